//! Folders above the backed-up paths that the target has as a symlink to a folder inside it
//! (`lib -> usr/lib` of a merged-/usr system): restored through, unless two of the snapshot's
//! folders or files would then be one place of the target.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::plan::Plan;
use crate::scan::backed_up;

/// The symlinks of the target that the restore goes through, and those it does not.
#[derive(Debug, Default)]
pub(crate) struct Followed {
    /// Folders restored through a symlink of the target, sorted.
    pub links: Vec<u32>,
    /// Folders the target has as such a symlink that are not restored (the reason): through
    /// the link, the snapshot's entries would land where others of it do. Sorted.
    pub clashes: Vec<(u32, String)>,
}

/// The folders above the backed-up paths (`/lib` for a backup of `/lib/os-release`) that the
/// target has as a symlink to a folder inside the target: the restore goes through them, as
/// restic does, and leaves their metadata alone. Replacing such a link with a folder of the
/// snapshot's few entries broke the system it was restored to (`--target /`). A backed-up
/// folder that is a symlink in the target is still replaced (the snapshot says what it is),
/// and a link leading out of the target is not followed: the restore writes only inside its
/// target. A link through which two entries of the snapshot would be one file (an old
/// system's `/lib/x` and `/usr/lib/x`), or that leads into a backed-up folder (whose
/// `--delete` would remove what lands there), is not restored through, nor replaced: the
/// entries below it are reported not restored.
pub(crate) fn followed_links(plan: &Plan, roots: &[PathBuf]) -> Followed {
    let under_root = |d: usize| backed_up(roots, &plan.dirs[d].snap_path);
    let Some(top) = plan.dirs.first() else {
        return Followed::default();
    };
    if under_root(0) {
        return Followed::default();
    }
    let Ok(top) = fs::canonicalize(&top.path) else {
        return Followed::default();
    };
    // Parents come before their folders: only those of a folder above are looked at.
    let mut above = vec![false; plan.dirs.len()];
    above[0] = true;
    let mut links = vec![];
    for d in 1..plan.dirs.len() {
        let dp = &plan.dirs[d];
        if !above[dp.parent as usize] || under_root(d) {
            continue;
        }
        above[d] = true;
        if arca_fs::lstat(&dp.path).is_ok_and(|m| m.is_symlink())
            && fs::canonicalize(&dp.path).is_ok_and(|p| p.starts_with(&top) && p.is_dir())
        {
            links.push(d as u32);
        }
    }
    let clashes = clashes(plan, &above, &links, &top);
    links.retain(|d| clashes.binary_search_by_key(d, |c| c.0).is_err());
    Followed { links, clashes }
}

fn name(p: &Path) -> &OsStr {
    p.file_name().unwrap_or_default()
}

/// The links of `links` through which two of the snapshot's paths would be one place of the
/// target, or one would land inside a backed-up folder, with the reason; sorted. `above`
/// marks the folders above the backed-up paths.
fn clashes(plan: &Plan, above: &[bool], links: &[u32], top: &Path) -> Vec<(u32, String)> {
    if links.is_empty() {
        return vec![];
    }
    let n = plan.dirs.len();
    // Where the target has each folder above the backed-up paths and each backed-up folder
    // right below one, going through the links; and the link it is reached through.
    let mut place: Vec<Option<PathBuf>> = vec![None; n];
    let mut via: Vec<Option<u32>> = vec![None; n];
    place[0] = Some(top.to_path_buf());
    for d in 1..n {
        let dp = &plan.dirs[d];
        let p = dp.parent as usize;
        if !above[p] {
            continue;
        }
        if links.binary_search(&(d as u32)).is_ok() {
            place[d] = fs::canonicalize(&dp.path).ok();
            via[d] = Some(d as u32);
        } else {
            place[d] = place[p].as_ref().map(|pp| pp.join(name(&dp.path)));
            via[d] = via[p];
        }
    }
    let mut found: Vec<(u32, String)> = vec![];
    let mut clash = |link: u32, ours: PathBuf, theirs: String| {
        if found.iter().any(|c| c.0 == link) {
            return;
        }
        let lp = &plan.dirs[link as usize].path;
        let to = place[link as usize].clone().unwrap_or_default();
        found.push((
            link,
            format!(
                "{}: not restored through this symlink of the target (to {}): {} would be {theirs} \
                 there; restore to another target, or make the link a folder",
                arca_format::text::shown(lp),
                arca_format::text::shown(&to),
                arca_format::text::shown(&ours),
            ),
        ));
    };

    // Folders above the backed-up paths that are one place: their entries must differ.
    let mut at: HashMap<&Path, Vec<usize>> = HashMap::new();
    for d in 0..n {
        if let (true, Some(p)) = (above[d], &place[d]) {
            at.entry(p.as_path()).or_default().push(d);
        }
    }
    let shared: Vec<Vec<usize>> = at
        .into_values()
        .filter(|g| g.len() > 1 && g.iter().any(|&d| via[d].is_some()))
        .collect();
    if !shared.is_empty() {
        // Per folder, its entries' names, and whether each is a folder above the backed-up
        // paths: two of those of one name are one place too, their own group (`lib/sub` and
        // `usr/lib/sub` may hold different files), not a clash by themselves.
        let mut names: HashMap<usize, Vec<(&[u8], bool)>> =
            shared.iter().flatten().map(|&d| (d, Vec::new())).collect();
        for (d, dp) in plan.dirs.iter().enumerate().skip(1) {
            if let Some(v) = names.get_mut(&(dp.parent as usize)) {
                v.push((name(&dp.path).as_bytes(), above[d]));
            }
        }
        for e in &plan.entries {
            if let Some(v) = names.get_mut(&(e.parent as usize)) {
                v.push((&e.name, false));
            }
        }
        for group in &shared {
            for &d in group {
                let Some(link) = via[d] else { continue };
                let other = group.iter().filter(|&&o| o != d).find_map(|&o| {
                    names[&d].iter().find_map(|&(x, way)| {
                        names[&o]
                            .iter()
                            .any(|&(y, their_way)| x == y && !(way && their_way))
                            .then_some((o, x))
                    })
                });
                if let Some((o, x)) = other {
                    let x = OsStr::from_bytes(x);
                    let theirs = plan.dirs[o].path.join(x);
                    clash(
                        link,
                        plan.dirs[d].path.join(x),
                        format!("the snapshot's {}", arca_format::text::shown(&theirs)),
                    );
                }
            }
        }
    }

    // Anything landing at or inside a backed-up path other than itself: a backed-up folder
    // (whose `--delete` would remove it), or a backed-up file the target has as a folder
    // (replaced, with what landed in it).
    let entries = plan.entries.iter().filter_map(|e| {
        let p = e.parent as usize;
        let at = place[p].as_ref().filter(|_| above[p])?;
        Some((
            at.join(OsStr::from_bytes(&e.name)),
            plan.dirs[p].path.join(OsStr::from_bytes(&e.name)),
            via[p],
            true,
        ))
    });
    let folders = (1..n).filter_map(|d| {
        let at = place[d].clone()?;
        Some((at, plan.dirs[d].path.clone(), via[d], !above[d]))
    });
    let landing: Vec<_> = folders.chain(entries).collect();
    // The backed-up paths by where they land: their path in the target and link.
    let roots: HashMap<&Path, (&Path, Option<u32>)> = landing
        .iter()
        .filter(|x| x.3)
        .map(|(at, path, link, _)| (at.as_path(), (path.as_path(), *link)))
        .collect();
    for (at, path, link, _) in &landing {
        for a in at.ancestors() {
            let Some(&(rp, rlink)) = roots.get(a) else {
                continue;
            };
            if rp == path || rlink == *link {
                continue;
            }
            if let Some(l) = link.or(rlink) {
                let how = if a == at { "" } else { "inside " };
                let theirs = format!(
                    "{how}the snapshot's backed-up {}",
                    arca_format::text::shown(rp)
                );
                clash(l, path.clone(), theirs);
            }
        }
    }
    found.sort_by_key(|c| c.0);
    found
}

//! The backed-up paths of a snapshot as its trees spell them, for `--delete` (which deletes
//! only inside them) and for the symlinks a backup followed on the way to them.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use crate::plan::Plan;

/// A path that may be a backed-up one: found by its exact spelling, or only as spelled with
/// the bytes that are not UTF-8 replaced (U+FFFD), where another path may look the same.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Candidate {
    /// The path as the trees spell them.
    path: PathBuf,
    /// Found only as spelled with its bytes that are not UTF-8 replaced.
    lossy: bool,
}

/// The backed-up paths among `candidates`. A path found only by its replaced spelling is
/// left out when it holds another candidate: `backup /x/dir\xff /x/dir\xfe/sub` lists
/// `/x/dir\u{FFFD}` twice in spirit, and `/x/dir\xfe` (only on the way to `sub`) looks like the
/// first. Taking it for backed up let `--delete` remove files of the folder above `sub` (hunt
/// 30). Left out, a folder that really was named with one inside it (`backup /a\xff
/// /a\xff/b`) has its own extra entries kept, its inner path still counts: no more is kept
/// than the user asked, and nothing is deleted that was not backed up.
fn settle(candidates: Vec<Candidate>) -> Vec<PathBuf> {
    let holds_another = |c: &Candidate| {
        candidates
            .iter()
            .any(|d| d.path != c.path && d.path.starts_with(&c.path))
    };
    let mut roots: Vec<PathBuf> = candidates
        .iter()
        .filter(|c| !c.lossy || !holds_another(c))
        .map(|c| c.path.clone())
        .collect();
    roots.sort();
    roots.dedup();
    roots
}

/// A folder's entries for [`resolve`]: each name as the trees spell it, with the folder to
/// go into when the entry is one.
pub type Children<N> = Vec<(Vec<u8>, Option<N>)>;

/// The backed-up paths as the snapshot's trees spell them, for the snapshot's `paths`, which
/// have the bytes that are not UTF-8 replaced (U+FFFD). A path holding one is looked up
/// folder by folder from `root`, each name compared as so replaced (`children` lists a
/// folder), then the paths found are [`settle`]d. The one way both a whole restore (over its
/// plan) and a restore of one folder (`ID:FOLDER`, over the trees) read them.
pub fn resolve<N: Clone, E>(
    paths: &[String],
    root: N,
    mut children: impl FnMut(&N) -> Result<Children<N>, E>,
) -> Result<Vec<PathBuf>, E> {
    let mut candidates = Vec::with_capacity(paths.len());
    for p in paths {
        if !p.contains(char::REPLACEMENT_CHARACTER) {
            candidates.push(Candidate {
                path: PathBuf::from(p),
                lossy: false,
            });
            continue;
        }
        let mut found: Vec<(Vec<u8>, Option<N>)> = vec![(Vec::new(), Some(root.clone()))];
        for name in p.split('/').filter(|c| !c.is_empty()) {
            let mut next = Vec::new();
            for (path, sub) in &found {
                let Some(sub) = sub else { continue };
                for (n, inner) in children(sub)? {
                    if String::from_utf8_lossy(&n) == name {
                        let mut q = path.clone();
                        q.push(b'/');
                        q.extend_from_slice(&n);
                        next.push((q, inner));
                    }
                }
            }
            found = next;
        }
        candidates.extend(found.into_iter().map(|(q, _)| Candidate {
            path: match q.is_empty() {
                true => PathBuf::from("/"),
                false => PathBuf::from(OsString::from_vec(q)),
            },
            lossy: true,
        }));
    }
    Ok(settle(candidates))
}

/// The snapshot's `paths` for backed-up paths `roots`, as a snapshot spells them (the bytes
/// that are not UTF-8 replaced), each once and in the order of `roots`. Two roots may read
/// alike without being side by side in sorted order (`/a\xfe`, `/a\xfe/b`, `/a\xff`): a
/// `dedup` of adjacent ones kept `/a\u{FFFD}` twice.
pub fn spelled(roots: &[PathBuf]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    roots
        .iter()
        .map(|r| r.to_string_lossy().into_owned())
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

/// [`resolve`] over the plan's folders and entries.
pub(crate) fn exact_roots(plan: &Plan, paths: &[String]) -> Vec<PathBuf> {
    let lossy = paths
        .iter()
        .any(|p| p.contains(char::REPLACEMENT_CHARACTER));
    // Each folder's entries (only when a path needs them).
    let mut inside: Vec<Children<u32>> = vec![vec![]; if lossy { plan.dirs.len() } else { 0 }];
    if lossy {
        for (d, dp) in plan.dirs.iter().enumerate().skip(1) {
            let name = dp.snap_path.file_name().unwrap_or_default();
            inside[dp.parent as usize].push((name.as_bytes().to_vec(), Some(d as u32)));
        }
        for e in &plan.entries {
            inside[e.parent as usize].push((e.name.to_vec(), None));
        }
    }
    let children = |d: &u32| Ok::<_, std::convert::Infallible>(inside[*d as usize].clone());
    match resolve(paths, 0, children) {
        Ok(roots) => roots,
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    fn c(p: &[u8], lossy: bool) -> Candidate {
        Candidate {
            path: PathBuf::from(OsStr::from_bytes(p)),
            lossy,
        }
    }

    #[test]
    fn a_lookalike_on_the_way_to_another_root_is_not_backed_up() {
        // backup /x/dir\xff /x/dir\xfe/sub: "/x/dir\u{FFFD}" matches both dir\xff and dir\xfe.
        let roots = settle(vec![
            c(b"/x/dir\xff", true),
            c(b"/x/dir\xfe", true),
            c(b"/x/dir\xfe/sub", true),
        ]);
        assert_eq!(
            roots,
            vec![
                PathBuf::from(OsStr::from_bytes(b"/x/dir\xfe/sub")),
                PathBuf::from(OsStr::from_bytes(b"/x/dir\xff")),
            ]
        );
    }

    /// A tree of folders by path: the names in each.
    fn listing(folder: &Vec<u8>) -> Result<Children<Vec<u8>>, ()> {
        let tree: &[(&[u8], &[&[u8]])] = &[
            (b"", &[b"x"]),
            (b"/x", &[b"dir\xfe", b"dir\xff", b"plain"]),
            (b"/x/dir\xfe", &[b"sub"]),
            (b"/x/dir\xfe/sub", &[b"g"]),
            (b"/x/dir\xff", &[b"f"]),
        ];
        let names = tree.iter().find(|(p, _)| *p == folder.as_slice());
        Ok(names.map_or(vec![], |(_, names)| {
            let child = |n: &[u8]| [folder.as_slice(), b"/", n].concat();
            let dir = |q: &Vec<u8>| tree.iter().any(|(p, _)| *p == q.as_slice());
            names
                .iter()
                .map(|n| (n.to_vec(), Some(child(n)).filter(dir)))
                .collect()
        }))
    }

    #[test]
    fn resolve_walks_the_trees_for_replaced_bytes() {
        let paths = [
            "/x/dir\u{FFFD}".to_string(),
            "/x/dir\u{FFFD}/sub".to_string(),
        ];
        let roots = resolve(&paths, vec![], listing).unwrap();
        assert_eq!(
            roots,
            vec![
                PathBuf::from(OsStr::from_bytes(b"/x/dir\xfe/sub")),
                PathBuf::from(OsStr::from_bytes(b"/x/dir\xff")),
            ]
        );
        // Paths without replaced bytes are taken as they are; one matching nothing is none.
        let paths = ["/x/plain".to_string(), "/x/none\u{FFFD}".to_string()];
        let roots = resolve(&paths, vec![], listing).unwrap();
        assert_eq!(roots, vec![PathBuf::from("/x/plain")]);
    }

    #[test]
    fn spelled_paths_are_each_once_whatever_lies_between() {
        let roots: Vec<PathBuf> = [&b"/a\xfe"[..], b"/a\xfe/b", b"/a\xff", b"/c"]
            .iter()
            .map(|p| PathBuf::from(OsStr::from_bytes(p)))
            .collect();
        assert_eq!(spelled(&roots), vec!["/a\u{FFFD}", "/a\u{FFFD}/b", "/c"]);
    }

    #[test]
    fn exact_roots_stay_even_when_they_hold_another() {
        // backup ~ ~/data/photos: both are backed up, the outer one too.
        let roots = settle(vec![c(b"/home/u", false), c(b"/home/u/data", false)]);
        assert_eq!(
            roots,
            vec![PathBuf::from("/home/u"), PathBuf::from("/home/u/data")]
        );
    }
}

//! Names a case-insensitive file system (vfat, exFAT, casefolded ext4) takes for one: the
//! snapshot may hold `Report.txt` and `report.txt`; restored there, both would land in one file.
//! The entries whose path could so alias another are found from the plan; on the target, the
//! first of them keeps the file and the others fail, named, instead of writing into it.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::canon::Canon;
use crate::plan::{EntryKind, Plan};
use crate::scan::{DirAction, EntryAction, Scan};

/// The entries that may alias another, and which file of the restore holds each inode they
/// opened.
#[derive(Debug, Default)]
pub(crate) struct Aliases {
    /// Per file: whether its path may alias another entry's (empty when none may, the rule).
    risky: Vec<bool>,
    /// The groups of siblings whose names fold equal ([`Risky::twins`]), and per entry in
    /// one, its group (a hard link or a file made under one name may be found again under
    /// the other).
    groups: Vec<Twins>,
    twins: HashMap<u32, usize>,
    /// Entries of those groups that the scan found to be another's on the target: not
    /// restored, so their names are no one's.
    blocked: HashSet<u32>,
    /// (device, inode) of each file a risky file opened, and that file.
    owners: Mutex<HashMap<(u64, u64), u32>>,
    /// Where risky entries land as the target stores their names ([`Canon`]), the entry
    /// each own path belongs to, and which file first opened each stored path.
    canon: Canon,
    by_path: HashMap<PathBuf, u32>,
    stored_owners: Mutex<HashMap<PathBuf, u32>>,
}

/// Per directory and per entry of the plan, whether its path may alias another's
/// ([`risky_paths`]): found once per restore, for the scan (`--delete`) and for [`Aliases`].
#[derive(Debug, Default)]
pub(crate) struct Risky {
    pub dirs: Vec<bool>,
    pub entries: Vec<bool>,
    /// The groups of siblings whose names fold equal, with at least one entry that is not a
    /// folder: those entries, and the folders of the group.
    pub twins: Vec<Twins>,
}

/// Siblings whose names fold equal: entries (not folders) and folders of the plan.
#[derive(Debug, Clone, Default)]
pub(crate) struct Twins {
    pub entries: Vec<u32>,
    pub dirs: Vec<u32>,
}

/// A name folded as a case-insensitive file system compares it (not yet normalized: `café`
/// written with a combining accent is missed), hashed (an equal hash of two
/// different names only costs a needless check). Looked at for every entry of every restore:
/// no allocation, and ASCII characters (most names) fold without Unicode tables.
pub(crate) fn folded(name: &[u8]) -> u64 {
    let mix =
        |h: u64, c: u32| (h.rotate_left(5) ^ u64::from(c)).wrapping_mul(0x517c_c1b7_2722_0a95);
    let mut h = 0u64;
    match std::str::from_utf8(name) {
        Ok(s) => {
            for c in s.chars() {
                if c.is_ascii() {
                    h = mix(h, u32::from(c.to_ascii_lowercase()));
                } else {
                    // Upper then lower case, so that the names file systems fold alike
                    // fold alike here too: ς and σ, ſ and s, ı and i, straße and STRASSE.
                    for l in c.to_uppercase().flat_map(char::to_lowercase) {
                        h = mix(h, u32::from(l));
                    }
                }
            }
        }
        Err(_) => {
            for b in name {
                h = mix(h, u32::from(b.to_ascii_lowercase()));
            }
        }
    }
    h
}

/// Per directory and per entry of the plan: whether its path may alias another's, that is,
/// its name or the name of a folder above it equals a sibling's once folded.
pub(crate) fn risky_paths(plan: &Plan) -> Risky {
    // (parent, folded name, whether a directory, index).
    let mut names: Vec<(u32, u64, bool, u32)> =
        Vec::with_capacity(plan.dirs.len() + plan.entries.len());
    for (d, dp) in plan.dirs.iter().enumerate().skip(1) {
        let name = dp.path.file_name().map_or(&[][..], |n| n.as_bytes());
        names.push((dp.parent, folded(name), true, d as u32));
    }
    for (e, ep) in plan.entries.iter().enumerate() {
        names.push((ep.parent, folded(&ep.name), false, e as u32));
    }
    names.sort_unstable();
    let mut dirs = vec![false; plan.dirs.len()];
    let mut entries = vec![false; plan.entries.len()];
    let mut twins = Vec::new();
    for group in names.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
        if group.len() > 1 {
            for &(_, _, is_dir, i) in group {
                if is_dir {
                    dirs[i as usize] = true;
                } else {
                    entries[i as usize] = true;
                }
            }
            let (dirs, files): (Vec<&(u32, u64, bool, u32)>, Vec<_>) =
                group.iter().partition(|n| n.2);
            if !files.is_empty() {
                twins.push(Twins {
                    entries: files.iter().map(|n| n.3).collect(),
                    dirs: dirs.iter().map(|n| n.3).collect(),
                });
            }
        }
    }
    // Parents come before their subdirectories in the plan.
    for d in 1..plan.dirs.len() {
        let p = plan.dirs[d].parent as usize;
        if p < d && dirs[p] {
            dirs[d] = true;
        }
    }
    for (e, ep) in plan.entries.iter().enumerate() {
        if dirs[ep.parent as usize] {
            entries[e] = true;
        }
    }
    Risky {
        dirs,
        entries,
        twins,
    }
}

/// For each existing folder of the plan that is one folder of the target with another (a
/// case-insensitive file system merges `Docs` and `docs`), the names the snapshot has in all
/// of them: `--delete` must not take `docs/y` for an extra entry of `Docs`.
pub(crate) fn merged_names(
    plan: &Plan,
    risky: &Risky,
    dirs: &[DirAction],
) -> HashMap<usize, Vec<Vec<u8>>> {
    // One folder by inode (a bind mount too), or by the path the target stores (exfat-fuse
    // gives `Docs` and `docs` two inode numbers).
    let canon = Canon::new(risky.dirs.clone());
    let mut by_inode: HashMap<(u64, u64), Vec<usize>> = HashMap::new();
    let mut by_path: HashMap<PathBuf, Vec<usize>> = HashMap::new();
    for (d, dp) in plan.dirs.iter().enumerate() {
        if risky.dirs[d]
            && dirs[d] == DirAction::Exists
            && let Ok(m) = arca_fs::lstat(&dp.path)
        {
            by_inode.entry((m.dev(), m.ino())).or_default().push(d);
            by_path
                .entry(canon.dir(plan, d as u32))
                .or_default()
                .push(d);
        }
    }
    let mut out: HashMap<usize, Vec<Vec<u8>>> = HashMap::new();
    for group in by_inode
        .into_values()
        .chain(by_path.into_values())
        .filter(|g| g.len() > 1)
    {
        let names: Vec<Vec<u8>> = group
            .iter()
            .flat_map(|&d| plan.dirs[d].names.iter().cloned())
            .collect();
        for d in group {
            out.entry(d).or_default().extend(names.iter().cloned());
        }
    }
    for names in out.values_mut() {
        names.sort_unstable();
        names.dedup();
    }
    out
}

/// Why an entry is not restored: `other` holds its name on the target.
fn reason(path: &Path, other: &Path) -> String {
    format!(
        "{}: the target's file system takes this name for {}, which the snapshot also has \
         (names that differ only in case); not restored",
        arca_format::text::shown(path),
        arca_format::text::shown(other)
    )
}

/// The other entry or folder of `group` whose name folder listing `listed` holds for entry
/// `e`'s: a name the snapshot does not have is the target's own, which `e` replaces as any
/// restore onto such a file system does.
fn listed_member(plan: &Plan, group: &Twins, e: u32, listed: &HashSet<Vec<u8>>) -> Option<PathBuf> {
    let want = folded(&plan.entries[e as usize].name);
    listed
        .iter()
        .filter(|n| folded(n) == want)
        .find_map(|n| member_named(plan, group, e, n))
}

/// The path of plan sibling `name` (an entry or a folder of `group`) other than entry `e`.
fn member_named(plan: &Plan, group: &Twins, e: u32, name: &[u8]) -> Option<PathBuf> {
    if let Some(&s) = group
        .entries
        .iter()
        .find(|&&s| s != e && &plan.entries[s as usize].name[..] == name)
    {
        return Some(plan.entry_path(s));
    }
    group
        .dirs
        .iter()
        .map(|&d| &plan.dirs[d as usize].path)
        .find(|p| p.file_name().is_some_and(|n| n.as_bytes() == name))
        .cloned()
}

impl Aliases {
    /// Finds the entries whose path may alias another's. On the existing part of the target,
    /// entries found to be one file there (a case-insensitive file system, restored onto
    /// before) are settled now: one keeps its action, the others are not restored (otherwise
    /// writing one would change the other, or replacing one would delete it).
    pub fn new(plan: &Plan, risky: &Risky, scan: &mut Scan) -> Self {
        let risky_entries = &risky.entries;
        let groups = risky.twins.clone();
        if !risky_entries.iter().any(|&r| r) {
            return Self::default();
        }
        let exists = |scan: &Scan, e: u32| {
            matches!(
                scan.dirs[plan.entries[e as usize].parent as usize],
                DirAction::Exists | DirAction::Followed
            )
        };
        // Names with a twin: the folder's listing tells whose name the file system kept.
        let mut twins = HashMap::new();
        let mut blocked = HashSet::new();
        // Each folder listed once (nothing is made while the scan runs): a folder of 10,000
        // twins was listed once per pair.
        let mut listings: HashMap<u32, Option<HashSet<Vec<u8>>>> = HashMap::new();
        for (g, group) in risky.twins.iter().enumerate() {
            for &e in &group.entries {
                twins.insert(e, g);
            }
            let first = group.entries[0];
            if !exists(scan, first) {
                continue;
            }
            let parent = plan.entries[first as usize].parent;
            let Some(listed) = listings
                .entry(parent)
                .or_insert_with(|| listing(&plan.dirs[parent as usize].path))
            else {
                continue;
            };
            // A name kept by another's file (or folder) of the snapshot is not restored; of
            // those kept by a name the snapshot does not have, the first takes it.
            let mut keeper = None;
            for &e in &group.entries {
                let name = &plan.entries[e as usize].name[..];
                let path = plan.entry_path(e);
                if listed.contains(name) || arca_fs::lstat(&path).is_err() {
                    continue;
                }
                let why = match (listed_member(plan, group, e, listed), keeper) {
                    (Some(other), _) => reason(&path, &other),
                    (None, Some(k)) => reason(&path, &plan.entry_path(k)),
                    (None, None) => {
                        keeper = Some(e);
                        continue;
                    }
                };
                block(scan, e, &path, why);
                blocked.insert(e);
            }
        }
        // Below folders that are one folder of the target: two names of one file there,
        // told by the path the target stores (exfat-fuse gives each name its own inode
        // number) and by inode.
        let canon = Canon::new(risky.dirs.clone());
        let by_path: HashMap<PathBuf, u32> = (0..plan.entries.len() as u32)
            .filter(|&e| risky_entries[e as usize])
            .map(|e| (plan.entry_path(e), e))
            .collect();
        let mut seen: HashMap<(u64, u64), u32> = HashMap::new();
        let mut seen_at: HashMap<PathBuf, u32> = HashMap::new();
        for (e, ep) in plan.entries.iter().enumerate() {
            if !risky_entries[e]
                || blocked.contains(&(e as u32))
                || !exists(scan, e as u32)
                || matches!(ep.kind, EntryKind::Link(_))
            {
                continue;
            }
            let path = plan.entry_path(e as u32);
            let Ok(m) = arca_fs::lstat(&path) else {
                continue;
            };
            let stored = stored_path(&canon, plan, &twins, &groups, e as u32);
            let holder = another_at(plan, &by_path, &blocked, &stored, &path, e as u32)
                .or_else(|| seen_at.get(&stored).map(|&o| plan.entry_path(o)));
            if let Some(other) = holder {
                block(scan, e as u32, &path, reason(&path, &other));
                blocked.insert(e as u32);
                continue;
            }
            seen_at.insert(stored, e as u32);
            // Hard links are names of one inode too, on any file system; aliases of one name
            // are one link.
            if m.nlink() != 1 {
                continue;
            }
            match seen.entry((m.dev(), m.ino())) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(e as u32);
                }
                std::collections::hash_map::Entry::Occupied(o) => {
                    block(
                        scan,
                        e as u32,
                        &path,
                        reason(&path, &plan.entry_path(*o.get())),
                    );
                }
            }
        }
        let risky = plan
            .files
            .iter()
            .map(|fp| risky_entries[fp.entry as usize])
            .collect();
        Self {
            risky,
            groups,
            twins,
            blocked,
            owners: Mutex::new(HashMap::new()),
            canon,
            by_path,
            stored_owners: Mutex::new(HashMap::new()),
        }
    }

    /// Checks that `file`, just opened for file `f`, is no other file of this restore (a
    /// case-insensitive target opens `report.txt` for `Report.txt`, or for a hard link made
    /// under that name): the first file to open an inode keeps it. The error says which
    /// file holds it.
    pub fn claim(&self, plan: &Plan, f: u32, file: &File) -> io::Result<()> {
        if !self.risky.get(f as usize).is_some_and(|&r| r) {
            return Ok(());
        }
        let entry = plan.files[f as usize].entry;
        // By the names the target lists: the file opened is stored under another entry's
        // path (`docs/x` opened `Docs/x`), or another file opened it first.
        let own = plan.entry_path(entry);
        let stored = stored_path(&self.canon, plan, &self.twins, &self.groups, entry);
        if let Some(other) = another_at(plan, &self.by_path, &self.blocked, &stored, &own, entry) {
            return Err(taken(&other));
        }
        {
            let mut owners = self.stored_owners.lock().unwrap_or_else(|p| p.into_inner());
            let owner = *owners.entry(stored).or_insert(f);
            if owner != f {
                return Err(taken(&plan.file_path(owner)));
            }
        }
        let m = file.metadata()?;
        if let Some(&g) = self.twins.get(&entry) {
            for &s in &self.groups[g].entries {
                // A hard link of this file shares its inode by right.
                if s == entry
                    || self.blocked.contains(&s)
                    || matches!(plan.entries[s as usize].kind, EntryKind::Link(x) if x == entry)
                {
                    continue;
                }
                let same = arca_fs::lstat(&plan.entry_path(s))
                    .is_ok_and(|o| (o.dev(), o.ino()) == (m.dev(), m.ino()));
                if same && let Some(other) = self.alias(plan, entry) {
                    return Err(taken(&other));
                }
            }
        }
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        let owner = *owners.entry((m.dev(), m.ino())).or_insert(f);
        if owner == f {
            return Ok(());
        }
        Err(taken(&plan.file_path(owner)))
    }

    /// For entry `e`, whose name folds equal to a sibling's and which the target seems to
    /// hold: the other entry or folder of the snapshot whose name its folder lists instead of
    /// its own, when it does not list its own (a case-insensitive file system found it under
    /// that name). Not found when the folder cannot be read.
    pub fn alias(&self, plan: &Plan, e: u32) -> Option<PathBuf> {
        let group = &self.groups[*self.twins.get(&e)?];
        let ep = &plan.entries[e as usize];
        let listed = listing(&plan.dirs[ep.parent as usize].path)?;
        if listed.contains(&ep.name[..]) {
            return None;
        }
        listed_member(plan, group, e, &listed)
    }
}

/// Where entry `e` is stored on the target ([`Canon::entry`]), without listing its folder
/// where that cannot change the answer: in a folder no other folder may merge with, a name
/// none of whose twins there leads anywhere is its own (on a case-insensitive file system
/// they would lead to `e`'s file). A folder of 10,000 twins was listed once per file.
fn stored_path(
    canon: &Canon,
    plan: &Plan,
    twins: &HashMap<u32, usize>,
    groups: &[Twins],
    e: u32,
) -> PathBuf {
    let ep = &plan.entries[e as usize];
    if !canon.risky_dir(ep.parent) {
        let resolves = |p: &Path| arca_fs::lstat(p).is_ok();
        let twin_there = twins.get(&e).is_some_and(|&g| {
            let group = &groups[g];
            group
                .entries
                .iter()
                .any(|&s| s != e && resolves(&plan.entry_path(s)))
                || group
                    .dirs
                    .iter()
                    .any(|&d| resolves(&plan.dirs[d as usize].path))
        });
        if !twin_there {
            return plan.entry_path(e);
        }
    }
    canon.entry(plan, e)
}

/// The entry of the snapshot whose own path is `stored`, where the target stores entry `e`
/// (own path `own`): not `e` itself, a hard link of it, or an entry not restored.
fn another_at(
    plan: &Plan,
    by_path: &HashMap<PathBuf, u32>,
    blocked: &HashSet<u32>,
    stored: &Path,
    own: &Path,
    e: u32,
) -> Option<PathBuf> {
    if stored == own {
        return None;
    }
    let &o = by_path.get(stored)?;
    let link_of_e = matches!(plan.entries[o as usize].kind, EntryKind::Link(x) if x == e);
    (o != e && !blocked.contains(&o) && !link_of_e).then(|| stored.to_path_buf())
}

/// The error of an entry whose name the target's file system takes for `other`'s.
pub(crate) fn taken(other: &Path) -> io::Error {
    io::Error::other(format!(
        "the file system takes this name for {}, which the snapshot also has (names that \
         differ only in case)",
        arca_format::text::shown(other)
    ))
}

/// Marks entry `e`, at `path`, not restored, for `why`: nothing is replaced for it either
/// (`--delete` took the folder its name leads to for one in its way).
fn block(scan: &mut Scan, e: u32, path: &Path, why: String) {
    scan.deletes.retain(|d| d.path != path);
    scan.entries[e as usize] = EntryAction::Blocked(why);
    if let Some(d) = scan.deferred_entry.get_mut(e as usize) {
        *d = false;
    }
    scan.deferred.retain(|h| h.entry != e);
}

/// The names folder `dir` lists, or nothing when it cannot be read.
fn listing(dir: &Path) -> Option<HashSet<Vec<u8>>> {
    let names = arca_fs::io_on_long_path(dir, |d| {
        std::fs::read_dir(d)?
            .map(|n| n.map(|n| n.file_name().into_vec()))
            .collect::<io::Result<HashSet<_>>>()
    });
    names.ok()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use arca_format::{Id, Tree};

    use super::{Aliases, folded, risky_paths};
    use crate::plan::tests::{dir, file, planned};
    use crate::plan::{EntryKind, Plan};
    use crate::trees::Trees;

    #[test]
    fn names_fold_as_a_case_insensitive_file_system_compares_them() {
        assert_eq!(folded(b"Report.TXT"), folded(b"report.txt"));
        assert_eq!(folded("ÉTÉ".as_bytes()), folded("été".as_bytes()));
        // What exFAT/NTFS (upper case) and casefolded ext4 (full folding) take for one (hunt 14).
        for (a, b) in [("ς", "σ"), ("ſ", "s"), ("ı", "i"), ("straße", "STRASSE")] {
            assert_eq!(folded(a.as_bytes()), folded(b.as_bytes()), "{a} {b}");
        }
        assert_eq!(folded(b"A\xff"), folded(b"a\xff"));
        assert_ne!(folded(b"report.txt"), folded(b"report.txt2"));
    }

    /// root: Docs/ (x), docs/ (x, y), Report.txt, report.txt, other.
    fn plan(target: &Path) -> Plan {
        let enc = |nodes| Ok(Tree { nodes }.encode().unwrap());
        let mut trees = Trees::new();
        trees.insert(
            Id([100; 32]),
            enc(vec![
                dir("Docs", 101),
                file("Report.txt", &[], 1, 1),
                dir("docs", 102),
                file("other", &[], 2, 1),
                file("report.txt", &[], 3, 1),
            ]),
        );
        trees.insert(Id([101; 32]), enc(vec![file("x", &[], 4, 1)]));
        trees.insert(
            Id([102; 32]),
            enc(vec![file("x", &[], 5, 1), file("y", &[], 6, 1)]),
        );
        planned(trees, Id([100; 32]), target)
    }

    fn file_named(p: &Plan, path: &str) -> u32 {
        (0..p.files.len() as u32)
            .find(|&f| p.file_path(f) == Path::new(path))
            .unwrap()
    }

    #[test]
    fn paths_that_differ_only_in_case_are_risky_down_the_tree() {
        let p = plan(Path::new("/t"));
        let entries = risky_paths(&p).entries;
        let mut risky: Vec<String> = (0..p.entries.len())
            .filter(|&e| entries[e])
            .map(|e| p.entry_path(e as u32).display().to_string())
            .collect();
        risky.sort();
        // y has no twin, but its folder merges with Docs/ on such a file system.
        assert_eq!(
            risky,
            [
                "/t/Docs/x",
                "/t/Report.txt",
                "/t/docs/x",
                "/t/docs/y",
                "/t/report.txt"
            ]
        );
        assert!(
            p.entries
                .iter()
                .all(|e| matches!(e.kind, EntryKind::File(_)))
        );
    }

    /// Two names opening one inode (as `report.txt` opens `Report.txt` on a case-insensitive
    /// target; a hard link stands in for it here): the first file to open it keeps it, the
    /// other is refused, naming the first; a file whose name has no twin is never checked.
    #[test]
    fn the_first_file_to_open_an_inode_keeps_it() {
        let tmp = tempfile::tempdir().unwrap();
        let p = plan(tmp.path());
        let mut scan = crate::scan::Scan::empty(&p);
        let aliases = Aliases::new(&p, &risky_paths(&p), &mut scan);
        std::fs::write(tmp.path().join("Report.txt"), b"one").unwrap();
        std::fs::hard_link(tmp.path().join("Report.txt"), tmp.path().join("report.txt")).unwrap();
        std::fs::hard_link(tmp.path().join("Report.txt"), tmp.path().join("other")).unwrap();
        let open = |n: &str| std::fs::File::open(tmp.path().join(n)).unwrap();
        let upper = file_named(&p, &tmp.path().join("Report.txt").display().to_string());
        let lower = file_named(&p, &tmp.path().join("report.txt").display().to_string());
        let other = file_named(&p, &tmp.path().join("other").display().to_string());
        aliases.claim(&p, lower, &open("report.txt")).unwrap();
        aliases.claim(&p, lower, &open("report.txt")).unwrap();
        let err = aliases
            .claim(&p, upper, &open("Report.txt"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("report.txt, which the snapshot also has"),
            "{err}"
        );
        aliases.claim(&p, other, &open("other")).unwrap();
    }

    /// A name whose folder lists its twin instead (a case-insensitive file system made
    /// `report.txt` for `Report.txt`, then finds it for both) is told from one listed as it
    /// is: only the first is another name's. Names without a twin are never looked up.
    #[test]
    fn a_name_listed_under_its_twin_is_an_alias() {
        let tmp = tempfile::tempdir().unwrap();
        let p = plan(tmp.path());
        let mut scan = crate::scan::Scan::empty(&p);
        let aliases = Aliases::new(&p, &risky_paths(&p), &mut scan);
        std::fs::write(tmp.path().join("Report.txt"), b"one").unwrap();
        std::fs::write(tmp.path().join("other"), b"two").unwrap();
        let entry = |n: &str| {
            (0..p.entries.len() as u32)
                .find(|&e| p.entry_path(e) == tmp.path().join(n))
                .unwrap()
        };
        assert_eq!(
            aliases.alias(&p, entry("report.txt")),
            Some(tmp.path().join("Report.txt"))
        );
        assert_eq!(aliases.alias(&p, entry("Report.txt")), None);
        std::fs::remove_file(tmp.path().join("other")).unwrap();
        assert_eq!(aliases.alias(&p, entry("other")), None);
    }

    /// A file whose name the target's file system takes for a folder of the snapshot is
    /// that folder's alias, named (it failed with a bare "Is a directory", and `--delete`
    /// then replaced the folder and all it held by the file, hunt 17).
    #[test]
    fn a_file_listed_as_a_sibling_folder_is_an_alias() {
        let tmp = tempfile::tempdir().unwrap();
        let enc = |nodes| Ok(Tree { nodes }.encode().unwrap());
        let mut trees = Trees::new();
        trees.insert(
            Id([100; 32]),
            enc(vec![dir("J", 101), file("j", &[], 1, 1)]),
        );
        trees.insert(Id([101; 32]), enc(vec![file("in", &[], 2, 1)]));
        let p = planned(trees, Id([100; 32]), tmp.path());
        std::fs::create_dir(tmp.path().join("J")).unwrap();
        let mut scan = crate::scan::Scan::empty(&p);
        let aliases = Aliases::new(&p, &risky_paths(&p), &mut scan);
        let j = (0..p.entries.len() as u32)
            .find(|&e| p.entry_path(e) == tmp.path().join("j"))
            .unwrap();
        assert_eq!(aliases.alias(&p, j), Some(tmp.path().join("J")));
    }

    /// Folders the target merges (a bind mount stands in for a case-insensitive file system,
    /// so this needs root) hold each other's names, so `--delete` keeps `docs/y` in `Docs`.
    #[test]
    fn merged_folders_hold_each_others_names() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root for a bind mount");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let p = plan(tmp.path());
        for d in ["Docs", "docs"] {
            std::fs::create_dir(tmp.path().join(d)).unwrap();
        }
        let (docs_upper, docs_lower) = (tmp.path().join("Docs"), tmp.path().join("docs"));
        let mounted = std::process::Command::new("mount")
            .arg("--bind")
            .args([&docs_upper, &docs_lower])
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("skipped: bind mount refused");
            return;
        }
        let dirs = vec![crate::scan::DirAction::Exists; p.dirs.len()];
        let merged = super::merged_names(&p, &risky_paths(&p), &dirs);
        let _ = std::process::Command::new("umount")
            .arg(&docs_lower)
            .status();
        let index = |path: &Path| p.dirs.iter().position(|d| d.path == path).unwrap();
        let both = vec![b"x".to_vec(), b"y".to_vec()];
        assert_eq!(merged.len(), 2, "{merged:?}");
        assert_eq!(merged[&index(&docs_upper)], both);
        assert_eq!(merged[&index(&docs_lower)], both);
    }

    /// On the existing target, two names of one inode that are hard links (any file system
    /// has them) are not taken for case aliases: both are restored.
    #[test]
    fn hard_links_on_the_target_are_not_aliases() {
        let tmp = tempfile::tempdir().unwrap();
        let p = plan(tmp.path());
        std::fs::write(tmp.path().join("Report.txt"), b"one").unwrap();
        std::fs::hard_link(tmp.path().join("Report.txt"), tmp.path().join("report.txt")).unwrap();
        let mut scan = crate::scan::Scan::empty(&p);
        scan.dirs[0] = crate::scan::DirAction::Exists;
        Aliases::new(&p, &risky_paths(&p), &mut scan);
        assert!(
            scan.entries
                .iter()
                .all(|a| *a == crate::scan::EntryAction::Create),
            "{:?}",
            scan.entries
        );
    }
}

//! `--delete`: the entries of existing folders that the snapshot lacks and the selection
//! covers, and the names a case-insensitive target gives the snapshot's own.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{Deletion, DirAction, EntryAction, Scan, Scanner, backed_up};
use crate::hashing::parallel_map;

impl Scanner<'_> {
    /// Entries of existing directories that the snapshot lacks and the selection covers.
    pub(super) fn find_deletions(&self, scan: &mut Scan) {
        let plan = self.plan;
        let merged = crate::aliases::merged_names(plan, self.risky, &scan.dirs);
        let found = parallel_map(plan.dirs.len(), self.threads, self.stop, |d| {
            let dp = &plan.dirs[d];
            if scan.dirs[d] != DirAction::Exists {
                return vec![];
            }
            // Above the backed-up folders (`/`, `/home` for a backup of `/home/you`), the
            // target's other entries were never backed up: they are not the snapshot's to
            // delete (restoring to `/` with --delete must not empty the system).
            if !backed_up(self.roots, &dp.snap_path) {
                return vec![];
            }
            // Without a listing (it could not be read) nothing is known to be extra.
            if !dp.listed {
                return vec![];
            }
            let Ok(listing) = arca_fs::list_dir_noatime(&dp.path) else {
                return vec![];
            };
            // Folders that the target's file system merges (`Docs` and `docs` on a
            // case-insensitive one) hold the names of them all.
            let names = merged.get(&d).unwrap_or(&dp.names);
            let mut known: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
            known.sort_unstable();
            let mut out = vec![];
            for (name, is_dir) in &listing {
                let is_dir = *is_dir;
                // A folder of the snapshot that holds nothing selected is not in the plan,
                // but the target's copy of it may hold selected extras (`--include '*.txt'`
                // and a stale `data/f.txt` beside the snapshot's `data/f.dat`).
                if is_dir && dp.bare.iter().any(|b| b == name) {
                    let name = std::ffi::OsStr::from_bytes(name);
                    out.extend(self.reached_within(dp.path.join(name), &dp.snap_path.join(name)));
                    continue;
                }
                if known.binary_search(&name.as_slice()).is_ok()
                    || alias_of_known(&dp.path, &listing, name, names)
                {
                    continue;
                }
                let name = std::ffi::OsStr::from_bytes(name);
                let snap = dp.snap_path.join(name);
                let path = dp.path.join(name);
                match self.sel.decide(is_dir, &snap, dp.selected) {
                    Some(true) if is_dir => out.extend(self.selected_within(path, &snap)),
                    Some(true) => out.push(Deletion { path, is_dir }),
                    // A folder not selected whole that may hold selected entries (`--include
                    // '*.txt'` and an extra `notes/f.txt`): those go, the folder stays.
                    Some(false) if is_dir => out.extend(self.reached_within(path, &snap)),
                    _ => {}
                }
            }
            out
        });
        scan.deletes = found.into_iter().flatten().flatten().collect();
        // A folder where the snapshot has a file goes too (with all it holds): it is listed
        // and counted as deleted, not only replaced. Unless it holds entries the selection
        // leaves out: then it stays, and the file is not restored.
        for (e, a) in scan.entries.iter_mut().enumerate() {
            if *a != EntryAction::Replace {
                continue;
            }
            let path = plan.entry_path(e as u32);
            if !arca_fs::lstat(&path).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            let ep = &plan.entries[e];
            let snap = plan.dirs[ep.parent as usize]
                .snap_path
                .join(std::ffi::OsStr::from_bytes(&ep.name));
            let (clean, _) = self.walk_selected(&path, &snap, true);
            if clean {
                scan.deletes.push(Deletion { path, is_dir: true });
            } else {
                *a = EntryAction::Blocked(format!(
                    "{}: a directory is in the way, and it holds entries the --include/--exclude \
                     patterns leave out; nothing removed",
                    arca_format::text::shown(&path)
                ));
            }
        }
    }

    /// What `--delete` removes of the extra folder `dir` (snapshot path `snap`), which the
    /// selection covers: the folder whole, unless something inside it is left out (`--exclude
    /// '*.keep' --delete` removed `extra/a.keep` with its folder `extra`); then the selected
    /// entries inside it, and the folders leading to what is left out stay. A folder holding a
    /// mount point stays whole, for [`crate::spare::keep_mounted`] to refuse and report (its
    /// entries taken one by one, those on the mounted file system went).
    fn selected_within(&self, dir: PathBuf, snap: &Path) -> Vec<Deletion> {
        let (clean, inside) = self.walk_selected(&dir, snap, true);
        match clean || arca_fs::mount_point_within(&dir).is_some() {
            true => vec![Deletion {
                path: dir,
                is_dir: true,
            }],
            false => inside,
        }
    }

    /// What `--delete` removes inside the extra folder `dir` (snapshot path `snap`), which the
    /// selection enters but does not cover whole: the selected entries it holds (they stayed,
    /// with their folder, when the folder itself matched no pattern). One holding a mount point
    /// is handed on whole, for [`crate::spare::keep_mounted`] to refuse and report: its
    /// entries on the mounted file system are not the restore's to remove.
    fn reached_within(&self, dir: PathBuf, snap: &Path) -> Vec<Deletion> {
        let (_, inside) = self.walk_selected(&dir, snap, false);
        if inside.is_empty() || arca_fs::mount_point_within(&dir).is_none() {
            return inside;
        }
        vec![Deletion {
            path: dir,
            is_dir: true,
        }]
    }

    /// Walks the target's folder `dir` (snapshot path `snap`, selected as a whole or not):
    /// whether the selection covers all it holds, and when not, the entries inside it that it
    /// covers (folders whole where it covers all they hold). A folder that cannot be listed
    /// counts as holding something left out. Folders the selection covers whole, with no
    /// pattern that could leave out something below them, are not listed. An explicit stack:
    /// a tree 10,000 folders deep overflowed the thread's stack when walked by recursion.
    fn walk_selected(&self, dir: &Path, snap: &Path, selected: bool) -> (bool, Vec<Deletion>) {
        struct Frame {
            path: PathBuf,
            snap: PathBuf,
            selected: bool,
            names: std::vec::IntoIter<(Vec<u8>, bool)>,
            clean: bool,
            /// Where its deletions begin in the output.
            start: usize,
        }
        let open = |path: PathBuf, snap: PathBuf, selected: bool, start: usize| {
            let (names, clean) = if selected && !self.sel.may_leave_out_below(&snap) {
                (vec![], true)
            } else {
                match arca_fs::list_dir_noatime(&path) {
                    Ok(l) => (l, true),
                    Err(_) => (vec![], false),
                }
            };
            Frame {
                path,
                snap,
                selected,
                names: names.into_iter(),
                clean,
                start,
            }
        };
        let mut out = vec![];
        let mut stack = vec![open(dir.to_path_buf(), snap.to_path_buf(), selected, 0)];
        while let Some(top) = stack.last_mut() {
            if let Some((name, is_dir)) = top.names.next() {
                let name = std::ffi::OsStr::from_bytes(&name);
                let (path, snap) = (top.path.join(name), top.snap.join(name));
                match self.sel.decide(is_dir, &snap, top.selected) {
                    Some(true) if !is_dir => out.push(Deletion { path, is_dir }),
                    Some(s) if is_dir => {
                        let frame = open(path, snap, s, out.len());
                        stack.push(frame);
                    }
                    _ => top.clean = false,
                }
                continue;
            }
            let Some(done) = stack.pop() else { break };
            let Some(parent) = stack.last_mut() else {
                return (done.clean, out);
            };
            if done.clean && done.selected {
                // Covered whole: the folder goes, with all it holds.
                out.truncate(done.start);
                out.push(Deletion {
                    path: done.path,
                    is_dir: true,
                });
            } else {
                parent.clean = false;
            }
        }
        (true, out)
    }
}

/// Whether the extra entry `name` of folder `dir` is one of the snapshot's `names` under
/// another case: on a case-insensitive file system (vfat, exFAT, a casefolded folder), the
/// snapshot's `Report.txt` is the target's `report.txt`, which the scan found and kept, and
/// `--delete` removed it as extra (exit 0, the file lost). Told by a name equal but for case
/// that leads to the same inode, or that the folder (whose `listing` is at hand) stores as
/// `name`.
fn alias_of_known(
    dir: &std::path::Path,
    listing: &[(Vec<u8>, bool)],
    name: &[u8],
    names: &[Vec<u8>],
) -> bool {
    use std::os::unix::fs::MetadataExt;
    // Folded as the case-alias check folds (upper then lower case: ß and SS, ς and σ too).
    let folded = crate::aliases::folded(name);
    let twins: Vec<&Vec<u8>> = names
        .iter()
        .filter(|n| crate::aliases::folded(n) == folded)
        .collect();
    if twins.is_empty() {
        return false;
    }
    let ino = |n: &[u8]| {
        arca_fs::lstat(&dir.join(std::ffi::OsStr::from_bytes(n)))
            .ok()
            .map(|m| (m.dev(), m.ino()))
    };
    let Some(mine) = ino(name) else {
        return false;
    };
    // Or by the name the folder stores for the snapshot's (exfat-fuse gives each name of a
    // file its own inode number).
    twins.iter().any(|t| ino(t) == Some(mine))
        || twins
            .iter()
            .any(|t| crate::canon::stored_in(dir, listing, t).as_deref() == Some(name))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::fs;

    /// A case-insensitive file system gives two names one entry: the same inode. A hard link
    /// stands in for it here (this kernel mounts no vfat or casefolded ext4 in tests).
    #[test]
    fn an_extra_name_is_a_known_one_under_another_case_only_on_the_same_inode() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fs::write(d.join("Report.txt"), b"kept").unwrap();
        fs::hard_link(d.join("Report.txt"), d.join("report.txt")).unwrap();
        fs::hard_link(d.join("Report.txt"), d.join("copy.txt")).unwrap();
        fs::write(d.join("NOTES"), b"another file").unwrap();
        fs::write(d.join("notes"), b"its own").unwrap();
        let names = vec![b"Report.txt".to_vec(), b"NOTES".to_vec()];
        let listing = arca_fs::list_dir_noatime(d).unwrap();
        assert!(alias_of_known(d, &listing, b"report.txt", &names));
        // Another name of the same file, not a case variant: extra.
        assert!(!alias_of_known(d, &listing, b"copy.txt", &names));
        // A case variant that is a file of its own (a case-sensitive file system): extra.
        assert!(!alias_of_known(d, &listing, b"notes", &names));
        // Folded as casefolded ext4 folds: the target's `Straße` is the snapshot's
        // `STRASSE`, which `--delete` removed as extra (exit 0, hunt 17 follow-up).
        fs::write(d.join("STRASSE"), b"kept").unwrap();
        fs::hard_link(d.join("STRASSE"), d.join("Straße")).unwrap();
        let listing = arca_fs::list_dir_noatime(d).unwrap();
        assert!(alias_of_known(
            d,
            &listing,
            "Straße".as_bytes(),
            &[b"STRASSE".to_vec()]
        ));
    }
}

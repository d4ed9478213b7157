//! `--delete` and hard links: a file right in the target whose inode has further names only
//! because of names `--delete` removes (itself, or with a folder it removes) is kept, not
//! split off and fetched again.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{Deletion, EntryAction, Scan, Scanner};

impl Scanner<'_> {
    /// Tells the scan which names `--delete` removes, then keeps the files it was to replace
    /// only for names their inode has beyond the restore's when those names are all removed
    /// (a correct group `a`, `b` with an extra name `c` the snapshot lacks, or `x/c` in a
    /// folder `x` it lacks, was split, and its content fetched again). Files still to be
    /// hashed learn of it when they are.
    pub(super) fn keep_groups_losing_deleted_names(&self, scan: &mut Scan) {
        let mut within = vec![];
        for d in scan.deletes.iter().filter(|d: &&Deletion| d.is_dir) {
            linked_within(&d.path, &mut within);
        }
        self.inodes.doom(
            scan.deletes
                .iter()
                .filter(|d: &&Deletion| !d.is_dir)
                .map(|d| d.path.as_path())
                .chain(within.iter().map(PathBuf::as_path)),
        );
        for (e, meta_ok) in self.inodes.take_split_for_names() {
            if scan.entries[e as usize] != EntryAction::Replace {
                continue;
            }
            let Ok(m) = arca_fs::lstat(&self.plan.entry_path(e)) else {
                continue;
            };
            if !self.foreign_names(e, m.nlink(), m.dev(), m.ino(), meta_ok) {
                scan.entries[e as usize] = EntryAction::Keep {
                    meta_ok,
                    meta_set: false,
                };
            }
        }
    }
}

/// Adds to `out` the names inside the folder tree `dir` (which `--delete` removes whole: one
/// holding a mount point is left out of the deletions) of files with further names. Symbolic
/// links are not followed; what cannot be listed is left out (it counts as a name of its own,
/// as before: a split, not a loss).
fn linked_within(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(names) = arca_fs::list_dir_names(&d) else {
            continue;
        };
        for name in names {
            let p = d.join(std::ffi::OsStr::from_bytes(&name));
            match arca_fs::lstat(&p) {
                Ok(m) if m.is_dir() => stack.push(p),
                Ok(m) if m.nlink() > 1 => out.push(p),
                _ => {}
            }
        }
    }
}

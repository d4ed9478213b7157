//! `--delete` and hard links: a file right in the target whose inode has further names only
//! because of names `--delete` removes is kept, not split off and fetched again.

use std::os::unix::fs::MetadataExt;

use super::{Deletion, EntryAction, Scan, Scanner};

impl Scanner<'_> {
    /// Tells the scan which names `--delete` removes, then keeps the files it was to replace
    /// only for names their inode has beyond the restore's when those names are all removed
    /// (a correct group `a`, `b` with an extra name `c` the snapshot lacks was split, and its
    /// content fetched again). Files still to be hashed learn of it when they are.
    pub(super) fn keep_groups_losing_deleted_names(&self, scan: &mut Scan) {
        self.inodes.doom(
            scan.deletes
                .iter()
                .filter(|d: &&Deletion| !d.is_dir)
                .map(|d| d.path.as_path()),
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

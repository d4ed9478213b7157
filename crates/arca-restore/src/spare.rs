//! What a restore leaves where it is in the target although the plan would replace it: the
//! repository it reads from, and folders holding a mount point.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::scan::{EntryAction, Scan, Scanner};

impl Scanner<'_> {
    /// Leaves the repository read from alone where the target holds it: `--delete` deletes
    /// neither it nor a folder holding it, and a file of the snapshot does not replace such a
    /// folder. (Restoring a folder over a live repository inside it, `--delete` removed the
    /// repository, or the snapshot being restored.) Folders are told by device and inode: a
    /// symlink or a bind mount shows them under other names.
    pub(crate) fn spare_repository(&self, scan: &mut Scan, repo: &crate::guard::Repository) {
        let holds = |p: &Path| {
            arca_fs::lstat(p).is_ok_and(|m| m.is_dir() && repo.held_by((m.dev(), m.ino())))
        };
        scan.deletes.retain(|d| !(d.is_dir && holds(&d.path)));
        for (e, a) in scan.entries.iter_mut().enumerate() {
            if *a == EntryAction::Replace {
                let path = self.plan.entry_path(e as u32);
                if holds(&path) {
                    *a = EntryAction::Blocked(crate::guard::holder_reason(&path));
                }
            }
        }
    }

    /// A folder in the way of a file that holds a mount point is left where it is, said
    /// before anything is written: removing it stops at the mount, and the dry run promised
    /// to replace it (exit 0, where the real run failed: hunt 30).
    pub(crate) fn spare_mounts(&self, scan: &mut Scan) {
        for (e, a) in scan.entries.iter_mut().enumerate() {
            if *a != EntryAction::Replace {
                continue;
            }
            let path = self.plan.entry_path(e as u32);
            if !arca_fs::lstat(&path).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            if let Some(mount) = arca_fs::mount_point_within(&path) {
                let at = match mount == path {
                    true => "it".to_string(),
                    false => arca_format::text::shown(&mount).into_owned(),
                };
                *a = EntryAction::Blocked(format!(
                    "{}: a directory is in the way, and {at} is a mount point; nothing removed",
                    arca_format::text::shown(&path)
                ));
            }
        }
    }
}

/// An extra folder (one the snapshot lacks) holding a mount point is not deleted: it is
/// reported before anything is written, in the dry run too (the dry run listed it as deleted,
/// exit 0, where the real run refused, exit 3). Folders in the way of a file were
/// [`Scanner::spare_mounts`]'s.
pub(crate) fn keep_mounted(scan: &mut Scan) {
    let mut kept = vec![];
    scan.deletes.retain(|d| {
        let refused = d
            .is_dir
            .then(|| crate::prepare::mount_refusal(&d.path, "delete"))
            .flatten();
        match refused {
            Some(e) => {
                kept.push(crate::RestoreIssue {
                    path: d.path.clone(),
                    message: e.to_string(),
                });
                false
            }
            None => true,
        }
    });
    scan.kept = kept;
}

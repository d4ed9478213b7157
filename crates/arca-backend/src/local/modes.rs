//! The permissions a local repository's folders and files are made with: private, or open
//! to the group when the repository is shared, and the calls that make them so.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::Path;

/// The permissions the repository's folders and files are made with, as restic's: private
/// (0700, 0600, less the umask), or open to the group (0770, 0660, whatever the umask) when
/// the repository's `config` is readable by its group, so that a repository shared by a group
/// stays shared (a member's backup under umask 077 locked the others out of its files).
/// The files hold keys and sealed data: a key file readable by anyone lets anyone try
/// passwords offline.
#[derive(Debug, Clone, Copy)]
pub(super) struct Modes {
    dir: u32,
    file: u32,
}

impl Modes {
    pub(super) fn of(root: &Path) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let shared =
            fs::metadata(root.join("config")).is_ok_and(|m| m.permissions().mode() & 0o040 != 0);
        if shared {
            Modes {
                dir: 0o770,
                file: 0o660,
            }
        } else {
            Modes {
                dir: 0o700,
                file: 0o600,
            }
        }
    }

    /// Whether the group shares the repository: its modes are then set past the umask.
    fn shared(self) -> bool {
        self.file & 0o060 != 0
    }

    /// Creates `dir` and the folders above it that are missing.
    pub(super) fn create_dir_all(self, dir: &Path) -> io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        fs::DirBuilder::new()
            .recursive(true)
            .mode(self.dir)
            .create(dir)?;
        if self.shared() {
            fs::set_permissions(dir, fs::Permissions::from_mode(self.dir))?;
        }
        Ok(())
    }

    /// Creates the new file `path` for writing.
    pub(super) fn create_new(self, path: &Path) -> io::Result<File> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        // A moment without a free descriptor (a low `ulimit -n`, the readers holding theirs)
        // is waited out.
        let f = arca_fs::patiently(|| {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(self.file)
                .open(path)
        })?;
        if self.shared() {
            f.set_permissions(fs::Permissions::from_mode(self.file))?;
        }
        Ok(f)
    }
}

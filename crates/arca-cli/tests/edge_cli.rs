//! Edge cases of backup and restore met by trying them as a restic user would: read-only
//! files in the target, odd sources and targets.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::*;

fn restored(target: &Path, src: &Path) -> std::path::PathBuf {
    target.join(src.strip_prefix("/").unwrap())
}

/// A file of the target that the user may not write (mode 0444, as a non-root user) and whose
/// content is wrong is replaced, as restic does: it failed with "create …: Permission denied"
/// and exit 3, the old content left in place.
#[test]
fn restore_replaces_read_only_file_of_the_user() {
    let e = Env::new();
    let nobody = e.unprivileged();
    let as_user = |args: &[&str]| {
        let o = e.run_as(nobody, args);
        assert!(o.status.success(), "arca {args:?}: {}", stderr(&o));
        o
    };
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/f"), b"right content\n").unwrap();
    fs::write(src.join("g"), b"other file\n").unwrap();
    as_user(&["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"]);
    as_user(&["backup", src.to_str().unwrap()]);
    let target = e.path("target");
    let t = target.to_str().unwrap();
    as_user(&["restore", "latest", "--target", t]);
    let f = restored(&target, &src).join("d/f");
    // Written in place, the file keeps its owner (the user).
    fs::write(&f, b"WRONG content\n").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o444)).unwrap();
    let o = as_user(&["restore", "latest", "--target", t]);
    assert_eq!(fs::read(&f).unwrap(), b"right content\n", "{}", stderr(&o));
    let mode = fs::metadata(&f).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
}

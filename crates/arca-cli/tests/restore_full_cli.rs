//! A restore stopped by a full target disk says so once, with what to do, and a rerun after
//! space is freed finishes it. Mounts a tmpfs: run as root, skipped otherwise.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::Path;

use common::*;

/// No inode left for a folder or a symbolic link (nothing of a file's data unfinished): the
/// error said "the restore stopped" and no more, where a file cut short said to free some
/// space and run it again. It says so too.
#[test]
fn a_restore_stopped_making_an_entry_says_to_free_space_and_run_it_again() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    for d in 0..20 {
        let dir = src.join(format!("d{d:02}"));
        fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink("../d00", dir.join("link")).unwrap();
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("target");
    fs::create_dir_all(&target).unwrap();
    let mount = |opts: &str, flags| {
        nix::mount::mount(Some("tmpfs"), &target, Some("tmpfs"), flags, Some(opts))
    };
    if !arca_testkit::is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    if let Err(err) = mount("size=1m,nr_inodes=12", nix::mount::MsFlags::empty()) {
        eprintln!("skipped: cannot mount a tmpfs: {err}");
        return;
    }
    let _unmount = Unmount(&target);
    let t = target.to_str().unwrap();
    let o = e.run(&["restore", "-q", "latest", "-t", t]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(err.matches("No space left on device").count(), 1, "{err}");
    assert!(
        err.contains("the restore stopped: free some space and run it again"),
        "{err}"
    );
    // What could not be made is said: it said "cannot write" of a folder or a link.
    assert!(
        err.starts_with("arca: cannot create directory ")
            || err.starts_with("arca: cannot create symlink "),
        "{err}"
    );
    mount("size=1m,nr_inodes=1000", nix::mount::MsFlags::MS_REMOUNT).unwrap();
    e.ok(&["restore", "-q", "latest", "-t", t]);
    // Each link, as stored (the source's links have a newer atime: the backup read them).
    let back = target.join(src.strip_prefix("/").unwrap());
    for d in 0..20 {
        let link = back.join(format!("d{d:02}/link"));
        assert_eq!(
            fs::read_link(&link).unwrap(),
            Path::new("../d00"),
            "{link:?}"
        );
    }
    assert_eq!(fs::read_dir(&back).unwrap().count(), 20);
}

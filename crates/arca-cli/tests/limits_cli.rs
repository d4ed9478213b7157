//! Backup and restore under a low open-file limit (`ulimit -n`): a moment without a free
//! descriptor is waited out, and a restore keeps fewer files open per worker.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;

use arca_testkit::compare;
use common::{Env, run_limited, stderr};
use nix::sys::resource::Resource;

/// `arca ARGS` with at most `limit` files open (soft and hard limit, as `ulimit -n` sets).
fn limited(e: &Env, limit: u64, args: &[&str]) -> std::process::Output {
    run_limited(e.cmd(args), Resource::RLIMIT_NOFILE, limit)
}

/// 2,000 files in 80 folders at `ulimit -n 20`: the backup skipped files and stored folders
/// empty ("Too many open files", exit 3, a snapshot marked incomplete), the restore failed to
/// create most files (hunt 28). Both now finish, and the restore equals the source.
#[test]
fn backup_and_restore_work_with_few_descriptors() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    for d in 0..80 {
        let dir = src.join(format!("d{d:02}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..25 {
            let data = arca_testkit::random_bytes(d * 100 + f, 1_500);
            fs::write(dir.join(format!("f{f:02}")), data).unwrap();
        }
    }
    let s = src.to_str().unwrap();
    let o = limited(&e, 20, &["backup", "-q", s]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let target = e.path("target");
    let o = limited(
        &e,
        24,
        &["restore", "-q", "latest", "-t", target.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = target.join(src.strip_prefix("/").unwrap());
    let differences = compare::diff_trees(&src, &out);
    assert!(differences.is_empty(), "{differences:?}");
    // Again over the restored tree, some files changed: the scan of the existing target
    // failed on folders below `ulimit -n 32` ("cannot look at the existing entry", exit 3;
    // hunt 29).
    for d in (0..80).step_by(7) {
        fs::write(out.join(format!("d{d:02}/f03")), b"changed").unwrap();
    }
    let o = limited(
        &e,
        20,
        &["restore", "-q", "latest", "-t", target.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let differences = compare::diff_trees(&src, &out);
    assert!(differences.is_empty(), "{differences:?}");
}

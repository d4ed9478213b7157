//! What backup reads for the paths it is given: symlinks among them, exclusion tags on named
//! paths, lists of files, compared with restic's choices.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::Path;

use common::{Env, stderr};

fn restored(target: &Path, src: &Path) -> std::path::PathBuf {
    target.join(src.strip_prefix("/").unwrap())
}

/// A symlink named with a path below it (`link` and `link/file`): the path below is stored
/// (the symlink as the directory it leads to, with a warning). The file was left out without
/// a word, exit 0, while the snapshot's paths listed it.
#[test]
fn a_path_named_through_a_named_symlink_is_stored() {
    let e = Env::new();
    e.init(&[]);
    let base = e.path("t");
    fs::create_dir_all(base.join("real")).unwrap();
    fs::write(base.join("real/file"), b"named through the link").unwrap();
    std::os::unix::fs::symlink(base.join("real"), base.join("link")).unwrap();
    let link = base.join("link");
    let file = link.join("file");
    let o = e.run(&[
        "backup",
        "-q",
        link.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("stored as the directory it leads to"),
        "{}",
        stderr(&o)
    );
    let target = e.path("target");
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    assert_eq!(
        fs::read(restored(&target, &file)).unwrap(),
        b"named through the link"
    );
    // Named inside a walked folder, the same.
    let o = e.run(&[
        "backup",
        "-q",
        base.to_str().unwrap(),
        link.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let target = e.path("target2");
    e.ok(&["restore", "-q", "latest", "-t", target.to_str().unwrap()]);
    assert_eq!(
        fs::read(restored(&target, &file)).unwrap(),
        b"named through the link"
    );
}

/// As restic: every named path excluded is refused ("snapshot is empty"), no snapshot saved;
/// arca saved a snapshot holding none of them, exit 0.
#[test]
fn every_path_excluded_saves_no_snapshot() {
    let e = Env::new();
    e.init(&[]);
    let a = e.path("a");
    fs::create_dir_all(&a).unwrap();
    fs::write(a.join("f"), b"x").unwrap();
    let o = e.run(&[
        "backup",
        "-q",
        a.to_str().unwrap(),
        "--exclude",
        a.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("every path given is excluded"),
        "{}",
        stderr(&o)
    );
    assert_eq!(fs::read_dir(e.repo.join("snapshots")).unwrap().count(), 0);
}

/// As restic: an empty `--host` is this machine's name, not an empty one.
#[test]
fn an_empty_host_is_this_machines_name() {
    let e = Env::new();
    e.init(&[]);
    let a = e.path("a");
    fs::create_dir_all(&a).unwrap();
    e.ok(&["backup", "-q", "--host", "", a.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let host = v[0]["hostname"].as_str().unwrap();
    assert!(!host.is_empty(), "{v}");
}

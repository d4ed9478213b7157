//! A target changed by someone else while a restore runs: a folder swapped for a symlink
//! mid-restore leads nowhere, and nothing lands outside the target.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::time::{Duration, Instant};

use common::*;

/// The restore's folders are made, then (while its pack reads wait) one of them is moved
/// away and a symlink to a folder outside the target put in its place. The files meant for
/// it are reported (exit 3), not written through the link; the others are restored. Files
/// were created outside the target through such a link, as root, where another user could
/// swap folders of the target.
#[test]
fn a_folder_swapped_for_a_symlink_mid_restore_leads_nowhere() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    for d in ["d", "other"] {
        fs::create_dir_all(src.join(d)).unwrap();
        for n in 0..20 {
            fs::write(src.join(d).join(format!("f{n}")), format!("{d} {n}")).unwrap();
        }
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let outside = e.path("outside");
    fs::create_dir_all(&outside).unwrap();
    let target = e.path("t");
    let restored = target.join(src.strip_prefix("/").unwrap());
    // Every pack read waits: the folders are made long before any content comes.
    let restore = e
        .cmd(&["restore", "latest", "--target", target.to_str().unwrap()])
        .env("ARCA_TEST_FAULTS", "read:pack:always:delay=600ms")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !restored.join("other").is_dir() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no folders made"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    fs::rename(restored.join("d"), e.path("moved")).unwrap();
    std::os::unix::fs::symlink(&outside, restored.join("d")).unwrap();
    let o = restore.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "written outside: {err}"
    );
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("is a symlink"), "{err}");
    for n in 0..20 {
        let f = restored.join("other").join(format!("f{n}"));
        assert_eq!(fs::read_to_string(f).unwrap(), format!("other {n}"));
    }
}

//! A restore cut off by a power failure: files the kernel had not written back come back
//! zero-filled with the snapshot's size and mtime. The restore run after the reboot hashes the
//! files changed since the cut-off restore began instead of trusting their size and mtime
//! (`ARCA_TEST_BOOT_ID` stands in for the boot).

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::Path;

use common::*;

fn restore(e: &Env, target: &Path, boot: &str) -> String {
    let o = e
        .cmd(&["restore", "latest", "--target", target.to_str().unwrap()])
        .env("ARCA_TEST_BOOT_ID", boot)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn after_a_reboot_files_written_by_the_last_restore_are_hashed() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let content: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(src.join("f"), &content).unwrap();
    fs::write(src.join("g"), b"small").unwrap();
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let t = e.path("t");
    restore(&e, &t, "boot-1");
    let f = t.join(src.strip_prefix("/").unwrap()).join("f");
    assert_eq!(fs::read(&f).unwrap(), content);
    // In the same boot, a second restore trusts what is in place.
    let out = restore(&e, &t, "boot-1");
    assert!(out.contains("nothing to fetch"), "{out}");

    // The power cut: the data never reached the disk, the inode did.
    let mtime = fs::metadata(&f).unwrap().modified().unwrap();
    fs::write(&f, vec![0u8; content.len()]).unwrap();
    fs::File::options()
        .write(true)
        .open(&f)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let out = restore(&e, &t, "boot-2");
    assert_eq!(fs::read(&f).unwrap(), content, "{out}");
    assert!(!out.contains("nothing to fetch"), "{out}");
}

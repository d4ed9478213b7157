//! Key files the command line meets: ones that cannot be decoded must not change what a
//! wrong password reports, nor its exit code.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;

use common::*;

/// A wrong password exits 12 with the wrong-password error even when other key files cannot
/// be decoded (garbage, or Argon2 parameters above the accepted maximum); the message names
/// them once, and the right password still opens the repository.
#[test]
fn a_wrong_password_exits_12_beside_undecodable_key_files() {
    let e = Env::new();
    e.init(&[]);
    let keys = e.repo.join("keys");
    let real = fs::read_dir(&keys).unwrap().next().unwrap().unwrap().path();
    let mut file = arca_format::KeyFile::decode(&fs::read(real).unwrap()).unwrap();
    file.kdf.memory_kib = 4 * 1024 * 1024 + 1;
    let mut names = vec![];
    for bytes in [b"garbage".to_vec(), file.encode().unwrap()] {
        let name = blake3::hash(&bytes).to_hex().to_string();
        fs::write(keys.join(&name), bytes).unwrap();
        names.push(name);
    }
    let o = e
        .cmd(&["snapshots"])
        .env("ARCA_PASSWORD", "nope")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(12), "{err}");
    assert!(err.contains("wrong password"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for name in &names {
        assert_eq!(err.matches(name.as_str()).count(), 1, "{name}: {err}");
    }
    e.ok(&["snapshots"]);
}

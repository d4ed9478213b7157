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

/// A key whose derivation needs more memory than `ulimit -v` leaves is not tried: a password
/// the other keys refuse is then not known to be wrong. The message says both (the keys tried
/// refused it, that one could not be tried and what it needs), exit 1; it said only that the
/// memory could not be had, hiding the refusals. With every key tried, it is a wrong password
/// (12); a password of a key that can be tried opens the repository under the limit.
#[test]
fn a_key_short_of_memory_is_named_beside_the_keys_that_refused() {
    use nix::sys::resource::Resource::RLIMIT_AS;
    let e = Env::new();
    e.init(&[]);
    let keys = e.repo.join("keys");
    let real = fs::read_dir(&keys).unwrap().next().unwrap().unwrap().path();
    // Another password's key, as a key file: its derivation needs 512 MiB.
    let mut file = arca_format::KeyFile::decode(&fs::read(real).unwrap()).unwrap();
    file.kdf.memory_kib = 512 * 1024;
    let bytes = file.encode().unwrap();
    let big = blake3::hash(&bytes).to_hex().to_string();
    fs::write(keys.join(&big), bytes).unwrap();
    let limited = |password: &str| {
        let mut c = e.cmd(&["snapshots"]);
        c.env("ARCA_PASSWORD", password);
        run_limited(c, RLIMIT_AS, 320 << 20)
    };
    let o = limited("nope");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("wrong password for the 1 key file tried"),
        "{err}"
    );
    assert!(
        err.contains(&format!("key file {big} could not be tried")),
        "{err}"
    );
    assert!(err.contains("needs 512 MiB of memory"), "{err}");
    assert_eq!(err.matches(big.as_str()).count(), 1, "{err}");
    assert!(limited("test password").status.success());
    let o = e
        .cmd(&["snapshots"])
        .env("ARCA_PASSWORD", "nope")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(12), "{}", stderr(&o));
}

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

/// A password file whose line ends in a space (an editor's): restic trims it, arca takes it
/// as written, and said only "wrong password". The note says why it may be wrong; without
/// the space there is no note.
#[test]
fn a_wrong_password_ending_in_a_space_is_pointed_out() {
    let e = Env::new();
    e.init(&[]);
    let file = e.path("pw");
    for (line, noted) in [("test password \n", true), ("other\n", false)] {
        fs::write(&file, line).unwrap();
        let o = e
            .cmd(&["snapshots", "--password-file", file.to_str().unwrap()])
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(12), "{err}");
        assert_eq!(
            err.contains("begins or ends with whitespace"),
            noted,
            "{err}"
        );
    }
    // The same for copy's source repository.
    let dst = Env::new();
    dst.init(&[]);
    let o = dst
        .cmd(&["copy", "--from-repo", e.repo.to_str().unwrap()])
        .env("ARCA_FROM_PASSWORD", "test password ")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(12), "{err}");
    assert!(
        err.contains("the source password given begins or ends with whitespace"),
        "{err}"
    );
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

/// A repository in `e` with a second key (password "second password"); the id of the key in
/// use (`current`) or of the other one.
fn two_keys(e: &Env, current: bool) -> String {
    e.init(&[]);
    let other = e.path("other-password");
    fs::write(&other, "second password\n").unwrap();
    e.ok(&[
        "key",
        "add",
        "--new-password-file",
        other.to_str().unwrap(),
        "--kdf-memory-kib",
        "256",
        "--kdf-iterations",
        "1",
    ]);
    let v = e.json(&["key", "list", "--json"]);
    v.as_array()
        .unwrap()
        .iter()
        .find(|k| k["current"] == current)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A byte flipped in the header of a key file (its magic) made it "cannot be decoded", and
/// the password of that key was told it is wrong (exit 12); a byte flipped further on was
/// reported as a damaged file (exit 1). Both now name the file as damaged, exit 1, and the
/// password of another key still opens the repository.
#[test]
fn a_key_file_damaged_in_its_header_is_named_as_damaged() {
    let e = Env::new();
    let current = two_keys(&e, true);
    let path = e.repo.join("keys").join(&current);
    let mut bytes = fs::read(&path).unwrap();
    // Its magic "AKEY" becomes "AKEX".
    assert_eq!(&bytes[8..12], b"AKEY");
    bytes[11] ^= 1;
    fs::write(&path, bytes).unwrap();

    let o = e.run(&["snapshots"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("wrong password"), "{err}");
    assert!(
        err.contains(&format!("key file {current} is damaged")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    // The other key's password opens it, and `key list` names the damaged file.
    let o = e
        .cmd(&["key", "list"])
        .env("ARCA_PASSWORD", "second password")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(&current[..8]), "{}", stderr(&o));
}

/// A byte flipped in the sealed part of a key file: it still decodes, and `key list` showed
/// it as a good key while its password no longer opened the repository (hunt H6). It is
/// named as damaged and left out, as one damaged in its header is.
#[test]
fn key_list_names_a_key_damaged_in_its_sealed_part() {
    let e = Env::new();
    let second = two_keys(&e, false);
    let path = e.repo.join("keys").join(&second);
    let mut bytes = fs::read(&path).unwrap();
    let at = bytes.len() - 5;
    bytes[at] ^= 1;
    fs::write(&path, bytes).unwrap();
    let o = e.run(&["key", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let err = stderr(&o);
    assert!(err.contains("damaged, or renamed"), "{err}");
    assert!(
        err.contains(&format!("arca key remove {}", &second[..8])),
        "{err}"
    );
}

/// The key in use renamed (its content intact, its name another): `key list` lists it as the
/// current key and says how to give it a right name, instead of calling it damaged and
/// advising its removal (which lost the password: hunt H13).
#[test]
fn a_renamed_key_in_use_is_listed_as_current() {
    let e = Env::new();
    e.init(&[]);
    let keys_dir = e.repo.join("keys");
    let old = fs::read_dir(&keys_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let renamed = format!("ab{}", "0".repeat(62));
    fs::rename(&old, keys_dir.join(&renamed)).unwrap();
    let o = e.run(&["key", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], renamed.as_str());
    assert_eq!(listed[0]["current"], true);
    let err = stderr(&o);
    assert!(err.contains("the key in use, ab000000"), "{err}");
    assert!(!err.contains("damaged"), "{err}");
    // Opened with another key's password, it may be damaged or renamed: said so, and that
    // its password should get a key before it is removed.
    let o = e
        .cmd(&["key", "add"])
        .env("ARCA_NEW_PASSWORD", "second")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = e
        .cmd(&["key", "list"])
        .env("ARCA_PASSWORD", "second")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("damaged, or renamed: if its password still opens"),
        "{err}"
    );
}

/// The number of key files.
fn keys(e: &Env) -> usize {
    fs::read_dir(e.repo.join("keys")).unwrap().count()
}

/// A new password that is empty or only whitespace is refused by `init`, `key add` and `key
/// passwd`, naming where it came from (ARCA_PASSWORD, a password file, a password command,
/// standard input, ARCA_NEW_PASSWORD), exit 1, with no repository or key written (a
/// password of spaces was taken). A key that already has such a password still opens the
/// repository: only new passwords are refused.
#[test]
fn a_blank_new_password_is_refused_naming_where_it_came_from() {
    let e = Env::new();
    let blank = e.path("blank");
    fs::write(&blank, "   \n").unwrap();
    let b = blank.to_str().unwrap();
    let named_file = format!("password file {b}");
    let init = ["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"];
    let refused = |o: &std::process::Output, source: &str| {
        let err = stderr(o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains(source) && err.contains("refused") && err.contains("only whitespace"),
            "{source}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    };
    let o = e.cmd(&init).env("ARCA_PASSWORD", "   ").output().unwrap();
    refused(&o, "from ARCA_PASSWORD");
    let o = e.cmd(&init).arg("--password-file").arg(b).output().unwrap();
    refused(&o, &named_file);
    let o = e
        .cmd(&init)
        .args(["--password-command", "echo '  '"])
        .output()
        .unwrap();
    refused(&o, "from password command \"echo '  '\"");
    let mut c = e.cmd(&init);
    c.env_remove("ARCA_PASSWORD")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"   \n").unwrap();
    }
    refused(&child.wait_with_output().unwrap(), "from standard input");
    assert!(!e.repo.join("config").exists(), "nothing written");

    e.init(&[]);
    let before = fs::read_dir(e.repo.join("keys")).unwrap().count();
    let o = e
        .cmd(&["key", "add"])
        .env("ARCA_NEW_PASSWORD", "  ")
        .output()
        .unwrap();
    refused(&o, "from ARCA_NEW_PASSWORD");
    let o = e.run(&["key", "passwd", "--new-password-file", b]);
    refused(&o, &named_file);
    // A line break: only an environment variable could give such a password again.
    let o = e
        .cmd(&["key", "add"])
        .env("ARCA_NEW_PASSWORD", "a\nb")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("from ARCA_NEW_PASSWORD refused: it holds a line break"),
        "{}",
        stderr(&o)
    );
    assert_eq!(keys(&e), before, "no key written or removed");
    e.ok(&["snapshots"]);

    // A key made with such a password before (by the library) still opens the repository.
    let backend = std::sync::Arc::new(arca_backend::LocalBackend::new(&e.repo));
    let repo = arca_repo::Repository::open(backend, b"test password").unwrap();
    let kdf = arca_format::KdfParams {
        memory_kib: 256,
        iterations: 1,
        parallelism: 1,
    };
    repo.add_key_for(b"   ", kdf, &arca_repo::KeyOwner::default())
        .unwrap();
    let o = e
        .cmd(&["snapshots"])
        .env("ARCA_PASSWORD", "   ")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = e
        .cmd(&["snapshots"])
        .arg("--password-file")
        .arg(b)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `key passwd` on a store that keeps what it is given (the old key cannot be deleted): the
/// error says the new key was saved, that the old password still opens the repository, and
/// how to remove it.
#[test]
fn key_passwd_that_cannot_delete_the_old_key_says_both_open() {
    let e = Env::new();
    e.init(&[]);
    let old = fs::read_dir(e.repo.join("keys"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .into_string()
        .unwrap();
    let o = e
        .cmd(&["key", "passwd"])
        .env("ARCA_NEW_PASSWORD", "new one")
        .env("ARCA_TEST_FAULTS", "delete:key:always:denied")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("saved new key"), "{err}");
    assert!(
        err.contains(&format!("arca key remove {}", &old[..8])),
        "{err}"
    );
    assert_eq!(keys(&e), 2);
    // Both passwords open it, as the message says.
    e.ok(&["snapshots"]);
    let o = e
        .cmd(&["snapshots"])
        .env("ARCA_PASSWORD", "new one")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Names holding control characters are shown escaped in `key list` and the snapshot table:
/// a newline split a row, an escape sequence reached the terminal (key files are not
/// encrypted, so anyone who can write to the repository could put one there).
#[test]
fn control_characters_in_names_are_shown_escaped() {
    let e = Env::new();
    e.init(&[]);
    let o = e
        .cmd(&["key", "add", "--user", "evil\nname\x1b[31m"])
        .env("ARCA_NEW_PASSWORD", "second")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = e.ok(&["key", "list"]);
    assert!(out.contains("evil\\x0aname\\x1b[31m"), "{out}");
    assert!(!out.contains('\x1b'), "{out}");
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    e.ok(&[
        "backup",
        src.to_str().unwrap(),
        "--host",
        "ev\nil\x1b[31m",
        "--tag",
        "t\x07",
    ]);
    let out = e.ok(&["snapshots"]);
    assert!(out.contains("ev\\x0ail\\x1b[31m"), "{out}");
    assert!(out.contains("t\\x07"), "{out}");
    assert!(!out.contains('\x1b') && !out.contains('\x07'), "{out}");
}

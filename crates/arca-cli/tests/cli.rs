//! End-to-end tests of the `arca` binary: exit codes, messages, JSON output and the bad
//! inputs a user meets (wrong password, missing repository, unreadable files, unwritable or
//! full targets, damaged packs, a killed backup).

#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use arca_testkit::{is_root, random_bytes, text_bytes};

mod common;
use common::*;

#[test]
fn end_to_end_with_json_listing_and_cat() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&[
        "--pack-size",
        "1MiB",
        "--chunk-min",
        "64KiB",
        "--chunk-avg",
        "128KiB",
        "--chunk-max",
        "512KiB",
    ]);
    let s = src.to_str().unwrap();
    let b = e.json(&["backup", "--json", "--tag", "t1", s]);
    assert_eq!(b["message_type"], "summary");
    assert_eq!(b["files_new"], 5);
    assert_eq!(b["complete"], true);
    assert!(b["backend"]["bytes_written"].as_u64().unwrap() > 0);
    let id = b["snapshot_id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 64);
    let b2 = e.json(&["backup", "--json", s]);
    assert_eq!(b2["files_unmodified"], 5);
    assert_eq!(b2["parent"], id.as_str());

    let snaps: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    assert_eq!(snaps.as_array().unwrap().len(), 2);
    assert_eq!(snaps[0]["id"], id.as_str());
    assert_eq!(snaps[0]["tags"][0], "t1");
    assert_eq!(snaps[0]["paths"][0], s);
    let human = e.ok(&["snapshots"]);
    assert!(
        human.contains(&id[..8]) && human.contains("2 snapshots"),
        "{human}"
    );
    // Snapshots named by id or prefix, as restic's `snapshots ID...`.
    let one = e.json(&["snapshots", "--json", &id[..8]]);
    assert_eq!(one.as_array().unwrap().len(), 1, "{one}");
    assert_eq!(one[0]["id"], id.as_str());
    let both = e.json(&["snapshots", "--json", "latest", &id]);
    assert_eq!(both.as_array().unwrap().len(), 2, "{both}");
    assert_eq!(both[0]["id"], id.as_str(), "oldest first");
    let o = e.run(&["snapshots", "ffffffff"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    let ls = e.ok(&["ls", &id[..10]]);
    assert!(ls.contains(&format!("{s}/docs/deep/c.bin")), "{ls}");
    let sub = e.ok(&["ls", "latest", &format!("{s}/docs")]);
    assert!(
        sub.lines().all(|l| l.starts_with(&format!("{s}/docs"))),
        "{sub}"
    );
    assert!(sub.contains("a.txt") && !sub.contains("top.bin"));
    // As restic's: a folder argument lists the folder and its entries, --recursive all below.
    assert!(!sub.contains("c.bin"), "{sub}");
    assert!(sub.lines().any(|l| l == format!("{s}/docs/deep")), "{sub}");
    let deep = e.ok(&["ls", "--recursive", "latest", &format!("{s}/docs")]);
    assert!(deep.contains(&format!("{s}/docs/deep/c.bin")), "{deep}");
    assert_eq!(deep.lines().next(), Some(format!("{s}/docs").as_str()));
    let two = e.ok(&[
        "ls",
        "latest",
        &format!("{s}/top.bin"),
        &format!("{s}/docs/deep"),
    ]);
    let two: Vec<&str> = two.lines().collect();
    assert_eq!(
        two,
        [
            format!("{s}/top.bin"),
            format!("{s}/docs/deep"),
            format!("{s}/docs/deep/c.bin")
        ],
    );
    let long = e.ok(&["ls", "-l", "latest", &format!("{s}/top.bin")]);
    assert!(long.starts_with("-rw") && long.contains("300000"), "{long}");
    let lsj = e.ok(&["ls", "--json", "latest"]);
    let lines: Vec<serde_json::Value> = lsj
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["message_type"], "snapshot");
    // restic's snapshot line has both ids.
    let full = lines[0]["id"].as_str().unwrap();
    assert_eq!(lines[0]["short_id"].as_str().unwrap(), &full[..8]);
    assert!(lines.iter().any(|n| n["path"] == format!("{s}/docs/b.txt")
        && n["size"] == 70_000
        && n["type"] == "file"));

    let target = e.path("target");
    let r = e.json(&[
        "restore",
        "latest",
        "--target",
        target.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r["files_restored"], 5);
    assert_eq!(r["errors"], 0);
    let out = target.join(s.trim_start_matches('/'));
    assert_eq!(
        fs::read(out.join("docs/deep/c.bin")).unwrap(),
        fs::read(src.join("docs/deep/c.bin")).unwrap()
    );

    let c: serde_json::Value = serde_json::from_str(&e.ok(&["cat", "config"])).unwrap();
    assert_eq!(c["chunker"]["avg"], 128 * 1024);
    assert_eq!(c["pack_size"], 1 << 20);
    let snap: serde_json::Value = serde_json::from_str(&e.ok(&["cat", "snapshot", &id])).unwrap();
    let tree = snap["tree"].as_str().unwrap();
    let t: serde_json::Value = serde_json::from_str(&e.ok(&["cat", "tree", tree])).unwrap();
    assert!(!t["nodes"].as_array().unwrap().is_empty());
    let index_id = fs::read_dir(e.repo.join("index"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    let ix: serde_json::Value =
        serde_json::from_str(&e.ok(&["cat", "index", index_id.to_str().unwrap()])).unwrap();
    let pack = ix["packs"][0]["id"].as_str().unwrap().to_string();
    let p: serde_json::Value = serde_json::from_str(&e.ok(&["cat", "pack", &pack])).unwrap();
    assert_eq!(p["blobs"], ix["packs"][0]["blobs"]);
    let blob = p["blobs"][0]["id"].as_str().unwrap();
    let raw = e.run(&["cat", "blob", blob]);
    assert!(raw.status.success());
    assert_eq!(
        raw.stdout.len() as u64,
        p["blobs"][0]["raw_length"].as_u64().unwrap()
    );
    let keys: serde_json::Value = serde_json::from_str(&e.ok(&["key", "list", "--json"])).unwrap();
    let k: serde_json::Value =
        serde_json::from_str(&e.ok(&["cat", "key", keys[0]["id"].as_str().unwrap()])).unwrap();
    assert_eq!(k["kdf"]["algorithm"], "argon2id");
    let chk = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(chk["ok"], true);
    assert!(chk["blobs_read"].as_u64().unwrap() > 5);
    // A bad id prefix is a clear error.
    let o = e.run(&["ls", "ffffffffff"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no snapshot matches \"ffffffffff\""),
        "{}",
        stderr(&o)
    );
}

/// `init --cipher` picks the AEAD; both round-trip a backup byte for byte and pass
/// `check --read-data`; `cat config` and `init` name the cipher; a bad name is refused.
#[test]
fn init_cipher_choice_round_trips() {
    for (cipher, version) in [("xchacha20-poly1305", 1), ("xaes-256-gcm", 3)] {
        let e = Env::new();
        let src = e.path("src");
        sample(&src);
        let said = e.ok(&[
            "init",
            "--kdf-memory-kib",
            "256",
            "--kdf-iterations",
            "1",
            "--cipher",
            cipher,
        ]);
        assert!(said.contains(&format!("(cipher {cipher})")), "{said}");
        let c: serde_json::Value = serde_json::from_str(&e.ok(&["cat", "config"])).unwrap();
        assert_eq!(
            (c["cipher"].as_str(), c["version"].as_u64()),
            (Some(cipher), Some(version))
        );
        let s = src.to_str().unwrap();
        e.ok(&["backup", s]);
        let target = e.path("target");
        e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
        let out = target.join(s.trim_start_matches('/'));
        for f in ["top.bin", "docs/b.txt", "docs/deep/c.bin"] {
            assert_eq!(
                fs::read(out.join(f)).unwrap(),
                fs::read(src.join(f)).unwrap(),
                "{f}"
            );
        }
        assert_eq!(e.json(&["check", "--read-data", "--json"])["ok"], true);
    }
    let e = Env::new();
    let o = e.run(&["init", "--cipher", "rot13"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("rot13"), "{}", stderr(&o));
}

#[test]
fn wrong_password_missing_and_foreign_repositories() {
    let e = Env::new();
    e.init(&[]);
    let o = e
        .cmd(&["snapshots"])
        .env("ARCA_PASSWORD", "nope")
        .output()
        .unwrap();
    // restic's exit codes: 12 wrong password, 10 no repository.
    assert_eq!(o.status.code(), Some(12));
    assert!(stderr(&o).contains("wrong password"), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1);
    // A damaged config is named by its path.
    let config = e.repo.join("config");
    let good = fs::read(&config).unwrap();
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    fs::write(&config, &bad).unwrap();
    let o = e.run(&["snapshots"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(&format!("{}", config.display())),
        "{}",
        stderr(&o)
    );
    fs::write(&config, &good).unwrap();
    // An empty password file is named as such, not taken for a wrong password.
    let empty = e.path("empty-password");
    fs::write(&empty, b"\n").unwrap();
    let o = e
        .cmd(&["snapshots", "--password-file", empty.to_str().unwrap()])
        .env_remove("ARCA_PASSWORD")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).trim(),
        format!("arca: password file {} is empty", empty.display())
    );
    fs::write(&empty, b"\nsecret\n").unwrap();
    let o = e
        .cmd(&["snapshots", "--password-file", empty.to_str().unwrap()])
        .env_remove("ARCA_PASSWORD")
        .output()
        .unwrap();
    assert!(
        stderr(&o).contains("its first line is empty"),
        "{}",
        stderr(&o)
    );

    let missing = e.path("no/such/repo");
    let o = Command::new(BIN)
        .args(["-r", missing.to_str().unwrap(), "snapshots"])
        .env("ARCA_PASSWORD", "x")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(10));
    assert!(
        stderr(&o).contains("no/such/repo") && stderr(&o).contains("does not exist"),
        "{}",
        stderr(&o)
    );

    let foreign = e.path("foreign");
    fs::create_dir_all(&foreign).unwrap();
    let o = Command::new(BIN)
        .args(["-r", foreign.to_str().unwrap(), "snapshots"])
        .env("ARCA_PASSWORD", "x")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(10));
    assert!(
        stderr(&o).contains("not an arca repository"),
        "{}",
        stderr(&o)
    );
    // Another tool's repository (restic's config is sealed bytes of its own).
    fs::write(foreign.join("config"), random_bytes(9, 200)).unwrap();
    let o = Command::new(BIN)
        .args(["-r", foreign.to_str().unwrap(), "snapshots"])
        .env("ARCA_PASSWORD", "x")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(10));
    assert!(
        stderr(&o).contains("its config file is not arca's"),
        "{}",
        stderr(&o)
    );

    // init refuses an existing repository and a non-empty folder.
    let o = e.run(&["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));

    let o = Command::new(BIN)
        .arg("snapshots")
        .env_remove("ARCA_REPOSITORY")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no repository given"));

    // Password from a file.
    let pwf = e.path("pw");
    fs::write(&pwf, "test password\n").unwrap();
    let o = e
        .cmd(&["snapshots", "--password-file", pwf.to_str().unwrap()])
        .env_remove("ARCA_PASSWORD")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn no_password_and_no_terminal_is_a_clear_error() {
    if Command::new("setsid").arg("--version").output().is_err() {
        return;
    }
    let e = Env::new();
    e.init(&[]);
    let o = Command::new("setsid")
        .args(["-w", BIN, "-r", e.repo.to_str().unwrap(), "snapshots"])
        .env_remove("ARCA_PASSWORD")
        .env_remove("ARCA_PASSWORD_FILE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no password given"), "{}", stderr(&o));
}

/// As restic: a password piped in is read from standard input, unless standard input holds
/// the data (`backup --stdin`, `--files-from -`); `key add` reads the new one from it too.
#[test]
fn a_password_piped_in_is_read_from_standard_input() {
    use std::io::Write;
    let e = Env::new();
    e.init(&[]);
    let piped = |args: &[&str], input: &str, env: &[(&str, &str)]| {
        let mut c = e.cmd(args);
        c.env_remove("ARCA_PASSWORD")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // A command that never reads it (its password came from elsewhere) may be gone
        // before it is written: a broken pipe here is not the test's failure.
        if let Err(err) = stdin.write_all(input.as_bytes()) {
            assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "{err}");
        }
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let o = piped(&["snapshots", "--json"], "test password\n", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = piped(&["snapshots"], "wrong\n", &[]);
    assert_eq!(o.status.code(), Some(12), "{}", stderr(&o));
    let o = piped(&["snapshots"], "", &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("gave none"), "{}", stderr(&o));
    // Standard input holds the data: it is not taken for the password.
    let o = piped(&["backup", "--stdin"], "test password\n", &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no password given"), "{}", stderr(&o));
    assert!(
        e.json(&["snapshots", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    // The password and the data in one pipe (`--password-file /dev/stdin`): the password
    // is the first line, and every byte after it is the data (the first 256 bytes read
    // took up to 255 bytes of the data with them).
    let data: String = (1..=1000).map(|i| format!("{i}\n")).collect();
    let o = piped(
        &[
            "--password-file",
            "/dev/stdin",
            "backup",
            "--stdin",
            "--stdin-filename",
            "numbers",
        ],
        &format!("test password\n{data}"),
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dumped = e.ok(&["dump", "latest", "/numbers"]);
    assert_eq!(dumped, data);
    // Two options that both read standard input: the second would find it empty (a list of
    // excludes read as nothing). Refused as a usage error, naming both.
    for args in [
        &["backup", "--files-from", "-", "--exclude-file", "-"][..],
        &["backup", "--stdin", "--exclude-file=-"],
        &[
            "restore",
            "latest",
            "--target",
            "t",
            "--include-file",
            "-",
            "--exclude-file",
            "-",
        ],
    ] {
        let o = piped(args, "x\n", &[("ARCA_PASSWORD", "test password")]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("--exclude-file -") && err.contains("read it"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // key add: the current password from ARCA_PASSWORD, the new one from standard input
    // (once: there is nobody to confirm it).
    let o = piped(
        &["key", "add"],
        "second password\n",
        &[("ARCA_PASSWORD", "test password")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = piped(&["snapshots"], "second password\n", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Nothing given anywhere: the error names how to give the new password.
    let o = e
        .cmd(&["key", "add"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no new password given (set ARCA_NEW_PASSWORD"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn unreadable_files_are_skipped_with_exit_3_and_an_incomplete_snapshot() {
    let e = Env::new();
    // As root, run arca as an unprivileged user so that mode 000 means unreadable.
    let nobody = e.unprivileged();
    let src = e.path("src");
    sample(&src);
    fs::write(src.join("secret"), b"no access").unwrap();
    fs::set_permissions(src.join("secret"), fs::Permissions::from_mode(0o000)).unwrap();
    fs::create_dir(src.join("closed")).unwrap();
    fs::write(src.join("closed/inner"), b"x").unwrap();
    fs::set_permissions(src.join("closed"), fs::Permissions::from_mode(0o000)).unwrap();
    let as_user = |args: &[&str]| e.run_as(nobody, args);
    let o = as_user(&["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = as_user(&["backup", "--json", src.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("secret") && err.contains("Permission denied"),
        "{err}"
    );
    // The folder's entry is kept with nothing in it, and the warning says so.
    assert!(
        err.contains(
            "closed: cannot list directory: Permission denied (os error 13); stored empty"
        ),
        "{err}"
    );
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(v["complete"], false);
    assert_eq!(v["errors"], 2);
    let o = as_user(&["snapshots"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("incomplete"));
    // Everything readable was stored.
    let o = as_user(&["ls", "latest"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("docs/deep/c.bin"));
    fs::set_permissions(src.join("closed"), fs::Permissions::from_mode(0o755)).unwrap();
}

/// A directory whose listing fails (at once, or after its first entries) and a file whose
/// reads fail part way, on a FUSE file system that fails on purpose: each is warned about by
/// name, the snapshot is marked incomplete and the exit code is 3; a failed listing is never
/// taken for the end of the directory (which would store a silently shorter tree).
#[test]
fn failed_listings_and_reads_are_warned_about_never_stored_as_shorter() {
    if !arca_testkit::faultfs::require_fuse() {
        return;
    }
    let e = Env::new();
    let m = e.path("m");
    fs::create_dir(&m).unwrap();
    let faulty = arca_testkit::faultfs::FaultFs::mount(&m).unwrap();
    e.init(&[]);
    let o = e.run(&["backup", "--json", m.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    for (name, what) in [
        ("m/bad", "list directory"),
        ("m/short", "list directory"),
        ("m/broken", "read"),
    ] {
        assert!(
            err.lines()
                .any(|l| l.contains(name) && l.contains(what) && l.contains("Input/output error")),
            "no warning for {name}: {err}"
        );
    }
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(v["complete"], false, "{v}");
    assert_eq!(v["errors"], 3, "{v}");
    let o = e.run(&["snapshots"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("incomplete"));
    // What could be read was stored, and nothing that failed was stored as if whole.
    let ls = e.ok(&["ls", "latest"]);
    assert!(ls.lines().any(|l| l.ends_with("/m/ok")), "{ls}");
    assert!(!ls.lines().any(|l| l.ends_with("/m/broken")), "{ls}");
    drop(faulty);
}

/// One of several paths missing: warned about by name and left out, the others backed up
/// (as restic does); the snapshot is incomplete and the exit code 3.
#[test]
fn a_missing_path_among_others_is_warned_about_and_left_out() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    sample(&src);
    let gone = e.path("not-here");
    let o = e.run(&[
        "backup",
        "--json",
        gone.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    // Under --json, restic's error line: the entry as `item`, the message naming it once.
    let line: serde_json::Value = serde_json::from_str(err.trim()).expect("one JSON line");
    assert_eq!(line["message_type"], "error", "{err}");
    assert_eq!(line["item"], gone.to_str().unwrap(), "{err}");
    let message = line["error"]["message"].as_str().unwrap();
    assert_eq!(message.matches("not-here").count(), 1, "{err}");
    assert!(message.contains("No such file or directory"), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(v["complete"], false);
    assert_eq!(v["errors"], 1);
    let snaps: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    assert_eq!(
        snaps[0]["paths"],
        serde_json::json!([src.to_str().unwrap()])
    );
    let target = e.path("t");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    let d = arca_testkit::compare::diff_trees(&src, &target.join(src.strip_prefix("/").unwrap()));
    assert!(d.is_empty(), "{d:?}");
}

#[test]
fn a_missing_backup_path_is_fatal() {
    let e = Env::new();
    e.init(&[]);
    let p = e.path("not-here");
    let o = e.run(&["backup", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not-here") && stderr(&o).contains("No such file"),
        "{}",
        stderr(&o)
    );
    assert!(
        fs::read_dir(e.repo.join("snapshots"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[test]
fn unwritable_target_is_a_clear_error() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let file = e.path("a-file");
    fs::write(&file, b"x").unwrap();
    let target = file.join("sub");
    let o = e.run(&["restore", "latest", "--target", target.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("a-file/sub"), "{}", stderr(&o));
}

struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: PathBuf, size: &str) -> Option<Self> {
        fs::create_dir_all(&dir).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .ok()?
            .success();
        ok.then_some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn one_file_system_keeps_a_mount_point_given_as_a_path_of_its_own() {
    if !is_root() {
        return;
    }
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(src.join("other")).unwrap();
    fs::write(src.join("top"), b"t").unwrap();
    let Some(mnt) = Tmpfs::mount(src.join("mnt"), "1m") else {
        return;
    };
    let Some(other) = Tmpfs::mount(src.join("other"), "1m") else {
        return;
    };
    fs::write(mnt.0.join("inside"), b"i").unwrap();
    fs::write(other.0.join("skipped"), b"s").unwrap();
    e.init(&[]);
    let (s, m) = (src.to_str().unwrap(), mnt.0.to_str().unwrap());
    e.ok(&["backup", "-x", s, m]);
    let listing = e.ok(&["ls", "latest"]);
    assert!(listing.contains(&format!("{m}/inside")), "{listing}");
    assert!(listing.contains(&format!("{s}/top")), "{listing}");
    // Another mount point inside is not crossed (stored empty).
    assert!(listing.contains(&format!("{s}/other\n")), "{listing}");
    assert!(!listing.contains("skipped"), "{listing}");
    // A path named inside that other file system is backed up, and only it: the rest of
    // that file system is not (it was, whole).
    fs::create_dir_all(other.0.join("wanted")).unwrap();
    fs::write(other.0.join("wanted/w"), b"w").unwrap();
    let wanted = other.0.join("wanted");
    e.ok(&["backup", "-x", s, wanted.to_str().unwrap()]);
    let listing = e.ok(&["ls", "latest"]);
    assert!(
        listing.contains(&format!("{}/w", wanted.display())),
        "{listing}"
    );
    assert!(listing.contains(&format!("{s}/top")), "{listing}");
    assert!(!listing.contains("skipped"), "{listing}");
}

#[test]
fn a_read_only_repository_is_read_with_no_lock_and_the_error_says_so() {
    if !is_root() {
        return;
    }
    let mut e = Env::new();
    let Some(fs_) = Tmpfs::mount(e.path("ro"), "64m") else {
        return;
    };
    e.repo = fs_.0.join("repo");
    let src = e.path("src");
    sample(&src);
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let ok = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&fs_.0)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let out = e.path("out");
    let o = e.run(&["restore", "latest", "--target", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Read-only file system") && stderr(&o).contains("--no-lock"),
        "{}",
        stderr(&o)
    );
    e.ok(&[
        "--no-lock",
        "restore",
        "latest",
        "--target",
        out.to_str().unwrap(),
    ]);
    // A command that writes is not told to skip the lock, which would not help it.
    let o = e.run(&["backup", src.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Read-only file system") && !stderr(&o).contains("--no-lock"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn full_disk_on_restore_and_on_backup() {
    if !is_root() {
        return;
    }
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("big"), random_bytes(9, 6 << 20)).unwrap();
    e.init(&[]);
    e.ok(&["backup", src.to_str().unwrap()]);
    let Some(small) = Tmpfs::mount(e.path("small"), "2m") else {
        return;
    };
    let o = e.run(&["restore", "latest", "--target", small.0.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("No space left on device")
            && stderr(&o).contains("big")
            && stderr(&o)
                .contains("the restore stopped, 1 file left partly written: free some space")
            && !stderr(&o).contains("disk full"),
        "{}",
        stderr(&o)
    );

    // A repository on a full disk: the backup fails cleanly and writes no snapshot.
    let Some(repo_fs) = Tmpfs::mount(e.path("repofs"), "3m") else {
        return;
    };
    let r = repo_fs.0.join("repo");
    let run = |args: &[&str]| {
        Command::new(BIN)
            .arg("-r")
            .arg(&r)
            .args(args)
            .env("ARCA_PASSWORD", "pw")
            .output()
            .unwrap()
    };
    assert!(
        run(&["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"])
            .status
            .success()
    );
    let o = run(&["backup", src.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("No space left"), "{}", stderr(&o));
    // Named by the folder it was written into: the temporary file it named is removed.
    assert!(
        stderr(&o).contains(&format!("write a new pack in {}", r.join("data").display())),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains(".tmp-"), "{}", stderr(&o));
    assert!(fs::read_dir(r.join("snapshots")).unwrap().next().is_none());
    // The pack being written when the disk filled (streamed into a temporary file) is gone.
    let temps = arca_testkit::temp_files_under(&r);
    assert!(temps.is_empty(), "{temps:?}");
    let o = run(&["check"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn damaged_pack_gives_exit_3_on_restore_and_1_on_check() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&["--pack-size", "1MiB"]);
    e.ok(&["backup", src.to_str().unwrap()]);
    // Damage the biggest pack in the middle.
    let mut packs = arca_testkit::files_under(&e.repo.join("data"));
    packs.sort_by_key(|p| fs::metadata(p).unwrap().len());
    let big = packs.last().unwrap();
    arca_testkit::flip_byte(big, fs::metadata(big).unwrap().len() / 3).unwrap();
    let o = e.run(&["check", "--read-data"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(big.file_name().unwrap().to_str().unwrap()),
        "{err}"
    );
    assert!(
        err.contains("is damaged") && err.contains(src.to_str().unwrap()),
        "{err}"
    );
    let target = e.path("t");
    let o = e.run(&["restore", "latest", "--target", target.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("damaged"), "{}", stderr(&o));
    // The summary does not count the failed files among those restored.
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = out
        .lines()
        .find(|l| l.starts_with("restored snapshot"))
        .unwrap_or_else(|| panic!("{out}"));
    let (done, planned) = line
        .split_once(": ")
        .and_then(|(_, rest)| rest.split_once(" files"))
        .and_then(|(n, _)| n.split_once(" of "))
        .unwrap_or_else(|| panic!("{line}"));
    let (done, planned): (u64, u64) = (done.parse().unwrap(), planned.parse().unwrap());
    assert!(done < planned, "{line}");
    assert!(line.contains("(planned: "), "{line}");
    // Truncation is caught by the structural check alone.
    arca_testkit::truncate_by(big, 10).unwrap();
    let o = e.run(&["check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("truncated"), "{}", stderr(&o));
}

#[test]
fn killed_backup_leaves_a_usable_repository_and_the_rerun_reuses_its_packs() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..24u64 {
        fs::write(src.join(format!("f{i:02}")), random_bytes(100 + i, 4 << 20)).unwrap();
    }
    e.init(&["--pack-size", "1MiB", "--compression", "0"]);
    let mut child = e
        .cmd(&["backup", src.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for a checkpoint index and 40 of the ~100 packs, then kill -9.
    let t0 = Instant::now();
    let killed = loop {
        let indexed = fs::read_dir(e.repo.join("index"))
            .unwrap()
            .any(|f| f.unwrap().file_name().len() == 64);
        let packs = arca_testkit::files_under(&e.repo.join("data")).len();
        if indexed && packs >= 40 {
            child.kill().unwrap();
            break true;
        }
        if child.try_wait().unwrap().is_some() || t0.elapsed() > Duration::from_secs(60) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    child.wait().unwrap();
    assert!(killed, "the backup finished before it could be killed");
    assert!(
        fs::read_dir(e.repo.join("snapshots"))
            .unwrap()
            .next()
            .is_none(),
        "no snapshot after a kill"
    );
    // No temporary files are visible as repository files, and check passes.
    let chk = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(chk["ok"], true, "{chk}");
    let b = e.json(&["backup", "--json", src.to_str().unwrap()]);
    assert!(
        b["data_added"].as_u64().unwrap() <= 64 << 20,
        "rerun uploaded everything again: {b}"
    );
    let target = e.path("t");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    let out = target.join(src.strip_prefix("/").unwrap());
    for i in 0..24u64 {
        assert_eq!(
            fs::read(out.join(format!("f{i:02}"))).unwrap(),
            random_bytes(100 + i, 4 << 20)
        );
    }
}

#[test]
fn include_and_exclude_on_restore_and_backup() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    fs::create_dir_all(src.join("cache")).unwrap();
    fs::write(src.join("cache/junk"), b"junk").unwrap();
    e.init(&[]);
    let s = src.to_str().unwrap();
    e.ok(&["backup", "--exclude", "cache", "--exclude", "*.bin", s]);
    let ls = e.ok(&["ls", "latest"]);
    assert!(
        !ls.contains("cache") && !ls.contains(".bin") && ls.contains("a.txt"),
        "{ls}"
    );
    e.ok(&["backup", s]);
    let t = e.path("t1");
    e.ok(&[
        "restore",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--include",
        &format!("{s}/docs"),
    ]);
    let out = t.join(s.trim_start_matches('/'));
    assert!(out.join("docs/deep/c.bin").exists() && out.join("docs/a.txt").exists());
    assert!(!out.join("top.bin").exists() && !out.join("cache").exists());
    let t = e.path("t2");
    e.ok(&[
        "restore",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--exclude",
        "*.txt",
        "--exclude",
        "deep",
    ]);
    let out = t.join(s.trim_start_matches('/'));
    assert!(out.join("top.bin").exists() && out.join("cache/junk").exists());
    assert!(!out.join("docs/a.txt").exists() && !out.join("docs/deep").exists());
    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        t.to_str().unwrap(),
        "--include",
        "[oops",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid pattern"), "{}", stderr(&o));
}

#[test]
fn key_add_list_remove_and_passwd() {
    let e = Env::new();
    e.init(&[]);
    let o = e
        .cmd(&[
            "key",
            "add",
            "--kdf-memory-kib",
            "256",
            "--kdf-iterations",
            "1",
        ])
        .env("ARCA_NEW_PASSWORD", "second")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let keys: serde_json::Value = serde_json::from_str(&e.ok(&["key", "list", "--json"])).unwrap();
    assert_eq!(keys.as_array().unwrap().len(), 2);
    let first = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["current"] == true)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let o = e.run(&["key", "remove", ""]);
    assert!(stderr(&o).contains("no key id given"), "{}", stderr(&o));
    // The key in use cannot be removed (named in capitals too, as other ids); with the
    // other password it can.
    let o = e.run(&["key", "remove", &first[..8].to_ascii_uppercase()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("refusing"), "{}", stderr(&o));
    let o = e.run(&["key", "remove", &first[..8]]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("refusing"));
    let o = e
        .cmd(&["key", "remove", &first[..8]])
        .env("ARCA_PASSWORD", "second")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = e.run(&["snapshots"]);
    assert!(stderr(&o).contains("wrong password"));
    let o = e
        .cmd(&[
            "key",
            "passwd",
            "--kdf-memory-kib",
            "256",
            "--kdf-iterations",
            "1",
        ])
        .env("ARCA_PASSWORD", "second")
        .env("ARCA_NEW_PASSWORD", "third")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        e.cmd(&["snapshots"])
            .env("ARCA_PASSWORD", "third")
            .output()
            .unwrap()
            .status
            .success()
    );
    assert!(
        !e.cmd(&["snapshots"])
            .env("ARCA_PASSWORD", "second")
            .output()
            .unwrap()
            .status
            .success()
    );
    let o = e
        .cmd(&["key", "add"])
        .env("ARCA_PASSWORD", "third")
        .env("ARCA_NEW_PASSWORD", "")
        .output()
        .unwrap();
    // Empty counts as unset (as every ARCA_* variable): no new password is given.
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no new password given"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn huge_sparse_file_over_4_gib_round_trips_with_its_holes() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let size: u64 = 6 << 30;
    let islands: [(u64, &[u8]); 3] = [
        (0, b"head"),
        ((4 << 30) + 12_345, b"beyond the 4 GiB mark"),
        (size - 4, b"tail"),
    ];
    {
        let f = fs::File::create(src.join("disk.img")).unwrap();
        f.set_len(size).unwrap();
        for (off, data) in islands {
            f.write_all_at(data, off).unwrap();
        }
    }
    e.init(&[]);
    let b = e.json(&["backup", "--json", src.to_str().unwrap()]);
    assert_eq!(b["total_bytes_processed"], size);
    assert!(b["data_added_packed"].as_u64().unwrap() < 1 << 20, "{b}");
    let ls = e.ok(&["ls", "-l", "latest", &format!("{}/disk.img", src.display())]);
    assert!(ls.contains(&size.to_string()), "{ls}");
    let target = e.path("t");
    let r = e.json(&[
        "restore",
        "latest",
        "--json",
        "--target",
        target.to_str().unwrap(),
    ]);
    // The holes are counted as the dry run counts them (the zero blocks skipped were left
    // out: 12 MiB of 4 GiB; hunt 26).
    let holes = r["bytes_holes"].as_u64().unwrap();
    assert!(holes > size - (16 << 20), "{r}");
    assert!(holes <= size, "{r}");
    let out = target.join(src.strip_prefix("/").unwrap()).join("disk.img");
    let m = fs::metadata(&out).unwrap();
    assert_eq!(m.len(), size);
    assert!(
        m.blocks() * 512 < 1 << 20,
        "holes were filled: {} bytes allocated",
        m.blocks() * 512
    );
    let f = fs::File::open(&out).unwrap();
    for (off, data) in islands {
        let mut buf = vec![0u8; data.len() + 8];
        let n = f.read_at(&mut buf, off.saturating_sub(4)).unwrap();
        let start = (off - off.saturating_sub(4)) as usize;
        assert_eq!(&buf[start..start + data.len()], data, "island at {off}");
        assert!(buf[..start].iter().all(|&x| x == 0));
        assert!(n >= start + data.len());
    }
}

#[test]
fn password_from_a_terminal_prompt_and_from_arca_password_file() {
    let e = Env::new();
    e.init(&[]);
    // A pseudo-terminal from script(1): arca prompts on it and reads the answer.
    if Command::new("script").arg("--version").output().is_ok() {
        let cmd = format!("{BIN} -r '{}' snapshots --json", e.repo.display());
        let run = |answer: &str| {
            let mut c = Command::new("script")
                .args(["-q", "-e", "-c", &cmd, "/dev/null"])
                .env_remove("ARCA_PASSWORD")
                .env_remove("ARCA_PASSWORD_FILE")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(300));
            use std::io::Write;
            let mut stdin = c.stdin.take().unwrap();
            stdin.write_all(format!("{answer}\n").as_bytes()).unwrap();
            drop(stdin);
            c.wait_with_output().unwrap()
        };
        let o = run("test password");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && out.contains("enter password") && out.contains("[]"),
            "{out}"
        );
        let o = run("not it");
        assert_eq!(o.status.code(), Some(12));
        assert!(String::from_utf8_lossy(&o.stdout).contains("wrong password"));
    }
    let pwf = e.path("pwfile");
    fs::write(&pwf, "test password\r\n").unwrap();
    let o = e
        .cmd(&["snapshots"])
        .env_remove("ARCA_PASSWORD")
        .env("ARCA_PASSWORD_FILE", &pwf)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = e
        .cmd(&["snapshots"])
        .env("ARCA_PASSWORD_FILE", e.path("missing"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot read password file") && stderr(&o).contains("missing"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn compression_is_set_at_init_and_overridable_per_backup() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("text"), text_bytes(5, 2 << 20)).unwrap();
    e.init(&["--compression", "0"]);
    let s = src.to_str().unwrap();
    let raw = e.json(&["backup", "--json", s]);
    let stored = raw["data_added_packed"].as_u64().unwrap();
    assert!(stored >= 2 << 20, "level 0 must store uncompressed: {raw}");
    fs::write(src.join("text2"), text_bytes(6, 2 << 20)).unwrap();
    let z = e.json(&["backup", "--json", "--compression", "9", s]);
    assert!(
        z["data_added_packed"].as_u64().unwrap() < 1 << 20,
        "override not applied: {z}"
    );
}

/// `list` prints the ids of one type of file, or every blob of the index with its type, as
/// restic's `list` does; `version` names the version and the platform.
#[test]
fn list_prints_ids_per_type_and_version_names_itself() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let lines =
        |what: &str| -> Vec<String> { e.ok(&["list", what]).lines().map(str::to_string).collect() };
    let ids_under = |dir: &str| -> Vec<String> {
        let mut v: Vec<String> = arca_testkit::files_under(&e.repo.join(dir))
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .filter(|n| n.len() == 64)
            .collect();
        v.sort();
        v
    };
    for (what, dir) in [
        ("snapshots", "snapshots"),
        ("index", "index"),
        ("packs", "data"),
        ("keys", "keys"),
    ] {
        let mut got = lines(what);
        got.sort();
        assert_eq!(got, ids_under(dir), "{what}");
        assert!(!got.is_empty(), "{what}");
    }
    assert_eq!(lines("snapshots").len(), 2);
    assert!(lines("locks").is_empty(), "list takes no lock");
    // Every blob once, with its type; the snapshots' root trees among them.
    let blobs = lines("blobs");
    let unique: std::collections::HashSet<&String> = blobs.iter().collect();
    assert_eq!(unique.len(), blobs.len());
    assert!(blobs.iter().all(|l| {
        let (kind, id) = l.split_once(' ').unwrap();
        (kind == "data" || kind == "tree") && id.len() == 64
    }));
    assert!(blobs.iter().any(|l| l.starts_with("data ")));
    let snap = e.json(&["snapshots", "--json"]);
    let tree = snap[0]["tree"].as_str().unwrap();
    assert!(blobs.contains(&format!("tree {tree}")), "{tree}");
    // A wrong password is not taken for an empty repository.
    let o = e
        .cmd(&["list", "snapshots"])
        .env("ARCA_PASSWORD", "wrong")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(12), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let bad = e.run(&["list", "things"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("possible values"), "{}", stderr(&bad));

    let v = e.ok(&["version"]);
    assert!(
        v.starts_with(&format!("arca {} compiled for ", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    let j = e.json(&["version", "--json"]);
    assert_eq!(j["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(j["os"], std::env::consts::OS);
}

/// `init --json` prints one object, as restic's: the new repository's id and where it is.
#[test]
fn init_json_names_the_new_repository() {
    let e = Env::new();
    let j = e.json(&[
        "init",
        "--kdf-memory-kib",
        "256",
        "--kdf-iterations",
        "1",
        "--json",
    ]);
    assert_eq!(j["message_type"], "initialized", "{j}");
    assert_eq!(j["repository"], e.repo.to_str().unwrap());
    let config: serde_json::Value = serde_json::from_str(&e.ok(&["cat", "config"])).unwrap();
    assert_eq!(j["id"], config["id"]);
    assert_eq!(j["cipher"], config["cipher"]);
}

/// Thread counts beyond reason are refused with the allowed range (100,000 workers aborted
/// the process when the threads could not be made), and so is a compression level zstd
/// does not have; the pack size's error says what is wrong, once.
#[test]
fn out_of_range_counts_and_levels_are_refused_clearly() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    let s = src.to_str().unwrap();
    let t = e.path("t");
    let t = t.to_str().unwrap();
    for args in [
        &["backup", "--workers", "100000", s][..],
        &["backup", "--read-concurrency", "100000", s],
        &["backup", "--upload-queue", "257", s],
        &["restore", "latest", "--target", t, "--workers", "100000"],
        &["restore", "latest", "--target", t, "--fetchers", "100000"],
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("expected a whole number from 1 to 256"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let o = e.run(&["backup", "--compression", "30", s]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("-7..=22"), "{}", stderr(&o));
    assert!(
        e.json(&["snapshots", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    // The top of the range works.
    e.ok(&[
        "backup",
        "-q",
        "--workers",
        "256",
        "--read-concurrency",
        "256",
        s,
    ]);
    let other = Env::new();
    let o = other.run(&["init", "--pack-size", "5GiB"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "a usage error, as a value that does not parse"
    );
    assert_eq!(
        stderr(&o).trim(),
        "arca: pack size 5GiB is too large",
        "{}",
        stderr(&o)
    );
}

/// `check --read-data-subset` reads sizes as every other size option: `500MB` is
/// 500,000,000 bytes (it was 500 MiB), `500MiB` and `500M` binary.
#[test]
fn read_data_subset_sizes_are_decimal_in_kb_and_mb() {
    let e = Env::new();
    e.init(&[]);
    for (size, want) in [
        ("500MB", "500000000 bytes"),
        ("2kb", "2000 bytes"),
        ("500MiB", "524288000 bytes"),
        ("500M", "524288000 bytes"),
    ] {
        let v = e.json(&["check", "--read-data-subset", size, "--json"]);
        assert_eq!(v["read_data_subset"], want, "{size}: {v}");
    }
    let o = e.run(&["check", "--read-data-subset", "0.5"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// A size that is not a whole number of bytes is a usage error naming it: `0.5` was 0 bytes,
/// and `--exclude-larger-than 0.5` left out every file that is not empty. A fraction in a
/// larger unit (`1.5K`) is truncated to whole bytes.
#[test]
fn fractional_byte_sizes_are_refused() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("small"), vec![b'x'; 1000]).unwrap();
    fs::write(src.join("large"), vec![b'y'; 2000]).unwrap();
    let s = src.to_str().unwrap();
    for bad in ["0.5", "1.5B", "0.0001K"] {
        let o = e.run(&["backup", "-q", "--exclude-larger-than", bad, s]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(&format!("'{bad}'")), "{bad}: {err}");
        assert!(err.contains("not a whole number of bytes"), "{bad}: {err}");
    }
    assert!(
        e.json(&["snapshots", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    e.ok(&["backup", "-q", "--exclude-larger-than", "1.5K", s]);
    let listed = e.ok(&["ls", "latest"]);
    assert!(
        listed.contains("small") && !listed.contains("large"),
        "{listed}"
    );
}

/// `--json` and `-v` between a command group and its subcommand (`key --json list`,
/// `repair --json index`), as before the group and as `-q` there: they were usage errors,
/// exit 2.
#[test]
fn json_between_a_group_and_its_subcommand_is_taken() {
    let e = Env::new();
    e.init(&[]);
    let keys: serde_json::Value = serde_json::from_str(&e.ok(&["key", "--json", "list"])).unwrap();
    assert_eq!(keys.as_array().map(Vec::len), Some(1), "{keys}");
    let v = e.json(&["repair", "--json", "index", "--dry-run"]);
    assert_eq!(v["message_type"], "summary", "{v}");
    let v = e.json(&["repair", "-v", "--json", "-q", "index", "--dry-run"]);
    assert_eq!(v["message_type"], "summary", "{v}");
}

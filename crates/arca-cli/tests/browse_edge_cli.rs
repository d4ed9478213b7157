//! Edge cases of the commands that browse and operate on snapshots, checked against restic's
//! behaviour.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;

use common::{Env, stderr};

/// A repository with one snapshot of a small folder.
fn one_snapshot() -> Env {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("sub")).unwrap();
    fs::write(src.join("a.txt"), b"hello").unwrap();
    fs::write(src.join("sub/b.txt"), b"world").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    e
}

#[test]
fn snapshots_group_by_nothing_lists_ungrouped() {
    let e = one_snapshot();
    // restic: `-g ''` groups by nothing, so the output is that of no grouping at all.
    let v = e.json(&["snapshots", "-g", "", "--json"]);
    let list = v.as_array().expect("a plain array of snapshots");
    assert_eq!(list.len(), 1);
    assert!(list[0].get("id").is_some(), "{v}");
    assert!(list[0].get("group_key").is_none(), "{v}");
    let text = e.ok(&["snapshots", "-g", ""]);
    assert!(!text.contains("snapshots for"), "{text}");
    assert!(text.contains("1 snapshot\n"), "{text}");
}

#[test]
fn cat_blob_unknown_id_names_no_kind() {
    let e = one_snapshot();
    let id = "00".repeat(32);
    let o = e.run(&["cat", "blob", &id]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("blob {id} is not in the index")),
        "{err}"
    );
    assert!(!err.contains("tree blob"), "{err}");
    // The start of a real blob's id, another end: not in the index either (the index,
    // keyed by the first 16 bytes, found the real blob, and it was called damaged).
    let blobs = e.ok(&["list", "blobs"]);
    let real = blobs.lines().find_map(|l| l.strip_prefix("data ")).unwrap();
    let id = format!("{}{}", &real[..32], "0".repeat(32));
    let o = e.run(&["cat", "blob", &id]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("blob {id} is not in the index")),
        "{err}"
    );
}

#[test]
fn ls_and_dump_take_a_subfolder_spec() {
    let e = one_snapshot();
    let src = e.path("src");
    let spec = format!("latest:{}", src.display());
    // restic: `ID:SUBFOLDER` makes that folder the root of the listing and of dump's PATH.
    let out = e.ok(&["ls", &spec]);
    assert_eq!(out, "/a.txt\n/sub\n/sub/b.txt\n");
    assert_eq!(e.ok(&["ls", &spec, "/sub"]), "/sub\n/sub/b.txt\n");
    assert_eq!(e.ok(&["dump", &spec, "/sub/b.txt"]), "world");
    let inner = format!("latest:{}/sub", src.display());
    assert_eq!(e.ok(&["dump", &inner, "b.txt"]), "world");
    // A subfolder that is a file or missing is an error naming it.
    let file = format!("latest:{}/a.txt", src.display());
    for cmd in ["ls", "dump"] {
        let mut args = vec![cmd, file.as_str()];
        if cmd == "dump" {
            args.push("/");
        }
        let o = e.run(&args);
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        assert!(
            stderr(&o).contains("a.txt is not a folder"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn cat_tree_takes_a_snapshot_spec() {
    let e = one_snapshot();
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["name"].as_str().unwrap().to_owned())
            .collect()
    };
    // restic: `cat tree ID:SUBFOLDER` prints that folder's tree; a tree id still works.
    let sub = format!("latest:{}/sub", e.path("src").display());
    let v: serde_json::Value = serde_json::from_str(&e.ok(&["cat", "tree", &sub])).unwrap();
    assert_eq!(names(&v), ["b.txt"]);
    let snap = e.json(&["snapshots", "--json"]);
    let (id, tree) = (
        snap[0]["id"].as_str().unwrap(),
        snap[0]["tree"].as_str().unwrap(),
    );
    let by_tree = e.ok(&["cat", "tree", tree]);
    assert_eq!(e.ok(&["cat", "tree", id]), by_tree);
    assert_eq!(e.ok(&["cat", "tree", &id[..8]]), by_tree);
    let o = e.run(&["cat", "tree", "zz"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not a full 64-digit tree id, and no snapshot matches \"zz\""),
        "{}",
        stderr(&o)
    );
    // A data blob's id is said to be one (it was "not in the index").
    let blob = e
        .ok(&["list", "blobs"])
        .lines()
        .find_map(|l| l.strip_prefix("data ").map(str::to_string))
        .unwrap();
    let o = e.run(&["cat", "tree", &blob]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(&format!("{blob} is a data blob, not a tree")),
        "{}",
        stderr(&o)
    );
}

#[test]
fn key_list_json_has_restics_field_names() {
    let e = Env::new();
    e.init(&[]);
    // restic's `key list --json`: current, id, userName, hostName, created.
    let v = e.json(&["key", "list", "--json"]);
    let k = &v.as_array().unwrap()[0];
    for field in ["current", "id", "userName", "hostName", "created"] {
        assert!(k.get(field).is_some(), "{field} missing: {k}");
    }
    assert_eq!(k["current"], true);
    assert_eq!(k["id"].as_str().unwrap().len(), 64);
}

#[test]
fn ls_prints_each_entry_once_for_overlapping_paths() {
    let e = one_snapshot();
    let src = e.path("src");
    let (dir, sub) = (src.display().to_string(), format!("{}/sub", src.display()));
    // restic walks the snapshot once: a path given twice, or inside another one given, adds
    // no line twice.
    let lines = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["ls", "latest"];
        a.extend_from_slice(args);
        e.ok(&a).lines().map(str::to_owned).collect()
    };
    for args in [
        vec![sub.as_str(), sub.as_str()],
        vec![sub.as_str(), dir.as_str()],
        vec![dir.as_str(), sub.as_str(), "--recursive"],
        vec![sub.as_str(), dir.as_str(), "--recursive"],
    ] {
        let got = lines(&args);
        let mut unique = got.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(got.len(), unique.len(), "{args:?}: {got:?}");
    }
    assert_eq!(lines(&[&sub, &dir]).len(), 4);
    assert_eq!(lines(&[&sub, &dir, "--recursive"]).len(), 4);
    // A path that is not there is named, exit 1, and the others are listed all the same
    // (nothing was listed).
    let missing = format!("{}/missing", src.display());
    let o = e.run(&["ls", "latest", &missing, &sub]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("{missing} is not in snapshot")),
        "{}",
        stderr(&o)
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(out.lines().count(), lines(&[&sub]).len(), "{out}");
}

#[test]
fn ls_and_dump_take_a_non_utf8_subfolder() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    e.init(&[]);
    let dir = e.tmp.path().join(OsStr::from_bytes(b"n\xe9d"));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("f"), b"hi").unwrap();
    let o = e.cmd(&["backup", "-q"]).arg(&dir).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut spec = std::ffi::OsString::from("latest:");
    spec.push(&dir);
    // The spec is taken as bytes, as restore and diff take it.
    let o = e.cmd(&[]).arg("ls").arg(&spec).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, b"/f\n");
    let o = e
        .cmd(&[])
        .arg("dump")
        .arg(&spec)
        .arg("/f")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, b"hi");
}

#[test]
fn key_list_reports_a_damaged_key_file_and_lists_the_others() {
    let e = Env::new();
    e.init(&[]);
    let current = e.json(&["key", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let pw = e.path("pw2");
    fs::write(&pw, "second password\n").unwrap();
    e.ok(&[
        "key",
        "add",
        "--new-password-file",
        pw.to_str().unwrap(),
        "--kdf-memory-kib",
        "256",
        "--kdf-iterations",
        "1",
    ]);
    let other = fs::read_dir(e.repo.join("keys"))
        .unwrap()
        .map(|d| d.unwrap().file_name().into_string().unwrap())
        .find(|n| *n != current)
        .unwrap();
    fs::write(e.repo.join("keys").join(&other), b"garbage").unwrap();
    // restic reports the key it cannot load and lists the others.
    let o = e.run(&["key", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [current.as_str()]);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("arca key remove {}", &other[..8])),
        "{err}"
    );
    // The damaged key can then be removed by the id named.
    e.ok(&["key", "remove", &other[..8]]);
}

#[test]
fn dump_of_a_fifo_proposes_only_tar() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let fifo = src.join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    // A zip archive cannot hold a FIFO: proposing it gave an archive without the entry.
    let o = e.run(&["dump", "latest", fifo.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("is a fifo, not a file: dump it with --archive tar\n"),
        "{err}"
    );
    // Asked for alone in a zip, it is refused too: that archive was empty, with success.
    let o = e.run(&["dump", "-a", "zip", "latest", fifo.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(
        err.contains("is a fifo: a zip archive cannot hold it (dump it with --archive tar)\n"),
        "{err}"
    );
    // In a tar it is written.
    let o = e.run(&["dump", "-a", "tar", "latest", fifo.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let fifo_header = |b: &[u8]| b.len() == 512 && b[156] == b'6' && &b[257..262] == b"ustar";
    assert!(o.stdout.chunks(512).any(fifo_header), "a FIFO entry");
}

/// `key add` and `key passwd` take restic's `--user` and `--host`: the names the new key
/// records, shown by `key list`; an empty name is refused.
#[test]
fn key_add_and_passwd_record_the_user_and_host_given() {
    let e = Env::new();
    e.init(&[]);
    let cheap = ["--kdf-memory-kib", "256", "--kdf-iterations", "1"];
    let key = |args: &[&str], new: &str| {
        let mut all = vec!["key"];
        all.extend_from_slice(args);
        all.extend_from_slice(&cheap);
        e.cmd(&all).env("ARCA_NEW_PASSWORD", new).output().unwrap()
    };
    let o = key(&["add", "--user", "alice", "--host", "box"], "second");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = key(&["passwd", "--host", "elsewhere"], "third");
    assert!(o.status.success(), "{}", stderr(&o));
    let o = e
        .cmd(&["key", "list", "--json"])
        .env("ARCA_PASSWORD", "third")
        .output()
        .unwrap();
    let keys: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let keys = keys.as_array().unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let added = keys.iter().find(|k| k["current"] == false).unwrap();
    assert_eq!(
        (added["userName"].as_str(), added["hostName"].as_str()),
        (Some("alice"), Some("box"))
    );
    let current = keys.iter().find(|k| k["current"] == true).unwrap();
    assert_eq!(current["hostName"], "elsewhere");
    // The user was not given: the current one's.
    assert!(!current["userName"].as_str().unwrap().is_empty());
    let o = key(&["add", "--user", ""], "fourth");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--user needs a name"), "{}", stderr(&o));
}

/// `cat lock ID` (an id or unique prefix, as restic's) shows who holds a lock and since when;
/// an unknown id is named.
#[test]
fn cat_lock_shows_the_holder() {
    let e = one_snapshot();
    let mut check = e.lock_holder();
    let ids = e.ok(&["--no-lock", "list", "locks"]);
    let id = ids.lines().next().unwrap().to_string();
    let v: serde_json::Value =
        serde_json::from_str(&e.ok(&["--no-lock", "cat", "lock", &id[..8]])).unwrap();
    check.kill().unwrap();
    check.wait().unwrap();
    assert_eq!(v["id"], id.as_str(), "{v}");
    assert_eq!(v["command"], "check", "{v}");
    assert_eq!(v["exclusive"], false, "{v}");
    assert_eq!(v["pid"], check.id(), "{v}");
    let o = e.run(&["--no-lock", "cat", "lock", "ffffffff"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no lock ffffffff"), "{}", stderr(&o));
}

#[test]
fn cat_masterkey_prints_the_keys_the_repository_uses() {
    let e = one_snapshot();
    // restic: `cat masterkey` prints the decrypted master key as JSON.
    let k: serde_json::Value = serde_json::from_str(&e.ok(&["cat", "masterkey"])).unwrap();
    let key = |name: &str| -> [u8; 32] {
        let hex = k[name].as_str().unwrap_or_else(|| panic!("{name} in {k}"));
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    };
    let secret = key("secret");
    // Every subkey derives from the secret as docs/FORMAT.md says...
    for (name, context) in [
        ("sealing_key", "arca 2026 v1 sealing key"),
        ("id_key", "arca 2026 v1 blob id key"),
        ("chunker_key", "arca 2026 v1 chunker gear key"),
    ] {
        assert_eq!(key(name), blake3::derive_key(context, &secret), "{name}");
    }
    // ...and the id key is the one the repository names its blobs with.
    let sub = format!("latest:{}", e.path("src").display());
    let v: serde_json::Value = serde_json::from_str(&e.ok(&["cat", "tree", &sub])).unwrap();
    let a = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "a.txt")
        .unwrap();
    let want = blake3::keyed_hash(&key("id_key"), b"hello")
        .to_hex()
        .to_string();
    assert_eq!(a["content"][0]["id"], want.as_str(), "{v}");
    assert!(k["cipher"].is_string(), "{k}");
}

/// A zip dump to a full disk reports the error once: the zip writer, dropped unfinished,
/// printed a second, raw report of its own on the same line.
#[test]
fn zip_dump_to_a_full_disk_reports_once() {
    let e = one_snapshot();
    let full = fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = e
        .cmd(&["dump", "--archive", "zip", "latest", "/"])
        .stdout(full)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("ZipWriter"), "{err}");
    // With --target, the file written is named (it was "writing the zip archive: No space
    // left on device").
    for archive in ["zip", "tar"] {
        let o = e.run(&[
            "dump",
            "--archive",
            archive,
            "latest",
            "/",
            "--target",
            "/dev/full",
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!(
                "writing the {archive} archive /dev/full: No space"
            )),
            "{err}"
        );
    }
}

/// A root listing that cannot be read (permissions, an I/O error) is not called an invalid
/// snapshot by restore: nothing is known to be damaged.
#[test]
fn an_unreadable_root_listing_is_not_an_invalid_snapshot() {
    let e = one_snapshot();
    let target = e.path("target");
    let o = e
        .cmd(&["restore", "latest", "-t", target.to_str().unwrap()])
        .env("ARCA_TEST_FAULTS", "read:pack:from=0:denied")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot read the snapshot's root directory listing"),
        "{err}"
    );
    assert!(!err.contains("invalid"), "{err}");
    // Listings below the root damaged at every read are lost (exit 3): the target is not
    // said to hold the snapshot's content, and the cause is said once.
    let o = e
        .cmd(&["restore", "latest", "-t", target.to_str().unwrap()])
        .env("ARCA_TEST_FAULTS", "read:pack:from=2:corrupt")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(!out.contains("already holds"), "{out}");
    assert!(err.contains("(read twice)"), "{err}");
    assert!(!err.contains("read again"), "{err}");
}

/// `check` does not call a snapshot or index file it cannot read damaged, nor propose a
/// repair on what that makes look lost: `repair snapshots --forget` was proposed for
/// snapshots whose listings the unreadable index file named.
#[test]
fn check_does_not_call_unreadable_files_damaged() {
    use std::os::unix::fs::PermissionsExt;
    let e = Env::new();
    let Some(nobody) = e.unprivileged() else {
        return;
    };
    let run = |args: &[&str]| e.run_as(Some(nobody), args);
    let init = ["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"];
    assert!(run(&init).status.success());
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..2 {
        fs::write(src.join("f"), format!("version {i}")).unwrap();
        let o = run(&["backup", "-q", src.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let first = |kind: &str| {
        let mut names: Vec<_> = fs::read_dir(e.repo.join(kind))
            .unwrap()
            .map(|f| f.unwrap().path())
            .collect();
        names.sort();
        names.remove(0)
    };
    for kind in ["snapshots", "index"] {
        fs::set_permissions(first(kind), fs::Permissions::from_mode(0o000)).unwrap();
    }
    let o = run(&["check"]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let all = format!("{out}{err}");
    assert!(all.contains("not verified, it could not be read"), "{all}");
    assert!(!all.contains("damaged"), "{all}");
    assert!(!all.contains("to repair"), "{all}");
}

/// `find --json` keeps its output one JSON document when a snapshot's listing cannot be read:
/// the array was left open (exit 1), so a script's parser failed on the hits found. The other
/// snapshots are searched, and the damaged one is named on stderr.
#[test]
fn find_json_stays_whole_when_a_listing_is_damaged() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("needle"), b"one").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    // The first backup's tree pack, damaged in its middle.
    let packs = |kind: &str| -> Vec<String> {
        e.ok(&["list", "packs"])
            .lines()
            .filter(|id| {
                let v: serde_json::Value =
                    serde_json::from_str(&e.ok(&["cat", "pack", id])).unwrap();
                v["type"] == kind
            })
            .map(String::from)
            .collect()
    };
    let trees = packs("tree");
    fs::write(src.join("needle"), b"two, longer").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let path = e.repo.join("data").join(&trees[0][..2]).join(&trees[0]);
    let mut bytes = fs::read(&path).unwrap();
    let mid = bytes.len() / 3;
    bytes[mid] ^= 0x55;
    fs::write(&path, bytes).unwrap();
    let o = e.run(&["--no-cache", "find", "--json", "needle"]);
    // The listing damaged is below the root: left out, exit 3.
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&o.stdout)));
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert!(stderr(&o).contains("snapshot"), "{}", stderr(&o));
}

/// A folder whose listing is damaged is left out by `find` and `ls`, named on stderr, and
/// the rest of the snapshot is searched and listed, exit 3 (as restore): both gave up at the
/// first such folder, and hits in intact listings after it were silently dropped.
#[test]
fn find_and_ls_leave_out_only_a_damaged_folder() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    for (d, f) in [("a_dir", "x.txt"), ("z_dir", "y.txt")] {
        fs::create_dir_all(src.join(d)).unwrap();
        fs::write(src.join(d).join(f), d).unwrap();
    }
    fs::write(src.join("zz.txt"), b"2").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    // a_dir's listing, damaged where the pack holds it.
    let line = e
        .ok(&["ls", "--json", "latest"])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["name"] == "a_dir")
        .unwrap();
    let sub = line["subtree"].as_str().unwrap().to_string();
    let (pack, offset) = e
        .ok(&["list", "packs"])
        .lines()
        .find_map(|id| {
            let v: serde_json::Value = serde_json::from_str(&e.ok(&["cat", "pack", id])).unwrap();
            let b = v["blobs"]
                .as_array()?
                .iter()
                .find(|b| b["id"] == sub.as_str())?;
            Some((id.to_string(), b["offset"].as_u64()?))
        })
        .unwrap();
    let path = e.repo.join("data").join(&pack[..2]).join(&pack);
    let mut bytes = fs::read(&path).unwrap();
    bytes[offset as usize + 10] ^= 1;
    fs::write(&path, bytes).unwrap();

    for args in [["find", "*.txt"], ["ls", "latest"]] {
        let o = e.run(&[&["--no-cache"][..], &args].concat());
        let out = String::from_utf8_lossy(&o.stdout);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{out}{err}");
        assert!(
            out.contains("/zz.txt") && out.contains("/z_dir/y.txt"),
            "{out}"
        );
        if args[0] == "find" {
            assert!(!out.contains("x.txt"), "{out}");
        } else {
            assert!(out.contains("/a_dir\n"), "{out}");
        }
        assert!(err.contains("a_dir") && err.contains("left out"), "{err}");
    }
}

/// For a damaged snapshot file, `check` also points at `recover`: `repair snapshots --forget`
/// then `prune` lost the listings the file led to, which `recover` could still save.
#[test]
fn check_points_at_recover_for_a_damaged_snapshot_file() {
    let e = one_snapshot();
    let snap = fs::read_dir(e.repo.join("snapshots"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = fs::read(&snap).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&snap, bytes).unwrap();
    let o = e.run(&["check"]);
    let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(all.contains("repair snapshots --forget"), "{all}");
    assert!(all.contains("arca recover"), "{all}");
}

/// As restic, `--json` and `-v` are taken by every command, before or after its name, and
/// ignored where it has no such output (`restic -v forget --prune` in scripts; wrappers that
/// add `--json` to every call): they were usage errors, exit 2.
#[test]
fn json_and_verbose_are_accepted_by_every_command() {
    let e = one_snapshot();
    for args in [
        &["unlock", "--json"][..],
        &["--json", "list", "snapshots"],
        &["-v", "snapshots"],
        &["forget", "-v", "--keep-last", "1"],
        &["-v", "check"],
    ] {
        let o = e.run(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
}

/// `ls --json` lines carry restic's older `struct_type` beside `message_type`, which many
/// scripts still key on.
#[test]
fn ls_json_lines_carry_struct_type() {
    let e = one_snapshot();
    let out = e.ok(&["ls", "--json", "latest"]);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["struct_type"], "snapshot");
    assert!(
        lines[1..]
            .iter()
            .all(|l| l["struct_type"] == "node" && l["message_type"] == "node")
    );
}

/// The `--json` summaries of backup and restore carry restic's field names too, for scripts
/// written for it.
#[test]
fn backup_and_restore_summaries_carry_restic_names() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"hello").unwrap();
    let b = e.json(&["backup", "--json", src.to_str().unwrap()]);
    assert!(b["total_duration"].is_number(), "{b}");
    assert!(
        b["backup_start"].is_string() && b["backup_end"].is_string(),
        "{b}"
    );
    let target = e.path("t");
    let r = e.json(&[
        "restore",
        "--json",
        "latest",
        "-t",
        target.to_str().unwrap(),
    ]);
    assert!(r["seconds_elapsed"].is_number(), "{r}");
    assert_eq!(r["total_files"], 1, "{r}");
    assert_eq!(r["total_bytes"], 5, "{r}");
    assert_eq!(r["files_skipped"], 0, "{r}");
    let again = e.json(&[
        "restore",
        "--json",
        "latest",
        "-t",
        target.to_str().unwrap(),
    ]);
    assert_eq!(again["files_skipped"], 1, "{again}");
    assert_eq!(again["bytes_skipped"], 5, "{again}");
}

/// The short id of the one snapshot.
fn short_id(e: &Env) -> String {
    e.json(&["snapshots", "--json"])[0]["short_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `args`, with every pack read refused, exits 1 with one line of error saying `want`.
fn fails_reading(e: &Env, args: &[&str], want: &str) {
    let o = e
        .cmd(args)
        .env("ARCA_TEST_FAULTS", "read:pack:from=0:denied")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
}

/// `ls` names the folder and the snapshot whose listing it cannot read, as `find` does: it
/// said only the pack's read error (`read …/data/…: Permission denied`).
#[test]
fn ls_names_the_listing_it_cannot_read() {
    let e = one_snapshot();
    let short = short_id(&e);
    let src = e.path("src");
    for args in [
        vec!["ls", "latest"],
        vec!["ls", "--json", "latest"],
        vec!["ls", "latest", src.to_str().unwrap()],
    ] {
        fails_reading(
            &e,
            &args,
            &format!("cannot read the listing of / in snapshot {short}"),
        );
    }
}

/// `dump` names the snapshot whose listing or file it cannot read, whether the path is looked
/// up or written out: a dump of a whole snapshot said only "/: read …".
#[test]
fn dump_names_the_snapshot_it_cannot_read() {
    let e = one_snapshot();
    let short = short_id(&e);
    let a = e.path("src/a.txt");
    for args in [
        vec!["dump", "latest", "/"],
        vec!["dump", "latest", a.to_str().unwrap()],
    ] {
        fails_reading(&e, &args, &format!("snapshot {short}: /"));
    }
}

/// A path of a snapshot that `ls` or `dump` does not find is named as warnings name paths: a
/// byte that is not UTF-8 as `\xNN` (it was U+FFFD, the same for every such byte) and a
/// newline as `\x0a` (it broke the one-line message in two).
#[test]
fn a_path_not_in_the_snapshot_is_named_byte_for_byte() {
    use std::os::unix::ffi::OsStrExt;
    let e = one_snapshot();
    let src = e.path("src");
    for (name, said) in [
        (&b"bad\xff"[..], "bad\\xff"),
        (b"two\nlines", "two\\x0alines"),
    ] {
        let mut path = src.as_os_str().as_bytes().to_vec();
        path.push(b'/');
        path.extend_from_slice(name);
        let path = std::ffi::OsStr::from_bytes(&path);
        let spec = [b"latest:".as_slice(), path.as_bytes()].concat();
        let spec = std::ffi::OsStr::from_bytes(&spec);
        for args in [
            vec![
                std::ffi::OsStr::new("ls"),
                std::ffi::OsStr::new("latest"),
                path,
            ],
            vec![
                std::ffi::OsStr::new("dump"),
                std::ffi::OsStr::new("latest"),
                path,
            ],
            vec![std::ffi::OsStr::new("ls"), spec],
        ] {
            let mut c = e.cmd(&[]);
            c.args(&args);
            let o = c.output().unwrap();
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
            assert!(
                err.contains(&format!("src/{said} is not in snapshot")),
                "{args:?}: {err}"
            );
        }
    }
}

/// `ls` cleans its paths as restic does: `..` takes the name before it away. It was dropped:
/// `/sub/..` listed `/sub`, and `a.txt/..` printed the file, exit 0.
#[test]
fn ls_reads_dot_dot_as_the_folder_above() {
    let e = one_snapshot();
    let src = e.path("src");
    let spec = format!("latest:{}", src.display());
    assert_eq!(e.ok(&["ls", &spec, "/sub/.."]), "/a.txt\n/sub\n");
    assert_eq!(e.ok(&["ls", &spec, "/sub/../sub"]), "/sub\n/sub/b.txt\n");
    assert_eq!(e.ok(&["ls", &spec, "/a.txt/.."]), "/a.txt\n/sub\n");
}

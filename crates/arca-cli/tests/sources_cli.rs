//! What backup reads for the paths it is given: symlinks among them, exclusion tags on named
//! paths, lists of files, which files it trusts the parent for, compared with restic's choices.

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
    // Found by the walk of a named folder, with a path named below it: stored the same,
    // warned too (hunt 15: the symlink was replaced without a word).
    let o = e.run(&[
        "backup",
        "-q",
        base.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let warned = format!(
        "{}: a symlink with a backed-up path below it",
        link.display()
    );
    assert!(stderr(&o).contains(&warned), "{}", stderr(&o));
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
    // A file named alone and larger than --exclude-larger-than, the same (hunt 30: a
    // snapshot of its folders only, exit 0).
    fs::write(a.join("big"), vec![1u8; 4096]).unwrap();
    let big = a.join("big");
    let o = e.run(&[
        "backup",
        "-q",
        big.to_str().unwrap(),
        "--exclude-larger-than",
        "1K",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("every path given is excluded"),
        "{}",
        stderr(&o)
    );
    assert_eq!(fs::read_dir(e.repo.join("snapshots")).unwrap().count(), 0);
    fs::remove_file(&big).unwrap();
    // Some of them excluded: those are not among the snapshot's paths, which name only what
    // it holds (hunt 15: the excluded one was listed, and `restore ID:PATH` of it failed).
    let b = a.join("b");
    fs::create_dir_all(&b).unwrap();
    e.ok(&[
        "backup",
        "-q",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--exclude",
        b.to_str().unwrap(),
    ]);
    let snaps = e.json(&["snapshots", "--json"]);
    assert_eq!(snaps[0]["paths"], serde_json::json!([a]));
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

/// As restic: paths named in a folder an exclusion tag marks are left out too (but the tag
/// file itself): `find … -print0 | arca backup --files-from-raw - --exclude-caches` stored
/// every cache.
#[test]
fn named_paths_in_a_tagged_folder_are_left_out() {
    let e = Env::new();
    e.init(&[]);
    let cache = e.path("t/cache");
    let other = e.path("t/other");
    fs::create_dir_all(&cache).unwrap();
    fs::create_dir_all(&other).unwrap();
    fs::write(
        cache.join("CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55\n",
    )
    .unwrap();
    fs::write(cache.join("data"), b"cached").unwrap();
    fs::write(other.join("data"), b"kept").unwrap();
    let list = e.path("list");
    let names = [
        cache.join("CACHEDIR.TAG"),
        cache.join("data"),
        other.join("data"),
    ];
    let mut raw = vec![];
    for n in &names {
        raw.extend_from_slice(n.to_str().unwrap().as_bytes());
        raw.push(0);
    }
    fs::write(&list, raw).unwrap();
    e.ok(&[
        "backup",
        "-q",
        "--exclude-caches",
        "--files-from-raw",
        list.to_str().unwrap(),
    ]);
    let ls = e.ok(&["ls", "latest"]);
    assert!(ls.contains("other/data"), "{ls}");
    assert!(ls.contains("CACHEDIR.TAG"), "{ls}");
    assert!(!ls.contains("cache/data"), "{ls}");
}

/// As restic: a backup dated in the past (`--time`) takes no newer snapshot as its parent
/// (with --skip-if-unchanged, an import identical to a newer snapshot was skipped).
#[test]
fn a_backdated_backup_takes_no_newer_parent() {
    let e = Env::new();
    e.init(&[]);
    let a = e.path("a");
    fs::create_dir_all(&a).unwrap();
    fs::write(a.join("f"), b"x").unwrap();
    e.ok(&["backup", "-q", a.to_str().unwrap()]);
    let o = e.run(&[
        "backup",
        "-q",
        "--skip-if-unchanged",
        "--time",
        "2000-01-01 00:00:00",
        a.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let snaps = v.as_array().unwrap();
    assert_eq!(snaps.len(), 2, "{v}");
    let old = snaps
        .iter()
        .find(|s| s["time"].as_str().unwrap().starts_with("2000"))
        .unwrap();
    assert!(old.get("parent").is_none_or(|p| p.is_null()), "{v}");
}

/// `backup -v` lists a file once it is read: one that cannot be read was listed as `new`
/// (and as a `verbose_status` line with `--json`) though the snapshot lacks it.
#[test]
fn verbose_lists_only_files_that_were_stored() {
    use std::os::unix::fs::PermissionsExt;
    let e = Env::new();
    let Some(nobody) = e.unprivileged() else {
        return;
    };
    let init = ["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"];
    assert!(e.run_as(Some(nobody), &init).status.success());
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("ok"), b"x").unwrap();
    fs::write(src.join("secret"), b"y").unwrap();
    fs::set_permissions(src.join("secret"), fs::Permissions::from_mode(0o000)).unwrap();
    let o = e.run_as(Some(nobody), &["backup", "-v", src.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("/ok"), "{out}");
    assert!(
        !out.lines()
            .any(|l| l.starts_with("new") && l.ends_with("/secret")),
        "{out}"
    );
}

/// Every name of a hard-linked file is counted and listed (`-v`) as a file of its own, new or
/// modified, as restic counts them; the further names were missing from both ("Files: 1 new"
/// beside "Processed: 3 files").
#[test]
fn every_name_of_a_hard_linked_file_is_counted() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    // Many links, so that both ways a further name takes its content are met: the content
    // already read, and still being read.
    fs::write(src.join("a"), vec![7u8; 300_000]).unwrap();
    for k in 0..20 {
        fs::hard_link(src.join("a"), src.join(format!("l{k:02}"))).unwrap();
    }
    let listed = |out: &str, word: &str| {
        out.lines()
            .filter(|l| l.starts_with(word) && l.contains(src.to_str().unwrap()))
            .count()
    };
    let out = e.ok(&["backup", "-v", src.to_str().unwrap()]);
    assert!(out.contains("Files:       21 new, 0 changed"), "{out}");
    // Which parent was used is said, as restic says it (hunt 15).
    assert!(out.contains("Parent:      none, every file read"), "{out}");
    assert_eq!(listed(&out, "new "), 21, "{out}");
    fs::write(src.join("a"), vec![8u8; 300_001]).unwrap();
    let out = e.ok(&["backup", "-v", src.to_str().unwrap()]);
    assert!(out.contains("Files:       0 new, 21 changed"), "{out}");
    assert_eq!(listed(&out, "modified "), 21, "{out}");
    let out = e.ok(&["backup", "-v", src.to_str().unwrap()]);
    assert!(out.contains("0 new, 0 changed, 21 unmodified"), "{out}");
    let parent = e.json(&["snapshots", "--json"])[1]["short_id"].clone();
    let parent = format!("Parent:      snapshot {}", parent.as_str().unwrap());
    assert!(out.contains(&parent), "{out}");
}

/// `--stdin` that reads nothing (the program feeding it failed: `false | arca backup
/// --stdin`) saves no snapshot and fails, as restic's "no data read": an empty file was
/// saved, exit 0, and a failed dump went unnoticed until the restore.
#[test]
fn empty_stdin_saves_no_snapshot() {
    let e = Env::new();
    e.init(&[]);
    let o = e.run(&["backup", "--stdin", "--stdin-filename", "db.sql"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no data read from standard input"),
        "{}",
        stderr(&o)
    );
    let snaps: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    assert_eq!(snaps.as_array().unwrap().len(), 0);
    // Standard input that fails to read (a folder here; a connection reset midway): the
    // error, then no claim that nothing came (hunt 30).
    let o = e
        .cmd(&["backup", "--stdin", "--stdin-filename", "db.sql"])
        .stdin(fs::File::open(&e.repo).unwrap())
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("Is a directory"), "{err}");
    assert!(
        err.contains("standard input could not be read to its end") && !err.contains("no data"),
        "{err}"
    );
    let snaps: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    assert_eq!(snaps.as_array().unwrap().len(), 0);
}

/// The parent a backup reads against: `--parent latest` is the newest snapshot of this host
/// with the same paths, as without the option (it was the newest of any host and paths),
/// and a snapshot dated after the backup (a clock ahead, `--time` in the future) is never
/// the parent (it stayed the parent until its date).
#[test]
fn the_parent_is_of_these_paths_and_not_from_the_future() {
    let e = Env::new();
    e.init(&[]);
    let (a, b) = (e.path("a"), e.path("b"));
    for d in [&a, &b] {
        fs::create_dir_all(d).unwrap();
        fs::write(d.join("f"), b"data").unwrap();
    }
    let json = |args: &[&str]| -> serde_json::Value {
        let out = e.ok(args);
        serde_json::from_str(out.lines().last().unwrap()).unwrap()
    };
    let first_a = json(&["backup", "--json", a.to_str().unwrap()]);
    json(&["backup", "--json", b.to_str().unwrap()]);
    let again = json(&[
        "backup",
        "--json",
        "--parent",
        "latest",
        a.to_str().unwrap(),
    ]);
    assert_eq!(again["parent"], first_a["snapshot_id"], "{again}");
    assert_eq!(again["files_unmodified"], 1, "{again}");
    // A snapshot of a dated in 2099 is not taken as the parent now.
    let future = json(&[
        "backup",
        "--json",
        "--time",
        "2099-01-01 00:00:00",
        a.to_str().unwrap(),
    ]);
    let now = json(&["backup", "--json", a.to_str().unwrap()]);
    assert_ne!(now["parent"], future["snapshot_id"], "{now}");
    assert_eq!(now["parent"], again["snapshot_id"], "{now}");
    // As restic's: a snapshot holding these paths and more is a parent too (`backup a`
    // after `backup a b` read every file of a again).
    let both = json(&["backup", "--json", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(both["parent"], serde_json::Value::Null, "{both}");
    let one = json(&["backup", "--json", b.to_str().unwrap()]);
    assert_eq!(one["parent"], both["snapshot_id"], "{one}");
    assert_eq!(one["files_unmodified"], 1, "{one}");
    assert_eq!(one["files_new"], 0, "{one}");
}

/// As restic: standard input is always read whole, so `--stdin` takes no parent (one was
/// recorded and printed, while everything counted as new).
#[test]
fn stdin_takes_no_parent_unless_compared_with() {
    use std::io::Write;
    let e = Env::new();
    e.init(&[]);
    let stdin = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["backup", "--json", "--stdin", "--stdin-filename", "db.sql"];
        args.extend_from_slice(extra);
        let mut c = e.cmd(&args);
        c.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        child.stdin.take().unwrap().write_all(b"dump").unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8(o.stdout).unwrap();
        serde_json::from_str(out.lines().last().unwrap()).unwrap()
    };
    let first = stdin(&[]);
    let second = stdin(&[]);
    assert_eq!(second["parent"], serde_json::Value::Null, "{second}");
    let snap: serde_json::Value =
        serde_json::from_str(&e.ok(&["cat", "snapshot", second["snapshot_id"].as_str().unwrap()]))
            .unwrap();
    assert!(snap.get("parent").is_none_or(|p| p.is_null()), "{snap}");
    let skipped = stdin(&["--skip-if-unchanged"]);
    assert_eq!(skipped["parent"], serde_json::Value::Null, "{skipped}");
    assert_ne!(first["snapshot_id"], second["snapshot_id"]);
}

/// As restic's, the summary's folders are the snapshot's folders: the root listing, which
/// holds the backed-up paths' first names, is none (each count was one too many).
#[test]
fn the_summary_counts_folders_not_the_root_listing() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("sub")).unwrap();
    let depth = src.components().count() as u64; // "/", then each name down to src
    let s = e.json(&["backup", "--json", src.to_str().unwrap()]);
    // The folders above src, src and sub.
    assert_eq!(s["dirs_new"], depth, "{s}");
    let s = e.json(&["backup", "--json", src.to_str().unwrap()]);
    assert_eq!(s["dirs_unmodified"], depth, "{s}");
    assert_eq!(s["dirs_new"], 0, "{s}");
}

/// As restic: a `--files-from` pattern that matches nothing is skipped with a warning, and
/// the snapshot is complete. It was taken for a missing file ("No such file or directory"),
/// exit 3, every snapshot marked incomplete (hunt 15).
#[test]
fn a_files_from_pattern_matching_nothing_is_skipped() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a.conf"), b"x").unwrap();
    let list = e.path("list");
    let nothing = src.join("*.none");
    fs::write(
        &list,
        format!("{}\n{}\n", src.join("*.conf").display(), nothing.display()),
    )
    .unwrap();
    let o = e.run(&["backup", "-q", "--files-from", list.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let says = format!(
        "{}: the pattern of {} matches no file; skipped",
        nothing.display(),
        list.display()
    );
    assert!(stderr(&o).contains(&says), "{}", stderr(&o));
    let snaps = e.json(&["snapshots", "--json"]);
    assert_eq!(snaps[0]["paths"], serde_json::json!([src.join("a.conf")]));
    // A name without wildcards that does not exist likewise (Go's Glob matches nothing):
    // it was backed up as missing, exit 3, the snapshot incomplete.
    let gone = src.join("gone.txt");
    fs::write(
        &list,
        format!("{}\n{}\n", src.join("a.conf").display(), gone.display()),
    )
    .unwrap();
    let o = e.run(&["backup", "-q", "--files-from", list.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let says = format!(
        "{}: named in {}, does not exist; skipped",
        gone.display(),
        list.display()
    );
    assert!(stderr(&o).contains(&says), "{}", stderr(&o));
    let snaps = e.json(&["snapshots", "--json"]);
    assert_eq!(snaps[1]["paths"], serde_json::json!([src.join("a.conf")]));
    // Nothing at all to back up: refused, saying why.
    fs::write(&list, format!("{}\n", nothing.display())).unwrap();
    let o = e.run(&["backup", "-q", "--files-from", list.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("patterns match no file"),
        "{}",
        stderr(&o)
    );
}

/// As restic: `--stdin-filename` and `--path` take names that are not UTF-8 (clap refused
/// them with "invalid UTF-8 was detected in one or more arguments", naming no option); the
/// name is stored as given and the snapshot found by its path; `--parent` that matches no
/// snapshot is named in the error (hunt 15).
#[test]
fn stdin_names_and_path_filters_may_be_any_bytes() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    e.init(&[]);
    let name = OsStr::from_bytes(b"a\xffb");
    let mut c = e.cmd(&["backup", "-q", "--stdin", "--stdin-filename"]);
    c.arg(name).stdin(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"piped").unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut c = e.cmd(&["dump", "latest"]);
    c.arg(std::path::Path::new("/").join(name));
    let o = c.output().unwrap();
    assert_eq!(o.stdout, b"piped", "{}", stderr(&o));
    let mut c = e.cmd(&["snapshots", "--json", "--path"]);
    c.arg(std::path::Path::new("/").join(name));
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let o = e.run(&["backup", "--parent", "deadbeef", e.repo.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("invalid --parent \"deadbeef\""),
        "{}",
        stderr(&o)
    );
}

/// As restic: a text list that starts with a UTF-8 byte order mark (Notepad, PowerShell's
/// `Out-File`) does not carry it into its first line. The first pattern of an exclude file
/// matched nothing (`e.log` was backed up) and the first path of `--files-from` was reported
/// missing.
#[test]
fn lists_starting_with_a_bom_lose_no_line() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for n in ["e.log", "keep", "other"] {
        fs::write(src.join(n), n).unwrap();
    }
    let bom = e.path("bom.txt");
    fs::write(&bom, b"\xef\xbb\xbf*.log\n").unwrap();
    let s = src.to_str().unwrap();
    let o = e.run(&["backup", "-q", "--exclude-file", bom.to_str().unwrap(), s]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = e.ok(&["ls", "latest"]);
    assert!(!listed.contains("e.log"), "{listed}");
    assert!(listed.contains("keep"), "{listed}");

    let list = e.path("list.txt");
    let mut text = b"\xef\xbb\xbf".to_vec();
    text.extend_from_slice(format!("{}\n", src.join("keep").display()).as_bytes());
    fs::write(&list, text).unwrap();
    let o = e.run(&["backup", "-q", "--files-from", list.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let snaps = e.json(&["snapshots", "--json"]);
    let want = serde_json::json!([src.join("keep")]);
    assert!(
        snaps.as_array().unwrap().iter().any(|s| s["paths"] == want),
        "{snaps}"
    );
}

/// `--ignore-ctime` and `--ignore-inode`, as restic's: a file whose ctime alone changed (a
/// `chmod`), or that was copied with its times and renamed over itself (a new inode and
/// ctime), is taken from the parent instead of read again; without them it is read, and the
/// rule for the other attributes stays.
#[test]
fn ignore_ctime_and_ignore_inode_trust_the_parent() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let f = src.join("f");
    fs::write(&f, b"content of f").unwrap();
    let backup = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["backup", "--json"];
        args.extend_from_slice(extra);
        args.push(src.to_str().unwrap());
        let out = e.ok(&args);
        serde_json::from_str(out.lines().last().unwrap()).unwrap()
    };
    let counts =
        |s: &serde_json::Value| (s["files_changed"].clone(), s["files_unmodified"].clone());
    backup(&[]);
    // A mode change alone: a new ctime, same mtime, size and inode.
    let chmod = |mode| fs::set_permissions(&f, fs::Permissions::from_mode(mode)).unwrap();
    chmod(0o600);
    assert_eq!(counts(&backup(&["--ignore-ctime"])), (0.into(), 1.into()));
    chmod(0o640);
    let s = backup(&[]);
    assert_eq!(counts(&s), (1.into(), 0.into()));
    assert_eq!(s["files_renumbered"], 0, "its ctime changed too: {s}");
    // A copy with the same times renamed over the file: a new inode and ctime.
    let replace_by_copy = || {
        let before = fs::metadata(&f).unwrap();
        let copy = src.join(".f.new");
        let cp = std::process::Command::new("cp")
            .arg("-p")
            .arg(&f)
            .arg(&copy)
            .status();
        assert!(cp.unwrap().success());
        fs::rename(&copy, &f).unwrap();
        let after = fs::metadata(&f).unwrap();
        assert_ne!(before.ino(), after.ino());
        assert_eq!(before.mtime_nsec(), after.mtime_nsec());
    };
    replace_by_copy();
    let s = backup(&["--ignore-ctime"]);
    assert_eq!(counts(&s), (1.into(), 0.into()));
    // Counted as read again for its inode number alone (the note that names
    // `--ignore-inode` waits for ten such files).
    assert_eq!(s["files_renumbered"], 1, "{s}");
    replace_by_copy();
    let s = backup(&["--ignore-ctime", "--ignore-inode"]);
    assert_eq!(counts(&s), (0.into(), 1.into()));
    assert_eq!(s["files_renumbered"], 0, "{s}");
    // The content is still checked by size and mtime: a change of either is read.
    fs::write(&f, b"content of f, longer").unwrap();
    assert_eq!(
        counts(&backup(&["--ignore-ctime", "--ignore-inode"])),
        (1.into(), 0.into())
    );
    // And the snapshot holds the new content.
    let out = e.ok(&["dump", "latest", f.to_str().unwrap()]);
    assert_eq!(out, "content of f, longer");
    // As restic's, `--ignore-inode` implies `--ignore-ctime` (a mount that numbers inodes
    // anew makes up ctimes too): a ctime change alone is trusted. It read the file again.
    chmod(0o600);
    assert_eq!(counts(&backup(&["--ignore-inode"])), (0.into(), 1.into()));
}

/// Files of /proc and /sys list a size that is not their content's (0, or a page): the
/// content is stored as read, without a word, as restic does. Each was warned about as
/// "changed while it was read", which it was not (size and times the same before and after).
#[test]
fn pseudo_files_whose_size_is_not_their_content_are_stored_without_a_warning() {
    let named: Vec<&str> = [
        "/proc/version",
        "/sys/kernel/mm/transparent_hugepage/enabled",
    ]
    .into_iter()
    .filter(|p| fs::read(p).is_ok_and(|c| !c.is_empty()))
    .collect();
    if !named.iter().any(|p| p.starts_with("/proc")) {
        eprintln!("skipped: no /proc here");
        return;
    }
    let e = Env::new();
    e.init(&[]);
    let mut args = vec!["backup", "-q"];
    args.extend(&named);
    let o = e.run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("changed while"), "{}", stderr(&o));
    for p in named {
        let dumped = e.run(&["dump", "latest", p]);
        assert!(dumped.status.success(), "{}", stderr(&dumped));
        assert_eq!(dumped.stdout, fs::read(p).unwrap(), "{p}");
    }
}

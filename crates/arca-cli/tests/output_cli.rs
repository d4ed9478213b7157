//! What commands print on standard output when a script reads it: a reader that stops early
//! does not leave the work half done, and `-q --json` prints the summary alone.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::process::Output;

use common::*;

/// Runs `args` with standard output a pipe whose reader is already gone (`| true`).
fn closed_stdout(e: &Env, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    e.cmd(args).stdout(writer).output().unwrap()
}

fn snapshot_count(e: &Env) -> usize {
    e.json(&["snapshots", "--json"]).as_array().unwrap().len()
}

/// A reader that goes away (`| head -1`, `| true`) made `forget` remove nothing, `forget
/// --prune` skip its prune, and `tag` and `copy` stop halfway, all with exit 0 (hunt 19).
/// Commands that change something now finish and drop what they would print.
#[test]
fn a_closed_stdout_does_not_stop_a_command_halfway() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for n in 0..4 {
        fs::write(src.join("f"), arca_testkit::random_bytes(n, 200_000)).unwrap();
        e.ok(&["backup", "-q", src.to_str().unwrap()]);
    }
    let o = closed_stdout(&e, &["tag", "--add", "T", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let snaps = e.json(&["snapshots", "--json"]);
    for s in snaps.as_array().unwrap() {
        assert_eq!(s["tags"], serde_json::json!(["T"]), "{snaps}");
    }

    let other = e.path("other");
    let o = e
        .cmd(&["init", "-q"])
        .args(["-r", other.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = e
        .cmd(&["copy", "--from-repo", e.path("repo").to_str().unwrap()])
        .args(["-r", other.to_str().unwrap()])
        .env("ARCA_FROM_PASSWORD", "test password")
        .stdout(writer)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let copied = e
        .cmd(&["snapshots", "--json"])
        .args(["-r", other.to_str().unwrap()])
        .output()
        .unwrap();
    let copied: serde_json::Value = serde_json::from_slice(&copied.stdout).unwrap();
    assert_eq!(copied.as_array().unwrap().len(), 4, "{copied}");

    let o = closed_stdout(&e, &["forget", "--keep-last", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(snapshot_count(&e), 2);
    let o = closed_stdout(&e, &["forget", "--keep-last", "1", "--prune", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(snapshot_count(&e), 1);
    // The prune ran: nothing is left for another one to delete.
    let dry = e.json(&["prune", "--dry-run", "--json"]);
    assert_eq!(dry["unused_blobs"], 0, "{dry}");

    // A command that only reads still stops at once, exit 0.
    let o = closed_stdout(&e, &["ls", "latest"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `restore -q --json` prints the summary alone, as restic and `backup -q --json` do: its
/// status lines (one a second) made stdout more than one document when the restore was slow.
#[test]
fn a_quiet_json_restore_prints_the_summary_alone() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), arca_testkit::random_bytes(7, 300_000)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    // About 3 s behind a slow link: status lines would come every second.
    let out = e.ok(&[
        "--backend-bandwidth",
        "100KB",
        "restore",
        "latest",
        "--target",
        target.to_str().unwrap(),
        "-q",
        "--json",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["message_type"], "summary", "{out}");
}

/// A fatal error under `--json` is one JSON line on standard error, as restic's `exit_error`,
/// with the exit code; standard output stays empty. Without `--json` it stays plain text.
#[test]
fn a_fatal_error_under_json_is_an_exit_error_line() {
    let e = Env::new();
    e.init(&[]);
    let o = e
        .cmd(&["snapshots", "--json"])
        .env("ARCA_PASSWORD", "wrong")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(12));
    assert!(o.stdout.is_empty());
    let line: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(line["message_type"], "exit_error");
    assert_eq!(line["code"], 12);
    assert!(
        line["message"].as_str().unwrap().contains("password"),
        "{line}"
    );
    let o = e
        .cmd(&["snapshots"])
        .env("ARCA_PASSWORD", "wrong")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(12));
    assert!(stderr(&o).starts_with("arca: "), "{}", stderr(&o));
    // A missing repository: 10.
    let none = Env::new();
    let o = none.cmd(&["check", "--json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(10));
    let line: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(line["code"], 10, "{line}");
}

/// Standard output on a full disk (`> file`), for the commands that wrote it on their own:
/// `cat blob`, `completions` and `man` said a bare "No space left on device", naming
/// nothing; they say, once, that standard output could not be written, as the others do.
#[test]
fn a_full_disk_behind_stdout_is_named_by_every_command() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"hello").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let blob = e.ok(&["list", "blobs"]);
    let blob = blob
        .lines()
        .find_map(|l| l.strip_prefix("data "))
        .unwrap()
        .to_string();
    for args in [
        &["cat", "blob", blob.as_str()][..],
        &["completions", "bash"],
        &["man"],
    ] {
        let Ok(full) = fs::OpenOptions::new().write(true).open("/dev/full") else {
            eprintln!("skipped: no /dev/full");
            return;
        };
        let o = e.cmd(args).stdout(full).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert_eq!(
            err.matches("cannot write to standard output").count(),
            1,
            "{args:?}: {err}"
        );
        assert_eq!(
            err.matches("No space left on device").count(),
            1,
            "{args:?}: {err}"
        );
    }
}

/// `man --dir` on a full disk (here files may not grow past 512 bytes, `ulimit -f 1`) left the
/// page it was writing cut short; the folder now holds whole pages only, and no temporary
/// file.
#[test]
fn man_pages_cut_short_by_a_full_disk_are_not_left_behind() {
    let e = Env::new();
    let dir = e.path("man");
    let mut man = std::process::Command::new(BIN);
    man.args(["man", "--dir"]).arg(&dir);
    let o = run_limited(man, nix::sys::resource::Resource::RLIMIT_FSIZE, 512);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("cannot write {}", dir.join("arca.1").display())),
        "{err}"
    );
    let left: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A closed standard error (`2>&1 | head -1`, a logger that died) does not stop a backup or a
/// restore either: the first warning line panicked (exit 101), the backup saved no snapshot
/// and the restore stopped halfway. The lines are dropped and the work finishes, exit 3.
#[test]
fn a_closed_stderr_does_not_stop_a_backup_or_a_restore() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for n in 0..20 {
        fs::write(
            src.join(format!("f{n:02}")),
            arca_testkit::random_bytes(n, 5_000),
        )
        .unwrap();
    }
    let closed_stderr = |args: &[&str]| {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        e.cmd(args).stderr(writer).output().unwrap()
    };
    // A source that is not there: one warning line, and an incomplete snapshot.
    let missing = e.path("missing");
    let o = closed_stderr(&["backup", src.to_str().unwrap(), missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(snapshot_count(&e), 1);
    // A folder where the first file belongs: one error line; the other files are restored.
    let target = e.path("t");
    let first = target.join(src.strip_prefix("/").unwrap()).join("f00");
    fs::create_dir_all(first.join("inside")).unwrap();
    let o = closed_stderr(&["restore", "latest", "--target", target.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    for n in 1..20 {
        let name = format!("f{n:02}");
        assert_eq!(
            fs::read(first.with_file_name(&name)).unwrap(),
            fs::read(src.join(&name)).unwrap(),
            "{name}"
        );
    }
}

//! Error messages name the path or object and the cause exactly once.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::process::Command;

use common::*;

fn once(haystack: &str, needle: &str) {
    assert_eq!(
        haystack.matches(needle).count(),
        1,
        "{needle:?} not exactly once in:\n{haystack}"
    );
}

#[test]
fn causes_and_names_appear_once() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"hello").unwrap();
    e.ok(&["backup", "--quiet", src.to_str().unwrap()]);

    let o = e.run(&["backup", "/nonexistent/arca-test-path"]);
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    once(&err, "/nonexistent/arca-test-path");
    once(&err, "No such file or directory");

    // A full disk behind stdout is named as such.
    for args in [
        &["ls", "latest"][..],
        &["snapshots"],
        &["diff", "latest", "latest"],
    ] {
        let o = e
            .cmd(args)
            .stdout(fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        once(&stderr(&o), "cannot write to standard output");
        once(&stderr(&o), "No space left on device");
    }

    // A listing find cannot read names its snapshot.
    let snaps: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let short = snaps[0]["short_id"].as_str().unwrap().to_string();
    let o = e
        .cmd(&["find", "a"])
        .env("ARCA_TEST_FAULTS", "read:pack:from=0:denied")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    once(
        &err,
        &format!("snapshot {short}: cannot read the listing of /"),
    );

    let o = e.run(&["cat", "tree", "33386a486360"]);
    assert_eq!(o.status.code(), Some(1));
    once(&stderr(&o), "33386a486360");

    let o = e.run(&["restore", "latest", "--target", "/dev/null/x"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    once(&err, "/dev/null/x");
    once(&err, "Not a directory");

    // A corrupt index file: named once, with its cause.
    let index = fs::read_dir(e.repo.join("index"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let name = index.file_name().unwrap().to_string_lossy().into_owned();
    arca_testkit::flip_byte(&index, 20).unwrap();
    let o = e.run(&["ls", "latest"]);
    let err = stderr(&o);
    once(&err, &name);
    once(&err, "does not match its id");

    let missing = Env::remote(e.path("nowhere").display().to_string(), vec![]);
    let o = missing.run(&["snapshots"]);
    assert_eq!(o.status.code(), Some(10));
    once(&stderr(&o), "does not exist");
}

/// Damage found in the repository: the config, a blob, a pack's header, a snapshot file, an
/// index file met by a backup. Each message line names the file or object once.
#[test]
fn damage_is_named_once() {
    let e = Env::new();
    e.init(&["--pack-size", "1MiB"]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("big"), arca_testkit::random_bytes(1, 600_000)).unwrap();
    let first = e.json(&["backup", "--json", src.to_str().unwrap()]);
    let first = first["snapshot_id"].as_str().unwrap().to_string();
    let pack = arca_testkit::files_under(&e.repo.join("data"))
        .into_iter()
        .max_by_key(|p| fs::metadata(p).unwrap().len())
        .unwrap();
    let pack_name = pack.file_name().unwrap().to_string_lossy().into_owned();
    let good = fs::read(&pack).unwrap();
    let each_line_once = |err: &str, name: &str| {
        for l in err.lines().filter(|l| l.contains(name)) {
            once(l, name);
        }
    };

    let config = e.repo.join("config");
    let config_bytes = fs::read(&config).unwrap();
    arca_testkit::flip_byte(&config, 70).unwrap();
    let err = stderr(&e.run(&["snapshots"]));
    once(&err, "config");
    once(&err, "authentication failed");
    fs::write(&config, &config_bytes).unwrap();

    // A damaged blob, met by restore and by check.
    arca_testkit::flip_byte(&pack, 1000).unwrap();
    let o = e.run(&[
        "restore",
        "latest",
        "--target",
        e.path("t").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3));
    let err = stderr(&o);
    assert!(err.contains("authentication failed"), "{err}");
    for l in err.lines().filter(|l| l.contains("blob")) {
        let blob = l.split("blob ").nth(1).unwrap().split(' ').next().unwrap();
        once(l, blob);
    }
    each_line_once(&stderr(&e.run(&["check", "--read-data"])), &pack_name);
    fs::write(&pack, &good).unwrap();

    // A damaged header.
    arca_testkit::flip_byte(&pack, good.len() as u64 - 30).unwrap();
    let err = stderr(&e.run(&["check", "--read-data"]));
    assert!(err.contains("header"), "{err}");
    each_line_once(&err, &pack_name);
    fs::write(&pack, &good).unwrap();

    // A damaged snapshot file and a damaged index file, met by a backup: one warning each.
    arca_testkit::flip_byte(&e.repo.join("snapshots").join(&first), 60).unwrap();
    let index = arca_testkit::files_under(&e.repo.join("index")).remove(0);
    let index_name = index.file_name().unwrap().to_string_lossy().into_owned();
    arca_testkit::flip_byte(&index, 20).unwrap();
    let o = e.run(&["backup", src.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    once(&err, &index_name);
    once(&err, &first);
    let err = stderr(&e.run(&["check"]));
    each_line_once(&err, &first);
}

/// An environment variable set but empty counts as unset, as restic's: an empty
/// `ARCA_PASSWORD_FILE` or `ARCA_CACHE_DIR` was a usage error (exit 2) naming a flag nobody
/// typed, even for `version`. Passwords are text: a password command printing bytes that are
/// not UTF-8 is refused (they became U+FFFD, and different passwords opened the repository),
/// and so is such an `ARCA_PASSWORD` (it was ignored, and the error said none was given).
#[test]
fn empty_variables_are_unset_and_passwords_are_text() {
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    e.init(&[]);
    let o = e
        .cmd(&["version"])
        .env("ARCA_PASSWORD_FILE", "")
        .env("ARCA_CACHE_DIR", "")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = e
        .cmd(&["snapshots"])
        .env("ARCA_PASSWORD_FILE", "")
        .env("ARCA_PASSWORD_COMMAND", "")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = e
        .cmd(&["snapshots", "--password-command", "printf '\\377\\376\\n'"])
        .env_remove("ARCA_PASSWORD")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    once(&stderr(&o), "not UTF-8");
    let o = e
        .cmd(&["snapshots"])
        .env(
            "ARCA_PASSWORD",
            std::ffi::OsStr::from_bytes(b"test password\xff"),
        )
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    once(&stderr(&o), "ARCA_PASSWORD holds bytes that are not UTF-8");
}

/// A password file or command gives its first line, and nothing past it is read: an endless
/// one (`--password-file /dev/zero`, `--password-command 'yes pw'`) was read to its end,
/// memory growing until the process was killed. A command printing on after the line ends
/// on SIGPIPE, which is no failure; one that fails is still named.
#[test]
fn only_the_first_line_of_a_password_file_or_command_is_read() {
    let e = Env::new();
    e.init(&[]);
    let run = |args: &[&str]| {
        let mut c = e.cmd(args);
        c.env_remove("ARCA_PASSWORD");
        run_limited(c, nix::sys::resource::Resource::RLIMIT_AS, 4 << 30)
    };
    let o = run(&["--password-command", "yes 'test password'", "snapshots"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[
        "--password-command",
        "echo 'test password'; exit 3",
        "snapshots",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    once(&stderr(&o), "failed (exit status: 3)");
    let o = run(&["--password-file", "/dev/zero", "snapshots"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    once(&stderr(&o), "no line end in its first 64 KiB");
    let file = e.path("pw");
    let mut text = b"test password\n".to_vec();
    text.resize(10 << 20, b'x');
    fs::write(&file, &text).unwrap();
    let o = run(&["--password-file", file.to_str().unwrap(), "snapshots"]);
    assert!(o.status.success(), "{}", stderr(&o));
    fs::write(&file, "\n\nsecond line\n").unwrap();
    let o = run(&["--password-file", file.to_str().unwrap(), "snapshots"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    once(&stderr(&o), "its first line is empty");
}

/// A password piped on standard input is its first line (read into wiped storage, byte by
/// byte, so nothing after it is taken); bytes that are not UTF-8 are refused. The source
/// password file of `copy` is read as the repository's: an empty one is named, not tried.
#[test]
fn a_piped_password_is_the_first_line_and_text() {
    use std::io::Write;
    let e = Env::new();
    e.init(&[]);
    let piped = |input: &[u8], args: &[&str]| {
        let mut c = e.cmd(args);
        c.env_remove("ARCA_PASSWORD")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    };
    let o = piped(b"test password\r\nmore lines\n", &["snapshots"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = piped(b"test password", &["snapshots"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = piped(b"test\xffpassword\n", &["snapshots"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    once(&stderr(&o), "not UTF-8");
    // A `-` that is a value, not a list read from standard input, leaves the password there
    // (any `-` took it away).
    for args in [&["find", "-"][..], &["ls", "latest", "--host", "-"]] {
        let o = piped(b"test password\n", args);
        assert!(
            !stderr(&o).contains("no password given"),
            "{args:?}: {}",
            stderr(&o)
        );
    }

    let empty = e.path("empty-password");
    fs::write(&empty, "\n").unwrap();
    let other = Env::new();
    other.init(&[]);
    let o = other
        .cmd(&["copy", "--from-password-file", empty.to_str().unwrap()])
        .arg("--from-repo")
        .arg(&e.repo)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    once(
        &stderr(&o),
        &format!("password file {} is empty", empty.display()),
    );
}

/// Runs `script` (a shell script) on a pseudo-terminal made by script(1), feeding it `keys`,
/// and returns what it printed; None where script(1) is missing or cannot make one.
fn on_a_terminal(e: &Env, script: &str, keys: &str) -> Option<String> {
    let has_script = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        eprintln!("no script(1) here: skipped");
        return None;
    }
    let inner = e.path("inner.sh");
    fs::write(&inner, script).unwrap();
    let outer = format!(
        "(sleep 1; printf '{keys}'; sleep 2) | script -qec 'sh {}' /dev/null",
        inner.display()
    );
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(&outer)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    if !out.contains("rc=") {
        // script(1) could not make a pseudo-terminal here (the command did not run).
        eprintln!("script(1) ran nothing: skipped: {out} {}", stderr(&o));
        return None;
    }
    Some(out)
}

/// The shell lines that print the terminal's echo setting after the command.
const ECHO_SETTING: &str = "stty -a | tr ' ;' '\\n\\n' | grep -x -e echo -e -echo\n";

/// Ctrl-C at the password prompt puts the terminal back (echo on) and exits with 130, as
/// restic does; the prompt left echo off for whatever ran next. Run on a pseudo-terminal
/// made by `script` (util-linux), when it is there.
#[test]
fn ctrl_c_at_the_password_prompt_leaves_echo_on() {
    let e = Env::new();
    e.init(&[]);
    let script = format!(
        "env -u ARCA_PASSWORD {} -r {} snapshots; echo rc=$?; {ECHO_SETTING}",
        common::BIN,
        e.repo.display()
    );
    let Some(out) = on_a_terminal(&e, &script, "\\003") else {
        return;
    };
    assert!(out.contains("rc=130"), "{out}");
    assert!(
        out.lines().any(|l| l.trim() == "echo"),
        "echo left off: {out}"
    );
}

/// SIGTERM and SIGHUP at the password prompt end the process by that signal, as before, but
/// put the terminal back first: they left echo off. (A background command's standard input
/// is /dev/null in sh, hence the redirection.)
#[test]
fn sigterm_at_the_password_prompt_leaves_echo_on() {
    let e = Env::new();
    e.init(&[]);
    for (sig, code) in [("TERM", 143), ("HUP", 129)] {
        let script = format!(
            "env -u ARCA_PASSWORD --default-signal=HUP {} -r {} snapshots </dev/tty & pid=$!; \
             sleep 1; kill -{sig} $pid; \
             wait $pid; echo rc=$?; {ECHO_SETTING}",
            common::BIN,
            e.repo.display()
        );
        let Some(out) = on_a_terminal(&e, &script, "") else {
            return;
        };
        assert!(out.contains(&format!("rc={code}")), "{sig}: {out}");
        assert!(
            out.lines().any(|l| l.trim() == "echo"),
            "{sig}: echo left off: {out}"
        );
    }
}

/// A pattern that is not UTF-8 is refused naming the option and the value, or the pattern
/// file's line (clap said "invalid UTF-8 was detected in one or more arguments", and a
/// pattern file "stream did not contain valid UTF-8").
#[test]
fn a_pattern_that_is_not_text_is_named() {
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    e.init(&[]);
    let bad = std::ffi::OsStr::from_bytes(b"/x/caf\xe9");
    let o = e
        .cmd(&["restore", "latest", "--target", "/nonexistent", "--include"])
        .arg(bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    once(
        &stderr(&o),
        "--include <PATTERN> \"/x/caf\\xe9\": a pattern must be text",
    );
    let o = e
        .cmd(&["backup", "/tmp", "--exclude"])
        .arg(bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    once(&stderr(&o), "--exclude <PATTERN>");
    let list = e.path("patterns");
    fs::write(&list, b"# ok\n/fine\n/x/caf\xe9\n").unwrap();
    let o = e
        .cmd(&["backup", "/tmp", "--exclude-file", list.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    once(&stderr(&o), "line 3 is not UTF-8");
    let o = e.cmd(&["find"]).arg(bad).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    once(
        &stderr(&o),
        "<PATTERN>... \"/x/caf\\xe9\": a pattern must be text",
    );
}

/// `init` with a size out of range, or one that does not parse, is a usage error (exit 2,
/// as clap's own), names the value, and leaves no repository behind.
#[test]
fn init_sizes_out_of_range_are_usage_errors() {
    let e = Env::new();
    for (args, says) in [
        (
            &["--pack-size", "0"][..],
            "pack size 0 outside the allowed 1.00 MiB..1.00 GiB",
        ),
        (
            &["--pack-size", "5x"][..],
            "'5x' for '--pack-size <PACK_SIZE>'",
        ),
        (
            &["--chunk-min", "5000GiB"][..],
            "minimum chunk size 5000GiB is too large",
        ),
        (
            &["--chunk-avg", "3000KiB"][..],
            "average chunk size 3072000 is not a power of two",
        ),
    ] {
        let mut a = vec!["init"];
        a.extend_from_slice(args);
        let o = e.run(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        once(&stderr(&o), says);
        assert!(!e.repo.exists(), "{args:?}");
    }
}

/// A negative value of a size or share option is named with its option (clap took `-5%`
/// for an unknown option: "unexpected argument '-5' found"), exit 2.
#[test]
fn negative_sizes_and_shares_name_their_option() {
    let e = Env::new();
    e.init(&[]);
    for args in [
        &["prune", "--max-unused", "-5%"][..],
        &["prune", "--max-repack-size", "-1"][..],
        &[
            "forget",
            "--keep-last",
            "1",
            "--prune",
            "--max-unused",
            "-5%",
        ][..],
        &["check", "--read-data-subset", "-1%"][..],
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!("'{}'", args[args.len() - 1])),
            "{args:?}: {err}"
        );
        assert!(err.contains(args[args.len() - 2]), "{args:?}: {err}");
    }
}

/// Any other text option or argument that is not UTF-8 is named with its option (clap said
/// only "invalid UTF-8 was detected in one or more arguments").
#[test]
fn a_text_value_that_is_not_utf8_is_named() {
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    let bad = std::ffi::OsStr::from_bytes(b"caf\xe9");
    let o = e.cmd(&["snapshots", "--host"]).arg(bad).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    once(&err, "\"caf\\xE9\" (after --host) is not valid UTF-8");
    let mut inline = std::ffi::OsString::from("--tag=");
    inline.push(bad);
    let o = e.cmd(&["backup", "/tmp"]).arg(inline).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    once(&stderr(&o), "(given to --tag) is not valid UTF-8");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_arca"))
        .arg("snapshots")
        .env_clear()
        .env("ARCA_PASSWORD", "x")
        .env(
            "ARCA_REPOSITORY",
            std::ffi::OsStr::from_bytes(b"/tmp/caf\xe9"),
        )
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    once(
        &stderr(&o),
        "ARCA_REPOSITORY \"/tmp/caf\\xE9\" is not valid UTF-8",
    );
}

/// A pack read that comes back damaged (a fault on the way) is read once more before the
/// blobs in it fail their files: a flipped byte in transit failed the file, exit 3, while
/// the pack was whole (restic rereads too).
#[test]
fn a_blob_damaged_on_the_way_is_read_again() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let data = arca_testkit::random_bytes(5, 3 << 20);
    fs::write(src.join("f"), &data).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let mut clean = 0;
    for n in 1..=4 {
        let target = e.path(&format!("t{n}"));
        let o = e
            .cmd(&["restore", "latest", "-t", target.to_str().unwrap()])
            .env("ARCA_TEST_FAULTS", format!("read:pack:nth={n}:corrupt"))
            .output()
            .unwrap();
        let err = stderr(&o);
        // A damaged tree read stops the restore (exit 1); a damaged data read must not fail
        // the file.
        assert_ne!(o.status.code(), Some(3), "nth={n}: {err}");
        if o.status.success() {
            let back = target.join(src.strip_prefix("/").unwrap()).join("f");
            assert!(fs::read(back).unwrap() == data, "nth={n}: wrong bytes");
            clean += 1;
        }
    }
    assert!(clean >= 2, "{clean}");
}

/// The packs of `e`'s repository holding blobs of `kind` ("tree" or "data"), as `cat pack`
/// describes them.
fn packs_of(e: &Env, kind: &str) -> Vec<serde_json::Value> {
    e.ok(&["list", "packs"])
        .lines()
        .map(|p| serde_json::from_str::<serde_json::Value>(&e.ok(&["cat", "pack", p])).unwrap())
        .filter(|p| p["type"] == kind)
        .collect()
}

fn pack_file(e: &Env, id: &str) -> std::path::PathBuf {
    e.repo.join("data").join(&id[..2]).join(id)
}

/// A damaged listing or index file is named once in each message of find, prune, rewrite and
/// the repairs: the inner error named the tree or index file again (`(tree ID): tree blob ID
/// in pack …`), and the repairs' messages began with an internal `invalid index:`. Prune's
/// advice names repairs that exist (it said `arca repair`, which is no command), and
/// following it leaves a repository that checks clean.
#[test]
fn a_damaged_listing_or_index_file_is_named_once() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("sub")).unwrap();
    fs::write(src.join("f1"), arca_testkit::random_bytes(1, 30_000)).unwrap();
    fs::write(src.join("sub/a"), b"hi").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let index = arca_testkit::files_under(&e.repo.join("index")).remove(0);
    let index_name = index.file_name().unwrap().to_string_lossy().into_owned();
    let index_bytes = fs::read(&index).unwrap();

    // Every listing damaged.
    let pack = packs_of(&e, "tree").remove(0);
    let pack_id = pack["id"].as_str().unwrap().to_string();
    let trees: Vec<String> = pack["blobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap().to_string())
        .collect();
    for b in pack["blobs"].as_array().unwrap() {
        arca_testkit::flip_byte(&pack_file(&e, &pack_id), b["offset"].as_u64().unwrap() + 20)
            .unwrap();
    }
    let each_once = |err: &str| {
        for l in err.lines() {
            for t in &trees {
                if l.contains(&t[..8]) {
                    once(l, &t[..8]);
                }
            }
            if l.contains(&pack_id) {
                once(l, &pack_id);
            }
        }
    };
    for args in [
        &["find", "f1"][..],
        &["prune", "--dry-run"],
        &["rewrite", "--exclude", "f1", "latest"],
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains("damaged"), "{args:?}: {err}");
        each_once(&err);
    }
    let err = stderr(&e.run(&["prune", "--dry-run"]));
    assert!(!err.contains("`arca repair`"), "{err}");
    let repair = format!("`arca repair packs {}`", &pack_id[..8]);
    assert!(err.contains(&repair), "{err}");
    assert!(err.contains("`arca repair snapshots --forget`"), "{err}");

    // A damaged index file, met by prune and the repairs that refuse to run over it.
    arca_testkit::flip_byte(&index, 20).unwrap();
    for args in [
        &["prune", "--dry-run"][..],
        &["repair", "snapshots", "--dry-run"],
        &["repair", "packs", &pack_id[..8]],
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        once(&err, &index_name[..10]);
        once(&err, "`arca repair index`");
        assert!(!err.contains("invalid"), "{args:?}: {err}");
    }
    fs::write(&index, &index_bytes).unwrap();

    // Prune's advice for the damaged listings, followed.
    e.ok(&["repair", "packs", &pack_id[..8]]);
    e.ok(&["repair", "snapshots", "--forget"]);
    e.ok(&["check", "--read-data"]);
    // The one snapshot went with its damage: deleting all data is said outright.
    e.ok(&["prune", "--unsafe-allow-remove-all"]);
}

/// A pack that cannot be read (access denied) is not damage: prune and the repairs say to
/// make the repository readable. Prune proposed `arca check --read-data`, then `arca repair`
/// (no command), and `repair packs` to "try again", which fails the same way.
#[test]
fn an_unreadable_pack_asks_for_a_readable_repository() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f1"), arca_testkit::random_bytes(2, 30_000)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let pack = packs_of(&e, "tree").remove(0);
    let pack_id = pack["id"].as_str().unwrap().to_string();
    let denied = |args: &[&str]| {
        let o = e
            .cmd(args)
            .env("ARCA_TEST_FAULTS", "read:pack:always:denied")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        stderr(&o)
    };
    let err = denied(&["prune", "--dry-run"]);
    once(&err, "Make the repository readable");
    once(&err, "nothing was deleted");
    assert!(!err.contains("repair"), "{err}");
    let err = denied(&["repair", "packs", &pack_id[..8]]);
    once(&err, &pack_id);
    once(&err, "make it readable");
    once(&err, "nothing was changed");
    assert!(
        !err.contains("try again") && !err.contains("invalid"),
        "{err}"
    );
    let err = denied(&["repair", "index", "--read-all-packs"]);
    once(&err, "make the repository readable");
    once(&err, "nothing was changed");
    assert!(
        !err.contains("try again") && !err.contains("invalid"),
        "{err}"
    );
    // Nothing was taken for damage.
    e.ok(&["check", "--read-data"]);
}

/// Errors name the path the user gave: dump's `--target` (not the temporary file beside it),
/// standard output, and an empty password file given to init or key add.
#[test]
fn the_path_given_is_named() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f1"), b"hello").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);

    let target = e.path("nonexistent/x.tar");
    let o = e.run(&["dump", "latest", "/", "-t", target.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    once(&err, &format!("cannot create {}", target.display()));
    once(&err, "No such file or directory");
    assert!(!err.contains("arca-dump"), "{err}");

    let file = src.join("f1");
    let o = e
        .cmd(&["dump", "latest", file.to_str().unwrap()])
        .stdout(fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    once(&err, "standard output");
    once(&err, "No space left on device");

    let empty = e.path("empty");
    fs::write(&empty, b"").unwrap();
    let named = format!("password file {} is empty", empty.display());
    let o = e.run(&["key", "add", "--new-password-file", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    once(&stderr(&o), &named);
    let o = Command::new(common::BIN)
        .args(["-r", e.path("repo2").to_str().unwrap()])
        .args(["--password-file", empty.to_str().unwrap(), "init"])
        .env_remove("ARCA_PASSWORD")
        .env_remove("ARCA_REPOSITORY")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    once(&stderr(&o), &named);
}

/// A list file that cannot be read is named with the option that gave it (the message said
/// only "cannot read /path", which left the user to guess which of several lists it was).
#[test]
fn a_list_file_is_named_with_its_option() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f1"), b"hello").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let missing = e.path("no-such-list");
    let m = missing.to_str().unwrap();
    let t = e.path("t");
    let target = t.to_str().unwrap();
    let src = src.to_str().unwrap();
    for (option, args) in [
        ("--exclude-file", vec!["backup", src, "--exclude-file", m]),
        ("--iexclude-file", vec!["backup", src, "--iexclude-file", m]),
        ("--files-from", vec!["backup", "--files-from", m]),
        (
            "--files-from-verbatim",
            vec!["backup", "--files-from-verbatim", m],
        ),
        ("--files-from-raw", vec!["backup", "--files-from-raw", m]),
        (
            "--include-file",
            vec!["restore", "latest", "--target", target, "--include-file", m],
        ),
        (
            "--exclude-file",
            vec!["restore", "latest", "--target", target, "--exclude-file", m],
        ),
        (
            "--iinclude-file",
            vec![
                "restore",
                "latest",
                "--target",
                target,
                "--iinclude-file",
                m,
            ],
        ),
        (
            "--iexclude-file",
            vec![
                "restore",
                "latest",
                "--target",
                target,
                "--iexclude-file",
                m,
            ],
        ),
        (
            "--exclude-file",
            vec!["rewrite", "latest", "--exclude-file", m],
        ),
        (
            "--iexclude-file",
            vec!["rewrite", "latest", "--iexclude-file", m],
        ),
    ] {
        let o = e.run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        once(&err, &format!("cannot read {option} {m}"));
        once(&err, "No such file or directory");
    }
    assert!(!t.exists());
}

/// A pattern that does not compile is named as it was given, with the cause: the message
/// showed the glob it is rewritten to as well (`error parsing glob '**/[abc'`).
#[test]
fn a_bad_pattern_is_named_as_given() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f1"), b"hello").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let t = e.path("t");
    for args in [
        &["find", "[abc"][..],
        &[
            "restore",
            "latest",
            "-t",
            t.to_str().unwrap(),
            "--include",
            "[abc",
        ],
        &["rewrite", "latest", "--exclude", "[abc"],
    ] {
        let o = e.run(args);
        // A bad value: a usage error.
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = stderr(&o);
        once(&err, "[abc");
        once(&err, "unclosed character class");
        assert!(!err.contains("**/"), "{args:?}: {err}");
    }
}

/// Check's last line counts what it listed, in words that agree with the number: it said
/// `check found 1 errors` after listing an error and the snapshots it damages.
#[test]
fn check_counts_what_it_lists() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f1"), arca_testkit::random_bytes(3, 30_000)).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let pack = packs_of(&e, "data").remove(0);
    fs::remove_file(pack_file(&e, pack["id"].as_str().unwrap())).unwrap();
    let o = e.run(&["check"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.lines().filter(|l| l.starts_with("error: ")).count(), 1);
    once(&err, "is damaged: 1 path affected");
    once(&err, "arca: check found 1 error and 1 damaged snapshot\n");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("checked 1 snapshot, "), "{out}");
}

/// A bad value is a usage error, exit 2, whichever command takes it (the README's table):
/// a counting mode, a find time, a listen address and a glob exited 1, and a size too large
/// was told what sizes look like.
#[test]
fn bad_values_are_usage_errors() {
    let e = Env::new();
    for (args, says) in [
        (
            &["stats", "--mode", "bogus"][..],
            "[possible values: restore-size",
        ),
        (
            &["find", "-N", "notatime", "x"],
            "'--newest <TIME>': expected YYYY-MM-DD",
        ),
        (
            &["ui", "--listen", "nonsense"],
            "'--listen <ADDR>': expected ADDRESS:PORT",
        ),
        (
            &["backup", "/tmp", "--exclude", "["],
            "--exclude <PATTERN>: invalid pattern \"[\"",
        ),
        (&["rewrite", "--exclude", "[x"], "invalid pattern \"[x\""),
        (
            &[
                "restore",
                "latest",
                "-t",
                "/tmp/x",
                "--memory",
                "18446744073709551615",
            ],
            "out of range",
        ),
        // These three exited 1, after the repository was opened or not at all.
        (&["-o", "foo=bar", "snapshots"], "unknown key \"foo\""),
        (&["snapshots", "-o", "s3.region"], "expected key=value"),
        (
            &[
                "copy",
                "--from-repo",
                "/nonexistent",
                "--from-option",
                "x=1",
            ],
            "unknown key \"x\"",
        ),
        (&["forget", "--keep-tag", ""], "'--keep-tag <TAG[,TAG]>'"),
        (&["forget", "--keep-tag", " , "], "expected a tag"),
        (&["init", "--compression", "99"], "99 is not in -7..=22"),
        // Hunt 30: exit 1 after the repository was opened, and "unexpected argument '-1'".
        (
            &["backup", "/tmp", "--exclude-if-present", ""],
            "expected a value, not an empty one",
        ),
        (
            &["forget", "--keep-within", "-1d"],
            "'--keep-within <DURATION>'",
        ),
        (
            &["backup", "/tmp", "--exclude-larger-than", "-1"],
            "'--exclude-larger-than <SIZE>'",
        ),
    ] {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        once(&stderr(&o), says);
    }
}

/// The long help and the manual page name the environment variables that have no option
/// of their own, and the exit codes.
#[test]
fn help_names_the_environment_and_exit_codes() {
    let e = Env::new();
    let help = e.run(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let man = e.run(&["man"]);
    assert_eq!(man.status.code(), Some(0));
    for text in [
        String::from_utf8_lossy(&help.stdout),
        String::from_utf8_lossy(&man.stdout),
    ] {
        for var in [
            "ARCA_PASSWORD ",
            "ARCA_FROM_PASSWORD ",
            "ARCA_NEW_PASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "XDG_CACHE_HOME",
            "12 wrong password",
        ] {
            assert!(text.contains(var), "{var} missing from:\n{text}");
        }
    }
    // man prints the table as laid out, not filled into one paragraph.
    let page = String::from_utf8_lossy(&man.stdout);
    assert!(
        page.contains("ENVIRONMENT AND EXIT STATUS\"\n.nf\nEnvironment:"),
        "{page}"
    );
    assert!(page.contains("130 interrupted.\n.fi\n"), "{page}");
}

/// A password command does not get the data `backup --stdin` reads: one that read its
/// standard input (`ssh host cat pw` without `-n`) cut the start off the backup, exit 0.
#[test]
fn a_password_command_does_not_read_the_data_of_a_stdin_backup() {
    use std::io::Write;
    let e = Env::new();
    e.init(&[]);
    let data: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let mut c = e.cmd(&[
        "backup",
        "--stdin",
        "--stdin-filename",
        "data.bin",
        "--password-command",
        "head -c 4096 >/dev/null; echo 'test password'",
    ]);
    c.env_remove("ARCA_PASSWORD")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    let fed = data.clone();
    let feeder = std::thread::spawn(move || input.write_all(&fed));
    let o = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = e.cmd(&["dump", "latest", "/data.bin"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout.len(), data.len());
    assert!(o.stdout == data, "the stored data differs from the input");
}

//! Every command against an S3 repository on a real S3 server on loopback (`s3s-fs`): the
//! every-entry-kind round trip, a backup killed with SIGKILL followed by check and rerun,
//! injected transient failures, and the errors a user meets (wrong credentials, a missing
//! bucket, an unreachable server, an occupied location).

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arca_testkit::s3d::S3Server;
use arca_testkit::{compare, random_bytes};
use common::*;

fn server(e: &Env) -> S3Server {
    S3Server::start(&e.path("s3"))
}

fn s3_env(server: &S3Server, bucket: &str, prefix: &str) -> Env {
    server.bucket(bucket);
    Env::remote(server.location(bucket, prefix), server.env())
}

/// Object files of packs the server holds for a repository folder.
fn packs_on_server(dir: &Path) -> usize {
    let Ok(shards) = fs::read_dir(dir.join("data")) else {
        return 0;
    };
    shards
        .flatten()
        .filter_map(|s| fs::read_dir(s.path()).ok())
        .flat_map(|f| f.flatten())
        .filter(|f| {
            let n = f.file_name();
            let n = n.to_string_lossy();
            n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .count()
}

fn restored(target: &Path, src: &Path) -> PathBuf {
    target.join(src.strip_prefix("/").unwrap())
}

#[test]
fn every_command_works_on_s3() {
    let e0 = Env::new();
    let s3 = server(&e0);
    // The bucket does not exist yet: init creates it.
    let e = Env::remote(s3.location("fresh-bucket", "repos/main"), s3.env());
    let src = e.path("src");
    arca_testkit::generate::every_kind(&src.join("kinds"), 3).unwrap();
    sample(&src.join("sample"));
    let expected = compare::snapshot(&src).unwrap();
    e.init(&[]);
    assert!(s3.root.join("fresh-bucket/repos/main/config").is_file());
    // A second init on the same location is refused.
    let again = e.run(&["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );

    let s = src.to_str().unwrap();
    let first = e.json(&["backup", "--json", s]);
    assert_eq!(first["errors"], 0, "{first}");
    let snaps = e.json(&["snapshots", "--json"]);
    assert_eq!(snaps.as_array().unwrap().len(), 1);
    let ls = String::from_utf8_lossy(&e.run(&["ls", "latest"]).stdout).into_owned();
    assert!(ls.contains("kinds"), "{ls}");

    let target = e.path("target");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    let out = restored(&target, &src);
    let diffs = compare::diff(&expected, &src, &compare::snapshot(&out).unwrap(), &out);
    assert!(diffs.is_empty(), "restore differs:\n{}", diffs.join("\n"));

    let check = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(check["errors"].as_array().map_or(0, Vec::len), 0, "{check}");

    // Keys: add one, open with it, list both.
    let pw2 = e.path("pw2");
    fs::write(&pw2, "second password\n").unwrap();
    e.ok(&[
        "key",
        "add",
        "--new-password-file",
        pw2.to_str().unwrap(),
        "--kdf-memory-kib",
        "256",
        "--kdf-iterations",
        "1",
    ]);
    let keys = e
        .cmd(&["key", "list"])
        .env_remove("ARCA_PASSWORD")
        .env("ARCA_PASSWORD_FILE", &pw2)
        .output()
        .unwrap();
    assert!(keys.status.success(), "{}", stderr(&keys));
    assert!(String::from_utf8_lossy(&keys.stdout).matches('\n').count() >= 2);
    let cfg = e.ok(&["cat", "config"]);
    assert!(cfg.contains("chunker") || cfg.contains("version"), "{cfg}");

    // A no-change backup reads the parent's trees through the cache: a handful of requests
    // (three of them look at the lock: before the index file, after it, which also stands for
    // the look before the snapshot, and after the snapshot).
    let second = e.json(&["backup", "--json", s]);
    assert_eq!(second["errors"], 0, "{second}");
    let requests = second["backend"]["requests"].as_u64().unwrap();
    let bytes = second["backend"]["bytes_read"].as_u64().unwrap();
    assert!(
        requests <= 13 && bytes < 4096,
        "no-change backup made {requests} requests reading {bytes} bytes: {second}"
    );
}

#[test]
fn killed_backup_to_s3_leaves_a_consistent_repository() {
    let e0 = Env::new();
    let s3 = server(&e0);
    let e = s3_env(&s3, "crash", "r");
    let src = e.path("src");
    for i in 0..60u64 {
        let dir = src.join(format!("d{}", i % 6));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(format!("f{i}")), random_bytes(i + 1, 400_000)).unwrap();
    }
    e.init(&[&["--pack-size", "1MiB"][..], &SMALL_CHUNKS].concat());
    let repo_dir = s3.root.join("crash/r");
    let s = src.to_str().unwrap();
    let mut child = e.cmd(&["backup", "--quiet", s]).spawn().unwrap();
    let start = Instant::now();
    while packs_on_server(&repo_dir) < 6 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no packs appeared"
        );
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    child.wait().unwrap();
    let check = e.run(&["check", "--read-data"]);
    assert!(check.status.success(), "{}", stderr(&check));
    let rerun = e.json(&["backup", "--json", s]);
    assert_eq!(rerun["errors"], 0, "{rerun}");
    let check = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(check["errors"].as_array().map_or(0, Vec::len), 0, "{check}");
    let target = e.path("t");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    assert!(compare::diff_trees(&src, &restored(&target, &src)).is_empty());
}

#[test]
fn transient_failures_on_s3_are_retried() {
    let e0 = Env::new();
    let s3 = server(&e0);
    let mut e = s3_env(&s3, "faults", "r");
    let src = e.path("src");
    sample(&src);
    e.init(&SMALL_CHUNKS);
    e.vars.push((
        "ARCA_TEST_FAULTS",
        "write:pack:25%:seed=3,read:any:10%:seed=5,list:any:nth=2".into(),
    ));
    let s = src.to_str().unwrap();
    let b = e.json(&["backup", "--json", s]);
    assert_eq!(b["errors"], 0, "{b}");
    assert!(b["backend"]["retries"].as_u64().unwrap() > 0, "{b}");
    let target = e.path("t");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    assert!(compare::diff_trees(&src, &restored(&target, &src)).is_empty());
    e.vars.pop();
    let check = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(check["errors"].as_array().map_or(0, Vec::len), 0, "{check}");
}

fn one_line_error(o: &std::process::Output, wants: &[&str]) {
    assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
    let err = stderr(o);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() <= 2, "long error:\n{err}");
    for w in wants {
        assert!(err.contains(w), "{w:?} missing from:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn user_errors_on_s3_are_one_clear_line() {
    let e0 = Env::new();
    let s3 = server(&e0);
    let e = s3_env(&s3, "errs", "r");
    e.init(&[]);
    let start = Instant::now();

    let mut wrong = Env::remote(e.location.clone().unwrap(), s3.env());
    wrong.vars[1].1 = "not the secret".into();
    one_line_error(
        &wrong.run(&["snapshots"]),
        &["AWS_SECRET_ACCESS_KEY", "s3:http://127.0.0.1"],
    );

    // A missing bucket: no repository there, as a missing prefix (exit 10, restic's; it was
    // 1), in one line naming the bucket.
    let missing = Env::remote(s3.location("no-such-bucket", "r"), s3.env());
    let o = missing.run(&["snapshots"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(10), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("no-such-bucket") && err.contains("does not exist"),
        "{err}"
    );
    // It says that the bucket is missing, once (the repository's error dropped the server's
    // word, and the line said only "repository ... does not exist").
    assert_eq!(
        err.matches("bucket \"no-such-bucket\" does not exist")
            .count(),
        1,
        "{err}"
    );
    let prefix = Env::remote(s3.location("errs", "no-such-prefix"), s3.env());
    let o = prefix.run(&["snapshots"]);
    assert_eq!(o.status.code(), Some(10), "{}", stderr(&o));
    assert!(!stderr(&o).contains("bucket"), "{}", stderr(&o));
    // A prefix holding objects but no config is something, not a repository (it said
    // "repository ... does not exist").
    fs::create_dir_all(s3.root.join("errs/other")).unwrap();
    fs::write(s3.root.join("errs/other/notes.txt"), b"mine").unwrap();
    let other = Env::remote(s3.location("errs", "other"), s3.env());
    let o = other.run(&["snapshots"]);
    assert_eq!(o.status.code(), Some(10), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("errs/other is not an arca repository (no config file)"),
        "{err}"
    );
    // `init` there creates the bucket, and the repository then opens.
    missing.init(&[]);
    assert!(s3.root.join("no-such-bucket/r/config").is_file());
    let o = missing.run(&["snapshots"]);
    assert!(o.status.success(), "{}", stderr(&o));

    // No credentials anywhere: the message says which variables to set.
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() && std::env::var_os("AWS_PROFILE").is_none()
    {
        let bare = Env::remote(e.location.clone().unwrap(), vec![]);
        let mut c = bare.cmd(&["snapshots"]);
        c.env("HOME", e.path("no-home"));
        one_line_error(
            &c.output().unwrap(),
            &["no S3 credentials", "AWS_ACCESS_KEY_ID"],
        );
        // A profile named that holds none: said so (it said to set AWS_PROFILE).
        let mut c = bare.cmd(&["snapshots"]);
        c.env("HOME", e.path("no-home"))
            .env("AWS_PROFILE", "missing");
        one_line_error(
            &c.output().unwrap(),
            &["no S3 credentials", "\"missing\" (AWS_PROFILE)"],
        );
    }

    let port = arca_testkit::s3d::free_port();
    let down = Env::remote(format!("s3:http://127.0.0.1:{port}/errs/r"), s3.env());
    one_line_error(&down.run(&["snapshots"]), &[&format!("127.0.0.1:{port}")]);

    let bad = Env::remote("s3:http://127.0.0.1/".into(), s3.env());
    one_line_error(&bad.run(&["snapshots"]), &["no bucket"]);
    // A name with '_' (valid for old AWS buckets) that this server refuses: said in words,
    // not as the server's bare code.
    let under = Env::remote(s3.location("bad_bucket", "r"), s3.env());
    one_line_error(
        &under.run(&["snapshots"]),
        &["bucket name \"bad_bucket\" as not valid (InvalidBucketName)"],
    );
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn throttling_and_resets_from_the_network_are_retried() {
    use arca_testkit::s3d::{ConnectionFault, FaultProxy};
    let e0 = Env::new();
    let s3 = server(&e0);
    s3.bucket("net");
    // Every fifth connection is throttled (503 SlowDown), every seventh reset.
    let proxy = FaultProxy::start(s3.port, |n| match n % 35 {
        n if n % 5 == 1 => ConnectionFault::SlowDown,
        n if n % 7 == 3 => ConnectionFault::Reset,
        _ => ConnectionFault::Pass,
    });
    let e = Env::remote(
        format!("s3:http://127.0.0.1:{}/net/r", proxy.port),
        s3.env(),
    );
    let src = e.path("src");
    sample(&src);
    for i in 0..30u64 {
        fs::write(src.join(format!("f{i}")), random_bytes(i, 200_000)).unwrap();
    }
    e.init(&SMALL_CHUNKS);
    let s = src.to_str().unwrap();
    // Few connections, so that new ones (and so faults) keep coming.
    let b = e.json(&["backup", "--json", "--connections", "2", s]);
    assert_eq!(b["errors"], 0, "{b}");
    let target = e.path("t");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    assert!(compare::diff_trees(&src, &restored(&target, &src)).is_empty());
    let check = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(check["errors"].as_array().map_or(0, Vec::len), 0, "{check}");
    assert!(b["backend"]["retries"].as_u64().unwrap() > 0, "{b}");
    assert!(
        proxy.faults() >= 5,
        "only {} faults injected",
        proxy.faults()
    );
}

/// Every upload carries a checksum the server checks (crc32c by default, `-o
/// s3.checksum=md5`): a body damaged on the way (one byte flipped by a proxy, the first time
/// each object is sent) is refused (`400 BadDigest`) and sent again, and the repository holds
/// every file whole. With `-o s3.checksum=off` the same damage is stored, unseen.
#[test]
fn uploads_damaged_on_the_way_are_refused_and_sent_again() {
    use arca_testkit::s3d::{ConnectionFault, FaultProxy};
    let e0 = Env::new();
    let s3 = server(&e0);
    let src = e0.path("src");
    sample(&src);
    for i in 0..10u64 {
        fs::write(src.join(format!("f{i}")), random_bytes(i, 300_000)).unwrap();
    }
    let s = src.to_str().unwrap();
    for (bucket, option) in [
        ("default", None),
        ("md5", Some("md5")),
        ("off", Some("off")),
    ] {
        s3.bucket(bucket);
        // Made straight on the server; then the backup goes through the proxy.
        let direct = s3_env(&s3, bucket, "r");
        direct.init(&SMALL_CHUNKS);
        let proxy = FaultProxy::start(s3.port, |_| ConnectionFault::FlipBody);
        let e = Env::remote(
            format!("s3:http://127.0.0.1:{}/{bucket}/r", proxy.port),
            s3.env(),
        );
        let mut args = vec![];
        let o = option.map(|c| format!("s3.checksum={c}"));
        if let Some(o) = &o {
            args.extend(["-o", o.as_str()]);
        }
        args.extend(["backup", "--json", "--connections", "2", s]);
        let b = e.json(&args);
        assert_eq!(b["errors"], 0, "{b}");
        assert!(
            proxy.flipped() >= 3,
            "only {} bodies flipped",
            proxy.flipped()
        );
        let retries = b["backend"]["retries"].as_u64().unwrap();
        // Read straight from the server.
        let check = direct.run(&["check", "--read-data"]);
        if option == Some("off") {
            assert_eq!(retries, 0, "{b}");
            assert_ne!(check.status.code(), Some(0), "the damage was not stored");
            continue;
        }
        assert!(retries >= proxy.flipped(), "{b}");
        assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
        let target = e0.path(&format!("t-{bucket}"));
        direct.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
        assert!(compare::diff_trees(&src, &restored(&target, &src)).is_empty());
    }
    // An unknown value is refused, naming it.
    let e = s3_env(&s3, "md5", "r");
    let o = e.run(&["-o", "s3.checksum=sha1", "snapshots"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("s3.checksum \"sha1\": expected crc32c, md5 or off"),
        "{}",
        stderr(&o)
    );
}

/// A server down for 20 s while a backup runs (its connections refused) is waited out: the
/// server answered before, so a refused connection is an outage, not a wrong address, and the
/// retries last about half a minute. Before, the backup failed at the first refused
/// connection, and a 20 s outage outlasted the retries of other failures.
#[test]
fn a_server_restart_during_a_backup_is_waited_out() {
    let e0 = Env::new();
    let mut s3 = server(&e0);
    let e = s3_env(&s3, "restart", "r");
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..30u64 {
        fs::write(src.join(format!("f{i}")), random_bytes(i, 1_000_000)).unwrap();
    }
    e.init(&[&["--pack-size", "1MiB"][..], &SMALL_CHUNKS].concat());
    let s = src.to_str().unwrap();
    // Slow requests, so that the backup is still writing when the server goes away: about
    // 30 packs, two at a time, 300 ms each.
    let backup = e
        .cmd(&["backup", "--json", "--backend-latency", "300ms", s])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let repo_dir = e0.path("s3").join("restart").join("r");
    let start = Instant::now();
    while packs_on_server(&repo_dir) == 0 {
        assert!(start.elapsed() < Duration::from_secs(60), "no pack arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    s3.stop();
    std::thread::sleep(Duration::from_secs(20));
    s3.restart();
    let out = backup.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(summary["complete"], true, "{summary}");
    assert!(
        summary["backend"]["retries"].as_u64().unwrap() > 0,
        "the backup did not meet the outage: {summary}"
    );
    let check = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(check["errors"].as_array().map_or(0, Vec::len), 0, "{check}");
}

/// A server gone for good during a restore stops the restore once the retries are spent: exit
/// 1 and one message, not a "content lost" error for every file and exit 3 (the whole
/// repository is unreachable, not some files damaged). A rerun goes on from there.
#[test]
fn a_server_gone_during_a_restore_stops_it_with_one_error() {
    let e0 = Env::new();
    let mut s3 = server(&e0);
    let e = s3_env(&s3, "gone", "r");
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..20u64 {
        fs::write(src.join(format!("f{i}")), random_bytes(i, 500_000)).unwrap();
    }
    e.init(&[&["--pack-size", "1MiB"][..], &SMALL_CHUNKS].concat());
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let target = e.path("t");
    let t = target.to_str().unwrap();
    let restore = e
        .cmd(&[
            "restore",
            "latest",
            "--target",
            t,
            "--fetchers",
            "1",
            "--backend-latency",
            "300ms",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let back = restored(&target, &src);
    let start = Instant::now();
    while fs::read_dir(&back).map_or(0, Iterator::count) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "nothing restored"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    s3.stop();
    let stopped = Instant::now();
    let out = restore.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot reach"), "{err}");
    assert!(!err.contains("lost"), "{err}");
    // One error (the retries before it are each told, as warnings).
    let errors = err.lines().filter(|l| !l.starts_with("warning: ")).count();
    assert!(errors <= 3, "{err}");
    assert!(err.contains("retrying in"), "{err}");
    assert!(
        stopped.elapsed() < Duration::from_secs(120),
        "{:?}",
        stopped.elapsed()
    );
    // Back up, the rerun completes the restore.
    s3.restart();
    e.ok(&["restore", "latest", "--target", t]);
    assert!(compare::diff_trees(&src, &back).is_empty());
}

/// A location without a config is reported after three requests: the listing of the keys
/// (sent beside the config's read), the config's GET, and one listing that tells what is
/// there (the bucket missing, nothing, other objects). The listing the read made to look for
/// the bucket was made again to tell what is there: four.
#[test]
fn a_missing_config_costs_one_listing() {
    use arca_testkit::s3d::{ConnectionFault, FaultProxy};
    use std::sync::atomic::Ordering::Relaxed;
    let e0 = Env::new();
    let s3 = server(&e0);
    s3.bucket("few");
    fs::create_dir_all(s3.root.join("few/other")).unwrap();
    fs::write(s3.root.join("few/other/notes.txt"), b"mine").unwrap();
    // Every request on its own connection: connections count requests.
    let proxy = FaultProxy::start(s3.port, |_| ConnectionFault::Pass);
    for (bucket, prefix, says) in [
        ("few", "none", "/few/none does not exist"),
        (
            "few",
            "other",
            "few/other is not an arca repository (no config file)",
        ),
        ("no-bucket", "r", "bucket \"no-bucket\" does not exist"),
    ] {
        let at = format!("s3:http://127.0.0.1:{}/{bucket}/{prefix}", proxy.port);
        let before = proxy.counts[0].load(Relaxed);
        let o = Env::remote(at, s3.env()).run(&["snapshots"]);
        let requests = proxy.counts[0].load(Relaxed) - before;
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(10), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{says:?} missing from {err}");
        assert_eq!(requests, 3, "{bucket}/{prefix}: {err}");
    }
}

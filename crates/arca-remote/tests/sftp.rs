//! The SFTP backend against a real OpenSSH server started by the test (see `sshd/mod.rs`):
//! conformance, concurrency, large files, refusals, login failures and lost sessions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sshd;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arca_backend::{Backend, ErrorKind, FileType, RetryBackend, RetryPolicy, RootKind};
use arca_remote::{RemoteOptions, SftpBackend, SftpLocation, SftpOptions};
use sshd::Sshd;

fn options(kv: &[(&str, &str)]) -> SftpOptions {
    SftpOptions::from_remote(&RemoteOptions {
        connections: None,
        extended: kv
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    })
    .expect("options")
}

fn location(host: &str, path: &Path) -> SftpLocation {
    SftpLocation {
        user: None,
        host: host.into(),
        port: None,
        path: path.to_str().expect("utf-8 path").into(),
    }
}

/// A backend on `path` of the server, through the test's ssh configuration.
fn open_with(command: &str, path: &Path) -> arca_backend::Result<SftpBackend> {
    SftpBackend::open(
        &location(sshd::HOST, path),
        &options(&[("sftp.command", command)]),
    )
}

fn open(sshd: &Sshd, path: &Path) -> SftpBackend {
    open_with(&sshd.command, path).unwrap_or_else(|e| panic!("open: {e}\n{}", sshd.log()))
}

/// Deterministic bytes (xorshift), different per seed.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn id(i: u64) -> String {
    let mut s = format!("{:016x}", i.wrapping_mul(0x2545_F491_4F6C_DD1D));
    while s.len() < 64 {
        s.push_str(&format!("{:02x}", (i * 7 + s.len() as u64) % 256));
    }
    s.truncate(64);
    s
}

/// Every file under `dir` whose name starts with `.tmp-`.
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if e.file_name().to_string_lossy().starts_with(".tmp-") {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn conformance_on_a_fresh_folder() {
    let sshd = Sshd::start();
    let root = sshd.dir.join("nested/parents/repo");
    let b = open(&sshd, &root);
    assert_eq!(
        b.location(),
        format!("sftp://{}/{}", sshd::HOST, root.display())
    );
    let hints = b.hints();
    assert!(!hints.local);
    assert_eq!(hints.connections, Some(arca_remote::SFTP_CONNECTIONS));
    b.create().expect("create");
    for d in [
        "keys",
        "snapshots",
        "index",
        "data/00",
        "data/7f",
        "data/ff",
    ] {
        assert!(root.join(d).is_dir(), "{d}");
    }
    assert_eq!(std::fs::read_dir(root.join("data")).unwrap().count(), 256);
    arca_backend::conformance(&b);
    // Names that are not ids are not listed; missing files are NotFound.
    std::fs::write(root.join("keys/not-an-id"), b"x").unwrap();
    std::fs::write(root.join("data/ab").join("ab".repeat(31) + "zz"), b"x").unwrap();
    assert_eq!(b.list(FileType::Key).unwrap(), vec![]);
    assert_eq!(b.list(FileType::Pack).unwrap().len(), 1);
    let missing = b.read(FileType::Index, &id(1)).expect_err("missing");
    assert_eq!(missing.kind, ErrorKind::NotFound, "{missing}");
    assert!(
        missing.to_string().contains(&format!(
            "sftp://{}/{}/index/{}",
            sshd::HOST,
            root.display(),
            id(1)
        )),
        "{missing}"
    );
    assert_eq!(
        b.read_range(FileType::Index, &id(1), 0, 1)
            .unwrap_err()
            .kind,
        ErrorKind::NotFound
    );
    // An empty file.
    b.write(FileType::Index, &id(2), b"").unwrap();
    assert_eq!(b.read(FileType::Index, &id(2)).unwrap(), b"");
    assert_eq!(
        b.read_range(FileType::Index, &id(2), 0, 1)
            .unwrap_err()
            .kind,
        ErrorKind::ShortRead
    );
    assert!(temp_files(&root).is_empty(), "{:?}", temp_files(&root));
}

#[test]
fn default_command_uses_the_location_and_args() {
    let sshd = Sshd::start();
    // ssh -p PORT -l USER [args] 127.0.0.1 -s sftp, with no configuration file at all.
    let args = format!(
        "-F /dev/null -i '{}' -o IdentitiesOnly=yes -o IdentityAgent=none \
         -o UserKnownHostsFile='{}' -o GlobalKnownHostsFile=/dev/null \
         -o StrictHostKeyChecking=yes -o BatchMode=yes",
        sshd.client_key.display(),
        sshd.known_hosts.display()
    );
    let root = sshd.dir.join("repo1");
    let loc = SftpLocation {
        user: Some(sshd.user.clone()),
        host: "127.0.0.1".into(),
        port: Some(sshd.port),
        path: root.to_str().unwrap().into(),
    };
    let b = SftpBackend::open(&loc, &options(&[("sftp.args", &args)]))
        .unwrap_or_else(|e| panic!("open: {e}\n{}", sshd.log()));
    b.create().unwrap();
    b.write(FileType::Snapshot, &id(3), b"snapshot").unwrap();
    assert_eq!(
        std::fs::read(root.join("snapshots").join(id(3))).unwrap(),
        b"snapshot"
    );
    // The host alias of an ssh configuration file, given through sftp.args.
    let root = sshd.dir.join("repo2");
    let conf = sshd.ssh_config.to_str().unwrap().to_string();
    let b = SftpBackend::open(
        &location(sshd::HOST, &root),
        &options(&[("sftp.args", &format!("-F {conf}"))]),
    )
    .unwrap_or_else(|e| panic!("open: {e}\n{}", sshd.log()));
    b.create().unwrap();
    assert_eq!(b.list(FileType::Snapshot).unwrap(), vec![]);
}

#[test]
fn many_writes_and_reads_at_once() {
    let sshd = Sshd::start();
    let root = sshd.dir.join("repo");
    let b = Arc::new(open(&sshd, &root));
    b.create().unwrap();
    let size = |i: u64| 1 + (i as usize * 37_123) % 700_000;
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let b = b.clone();
            std::thread::spawn(move || {
                for i in (t * 8)..(t * 8 + 8) {
                    b.write(FileType::Pack, &id(i), &bytes(i, size(i)))
                        .expect("write");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    let listed = b.list(FileType::Pack).unwrap();
    assert_eq!(listed.len(), 64);
    for f in &listed {
        let i = (0..64).find(|i| id(*i) == f.name).expect("known id");
        assert_eq!(f.size, size(i) as u64);
    }
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let b = b.clone();
            std::thread::spawn(move || {
                for i in (t * 8)..(t * 8 + 8) {
                    let want = bytes(i, size(i));
                    let off = (i as usize * 4099) % want.len();
                    let len = (want.len() - off).min(300_000);
                    let got = b
                        .read_range(FileType::Pack, &id(i), off as u64, len as u64)
                        .expect("read_range");
                    assert!(got == want[off..off + len], "file {i} range {off}+{len}");
                    assert!(
                        b.read(FileType::Pack, &id(i)).expect("read") == want,
                        "file {i}"
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("reader");
    }
    assert!(temp_files(&root).is_empty());
}

#[test]
fn large_file_and_odd_ranges() {
    let sshd = Sshd::start();
    let root = sshd.dir.join("repo");
    let b = open(&sshd, &root);
    b.create().unwrap();
    const N: usize = 20 << 20;
    let data = bytes(42, N);
    let name = id(42);
    let t = Instant::now();
    b.write(FileType::Pack, &name, &data).unwrap();
    let wrote = t.elapsed();
    assert!(std::fs::read(root.join(FileType::Pack.path(&name))).unwrap() == data);
    let t = Instant::now();
    assert!(b.read(FileType::Pack, &name).unwrap() == data);
    let read = t.elapsed();
    eprintln!("20 MiB over loopback: write {wrote:?}, read {read:?}");
    let chunk = 255 * 1024;
    for (off, len) in [
        (0, 1),
        (1, 3 * 1024 * 1024 + 7),
        (chunk - 1, 3),
        (chunk, chunk),
        (12_345, 9_999_999),
        (N - 5, 5),
        (N - chunk - 17, chunk + 17),
        (7, N - 7),
    ] {
        let got = b
            .read_range(FileType::Pack, &name, off as u64, len as u64)
            .unwrap();
        assert!(got == data[off..off + len], "range {off}+{len}");
    }
    let mut buf = vec![9u8; 10];
    b.read_range_into(FileType::Pack, &name, 3, 2 * chunk as u64 + 1, &mut buf)
        .unwrap();
    assert!(buf == data[3..3 + 2 * chunk + 1]);
    for (off, len) in [(N - 5, 6), (N, 1), (0, N + 1), (N + 100, 1)] {
        let e = b
            .read_range(FileType::Pack, &name, off as u64, len as u64)
            .expect_err("past the end");
        assert_eq!(e.kind, ErrorKind::ShortRead, "{off}+{len}: {e}");
    }
    // Replacing a large file with a small one leaves only the small one.
    b.write(FileType::Pack, &name, b"small").unwrap();
    assert_eq!(b.read(FileType::Pack, &name).unwrap(), b"small");
    assert!(temp_files(&root).is_empty());
}

#[test]
fn transfer_speed_16_mib() {
    let sshd = Sshd::start();
    let root = sshd.dir.join("repo");
    let b = Arc::new(open(&sshd, &root));
    b.create().unwrap();
    let data = bytes(16, 16 << 20);
    let t = Instant::now();
    b.write(FileType::Pack, &id(16), &data).unwrap();
    let w = t.elapsed();
    let t = Instant::now();
    let back = b.read(FileType::Pack, &id(16)).unwrap();
    let r = t.elapsed();
    assert!(back == data);
    // Eight threads reading 2 MiB ranges of it at once.
    let t = Instant::now();
    let threads: Vec<_> = (0..8u64)
        .map(|i| {
            let b = b.clone();
            std::thread::spawn(move || {
                b.read_range(FileType::Pack, &id(16), i << 21, 1 << 21)
                    .expect("range")
                    .len()
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let p = t.elapsed();
    assert_eq!(total, 16 << 20);
    // 64 small files, 8 threads.
    let t = Instant::now();
    let threads: Vec<_> = (0..8u64)
        .map(|th| {
            let b = b.clone();
            std::thread::spawn(move || {
                for i in 0..8 {
                    b.write(FileType::Index, &id(100 + th * 8 + i), &bytes(i, 4096))
                        .expect("small write");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let small = t.elapsed();
    eprintln!(
        "16 MiB over loopback: write {w:?}, read {r:?}, 8 parallel 2 MiB ranges {p:?}; \
         64 writes of 4 KiB from 8 threads {small:?}"
    );
}

#[test]
fn create_refuses_existing_repositories_and_other_files() {
    let sshd = Sshd::start();
    let root = sshd.dir.join("repo");
    let b = open(&sshd, &root);
    b.create().unwrap();
    b.write(FileType::Config, "config", b"cfg").unwrap();
    let e = b.create().expect_err("repository exists");
    assert_eq!(e.kind, ErrorKind::AlreadyExists);
    assert!(e.to_string().contains("repository already exists"), "{e}");

    let other = sshd.dir.join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"mine").unwrap();
    let e = open(&sshd, &other).create().expect_err("not empty");
    assert_eq!(e.kind, ErrorKind::AlreadyExists);
    assert!(e.to_string().contains("not empty"), "{e}");
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 1);

    let empty = sshd.dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    open(&sshd, &empty)
        .create()
        .expect("an empty folder is fine");
    assert!(empty.join("data/a5").is_dir());

    let file = sshd.dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let e = open(&sshd, &file).create().expect_err("a file");
    assert_ne!(e.kind, ErrorKind::Transient, "{e}");
}

/// What is at the root, told as a local folder tells it: a folder (a repository or not),
/// nothing, a file, or a file above it (named by its location; the server says "No such
/// file" of a path through a file).
#[test]
fn root_kind_tells_a_folder_nothing_and_a_file_in_the_way() {
    let sshd = Sshd::start();
    let folder = sshd.dir.join("plain");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("notes.txt"), b"mine").unwrap();
    let file = sshd.dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let under = file.join("repo/deeper");
    let shown = |p: &Path| format!("sftp://{}/{}", sshd::HOST, p.display());
    for (path, kind) in [
        (folder.clone(), RootKind::Folder),
        (sshd.dir.join("nothing"), RootKind::Nothing),
        (sshd.dir.join("nothing/here"), RootKind::Nothing),
        (
            file.clone(),
            RootKind::FileInTheWay("it is a file, not a folder".into()),
        ),
        (
            under.clone(),
            RootKind::FileInTheWay(format!("{} is a file, not a folder", shown(&file))),
        ),
    ] {
        assert_eq!(open(&sshd, &path).root_kind(), kind, "{}", path.display());
    }
}

/// An init cut off before its config (a full disk, a dropped connection) leaves the folders
/// and perhaps a key: init run again clears them, as it does locally; a key written moments
/// ago is another init's, and anything else is not ours (hunt 30: every init after such a
/// failure refused the folder, "not empty").
#[test]
fn create_clears_what_an_interrupted_init_left() {
    use std::time::{Duration, SystemTime};
    let sshd = Sshd::start();
    let root = sshd.dir.join("repo");
    let key = root.join(format!("keys/{}", "ab".repeat(32)));
    let left = |age: Duration| {
        for d in ["keys", "snapshots", "index", "data/00", "data/ab"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [&key, &root.join("data/ab/.tmp-1234"), &root.join(".tmp-9")] {
            std::fs::write(f, b"x").unwrap();
            std::fs::File::options()
                .write(true)
                .open(f)
                .unwrap()
                .set_modified(SystemTime::now() - age)
                .unwrap();
        }
    };

    left(Duration::from_secs(5));
    let e = open(&sshd, &root).create().expect_err("a fresh key");
    assert!(e.to_string().contains("another init"), "{e}");
    assert!(key.exists());

    left(Duration::from_secs(3600));
    std::fs::write(root.join("data/00/notes.txt"), b"mine").unwrap();
    let e = open(&sshd, &root).create().expect_err("not ours");
    assert!(e.to_string().contains("not empty"), "{e}");
    assert!(key.exists());
    std::fs::remove_file(root.join("data/00/notes.txt")).unwrap();

    open(&sshd, &root).create().expect("a leftover is cleared");
    assert!(!key.exists());
    assert!(!root.join("data/ab/.tmp-1234").exists());
    assert!(!root.join(".tmp-9").exists());
    for d in [
        "keys",
        "snapshots",
        "index",
        "locks",
        "data/00",
        "data/ab",
        "data/ff",
    ] {
        assert!(root.join(d).is_dir(), "{d}");
    }
}

#[test]
fn wrong_client_key_is_refused_clearly() {
    let sshd = Sshd::start();
    let key = sshd.dir.join("stranger");
    sshd::keygen(&key);
    let conf = sshd.dir.join("ssh_config_stranger");
    sshd.write_client_config(&conf, &key, &sshd.known_hosts);
    let t = Instant::now();
    let e = open_with(&Sshd::command_for(&conf), &sshd.dir.join("repo")).expect_err("wrong key");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(e.kind, ErrorKind::PermissionDenied, "{e}");
    let msg = e.to_string();
    eprintln!("wrong key: {msg}");
    assert!(msg.to_lowercase().contains("permission denied"), "{msg}");
    assert!(msg.contains(&format!("sftp://{}/", sshd::HOST)), "{msg}");
}

#[test]
fn host_key_mismatch_is_refused_clearly() {
    let sshd = Sshd::start();
    let other = sshd.dir.join("impostor_host_key");
    sshd::keygen(&other);
    let known = sshd.dir.join("known_hosts_wrong");
    std::fs::write(
        &known,
        sshd::known_hosts_line(sshd.port, &other.with_extension("pub")),
    )
    .unwrap();
    let conf = sshd.dir.join("ssh_config_wrong_host");
    sshd.write_client_config(&conf, &sshd.client_key, &known);
    let t = Instant::now();
    let e = open_with(&Sshd::command_for(&conf), &sshd.dir.join("repo")).expect_err("mismatch");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_ne!(e.kind, ErrorKind::Transient, "{e}");
    let msg = e.to_string();
    eprintln!("host key mismatch: {msg}");
    assert!(msg.contains("host key"), "{msg}");
    assert!(msg.contains("Host key verification failed"), "{msg}");
}

#[test]
fn unreachable_port_fails_quickly() {
    let sshd = Sshd::start();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let command = format!(
        "ssh -F '{}' -p {closed} {} -s sftp",
        sshd.ssh_config.display(),
        sshd::HOST
    );
    let t = Instant::now();
    let e = open_with(&command, &sshd.dir.join("repo")).expect_err("closed port");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_ne!(e.kind, ErrorKind::Transient, "{e}");
    assert!(e.to_string().contains("Connection refused"), "{e}");
    eprintln!("closed port: {e}");
    // A command that does not exist says so.
    let e = open_with("/nonexistent/ssh host -s sftp", &sshd.dir.join("repo"))
        .expect_err("no such command");
    assert!(e.to_string().contains("cannot run"), "{e}");
}

/// Calls `f` until it succeeds: at most 50 times over about 10 s.
fn eventually<T>(what: &str, mut f: impl FnMut() -> arca_backend::Result<T>) -> T {
    let start = Instant::now();
    let mut last = None;
    for _ in 0..50 {
        match f() {
            Ok(v) => return v,
            Err(e) => last = Some(e.to_string()),
        }
        if start.elapsed() > Duration::from_secs(10) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{what} did not recover: {last:?}");
}

#[test]
fn killed_session_is_replaced() {
    let sshd = Sshd::start();
    let root = sshd.dir.join("repo");
    let b = open(&sshd, &root);
    b.create().unwrap();
    b.write(FileType::Key, &id(5), b"key").unwrap();
    assert!(sshd.kill_sessions() > 0, "no session processes found");
    // The next call fails transiently or already runs on a new session.
    match b.read(FileType::Key, &id(5)) {
        Ok(v) => assert_eq!(v, b"key"),
        Err(e) => {
            eprintln!("after kill: {e}");
            assert_eq!(e.kind, ErrorKind::Transient, "{e}");
        }
    }
    assert_eq!(eventually("read", || b.read(FileType::Key, &id(5))), b"key");

    // Killed while requests are in flight: those fail transiently and leave no partial file
    // under its final name; later ones work.
    let b = Arc::new(b);
    let data = Arc::new(bytes(6, 4 << 20));
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..4u64)
        .map(|i| {
            let (b, data, done) = (b.clone(), data.clone(), done.clone());
            std::thread::spawn(move || {
                let mut failed = vec![];
                for j in 0..4 {
                    match b.write(FileType::Pack, &id(i * 10 + j), &data) {
                        Ok(()) => {}
                        Err(e) => failed.push((i * 10 + j, e)),
                    }
                    done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                failed
            })
        })
        .collect();
    let start = Instant::now();
    while done.load(std::sync::atomic::Ordering::SeqCst) == 0
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    sshd.kill_sessions();
    let mut failed = vec![];
    for t in threads {
        failed.extend(t.join().unwrap());
    }
    eprintln!("writes failed by the kill: {}", failed.len());
    assert!(
        !failed.is_empty(),
        "no write was in flight when the session was killed"
    );
    for (i, e) in &failed {
        assert_eq!(e.kind, ErrorKind::Transient, "{e}");
        match std::fs::read(root.join(FileType::Pack.path(&id(*i)))) {
            Ok(v) => assert!(v == *data, "partial file {i}"),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
        }
    }
    eventually("write", || b.write(FileType::Pack, &id(99), b"after"));
    assert_eq!(b.read(FileType::Pack, &id(99)).unwrap(), b"after");

    // Behind the retrying decorator, a lost session is invisible.
    let r = RetryBackend::new(b.clone(), RetryPolicy::default());
    sshd.kill_sessions();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(r.read(FileType::Key, &id(5)).unwrap(), b"key");
    sshd.kill_sessions();
    r.write(FileType::Key, &id(7), b"seven").unwrap();
    assert_eq!(r.read(FileType::Key, &id(7)).unwrap(), b"seven");
}

#[test]
fn restarted_server_is_reconnected() {
    let mut sshd = Sshd::start();
    let root = sshd.dir.join("repo");
    let b = open(&sshd, &root);
    b.create().unwrap();
    b.write(FileType::Index, &id(8), b"index").unwrap();
    sshd.stop();
    let t = Instant::now();
    let e = b.read(FileType::Index, &id(8)).expect_err("server down");
    assert_eq!(e.kind, ErrorKind::Transient, "{e}");
    let e = b
        .stat(FileType::Index, &id(8))
        .expect_err("server still down");
    assert_eq!(e.kind, ErrorKind::Transient, "{e}");
    assert!(e.to_string().contains("Connection refused"), "{e}");
    eprintln!("server down: {e}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    sshd.restart();
    assert_eq!(
        eventually("read", || b.read(FileType::Index, &id(8))),
        b"index"
    );
    b.write(FileType::Index, &id(9), b"more").unwrap();
    assert_eq!(b.list(FileType::Index).unwrap().len(), 2);
}

/// Copies `from` to `to`, each piece `delay` after it arrived (a link with latency but no
/// bandwidth limit); ends when either side closes.
fn delay_line(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            if tx
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
            {
                break;
            }
        }
    });
    std::thread::spawn(move || {
        for (due, piece) in rx {
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            if to.write_all(&piece).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Both);
    });
}

/// A port on 127.0.0.1 that forwards one connection to `target` with `rtt` of latency.
fn slow_link(target: u16, rtt: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Some(Ok(client)) = listener.incoming().next() {
            let server = TcpStream::connect(("127.0.0.1", target)).expect("connect to sshd");
            for s in [&client, &server] {
                s.set_nodelay(true).unwrap();
            }
            delay_line(
                client.try_clone().unwrap(),
                server.try_clone().unwrap(),
                rtt / 2,
            );
            delay_line(server, client, rtt / 2);
        }
    });
    port
}

#[test]
fn requests_overlap_on_a_slow_link() {
    let sshd = Sshd::start();
    const RTT: Duration = Duration::from_millis(40);
    let port = slow_link(sshd.port, RTT);
    let known = sshd.dir.join("known_hosts_slow");
    std::fs::write(
        &known,
        sshd::known_hosts_line(port, &sshd.host_key.with_extension("pub")),
    )
    .unwrap();
    let conf = sshd.dir.join("ssh_config_slow");
    sshd.write_client_config(&conf, &sshd.client_key, &known);
    let command = format!(
        "ssh -F '{}' -p {port} {} -s sftp",
        conf.display(),
        sshd::HOST
    );
    let root = sshd.dir.join("repo");
    let b = Arc::new(open_with(&command, &root).unwrap_or_else(|e| panic!("{e}\n{}", sshd.log())));
    let t = Instant::now();
    b.create().unwrap();
    let create = t.elapsed();
    let data = bytes(1, 16 << 20);
    let t = Instant::now();
    b.write(FileType::Pack, &id(1), &data).unwrap();
    let write = t.elapsed();
    let t = Instant::now();
    assert!(b.read(FileType::Pack, &id(1)).unwrap() == data);
    let read = t.elapsed();
    b.write(FileType::Key, &id(2), b"key").unwrap();
    let t = Instant::now();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let b = b.clone();
            std::thread::spawn(move || {
                for _ in 0..8 {
                    assert_eq!(b.read(FileType::Key, &id(2)).expect("read"), b"key");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let small = t.elapsed();
    let t = Instant::now();
    assert_eq!(b.list(FileType::Pack).unwrap().len(), 1);
    let list = t.elapsed();
    eprintln!(
        "{RTT:?} round trips: create {create:?}, 16 MiB write {write:?}, read {read:?}; \
         64 small reads from 8 threads {small:?}; list of 256 shards {list:?}"
    );
    // One request at a time would take 64 round trips for 16 MiB, and 128 for the small
    // reads (open, then read): at least 2.5 s and 5 s.
    assert!(read < RTT * 45, "16 MiB read took {read:?}");
    assert!(small < RTT * 60, "64 small reads took {small:?}");
    assert!(list < RTT * 30, "listing 256 shards took {list:?}");
}

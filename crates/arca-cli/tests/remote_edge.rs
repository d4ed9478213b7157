//! Edge cases of the remote backends met by hand: servers that accept a connection and never
//! answer, and the like. Each test skips (with a note) when its server program is missing.

#![allow(clippy::unwrap_used)]

mod common;
#[path = "../../arca-remote/tests/sshd/mod.rs"]
mod sshd;

use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// The ssh client, when OpenSSH (client and server) is installed.
fn ssh_client() -> Option<PathBuf> {
    let server = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"]
        .iter()
        .any(|p| Path::new(p).is_file());
    let path = std::env::var_os("PATH").unwrap_or_default();
    let client = std::env::split_paths(&path)
        .map(|d| d.join("ssh"))
        .find(|p| p.is_file());
    client.filter(|_| server)
}

/// A port on 127.0.0.1 that accepts connections and never sends a byte (a hung server, or a
/// firewall that swallows the traffic); the listener lives as long as the returned value.
fn silent_port() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let accept = l.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok((c, _)) = accept.accept() {
            held.push(c);
        }
    });
    (l, port)
}

/// Runs `cmd`, killing it after `limit`; the output and whether it ended by itself.
fn run_bounded(mut cmd: std::process::Command, limit: Duration) -> (String, Option<i32>, bool) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let ended = loop {
        if child.try_wait().unwrap().is_some() {
            break true;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (err, status.code(), ended)
}

/// An SSH port that accepts the connection and stays silent: arca gives up with a clear error
/// once ssh's ConnectTimeout passes. Before, ssh (without a ConnectTimeout) waited for the
/// server's greeting for ever and every command hung. The real ssh runs behind a wrapper that
/// shortens arca's 30 s to 2 s, so that the test is quick.
#[test]
fn a_silent_ssh_server_is_given_up_on() {
    let Some(ssh) = ssh_client() else {
        eprintln!("skipped: OpenSSH (ssh, sshd) is not installed");
        return;
    };
    let e = Env::new();
    let bin = e.path("bin");
    fs::create_dir_all(&bin).unwrap();
    let wrapper = bin.join("ssh");
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n\
             for a in \"$@\"; do shift; [ \"$a\" = ConnectTimeout=30 ] && a=ConnectTimeout=2; \
             set -- \"$@\" \"$a\"; done\n\
             exec '{}' \"$@\"\n",
            ssh.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    let (_listener, port) = silent_port();
    let remote = Env::remote(format!("sftp://127.0.0.1:{port}//srv/repo"), vec![]);
    let mut cmd = remote.cmd(&["snapshots"]);
    cmd.env("PATH", format!("{}:{path}", bin.display()));
    let start = Instant::now();
    let (err, code, ended) = run_bounded(cmd, Duration::from_secs(20));
    assert!(
        ended,
        "arca still waited after {:?}: {err}",
        start.elapsed()
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("cannot reach the SSH server"), "{err}");
    assert!(err.contains(&format!("sftp://127.0.0.1:{port}")), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Credentials written into an S3 location (`s3:http://ID:SECRET@host/bucket`, as some URLs
/// carry them) are refused with what to do instead. Before, they went into the request's
/// address: the server refused the signature, and the error blamed the (right) credentials
/// of the environment while showing the secret of the location in every message.
#[test]
fn credentials_in_an_s3_location_are_refused() {
    let e = Env::remote(
        "s3:http://someid:s3cr3t@127.0.0.1:9/bucket/repo".into(),
        vec![
            ("AWS_ACCESS_KEY_ID", "id".into()),
            ("AWS_SECRET_ACCESS_KEY", "secret".into()),
        ],
    );
    let start = Instant::now();
    let o = e.run(&["snapshots"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("credentials cannot be part of the location"),
        "{err}"
    );
    assert!(err.contains("AWS_SECRET_ACCESS_KEY"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(10));
}

/// A session where the SFTP server never says hello (a login script waiting for input, a
/// stuck sftp-server) is given up on when nobody can type into ssh; it hung for good. The
/// test shortens the wait from 120 s.
#[test]
fn an_sftp_server_that_never_says_hello_is_given_up_on() {
    let remote = Env::remote("sftp://nas//srv/repo".into(), vec![]);
    let mut cmd = remote.cmd(&["-o", "sftp.command=sleep 30", "snapshots"]);
    cmd.env("ARCA_TEST_SFTP_HELLO_MS", "1500");
    let start = Instant::now();
    let (err, code, ended) = run_bounded(cmd, Duration::from_secs(25));
    assert!(
        ended,
        "arca still waited after {:?}: {err}",
        start.elapsed()
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("did not start SFTP within 1.5 s"), "{err}");
}

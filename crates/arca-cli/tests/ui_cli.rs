//! `arca ui` through the binary: the printed address with its token, the token checked, Ctrl-C
//! stopping it with exit 0, connections that send no request dropped, the refusal to listen
//! beyond loopback without TLS, and HTTPS with a certificate (when openssl and curl are there
//! to make and use one).

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

/// Starts `arca ui` with `args`; returns the child and the URL it printed.
fn start(e: &Env, args: &[&str]) -> (Child, String) {
    start_env(e, args, &[])
}

/// [`start`] with more environment variables.
fn start_env(e: &Env, args: &[&str], env: &[(&str, &str)]) -> (Child, String) {
    let mut c = e.cmd(&[&["ui", "--no-open"], args].concat());
    c.envs(env.iter().copied());
    hangup_default(&mut c)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("arca ui: serving "), "{first}");
    let url = lines.next().unwrap().unwrap().trim().to_string();
    assert_eq!(lines.next().unwrap().unwrap(), "Press Ctrl-C to stop.");
    (child, url)
}

fn http(addr: &str, path: &str, headers: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{headers}\r\n"
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    r
}

fn stop(child: Child) -> (i32, String) {
    stop_with(child, nix::sys::signal::Signal::SIGINT)
}

fn stop_with(mut child: Child, signal: nix::sys::signal::Signal) -> (i32, String) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, signal).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code().unwrap_or(-1), err)
}

#[test]
fn serves_with_the_printed_token_and_stops_on_ctrl_c() {
    let e = Env::new();
    e.init(&[]);
    e.ok(&[
        "backup",
        e.tmp.path().to_str().unwrap(),
        "--exclude",
        "repo",
    ]);
    let (child, url) = start(&e, &[]);
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, token) = rest.split_once("/?token=").unwrap();
    assert_eq!(token.len(), 64);
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
    let addr = format!("127.0.0.1:{port}");
    let r = http(&addr, "/api/status", "");
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    let r = http(&addr, &format!("/?token={token}"), "");
    assert!(r.starts_with("HTTP/1.1 303"), "{r}");
    // A session secret, not the token: the cookie goes to every port of 127.0.0.1.
    assert!(r.contains(&format!("set-cookie: arca_ui_{port}=")), "{r}");
    assert!(r.contains("; Path=/; HttpOnly; SameSite=Strict"), "{r}");
    assert!(
        !r.contains(&format!("set-cookie: arca_ui_{port}={token}")),
        "{r}"
    );
    let r = http(
        &addr,
        "/api/status",
        &format!("Authorization: Bearer {token}\r\n"),
    );
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains("\"open\":true"), "{r}");
    let r = http(
        &addr,
        "/api/snapshots",
        &format!("Authorization: Bearer {token}\r\n"),
    );
    assert!(r.contains("\"short_id\""), "{r}");
    let (code, err) = stop(child);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("arca ui: stopping"), "{err}");
}

#[test]
fn listening_beyond_loopback_needs_tls() {
    let e = Env::new();
    e.init(&[]);
    let o = e.run(&["ui", "--no-open", "--listen", "0.0.0.0:0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(
            "arca: refusing to listen on 0.0.0.0:0 without TLS: anyone on the network could reach the repository"
        ),
        "{}",
        stderr(&o)
    );
    let o = e.run(&["ui", "--no-open", "--listen", "nowhere"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("invalid value 'nowhere' for '--listen <ADDR>'"),
        "{}",
        stderr(&o)
    );
    let o = e.run(&["ui", "--no-open", "--tls-cert", "c.pem"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = e.run(&[
        "ui",
        "--no-open",
        "--tls-cert",
        "/no/c.pem",
        "--tls-key",
        "/no/k.pem",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("arca: TLS certificate /no/c.pem"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn https_with_a_certificate() {
    // `openssl --version` is refused by OpenSSL 3 ("Invalid command"): `openssl version`.
    let have = |c: &str| {
        Command::new(c)
            .arg(if c == "openssl" {
                "version"
            } else {
                "--version"
            })
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !have("openssl") || !have("curl") {
        println!("skipped: openssl or curl is missing");
        return;
    }
    let e = Env::new();
    e.init(&[]);
    let (cert, key) = (e.path("cert.pem"), e.path("key.pem"));
    let o = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (c, k) = (cert.to_str().unwrap(), key.to_str().unwrap());
    // Beyond loopback with TLS: served, with a loud warning.
    let (child, url) = start(
        &e,
        &["--listen", "0.0.0.0:0", "--tls-cert", c, "--tls-key", k],
    );
    assert!(url.starts_with("https://0.0.0.0:"), "{url}");
    let (port, token) = url
        .strip_prefix("https://0.0.0.0:")
        .unwrap()
        .split_once("/?token=")
        .unwrap();
    let o = Command::new("curl")
        .args([
            "-s",
            "--cacert",
            c,
            "-H",
            &format!("Authorization: Bearer {token}"),
        ])
        .arg(format!("https://127.0.0.1:{port}/api/status"))
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        body.contains("\"open\":true"),
        "{body} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", c])
        .arg(format!("https://127.0.0.1:{port}/api/status"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "401");
    // Over TLS the cookie is a `__Host-` one, Secure, holding the session secret.
    let o = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-D", "-", "--cacert", c])
        .arg(format!("https://127.0.0.1:{port}/?token={token}"))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&o.stdout).to_ascii_lowercase();
    let line = head
        .lines()
        .find(|l| l.starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("{head}"));
    assert!(
        line.starts_with(&format!("set-cookie: __host-arca_ui_{port}=")),
        "{line}"
    );
    assert!(
        line.trim_end()
            .ends_with("; path=/; httponly; samesite=strict; secure"),
        "{line}"
    );
    assert!(!line.contains(token), "{line}");
    let (code, err) = stop(child);
    assert_eq!(code, 0);
    assert!(
        err.contains("WARNING: arca ui is listening on 0.0.0.0:"),
        "{err}"
    );
}

/// A connection that sends nothing, or half a request, is dropped once the time for a
/// request's head is over (30 s; half a second here): they stayed open for good, and anyone
/// on the machine could use up the server's sockets and memory without the token.
#[test]
fn connections_that_send_no_whole_request_are_dropped() {
    let e = Env::new();
    e.init(&[]);
    let (child, url) = start_env(&e, &[], &[("ARCA_TEST_UI_HEADER_TIMEOUT_MS", "500")]);
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, token) = rest.split_once("/?token=").unwrap();
    let addr = format!("127.0.0.1:{port}");
    let silent = TcpStream::connect(&addr).unwrap();
    let mut half = TcpStream::connect(&addr).unwrap();
    write!(half, "GET /api/status HTTP/1.1\r\nHost: {addr}\r\n").unwrap();
    for mut s in [silent, half] {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = vec![];
        match s.read_to_end(&mut buf) {
            Ok(_) => {}
            Err(err) => assert!(
                !matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "still open after 10 s: {err}"
            ),
        }
    }
    // Whole requests are served as before.
    let r = http(
        &addr,
        "/api/status",
        &format!("Authorization: Bearer {token}\r\n"),
    );
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let (code, err) = stop(child);
    assert_eq!(code, 0, "{err}");
}

/// A hang-up (the terminal closed, the ssh session dropped) stops the server in order, as
/// Ctrl-C does: it killed it outright, leaving its jobs' locks behind (hunt 24).
#[test]
fn a_hang_up_stops_the_server_in_order() {
    let e = Env::new();
    e.init(&[]);
    let (child, _url) = start(&e, &[]);
    let (code, err) = stop_with(child, nix::sys::signal::Signal::SIGHUP);
    assert_eq!(code, 0, "{err}");
    assert!(
        e.path("repo/locks").read_dir().unwrap().next().is_none(),
        "a lock was left"
    );
}

#[test]
fn a_password_file_that_cannot_be_read_is_said_and_the_page_asks() {
    let e = Env::new();
    e.init(&[]);
    let missing = e.tmp.path().join("no-such-password-file");
    let (child, url) = start(&e, &["--password-file", missing.to_str().unwrap()]);
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, token) = rest.split_once("/?token=").unwrap();
    let r = http(
        &format!("127.0.0.1:{port}"),
        "/api/status",
        &format!("Authorization: Bearer {token}\r\n"),
    );
    assert!(r.contains("\"open\":false"), "{r}");
    let (code, err) = stop(child);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("cannot read password file") && err.contains("no-such-password-file"),
        "{err}"
    );
    assert!(err.contains("the page will ask for the password"), "{err}");
}

/// POSTs JSON `body` to `path` with the bearer `token`; gives the response.
fn http_post(addr: &str, path: &str, token: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer \
         {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    r
}

#[test]
fn a_second_ctrl_c_quits_at_once_naming_the_abandoned_jobs() {
    let e = Env::new();
    e.init(&[]);
    // 4 MB that does not compress, behind a slow backend: the backup runs for a minute.
    let data = e.tmp.path().join("big");
    std::fs::create_dir_all(&data).unwrap();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let bytes: Vec<u8> = (0..4 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(data.join("blob"), bytes).unwrap();
    let config = e.tmp.path().join("config");
    std::fs::create_dir_all(config.join("arca")).unwrap();
    std::fs::write(
        config.join("arca/big.toml"),
        format!("[backup]\npaths = [{:?}]\n", data.display().to_string()),
    )
    .unwrap();
    let (mut child, url) = start_env(
        &e,
        &["--backend-bandwidth", "50KB"],
        &[("XDG_CONFIG_HOME", config.to_str().unwrap())],
    );
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, token) = rest.split_once("/?token=").unwrap();
    let addr = format!("127.0.0.1:{port}");
    let r = http_post(&addr, "/api/backup", token, "{\"profile\":\"big\"}");
    assert!(r.starts_with("HTTP/1.1 202"), "{r}");
    std::thread::sleep(Duration::from_millis(500));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = status.unwrap_or_else(|| panic!("still running after the second Ctrl-C: {err}"));
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("Ctrl-C again to quit at once"), "{err}");
    assert!(
        err.contains("quitting at once; abandoned: #1 backup of profile big"),
        "{err}"
    );
    assert!(err.contains("arca unlock"), "{err}");
}

/// A profile with a section no command has (`[bakup]`) is refused by the page as `arca -P
/// NAME backup` refuses it, checked by the command line's own reading of profiles (the page
/// listed it as runnable, and ran it); a profile without one runs.
#[test]
fn a_profile_with_an_unknown_section_is_refused_as_the_command_line_refuses_it() {
    let e = Env::new();
    e.init(&[]);
    let data = e.tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("f"), b"x").unwrap();
    let config = e.tmp.path().join("config");
    std::fs::create_dir_all(config.join("arca")).unwrap();
    let backup = format!("[backup]\npaths = [{:?}]\n", data.display().to_string());
    std::fs::write(config.join("arca/good.toml"), &backup).unwrap();
    std::fs::write(
        config.join("arca/typo.toml"),
        format!("{backup}[bakup]\ntag = [\"x\"]\n"),
    )
    .unwrap();
    let o = e.run(&[
        "-P",
        config.join("arca/typo.toml").to_str().unwrap(),
        "backup",
    ]);
    assert!(
        stderr(&o).contains("unknown section [bakup]"),
        "{}",
        stderr(&o)
    );
    let (child, url) = start_env(&e, &[], &[("XDG_CONFIG_HOME", config.to_str().unwrap())]);
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, token) = rest.split_once("/?token=").unwrap();
    let addr = format!("127.0.0.1:{port}");
    let r = http(
        &addr,
        "/api/profiles",
        &format!("Authorization: Bearer {token}\r\n"),
    );
    let body = &r[r.find("\r\n\r\n").unwrap() + 4..];
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    let problem = |name: &str| {
        v["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["problem"]
            .clone()
    };
    assert_eq!(problem("good"), serde_json::Value::Null, "{v}");
    let why = problem("typo");
    assert!(
        why.as_str()
            .is_some_and(|w| w.contains("unknown section [bakup]")),
        "{v}"
    );
    let r = http_post(&addr, "/api/backup", token, "{\"profile\":\"typo\"}");
    assert!(
        r.starts_with("HTTP/1.1 400") && r.contains("unknown section [bakup]"),
        "{r}"
    );
    let r = http_post(&addr, "/api/backup", token, "{\"profile\":\"good\"}");
    assert!(r.starts_with("HTTP/1.1 202"), "{r}");
    let (code, err) = stop(child);
    assert_eq!(code, 0, "{err}");
}

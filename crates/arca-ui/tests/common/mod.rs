//! Test support for the web interface: a repository holding a backup of the every-entry-kind
//! tree, the server started in-process on 127.0.0.1:0, and a tiny HTTP/1.1 client.

#![allow(dead_code, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arca_backend::LocalBackend;
use arca_format::KdfParams;
use arca_repo::{CacheMode, InitOptions, Repository};
use arca_ui::{Server, UiOptions};
use serde_json::Value;

pub const TOKEN: &str = "test-token-0123456789";
pub const PASSWORD: &str = "test password";

pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub repo: PathBuf,
    /// The every-kind tree that was backed up (absolute).
    pub src: PathBuf,
    pub profiles: PathBuf,
}

impl Fixture {
    /// A repository with two snapshots of the every-kind tree (the second after `small.txt`
    /// changed) and a profile `home` backing the tree up.
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let src = tmp.path().join("src");
        arca_testkit::generate::every_kind(&src, 7).unwrap();
        let r = Repository::init(
            Arc::new(LocalBackend::new(&repo)),
            PASSWORD.as_bytes(),
            &InitOptions {
                kdf: KdfParams {
                    memory_kib: 256,
                    iterations: 1,
                    parallelism: 1,
                },
                ..InitOptions::default()
            },
        )
        .unwrap();
        let opts = arca_backup::BackupOptions {
            paths: vec![src.clone()],
            tags: vec!["first".into()],
            ..Default::default()
        };
        let p = arca_backup::Progress::default();
        arca_backup::backup(&r, &opts, &p, &|_: &arca_backup::Warning| {}).unwrap();
        std::fs::write(src.join("small.txt"), b"hello again, arca\n").unwrap();
        let opts = arca_backup::BackupOptions {
            tags: vec![],
            ..opts
        };
        arca_backup::backup(&r, &opts, &p, &|_: &arca_backup::Warning| {}).unwrap();
        let profiles = tmp.path().join("profiles");
        std::fs::create_dir_all(&profiles).unwrap();
        std::fs::write(
            profiles.join("home.toml"),
            format!(
                "[backup]\npaths = [{:?}]\ntag = [\"from-ui\"]\n",
                src.display().to_string()
            ),
        )
        .unwrap();
        Fixture {
            tmp,
            repo,
            src,
            profiles,
        }
    }

    pub fn options(&self, password: Option<&str>) -> UiOptions {
        UiOptions {
            // Not the cache folder of whoever runs the tests.
            restore_markers: Some(self.tmp.path().join("markers")),
            listen: None,
            tls: None,
            backend: Arc::new(LocalBackend::new(&self.repo)),
            cache: CacheMode::Off,
            password: password.map(|p| zeroize::Zeroizing::new(p.to_string())),
            no_lock: false,
            retry_lock: None,
            profiles_dir: Some(self.profiles.clone()),
            profile_check: None,
            token: Some(TOKEN.into()),
        }
    }

    pub fn start(&self) -> Server {
        Server::start(self.options(Some(PASSWORD))).unwrap()
    }
}

/// An HTTP response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = vec![];
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(
            std::str::from_utf8(&b[..eol])
                .unwrap()
                .split(';')
                .next()
                .unwrap()
                .trim(),
            16,
        )
        .unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 2 + size + 2..];
    }
}

/// Sends one request (`Connection: close`) and reads the whole response.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req += &format!("Host: {addr}\r\n");
    }
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    req += &format!("Content-Length: {}\r\n\r\n", body.len());
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = vec![];
    s.read_to_end(&mut raw).unwrap();
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Resp {
        status,
        headers,
        body,
    }
}

/// The `Cookie` header of a browser that opened the server's URL (`?token=`): the cookie the
/// redirect set, without its attributes.
pub fn session_jar(addr: SocketAddr) -> String {
    let r = request(addr, "GET", &format!("/?token={TOKEN}"), &[], b"");
    assert_eq!(r.status, 303);
    let cookie = r.header("set-cookie").unwrap();
    cookie.split(';').next().unwrap().to_string()
}

/// GET with the bearer token.
pub fn get(server: &Server, path: &str) -> Resp {
    let auth = format!("Bearer {TOKEN}");
    request(server.addr(), "GET", path, &[("Authorization", &auth)], b"")
}

/// POST JSON with the bearer token.
pub fn post(server: &Server, path: &str, body: &Value) -> Resp {
    let auth = format!("Bearer {TOKEN}");
    request(
        server.addr(),
        "POST",
        path,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
}

/// Polls job `id` until it is no longer running; returns its last JSON.
pub fn wait_job(server: &Server, id: u64) -> Value {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let j = get(server, &format!("/api/jobs/{id}")).json();
        if j["state"] != "running" || Instant::now() > until {
            return j;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Percent-encodes a path's bytes for `?path=`.
pub fn q(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut s = String::new();
    for b in p.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(b) {
            s.push(*b as char);
        } else {
            s += &format!("%{b:02X}");
        }
    }
    s
}

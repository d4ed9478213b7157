//! An S3-compatible server for tests: `s3s-fs` (crates.io, a real SigV4-checking S3 server
//! over a folder) started on a free loopback port, stopped when dropped.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Access key the test server accepts.
pub const ACCESS_KEY: &str = "arca-test-access";
/// Secret key the test server accepts.
pub const SECRET_KEY: &str = "arca-test-secret-0123456789";
/// How `.ci/run` installs the server.
pub const INSTALL: &str = "cargo install s3s-fs@0.14.1 --features binary --locked";

/// A running `s3s-fs`.
#[derive(Debug)]
pub struct S3Server {
    child: Child,
    /// Folder holding the buckets (one sub-folder each).
    pub root: PathBuf,
    /// Port on 127.0.0.1.
    pub port: u16,
}

/// The `s3s-fs` binary: `$ARCA_S3S_FS`, then `PATH`, then `~/.cargo/bin`.
pub fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ARCA_S3S_FS") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("s3s-fs"))
        .find(|p| p.is_file())
}

/// A port free on 127.0.0.1 right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

/// Waits until something accepts connections on `port` (at most `limit`).
pub fn wait_for_port(port: u16, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

impl S3Server {
    /// Starts a server storing its buckets under `root` (created). Panics with the install
    /// command when `s3s-fs` is missing: these tests must not pass silently.
    pub fn start(root: &Path) -> S3Server {
        let bin = binary()
            .unwrap_or_else(|| panic!("s3s-fs not found (set ARCA_S3S_FS or run `{INSTALL}`)"));
        std::fs::create_dir_all(root).expect("create the server's folder");
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(&bin)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
                .arg(root)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
            if wait_for_port(port, Duration::from_secs(10)) {
                return S3Server {
                    child,
                    root: root.to_path_buf(),
                    port,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("s3s-fs did not start listening on 127.0.0.1");
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a bucket (a folder of the server's root).
    pub fn bucket(&self, name: &str) {
        std::fs::create_dir_all(self.root.join(name)).expect("create bucket folder");
    }

    /// A repository location in `bucket` under `prefix`.
    pub fn location(&self, bucket: &str, prefix: &str) -> String {
        format!("s3:{}/{bucket}/{prefix}", self.endpoint())
    }

    /// The environment a client needs (credentials and region).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
            ("AWS_DEFAULT_REGION", "us-east-1".to_string()),
        ]
    }

    /// Starts the server again on the same port and folder after [`Self::stop`] (a restart
    /// the clients see as refused connections meanwhile).
    pub fn restart(&mut self) {
        let bin = binary().expect("s3s-fs was found at start");
        self.child = Command::new(&bin)
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        assert!(
            wait_for_port(self.port, Duration::from_secs(10)),
            "s3s-fs did not listen again on port {}",
            self.port
        );
    }

    /// Stops the server (also done on drop).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a [`FaultProxy`] does to one incoming connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionFault {
    /// Forward it untouched.
    Pass,
    /// Answer its first request with `503 SlowDown` (S3's throttling) and close it.
    SlowDown,
    /// Read its first request, then close it without an answer (a reset).
    Reset,
    /// Forward it with one byte of its request's body flipped (damage on the way), the first
    /// time a request with a body names its method and path: sent again, it passes (a
    /// request without a body passes untouched).
    FlipBody,
}

/// A TCP proxy in front of a server that injects S3 throttling and connection resets by
/// connection: connection `n` (counting from 0) gets `plan(n)`. Stops with the test.
#[derive(Debug)]
pub struct FaultProxy {
    /// Port on 127.0.0.1.
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Connections served so far, how many got a fault, and how many request bodies were
    /// flipped.
    pub counts: std::sync::Arc<[std::sync::atomic::AtomicU64; 3]>,
}

impl FaultProxy {
    /// Starts proxying `127.0.0.1:PORT` to `127.0.0.1:target`.
    pub fn start(target: u16, plan: fn(u64) -> ConnectionFault) -> FaultProxy {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let port = listener.local_addr().expect("proxy address").port();
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
        let (stop2, counts2) = (stop.clone(), counts.clone());
        let seen = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop2.load(Ordering::Relaxed) {
                let client = match listener.accept() {
                    Ok((c, _)) => c,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                };
                let fault = plan(n);
                n += 1;
                counts2[0].fetch_add(1, Ordering::Relaxed);
                if fault != ConnectionFault::Pass {
                    counts2[1].fetch_add(1, Ordering::Relaxed);
                }
                let (counts, seen) = (counts2.clone(), seen.clone());
                std::thread::spawn(move || {
                    if serve(client, target, fault, &seen) {
                        counts[2].fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        FaultProxy { port, stop, counts }
    }

    /// Connections that got a fault.
    pub fn faults(&self) -> u64 {
        self.counts[1].load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Request bodies flipped ([`ConnectionFault::FlipBody`] on a request with a body).
    pub fn flipped(&self) -> u64 {
        self.counts[2].load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Reads one request head from `c`: the head's lines and the body's length.
fn read_head(c: &mut TcpStream) -> std::io::Result<Option<(Vec<String>, u64)>> {
    use std::io::Read;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if c.read(&mut byte)? == 0 || head.len() > 64 << 10 {
            return Ok(None);
        }
        head.push(byte[0]);
    }
    let lines: Vec<String> = String::from_utf8_lossy(&head)
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    let len = lines
        .iter()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    Ok(Some((lines, len)))
}

/// Serves one connection; returns whether a request body was flipped. `seen`: the request
/// lines whose bodies were flipped before.
fn serve(
    mut client: TcpStream,
    target: u16,
    fault: ConnectionFault,
    seen: &std::sync::Mutex<std::collections::HashSet<String>>,
) -> bool {
    use std::io::{Read, Write};
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(Some((lines, len))) = read_head(&mut client) else {
        return false;
    };
    match fault {
        ConnectionFault::SlowDown => {
            let _ = std::io::copy(&mut (&mut client).take(len), &mut std::io::sink());
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>\
                        <Message>Please reduce your request rate.</Message></Error>";
            let _ = write!(
                client,
                "HTTP/1.1 503 Slow Down\r\ncontent-type: application/xml\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        // Dropping the connection with the request unanswered.
        ConnectionFault::Reset => {}
        ConnectionFault::Pass | ConnectionFault::FlipBody => {
            // One request per connection (`connection: close`), so that every request
            // passes through the plan.
            let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)) else {
                return false;
            };
            let mut head: Vec<&str> = lines
                .iter()
                .map(String::as_str)
                .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                .collect();
            head.push("connection: close");
            let text = format!("{}\r\n\r\n", head.join("\r\n"));
            let mut body = Vec::new();
            if (&mut client).take(len).read_to_end(&mut body).is_err() {
                return false;
            }
            let flipped = fault == ConnectionFault::FlipBody
                && !body.is_empty()
                && seen
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(lines.first().cloned().unwrap_or_default());
            if flipped {
                let mid = body.len() / 2;
                body[mid] ^= 0x01;
            }
            if server.write_all(text.as_bytes()).is_err() || server.write_all(&body).is_err() {
                return flipped;
            }
            let _ = std::io::copy(&mut server, &mut client);
            let _ = client.shutdown(std::net::Shutdown::Both);
            return flipped;
        }
    }
    false
}

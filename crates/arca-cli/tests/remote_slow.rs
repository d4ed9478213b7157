//! An S3 repository behind a slow link: a loopback proxy that passes uploads at a fixed pace
//! (no tc/netem needed). A pack's PUT on such a link takes longer than `s3.timeout`, and
//! must still be waited for, as long as its bytes keep moving at a plausible pace.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arca_testkit::random_bytes;
use arca_testkit::s3d::S3Server;
use common::*;

/// Bytes a second the proxy passes towards the server.
const PACE: usize = 256 * 1024;

/// A proxy on 127.0.0.1 in front of `target` that passes what the client sends at [`PACE`]
/// per connection, and the answers untouched. Stops accepting when dropped.
struct SlowLink {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl SlowLink {
    fn start(target: u16) -> SlowLink {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        std::thread::spawn(move || serve(client, target));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        SlowLink { port, stop }
    }
}

impl Drop for SlowLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies `from` to `to` until either side closes, at most `pace` bytes a second when given.
fn pump(mut from: TcpStream, mut to: TcpStream, pace: Option<usize>) {
    let piece = pace.map_or(64 << 10, |p| p / 20);
    let mut buf = vec![0u8; piece];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        if let Some(p) = pace {
            std::thread::sleep(Duration::from_secs_f64(n as f64 / p as f64));
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn serve(client: TcpStream, target: u16) {
    client.set_nonblocking(false).unwrap();
    let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
        return;
    };
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    std::thread::spawn(move || pump(s2, c2, None));
    pump(client, server, Some(PACE));
}

#[test]
fn a_pack_upload_slower_than_the_timeout_is_waited_for() {
    let e0 = Env::new();
    let s3 = S3Server::start(&e0.path("s3"));
    s3.bucket("slow");
    let link = SlowLink::start(s3.port);
    let location = format!("s3:http://127.0.0.1:{}/slow/r", link.port);
    let e = Env::remote(location, s3.env());
    // A pack of about 1.5 MiB takes some 6 s at the link's pace, over the 2 s timeout.
    let src = e.path("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("f"), random_bytes(7, 1_500_000)).unwrap();
    let opts = ["-o", "s3.timeout=2", "--connections", "1"];
    let mut init = opts.to_vec();
    init.extend(["init", "--pack-size", "2MiB", "--kdf-memory-kib", "256"]);
    init.extend(["--kdf-iterations", "1"]);
    e.ok(&init);
    let started = Instant::now();
    let mut backup = opts.to_vec();
    backup.extend(["backup", "--json", src.to_str().unwrap()]);
    let o = e.run(&backup);
    let err = stderr(&o);
    assert!(
        o.status.success(),
        "backup failed after {:?}:\n{err}",
        started.elapsed()
    );
    assert!(!err.contains("did not take the upload"), "{err}");
    let mut check = opts.to_vec();
    check.extend(["check", "--read-data"]);
    e.ok(&check);
}

#[test]
fn s3_timeout_is_checked() {
    let e = Env::remote("s3:http://127.0.0.1:1/bucket/r".into(), vec![]);
    let o = e.run(&["-o", "s3.timeout=soon", "snapshots"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("s3.timeout \"soon\""), "{err}");
}

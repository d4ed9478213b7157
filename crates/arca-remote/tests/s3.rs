//! The S3 backend against a real S3 server on loopback (`s3s-fs`): the conformance suite,
//! concurrent requests, paginated listings, large objects, and the errors a user meets (wrong
//! credentials, a missing bucket, an unreachable endpoint, a location already in use).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use arca_backend::{Backend, ErrorKind, FileType};
use arca_remote::{Location, RemoteOptions, S3Backend, S3Location, S3Options};
use arca_testkit::random_bytes;
use arca_testkit::s3d::{ACCESS_KEY, S3Server, SECRET_KEY};

fn s3_location(server: &S3Server, bucket: &str, prefix: &str) -> S3Location {
    match Location::parse(&server.location(bucket, prefix)).unwrap() {
        Location::S3(s) => s,
        other => panic!("not s3: {other:?}"),
    }
}

fn options(secret: &str) -> S3Options {
    let mut o = S3Options::from_remote(
        &S3Location {
            endpoint: "http://x".into(),
            bucket: "xyz".into(),
            prefix: String::new(),
        },
        &RemoteOptions {
            connections: Some(8),
            extended: vec![],
        },
    )
    .unwrap();
    o.credentials = Some((ACCESS_KEY.to_string(), secret.to_string()));
    o.region = Some("us-east-1".into());
    o.timeout = Duration::from_secs(20);
    o
}

fn backend(server: &S3Server, bucket: &str, prefix: &str) -> S3Backend {
    S3Backend::open(&s3_location(server, bucket, prefix), &options(SECRET_KEY)).unwrap()
}

fn id(i: u64) -> String {
    format!("{:064x}", u128::from(i as u32) * 0x9e37_79b9_7f4a_7c15 + 7)
}

#[test]
fn conformance_and_create() {
    let tmp = tempfile::tempdir().unwrap();
    let server = S3Server::start(&tmp.path().join("s3"));
    server.bucket("conf");
    server.bucket("whole");
    // A prefix inside a bucket, and a bucket's root.
    for (bucket, prefix) in [("conf", "some/repo"), ("whole", "")] {
        let b = backend(&server, bucket, prefix);
        b.create().unwrap();
        arca_backend::conformance(&b);
        assert!(b.hints().connections == Some(8) && !b.hints().local);
    }
    // Another prefix of the same bucket holds other objects: refused, naming the reason.
    let holder = backend(&server, "conf", "other");
    holder.write(FileType::Snapshot, &id(1), b"x").unwrap();
    let e = backend(&server, "conf", "other").create().unwrap_err();
    assert_eq!(e.kind, ErrorKind::AlreadyExists);
    assert!(e.to_string().contains("already"), "{e}");
    let e = backend(&server, "conf", "some/repo").create().unwrap_err();
    assert!(e.to_string().contains("repository already exists"), "{e}");
}

#[test]
fn concurrent_requests_and_large_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let server = S3Server::start(&tmp.path().join("s3"));
    server.bucket("conc");
    let b = Arc::new(backend(&server, "conc", "r"));
    b.create().unwrap();
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let b = b.clone();
            std::thread::spawn(move || {
                for i in 0..8u64 {
                    let n = t * 8 + i;
                    let data = random_bytes(n, 1000 + n as usize * 997);
                    b.write(FileType::Pack, &id(n), &data).unwrap();
                    let got = b.read_range(FileType::Pack, &id(n), 7, 500).unwrap();
                    assert_eq!(got, data[7..507]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(b.list(FileType::Pack).unwrap().len(), 64);
    // A 20 MiB object, read whole and by odd ranges into one reused buffer.
    let big = random_bytes(99, 20 << 20);
    b.write(FileType::Pack, &id(1000), &big).unwrap();
    assert_eq!(b.read(FileType::Pack, &id(1000)).unwrap(), big);
    let mut buf = Vec::new();
    for (off, len) in [(0u64, 1u64), (12_345, 3 << 20), ((20 << 20) - 17, 17)] {
        b.read_range_into(FileType::Pack, &id(1000), off, len, &mut buf)
            .unwrap();
        assert_eq!(buf, big[off as usize..(off + len) as usize]);
    }
    let short = b
        .read_range(FileType::Pack, &id(1000), (20 << 20) - 5, 10)
        .unwrap_err();
    assert_eq!(short.kind, ErrorKind::ShortRead, "{short}");
    let past = b
        .read_range(FileType::Pack, &id(1000), 30 << 20, 10)
        .unwrap_err();
    assert_eq!(past.kind, ErrorKind::ShortRead);
}

#[test]
fn listings_are_paginated() {
    let tmp = tempfile::tempdir().unwrap();
    let server = S3Server::start(&tmp.path().join("s3"));
    server.bucket("pages");
    let b = Arc::new(backend(&server, "pages", "r"));
    // More objects than one page of a listing (1,000) holds.
    let n = 1_150u64;
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let b = b.clone();
            std::thread::spawn(move || {
                for i in (t..n).step_by(8) {
                    b.write(FileType::Index, &id(i), &i.to_le_bytes()).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut names: Vec<String> = b
        .list(FileType::Index)
        .unwrap()
        .into_iter()
        .map(|f| {
            assert_eq!(f.size, 8);
            f.name
        })
        .collect();
    names.sort();
    let mut want: Vec<String> = (0..n).map(id).collect();
    want.sort();
    assert_eq!(names, want);
}

#[test]
fn user_errors_are_clear_and_not_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let server = S3Server::start(&tmp.path().join("s3"));
    server.bucket("errs");
    backend(&server, "errs", "r").create().unwrap();

    let start = Instant::now();
    let wrong = S3Backend::open(&s3_location(&server, "errs", "r"), &options("wrong")).unwrap();
    let e = wrong.read(FileType::Config, "config").unwrap_err();
    assert_eq!(e.kind, ErrorKind::PermissionDenied, "{e}");
    let msg = e.to_string();
    assert!(msg.contains("AWS_SECRET_ACCESS_KEY"), "{msg}");
    assert!(msg.contains("s3:http://127.0.0.1"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");

    let e = backend(&server, "no-such-bucket", "r")
        .list(FileType::Snapshot)
        .unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert!(!e.is_transient(), "{e}");

    // Nothing listens on this port.
    let port = arca_testkit::s3d::free_port();
    let loc = S3Location {
        endpoint: format!("http://127.0.0.1:{port}"),
        bucket: "errs".into(),
        prefix: "r".into(),
    };
    let e = S3Backend::open(&loc, &options(SECRET_KEY))
        .unwrap()
        .read(FileType::Config, "config")
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
    assert!(!e.is_transient(), "{msg}");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

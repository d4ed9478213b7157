//! The command line's global options and profile checks as the web interface applies them:
//! `--retry-lock`, unknown sections of a profile, `files-from` patterns that match nothing.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

fn job(s: &arca_ui::Server, url: &str, body: serde_json::Value) -> serde_json::Value {
    let r = post(s, url, &body);
    assert_eq!(r.status, 202, "{url}: {}", r.text());
    wait_job(s, r.json()["job"]["id"].as_u64().unwrap())
}

/// With `--retry-lock`, a job that finds the repository locked tries again until the lock
/// goes, and when it does not go in time says how long it tried (it failed at once).
#[test]
fn retry_lock_makes_jobs_wait_for_the_lock() {
    let f = Fixture::new();
    let s = arca_ui::Server::start(arca_ui::UiOptions {
        retry_lock: Some(Duration::from_secs(30)),
        ..f.options(Some(PASSWORD))
    })
    .unwrap();
    let repo = arca_repo::Repository::open(
        std::sync::Arc::new(arca_backend::LocalBackend::new(&f.repo)),
        PASSWORD.as_bytes(),
    )
    .unwrap();
    let held = repo
        .lock_for(arca_repo::LockKind::Exclusive, "prune")
        .unwrap();
    let started = Instant::now();
    let freed = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        drop(held);
    });
    let j = job(&s, "/api/check", json!({}));
    freed.join().unwrap();
    assert_eq!(j["state"], "done", "{j}");
    assert!(started.elapsed() >= Duration::from_millis(1500));
    drop(s);

    let s = arca_ui::Server::start(arca_ui::UiOptions {
        retry_lock: Some(Duration::from_secs(1)),
        ..f.options(Some(PASSWORD))
    })
    .unwrap();
    let held = repo
        .lock_for(arca_repo::LockKind::Exclusive, "prune")
        .unwrap();
    let j = job(&s, "/api/check", json!({}));
    assert_eq!(j["state"], "failed", "{j}");
    let error = j["error"].as_str().unwrap();
    assert!(
        error.contains("locked") && error.contains("(--retry-lock)"),
        "{j}"
    );
    drop(held);
}

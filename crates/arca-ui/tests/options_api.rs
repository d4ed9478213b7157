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

/// A job waiting out `--retry-lock` stops waiting when it is cancelled (it waited until the
/// lock went or the time was over).
#[test]
fn a_job_waiting_for_the_lock_can_be_cancelled() {
    let f = Fixture::new();
    let s = arca_ui::Server::start(arca_ui::UiOptions {
        retry_lock: Some(Duration::from_secs(120)),
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
    let r = post(&s, "/api/check", &json!({}));
    assert_eq!(r.status, 202, "{}", r.text());
    let id = r.json()["job"]["id"].as_u64().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let started = Instant::now();
    let c = post(&s, &format!("/api/jobs/{id}/cancel"), &json!({}));
    assert_eq!(c.json()["cancel_requested"], true, "{}", c.text());
    let j = wait_job(&s, id);
    assert_eq!(j["state"], "cancelled", "{j}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(held);
}

/// A `files-from` pattern of a profile that matches no file is skipped with the warning
/// `arca -P NAME backup` gives, in the backup job's log (and the profile's listing); the
/// backup runs with the other lines (it was skipped unsaid).
#[test]
fn a_files_from_pattern_that_matches_nothing_is_warned_about() {
    let f = Fixture::new();
    let list = f.tmp.path().join("list");
    let nothing = f.tmp.path().join("nowhere").join("*.none");
    std::fs::write(
        &list,
        format!("{}\n{}\n", f.src.display(), nothing.display()),
    )
    .unwrap();
    std::fs::write(
        f.profiles.join("listed.toml"),
        format!(
            "[backup]\nfiles-from = [{:?}]\n",
            list.display().to_string()
        ),
    )
    .unwrap();
    let s = f.start();
    let warning = format!(
        "warning: {}: the pattern of {} matches no file; skipped",
        nothing.display(),
        list.display()
    );
    let listed = get(&s, "/api/profiles").json();
    let p = listed["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "listed")
        .unwrap()
        .clone();
    assert_eq!(p["problem"], serde_json::Value::Null, "{p}");
    assert_eq!(p["warnings"].as_array().unwrap().len(), 1, "{p}");
    let j = job(&s, "/api/backup", json!({"profile": "listed"}));
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["log"][0], json!(warning), "{j}");
}

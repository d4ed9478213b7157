//! The forget form and API's keep rules beyond the counts: the `keep_within_*` spans of
//! `arca forget --keep-within-hourly/daily/weekly/monthly/yearly`.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::json;

/// `keep_within_hourly..yearly` are taken by the preview, the job and the form (they were
/// refused as unknown fields, so the web interface could not apply the CLI's policy).
#[test]
fn keep_within_spans_in_the_form_the_preview_and_the_job() {
    let f = Fixture::new();
    let s = f.start();
    // A third snapshot of the same host and paths (the fixture has two).
    let r = post(&s, "/api/backup", &json!({"profile": "home"}));
    assert_eq!(r.status, 202, "{}", r.text());
    let j = wait_job(&s, r.json()["job"]["id"].as_u64().unwrap());
    assert_eq!(j["state"], "done", "{j}");
    let r = get(&s, "/api/forget/preview?keep_within_yearly=1y");
    assert_eq!(r.status, 200, "{}", r.text());
    let p = r.json();
    assert_eq!(p["policy"], "keep yearly snapshots within 1y", "{p}");
    // The newest of the year, and the oldest snapshot (restic keeps it too); the middle goes.
    let groups = p["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{p}");
    let reasons: Vec<_> = groups[0]["keep"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["reasons"].clone())
        .collect();
    assert_eq!(
        reasons,
        [
            json!(["yearly within 1y"]),
            json!(["oldest yearly within 1y"])
        ],
        "{p}"
    );
    let remove = p["remove"].as_array().unwrap().clone();
    assert_eq!(remove.len(), 1, "{p}");
    // Each span is a field of its own, named when invalid.
    for (k, name) in [
        ("keep_within_hourly", "hourly"),
        ("keep_within_daily", "daily"),
        ("keep_within_weekly", "weekly"),
        ("keep_within_monthly", "monthly"),
    ] {
        let r = get(&s, &format!("/api/forget/preview?{k}=10y"));
        assert_eq!(r.status, 200, "{k}: {}", r.text());
        let policy = format!("keep {name} snapshots within 10y");
        assert_eq!(r.json()["policy"], policy, "{k}");
    }
    let r = get(&s, "/api/forget/preview?keep_within_daily=7x");
    assert_eq!(r.status, 400, "{}", r.text());
    let e = r.json()["error"].as_str().unwrap().to_string();
    assert!(e.starts_with("keep within daily: "), "{e}");
    // The form has the five spans; the preview page's button carries the one given.
    let page = get(&s, "/forget").text();
    for k in [
        "keep_within",
        "keep_within_hourly",
        "keep_within_daily",
        "keep_within_weekly",
        "keep_within_monthly",
        "keep_within_yearly",
    ] {
        assert!(page.contains(&format!("name=\"{k}\"")), "{k}: {page}");
    }
    let page = get(&s, "/forget?preview=1&keep_within_yearly=1y").text();
    assert!(
        page.contains("<input type=\"hidden\" name=\"keep_within_yearly\" value=\"1y\">"),
        "{page}"
    );
    // The job applies the same policy and removes what the preview showed.
    let r = post(
        &s,
        "/api/forget",
        &json!({"keep_within_yearly": "1y", "expect": remove}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let j = wait_job(&s, r.json()["job"]["id"].as_u64().unwrap());
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["result"]["removed"], json!(remove), "{j}");
    assert_eq!(
        j["result"]["policy"], "keep yearly snapshots within 1y",
        "{j}"
    );
    assert_eq!(get(&s, "/api/overview").json()["snapshots"], 2);
}

/// A damaged snapshot file is named by the forget preview (JSON and page) and by the job's
/// log and result, as `arca forget` names it; the job removes what the preview showed and
/// leaves the damaged file (the server only warned on its own stderr).
#[test]
fn forget_names_a_damaged_snapshot_file_it_leaves_out() {
    let f = Fixture::new();
    let s = f.start();
    // A third snapshot of the same host and paths, and one of the three damaged.
    let r = post(&s, "/api/backup", &json!({"profile": "home"}));
    assert_eq!(r.status, 202, "{}", r.text());
    let j = wait_job(&s, r.json()["job"]["id"].as_u64().unwrap());
    assert_eq!(j["state"], "done", "{j}");
    let list = get(&s, "/api/snapshots?sort=time&order=asc").json();
    let id = list["snapshots"][0]["id"].as_str().unwrap().to_string();
    let file = f.repo.join("snapshots").join(&id);
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&file, &bytes).unwrap();

    let p = get(&s, "/api/forget/preview?keep_last=1").json();
    assert_eq!(p["damaged"].as_array().unwrap().len(), 1, "{p}");
    assert_eq!(p["damaged"][0]["id"], id.as_str(), "{p}");
    let remove = p["remove"].as_array().unwrap().clone();
    assert_eq!(remove.len(), 1, "{p}");
    let page = get(&s, "/forget?preview=1&keep_last=1").text();
    assert!(
        page.contains("1 snapshot file could not be read and is left out"),
        "{page}"
    );
    assert!(page.contains(&id[..8]), "{page}");
    let r = post(
        &s,
        "/api/forget",
        &json!({"keep_last": "1", "expect": remove}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let j = wait_job(&s, r.json()["job"]["id"].as_u64().unwrap());
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["result"]["removed"], json!(remove), "{j}");
    assert_eq!(j["result"]["damaged"][0]["id"], id.as_str(), "{j}");
    let logged = j["log"].as_array().unwrap().iter().any(|l| {
        l.as_str()
            .is_some_and(|l| l.contains("damaged snapshot file") && l.contains(&id[..8]))
    });
    assert!(logged, "{j}");
    assert!(file.exists(), "the damaged file stays");
}

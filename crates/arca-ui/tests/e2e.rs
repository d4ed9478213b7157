//! Browser end-to-end tests: serves a repository holding the every-kind tree and runs
//! crates/arca-ui/e2e (pytest + Playwright) in Debian's headless Chromium against it; then
//! compares the folder the browser restored with the original. Skips, saying why, when
//! Chromium, Python's playwright or pytest is missing. `ARCA_UI_SCREENSHOTS=DIR` keeps the
//! screenshots there (docs/ui is made that way).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

fn python_has(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Skips the test with `why`, or fails it when `ARCA_REQUIRE_E2E` is set (CI installs
/// everything, so a skip there would hide a broken install).
fn skip(why: &str) {
    assert!(
        std::env::var_os("ARCA_REQUIRE_E2E").is_none(),
        "ARCA_REQUIRE_E2E is set but {why}"
    );
    println!("skipped: {why}");
}

#[test]
fn in_a_real_browser() {
    let Some(browser) = chromium() else {
        skip("no Chromium (apt-get install chromium)");
        return;
    };
    for m in ["playwright", "pytest"] {
        if !python_has(m) {
            skip(&format!(
                "Python module {m} is missing (pip install playwright pytest)"
            ));
            return;
        }
    }
    let f = Fixture::new();
    // An older snapshot of another host: the forget page's "group by nothing" then removes
    // other snapshots than grouping by host and paths does.
    let repo = arca_repo::Repository::open(
        std::sync::Arc::new(arca_backend::LocalBackend::new(&f.repo)),
        PASSWORD.as_bytes(),
    )
    .unwrap();
    let opts = arca_backup::BackupOptions {
        paths: vec![f.src.join("dir")],
        hostname: Some("elsewhere".into()),
        time: Some(chrono::DateTime::parse_from_rfc3339("2001-01-01T00:00:00Z").unwrap()),
        ..Default::default()
    };
    let p = arca_backup::Progress::default();
    arca_backup::backup(&repo, &opts, &p, &|_: &arca_backup::Warning| {}).unwrap();
    drop(repo);
    let s = f.start();
    let shots = std::env::var_os("ARCA_UI_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| f.tmp.path().join("shots"));
    std::fs::create_dir_all(&shots).unwrap();
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e");
    let out = Command::new("python3")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"])
        .arg(&suite)
        .env("ARCA_UI_URL", s.url())
        .env("ARCA_UI_BASE", format!("http://{}", s.addr()))
        .env("ARCA_UI_SRC", &f.src)
        .env("ARCA_UI_TMP", f.tmp.path())
        .env("ARCA_UI_CHROMIUM", &browser)
        .env("ARCA_UI_SHOTS", &shots)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "the browser tests failed:\n{text}");
    // The folder restored from the page is the original, metadata and all.
    let dir = f.src.join("dir");
    let restored = f
        .tmp
        .path()
        .join("restored-ui")
        .join(dir.strip_prefix("/").unwrap());
    assert_eq!(
        arca_testkit::compare::diff_trees(&dir, &restored),
        Vec::<String>::new()
    );
}

//! The web interface over HTTP, in-process on 127.0.0.1:0: the token (refused, accepted, the
//! cookie), the Host and CSRF checks, the JSON endpoints on a backup of the every-kind tree,
//! downloads byte for byte, and the jobs (restore, backup, check, forget, prune).

#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use common::*;
use serde_json::json;

#[test]
fn the_token_is_needed_on_every_request() {
    let f = Fixture::new();
    let s = f.start();
    let addr = s.addr();
    assert!(
        s.url()
            .starts_with(&format!("http://{addr}/?token={TOKEN}"))
    );
    // Nothing without the token: JSON under /api/, a page elsewhere, the assets too.
    let r = request(addr, "GET", "/api/overview", &[], b"");
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"], "this page needs the access token");
    let r = request(addr, "GET", "/", &[], b"");
    assert_eq!(r.status, 401);
    assert!(r.text().contains("Access refused"), "{}", r.text());
    assert_eq!(request(addr, "GET", "/static/app.js", &[], b"").status, 401);
    let r = request(
        addr,
        "GET",
        "/api/overview",
        &[("Authorization", "Bearer nope")],
        b"",
    );
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (401, Some("wrong access token"))
    );
    let r = request(addr, "GET", "/api/overview?token=nope", &[], b"");
    assert_eq!(r.status, 401);
    // The token in the address once: a cookie, and the token leaves the address bar.
    let r = request(
        addr,
        "GET",
        &format!("/snapshots?token={TOKEN}&sort=host"),
        &[],
        b"",
    );
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/snapshots?sort=host"));
    // Never to another site (`//host/x` is a protocol-relative address).
    let r = request(
        addr,
        "GET",
        &format!("//evil.example/x?token={TOKEN}"),
        &[],
        b"",
    );
    assert_eq!(
        r.header("location"),
        Some("/evil.example/x"),
        "{}",
        r.status
    );
    let cookie = r.header("set-cookie").unwrap().to_string();
    let port = addr.port();
    // The cookie goes to every port of 127.0.0.1 (cookies ignore ports): it holds a session
    // secret of this server, not the printed token.
    let session = cookie
        .strip_prefix(&format!("arca_ui_{port}="))
        .and_then(|c| c.strip_suffix("; Path=/; HttpOnly; SameSite=Strict"))
        .unwrap_or_else(|| panic!("{cookie}"));
    assert_eq!(session.len(), 64, "{cookie}");
    assert_ne!(session, TOKEN);
    let jar = format!("arca_ui_{port}={session}");
    assert_eq!(jar, session_jar(addr), "one secret per server");
    // The token is not the cookie's value.
    let r = request(
        addr,
        "GET",
        "/api/status",
        &[("Cookie", &format!("arca_ui_{port}={TOKEN}"))],
        b"",
    );
    assert_eq!(r.status, 401);
    let r = request(addr, "GET", "/", &[("Cookie", &jar)], b"");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("<h1>Repository overview</h1>"));
    assert!(
        r.header("content-security-policy")
            .unwrap()
            .contains("script-src 'self'")
    );
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
    let r = request(addr, "GET", "/static/app.css", &[("Cookie", &jar)], b"");
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("text/css; charset=utf-8"))
    );
    // Another Host (DNS rebinding) is refused even with the token.
    let auth = format!("Bearer {TOKEN}");
    let r = request(
        addr,
        "GET",
        "/api/overview",
        &[
            ("Authorization", &auth),
            ("Host", &format!("evil.example:{port}")),
        ],
        b"",
    );
    assert_eq!(r.status, 403);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("unexpected Host header")
    );
    assert_eq!(
        request(
            addr,
            "GET",
            "/api/status",
            &[
                ("Authorization", &auth),
                ("Host", &format!("localhost:{port}"))
            ],
            b""
        )
        .status,
        200
    );
}

#[test]
fn posts_need_the_csrf_token_and_this_origin() {
    let f = Fixture::new();
    let s = f.start();
    let addr = s.addr();
    let jar = session_jar(addr);
    let page = request(addr, "GET", "/check", &[("Cookie", &jar)], b"").text();
    let csrf = page
        .split("name=\"arca-csrf\" content=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string();
    assert_eq!(csrf.len(), 64);
    // The cookie alone (what a cross-site form would carry) is not enough.
    let r = request(addr, "POST", "/api/check", &[("Cookie", &jar)], b"{}");
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["error"],
        "cross-site request refused: missing or wrong X-Arca-CSRF header"
    );
    let r = request(
        addr,
        "POST",
        "/api/check",
        &[("Cookie", &jar), ("X-Arca-CSRF", "0000")],
        b"{}",
    );
    assert_eq!(r.status, 403);
    let r = request(
        addr,
        "POST",
        "/api/check",
        &[
            ("Cookie", &jar),
            ("X-Arca-CSRF", &csrf),
            ("Origin", "http://evil.example"),
        ],
        b"{}",
    );
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (
            403,
            Some("cross-site request refused: Origin is not this server")
        )
    );
    let origin = format!("http://{addr}");
    let r = request(
        addr,
        "POST",
        "/api/check",
        &[
            ("Cookie", &jar),
            ("X-Arca-CSRF", &csrf),
            ("Origin", &origin),
        ],
        b"{}",
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let id = r.json()["job"]["id"].as_u64().unwrap();
    let j = wait_job(&s, id);
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["result"]["ok"], true);
    assert_eq!(j["result"]["snapshots"], 2);
    // Other methods are refused; a script with the bearer token needs no CSRF header.
    let auth = format!("Bearer {TOKEN}");
    assert_eq!(
        request(
            addr,
            "DELETE",
            "/api/jobs/1",
            &[("Authorization", &auth)],
            b""
        )
        .status,
        405
    );
    // All data and a part of it: refused, as the command line refuses the pair (the part
    // was read, and "all" dropped without a word).
    let r = post(
        &s,
        "/api/check",
        &json!({"read_data": true, "read_data_subset": "1/5"}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("exclude each other"), "{}", r.text());
    assert_eq!(post(&s, "/api/check", &json!({})).status, 202);
    // The overview now shows the last check.
    assert_eq!(get(&s, "/api/overview").json()["last_check"]["ok"], true);
}

/// A damaged snapshot file is left out of the overview and the snapshot list, and both say
/// so, naming it, as the command line does (the server only warned on its own stderr, and the
/// pages showed one snapshot fewer without a word).
#[test]
fn a_damaged_snapshot_file_is_named_on_the_overview_and_the_list() {
    let f = Fixture::new();
    let s = f.start();
    let list = get(&s, "/api/snapshots").json();
    assert_eq!(list["damaged"], json!([]));
    let id = list["snapshots"][0]["id"].as_str().unwrap().to_string();
    let file = f.repo.join("snapshots").join(&id);
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&file, &bytes).unwrap();

    let o = get(&s, "/api/overview").json();
    assert_eq!(o["snapshots"], 1);
    let l = get(&s, "/api/snapshots").json();
    assert_eq!(l["snapshots"].as_array().unwrap().len(), 1);
    for damaged in [&o["damaged"], &l["damaged"]] {
        assert_eq!(damaged.as_array().unwrap().len(), 1, "{damaged}");
        assert_eq!(damaged[0]["id"], id.as_str());
        let message = damaged[0]["message"].as_str().unwrap();
        assert!(message.contains("damaged snapshot file"), "{message}");
        assert!(
            message.contains(&format!("arca forget {}", &id[..8])),
            "{message}"
        );
    }
    for page in ["/", "/snapshots"] {
        let text = get(&s, page).text();
        assert!(
            text.contains("1 snapshot file could not be read and is left out"),
            "{page}: {text}"
        );
        assert!(text.contains(&id[..8]), "{page}: {text}");
    }
}

#[test]
fn overview_snapshots_tree_and_diff() {
    let f = Fixture::new();
    let s = f.start();
    let o = get(&s, "/api/overview").json();
    assert_eq!(o["snapshots"], 2);
    assert_eq!(o["location"], f.repo.display().to_string());
    assert_eq!(o["files"]["snapshots"]["count"], 2);
    assert!(o["size_on_disk"].as_u64().unwrap() > 700_000);
    // Two snapshots of the same tree: the data is stored about once.
    let dedup = o["dedup_ratio"].as_f64().unwrap();
    assert!((1.9..2.1).contains(&dedup), "{dedup}");
    assert_eq!(o["last_backups"].as_array().unwrap().len(), 1);
    assert_eq!(o["last_backups"][0]["count"], 2);
    let all = get(&s, "/api/snapshots?sort=time&order=asc").json();
    let list = all["snapshots"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["tags"], json!(["first"]));
    assert!(list[0]["time"].as_str() <= list[1]["time"].as_str());
    assert_eq!(all["tags"], json!(["first"]));
    let tagged = get(&s, "/api/snapshots?tag=first").json();
    assert_eq!(tagged["snapshots"].as_array().unwrap().len(), 1);
    // An empty tag is the untagged snapshots (as documented, and as `--tag ''`); it was
    // dropped, and gave every snapshot. The page's "any tag" still means any.
    let untagged = get(&s, "/api/snapshots?tag=").json();
    assert_eq!(
        untagged["snapshots"].as_array().unwrap().len(),
        1,
        "{untagged}"
    );
    assert_eq!(untagged["snapshots"][0]["tags"], json!([]));
    let either = get(&s, "/api/snapshots?tag=first&tag=").json();
    assert_eq!(either["snapshots"].as_array().unwrap().len(), 2, "{either}");
    let page = get(&s, "/snapshots?tag=").text();
    assert_eq!(
        page.matches("first").count(),
        get(&s, "/snapshots").text().matches("first").count()
    );
    let none = get(&s, "/api/snapshots?host=elsewhere").json();
    assert_eq!(none["snapshots"].as_array().unwrap().len(), 0);
    let r = get(&s, "/api/snapshots?sort=color");
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (
            400,
            Some("invalid sort \"color\" (time, host, paths, files, size)")
        )
    );
    // A folder: entries in name order with their kinds, sizes and modes.
    let dir = f.src.join("dir");
    let t = get(&s, &format!("/api/snapshots/latest/tree?path={}", q(&dir))).json();
    let names: Vec<&str> = t["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["hard-2", "link-up", "nested", "text.log"]);
    let log = &t["entries"][3];
    assert_eq!(
        (log["type"].as_str(), log["size"].as_u64()),
        (Some("file"), Some(300_000))
    );
    assert_eq!(t["entries"][1]["link_target"], "..");
    assert_eq!(t["entries"][2]["type"], "dir");
    let root = get(
        &s,
        &format!("/api/snapshots/latest/tree?path={}", q(&f.src)),
    )
    .json();
    let sticky = root["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "sticky")
        .unwrap();
    assert_eq!(sticky["permissions"], "drwxrwxrwt");
    // The name that is not UTF-8 comes back as bytes in path_q.
    let latin = root["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str().unwrap().starts_with("latin1-"))
        .unwrap();
    assert!(
        latin["path_q"]
            .as_str()
            .unwrap()
            .ends_with("/latin1-%E9t%E9"),
        "{latin}"
    );
    let r = get(
        &s,
        &format!("/api/snapshots/latest/tree?path={}/nothing", q(&f.src)),
    );
    assert_eq!(r.status, 404);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .ends_with("/nothing is not in the snapshot")
    );
    assert_eq!(get(&s, "/api/snapshots/feedbeef/tree").status, 404);
    let r = get(
        &s,
        &format!(
            "/api/snapshots/latest/tree?path={}",
            q(&f.src.join("small.txt"))
        ),
    );
    assert_eq!(r.status, 400);
    // The diff: small.txt changed.
    let first = list[0]["id"].as_str().unwrap();
    let d = get(&s, &format!("/api/diff?a={first}&b=latest")).json();
    let changes = d["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{d}");
    assert_eq!(changes[0]["modifier"], "M");
    assert_eq!(changes[0]["path"], format!("{}/small.txt", f.src.display()));
    assert_eq!(d["changed_files"], 1);
    // The pages render the same data.
    let page = get(&s, &format!("/snapshots/latest?path={}", q(&dir))).text();
    assert!(
        page.contains("text.log") && page.contains("Download this folder (tar)"),
        "{page}"
    );
    let page = get(&s, &format!("/diff?a={first}&b=latest")).text();
    assert!(page.contains("small.txt"));
    let page = get(&s, "/snapshots/nothing-like-this").text();
    assert!(
        page.contains("role=\"alert\"") && page.contains("no snapshot matches"),
        "{page}"
    );
}

#[test]
fn downloads_are_the_files_bytes() {
    let f = Fixture::new();
    let s = f.start();
    for name in [
        &b"dir/nested/random.bin"[..],
        b"latin1-\xe9t\xe9",
        b"sparse.img",
        b"empty",
    ] {
        let p = f.src.join(std::ffi::OsStr::from_bytes(name));
        let r = get(
            &s,
            &format!("/api/snapshots/latest/download?path={}", q(&p)),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.body, std::fs::read(&p).unwrap(), "{}", p.display());
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    }
    let r = get(
        &s,
        &format!(
            "/api/snapshots/latest/download?path={}",
            q(&f.src.join("small.txt"))
        ),
    );
    assert_eq!(
        r.header("content-disposition"),
        Some("attachment; filename=\"small.txt\"; filename*=UTF-8''small%2Etxt")
    );
    // A folder as tar: the archive holds the file's bytes.
    let dir = f.src.join("dir");
    let r = get(
        &s,
        &format!("/api/snapshots/latest/download?path={}&format=tar", q(&dir)),
    );
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, Some("application/x-tar"))
    );
    let log = std::fs::read(dir.join("text.log")).unwrap();
    assert!(r.body.windows(log.len()).any(|w| w == log.as_slice()));
    let r = get(
        &s,
        &format!("/api/snapshots/latest/download?path={}&format=zip", q(&dir)),
    );
    assert_eq!(&r.body[..4], b"PK\x03\x04");
    assert!(
        r.header("content-disposition")
            .unwrap()
            .contains("filename=\"dir.zip\"")
    );
    let r = get(
        &s,
        &format!("/api/snapshots/latest/download?path={}", q(&dir)),
    );
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("is a folder, not a file")
    );
    // A FIFO alone as zip would be an empty archive: refused before any byte (it was an
    // empty zip, with success), as tar it is an entry.
    let fifo = f.src.join("fifo");
    let r = get(
        &s,
        &format!(
            "/api/snapshots/latest/download?path={}&format=zip",
            q(&fifo)
        ),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .ends_with("is a fifo: a zip archive cannot hold it (download it with format=tar)"),
        "{}",
        r.text()
    );
    let r = get(
        &s,
        &format!(
            "/api/snapshots/latest/download?path={}&format=tar",
            q(&fifo)
        ),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = get(
        &s,
        &format!("/api/snapshots/latest/download?path={}&format=rar", q(&dir)),
    );
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("invalid format \"rar\" (raw, tar, zip)"))
    );
    // A download holds a shared lock, as `arca dump` does: not beside a prune (hunt 29).
    let repo = arca_repo::Repository::open(
        std::sync::Arc::new(arca_backend::LocalBackend::new(&f.repo)),
        PASSWORD.as_bytes(),
    )
    .unwrap();
    let prune = repo
        .lock_for(arca_repo::LockKind::Exclusive, "prune")
        .unwrap();
    let url = format!("/api/snapshots/latest/download?path={}&format=tar", q(&dir));
    let r = get(&s, &url);
    assert_ne!(r.status, 200);
    assert!(
        r.json()["error"].as_str().unwrap().contains("locked"),
        "{}",
        r.text()
    );
    drop(prune);
    assert_eq!(get(&s, &url).status, 200);
    // Errors of page links come as a page.
    let r = get(
        &s,
        &format!("/snapshots/latest/download?path={}/gone", q(&dir)),
    );
    assert_eq!(r.status, 404);
    assert!(r.text().contains("role=\"alert\""));
}

#[test]
fn a_chosen_path_restores_that_entry_alone_and_a_missing_one_is_refused() {
    use std::os::unix::ffi::OsStrExt;
    let f = Fixture::new();
    let odd = f.src.join(std::ffi::OsStr::from_bytes(b"d\xff"));
    let near = f.src.join("dX");
    std::fs::create_dir_all(&odd).unwrap();
    std::fs::create_dir_all(&near).unwrap();
    std::fs::write(odd.join("f"), b"a").unwrap();
    std::fs::write(near.join("g"), b"b").unwrap();
    let s = f.start();
    let j = wait_job(
        &s,
        post(&s, "/api/backup", &json!({"profile": "home"})).json()["job"]["id"]
            .as_u64()
            .unwrap(),
    );
    assert_eq!(j["state"], "done", "{j}");
    // The target holds a folder whose name differs from the chosen one in the byte that
    // is not UTF-8: it is not the snapshot's to restore or clean, even with delete.
    let target = f.tmp.path().join("t");
    let mine = target.join(near.strip_prefix("/").unwrap());
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("g"), b"mine").unwrap();
    std::fs::write(mine.join("extra"), b"extra").unwrap();
    let req = json!({"snapshot": "latest", "paths": [q(&odd)], "target": target, "delete": true});
    let j = wait_job(
        &s,
        post(&s, "/api/restore", &req).json()["job"]["id"]
            .as_u64()
            .unwrap(),
    );
    assert_eq!(j["state"], "done", "{j}");
    let restored = target.join(odd.strip_prefix("/").unwrap());
    assert_eq!(std::fs::read(restored.join("f")).unwrap(), b"a");
    assert_eq!(std::fs::read(mine.join("g")).unwrap(), b"mine");
    assert_eq!(std::fs::read(mine.join("extra")).unwrap(), b"extra");
    // A path or snapshot that is not there is refused before any job starts.
    let gone = json!({"snapshot": "latest", "paths": [q(&f.src.join("gone"))], "target": target});
    let r = post(&s, "/api/restore", &gone);
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(
        r.json()["error"].as_str().unwrap().contains("gone"),
        "{}",
        r.text()
    );
    // An unknown field is refused: a misspelt `"dry-run": true` ran a real restore that
    // deleted in the target (hunt 19).
    let r = post(
        &s,
        "/api/restore",
        &json!({"snapshot": "latest", "paths": [q(&odd)], "target": target, "delete": true, "dry-run": true}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("unknown field `dry-run`"), "{}", r.text());
    assert_eq!(std::fs::read(mine.join("extra")).unwrap(), b"extra");
    for (url, body) in [
        ("/api/check", json!({"read_data": true, "subset": "1/5"})),
        ("/api/backup", json!({"profile": "home", "dryrun": true})),
    ] {
        let r = post(&s, url, &body);
        assert_eq!(r.status, 400, "{url}: {}", r.text());
        assert!(r.text().contains("unknown field"), "{}", r.text());
    }
    let r = post(
        &s,
        "/api/restore",
        &json!({"snapshot": "deadbeef", "target": target}),
    );
    assert_eq!(r.status, 404, "{}", r.text());
    // A target no path can be is refused before any job starts (the job failed later).
    let r = post(
        &s,
        "/api/restore",
        &json!({"snapshot": "latest", "target": "/tmp/a\u{0}b"}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("NUL"), "{}", r.text());
    // Without scripts, the forms post (a form sent by GET put the password in the URL).
    let page = get(&s, "/restore?snapshot=latest").text();
    assert!(
        page.contains("<form method=\"post\" class=\"stack\" data-api=\"/api/restore\""),
        "{page}"
    );
}

#[test]
fn restore_backup_forget_and_prune_jobs() {
    let f = Fixture::new();
    let s = f.start();
    let dir = f.src.join("dir");
    let target = f.tmp.path().join("restored");
    let req = json!({"snapshot": "latest", "paths": [q(&dir)], "target": target, "dry_run": true});
    let r = post(&s, "/api/restore", &req);
    assert_eq!(r.status, 202, "{}", r.text());
    let j = wait_job(&s, r.json()["job"]["id"].as_u64().unwrap());
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["result"]["dry_run"], true);
    assert!(j["result"]["planned"].as_array().unwrap().len() >= 4, "{j}");
    assert!(!target.exists(), "a dry run creates nothing");
    let mut real = req.clone();
    real["dry_run"] = json!(false);
    let j = wait_job(
        &s,
        post(&s, "/api/restore", &real).json()["job"]["id"]
            .as_u64()
            .unwrap(),
    );
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["result"]["errors"], 0);
    // The power-cut marker is where the command line said (--cache-dir).
    assert!(
        std::fs::read_dir(f.tmp.path().join("markers"))
            .unwrap()
            .next()
            .is_some()
    );
    assert_eq!(j["progress"]["fraction"], 1.0);
    let restored = target.join(dir.strip_prefix("/").unwrap());
    assert_eq!(
        arca_testkit::compare::diff_trees(&dir, &restored),
        Vec::<String>::new()
    );
    assert!(
        !target
            .join(f.src.strip_prefix("/").unwrap())
            .join("small.txt")
            .exists()
    );
    // Bad input is refused before a job starts, with the value named.
    let r = post(
        &s,
        "/api/restore",
        &json!({"snapshot": "latest", "target": "relative/dir"}),
    );
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (
            400,
            Some("the target folder must be an absolute path, not \"relative/dir\"")
        )
    );
    let r = post(
        &s,
        "/api/restore",
        &json!({"snapshot": "latest", "target": "/tmp/x", "overwrite": "sometimes"}),
    );
    assert_eq!(r.status, 400);
    // A failing restore says why (the target is a file).
    let file = f.tmp.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let j = wait_job(
        &s,
        post(
            &s,
            "/api/restore",
            &json!({"snapshot": "latest", "target": file}),
        )
        .json()["job"]["id"]
            .as_u64()
            .unwrap(),
    );
    assert_eq!(j["state"], "failed");
    assert!(
        j["error"].as_str().unwrap().contains("not a directory"),
        "{j}"
    );
    // The profile's backup reaches 100% and adds a snapshot.
    let profiles = get(&s, "/api/profiles").json();
    assert_eq!(profiles["profiles"][0]["name"], "home");
    let r = post(&s, "/api/backup", &json!({"profile": "home"}));
    assert_eq!(r.status, 202, "{}", r.text());
    let j = wait_job(&s, r.json()["job"]["id"].as_u64().unwrap());
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["progress"]["fraction"], 1.0);
    assert_eq!(j["result"]["complete"], true);
    assert_eq!(get(&s, "/api/overview").json()["snapshots"], 3);
    let r = post(&s, "/api/backup", &json!({"profile": "nope"}));
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("profile \"nope\" not found")
    );
    // A policy that keeps nothing of a group (a tag no snapshot has) is refused.
    let r = get(&s, "/api/forget/preview?keep_tag=nosuchtag");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("keeps none of the 3 snapshot(s)"),
        "{}",
        r.text()
    );
    // Forget: the preview, a refusal when the snapshots changed since, then removal + prune.
    let p = get(&s, "/api/forget/preview?keep_last=1").json();
    // The token in the query is no policy field (it was refused as one).
    let with_token = get(
        &s,
        &format!("/api/forget/preview?keep_last=1&token={TOKEN}"),
    );
    assert_eq!(with_token.status, 200, "{}", with_token.text());
    assert_eq!(with_token.json()["remove"], p["remove"]);
    let remove = p["remove"].as_array().unwrap().clone();
    assert_eq!(remove.len(), 2, "{p}");
    assert_eq!(
        p["groups"][0]["keep"][0]["reasons"],
        json!(["last snapshot"])
    );
    // The preview page's button carries the grouping the preview used.
    let page = get(&s, "/forget?preview=1&keep_last=1&group_by=host").text();
    assert!(page.contains("name=\"group_by\" value=\"host\""), "{page}");
    let r = post(
        &s,
        "/api/forget",
        &json!({"keep_last": 1, "expect": [remove[0]], "prune": true}),
    );
    let j = wait_job(&s, r.json()["job"]["id"].as_u64().unwrap());
    assert_eq!(j["state"], "failed");
    assert_eq!(
        j["error"],
        "the snapshots changed since the preview: nothing was removed; preview again"
    );
    assert_eq!(get(&s, "/api/overview").json()["snapshots"], 3);
    let r = post(
        &s,
        "/api/forget",
        &json!({"keep_last": "1", "expect": remove, "prune": true}),
    );
    let j = wait_job(&s, r.json()["job"]["id"].as_u64().unwrap());
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["result"]["removed"].as_array().unwrap().len(), 2);
    assert!(j["result"]["prune"]["freed_bytes"].is_u64(), "{j}");
    assert_eq!(get(&s, "/api/overview").json()["snapshots"], 1);
    let r = get(&s, "/api/forget/preview");
    assert_eq!(r.status, 400);
    // A job without keep rules is refused before it starts (and takes no lock).
    let r = post(&s, "/api/forget", &json!({"expect": []}));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.json()["error"].as_str().unwrap().contains("keep rule"));
    // Fields the API does not know are refused, not ignored (another policy would apply).
    let r = get(&s, "/api/forget/preview?keep_minutely=7");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains("unknown field(s) keep_minutely"),
        "{}",
        r.text()
    );
    let r = post(
        &s,
        "/api/forget",
        &json!({"keep_last": 1, "tag": "a", "expect": []}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("unknown field(s) tag"), "{}", r.text());
    // The list of what the job takes names its own fields too.
    assert!(r.text().contains(", expect, prune"), "{}", r.text());
    // A field given twice in the preview's query is refused: the first value was taken and
    // the other dropped (`host=a&host=b` previewed host a alone).
    for q in ["keep_last=1&keep_last=5", "keep_last=1&host=a&host=b"] {
        let r = get(&s, &format!("/api/forget/preview?{q}"));
        assert_eq!(r.status, 400, "{q}: {}", r.text());
        assert!(r.text().contains("given more than once"), "{}", r.text());
    }
    // The list repeats (here refused only for keeping nothing).
    let r = get(&s, "/api/forget/preview?keep_tag=a&keep_tag=b");
    assert!(
        r.text().contains("tags [a] or [b] keeps none"),
        "{}",
        r.text()
    );
    // An empty grouping groups by nothing, in the preview as in the job and the CLI.
    let p = get(&s, "/api/forget/preview?keep_last=1").json();
    assert!(p["groups"][0]["group_key"]["hostname"].is_string(), "{p}");
    let p = get(&s, "/api/forget/preview?keep_last=1&group_by=").json();
    assert!(p["groups"][0]["group_key"]["hostname"].is_null(), "{p}");
    let r = get(&s, "/api/forget/preview?keep_daily=-5");
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("keep daily: invalid keep count \"-5\""),
        "{}",
        r.text()
    );
    // A misspelt or missing dry_run is refused, never read as a real prune (hunt 19).
    let jobs_before = get(&s, "/api/jobs").json()["jobs"]
        .as_array()
        .unwrap()
        .len();
    for body in [json!({}), json!({"dry-run": true}), json!({"dryrun": true})] {
        let r = post(&s, "/api/prune", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert!(r.text().contains("dry"), "{}", r.text());
    }
    let jobs_after = get(&s, "/api/jobs").json()["jobs"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(jobs_before, jobs_after);
    let j = wait_job(
        &s,
        post(&s, "/api/prune", &json!({"dry_run": true})).json()["job"]["id"]
            .as_u64()
            .unwrap(),
    );
    assert_eq!(
        (j["state"].as_str(), j["result"]["dry_run"].as_bool()),
        (Some("done"), Some(true)),
        "{j}"
    );
    // Every job is listed, newest first; the pages show them.
    let jobs = get(&s, "/api/jobs").json();
    assert_eq!(jobs["jobs"][0]["kind"], "prune");
    assert!(get(&s, "/jobs").text().contains("dry run: prune"));
    assert_eq!(get(&s, "/api/jobs/999").status, 404);
    // What the framework refuses comes as the API's JSON too.
    let r = get(&s, "/api/jobs/%FF");
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"].as_str().unwrap().contains("UTF-8"),
        "{}",
        r.text()
    );
    let r = post(&s, "/api/status", &json!({}));
    assert_eq!(r.status, 405);
    assert_eq!(r.json()["error"], "method not allowed");
    // A job that has ended is not asked to stop (it said cancel_requested: true).
    let ended = post(&s, "/api/jobs/1/cancel", &json!({})).json();
    assert_ne!(ended["state"], "running", "{ended}");
    assert_eq!(ended["cancel_requested"], false, "{ended}");
}

#[test]
fn snapshots_sort_by_their_moment_whatever_their_time_zone() {
    let f = Fixture::new();
    let repo = arca_repo::Repository::open(
        std::sync::Arc::new(arca_backend::LocalBackend::new(&f.repo)),
        PASSWORD.as_bytes(),
    )
    .unwrap();
    let (_, s) = repo.find_snapshot("latest", &Default::default()).unwrap();
    // An hour later in Tokyo, then two hours later in New York: text order is the other way.
    for (hours, offset) in [(1, 9), (2, -5)] {
        let zone = chrono::FixedOffset::east_opt(offset * 3600).unwrap();
        let mut later = s.clone();
        later.time = (s.time + chrono::Duration::hours(hours)).with_timezone(&zone);
        later.hostname = "tz".into();
        repo.save_snapshot(&later).unwrap();
    }
    let server = f.start();
    let v = get(&server, "/api/snapshots?host=tz").json();
    let times: Vec<&str> = v["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["time"].as_str().unwrap())
        .collect();
    assert_eq!(times.len(), 2);
    assert!(times[0].ends_with("-05:00"), "newest first: {times:?}");
    let o = get(&server, "/api/overview").json();
    let first = &o["last_backups"][0];
    assert_eq!(first["hostname"], "tz", "{o}");
    assert!(
        first["snapshot"]["time"]
            .as_str()
            .unwrap()
            .ends_with("-05:00")
    );
}

#[test]
fn a_wrong_password_is_shown_and_the_page_opens_the_repository() {
    let f = Fixture::new();
    let s = arca_ui::Server::start(f.options(Some("not the password"))).unwrap();
    let r = get(&s, "/api/overview");
    assert_eq!(r.status, 503);
    let e = r.json();
    assert_eq!(e["needs_password"], true);
    assert_eq!(
        e["error"],
        format!(
            "wrong password or no key found for repository {}",
            f.repo.display()
        )
    );
    let r = get(&s, "/");
    assert_eq!((r.status, r.header("location")), (303, Some("/open")));
    let page = get(&s, "/open").text();
    assert!(page.contains("wrong password or no key found") && page.contains("type=\"password\""));
    let r = post(&s, "/api/open", &json!({"password": "still wrong"}));
    assert_eq!(r.status, 401);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("wrong password")
    );
    assert_eq!(
        post(&s, "/api/open", &json!({"password": PASSWORD})).status,
        200
    );
    assert_eq!(get(&s, "/api/overview").json()["snapshots"], 2);
    // A wrong password sent later leaves the open repository open.
    assert_eq!(
        post(&s, "/api/open", &json!({"password": "wrong again"})).status,
        401
    );
    assert_eq!(get(&s, "/api/overview").status, 200);
    // An unreachable repository is a message too.
    let gone = Fixture {
        repo: f.tmp.path().join("no-such-repo"),
        ..Fixture::new()
    };
    let s2 = arca_ui::Server::start(gone.options(Some(PASSWORD))).unwrap();
    let r = get(&s2, "/api/overview");
    assert_eq!(r.status, 503);
    assert!(
        r.json()["error"].as_str().unwrap().contains("no-such-repo"),
        "{}",
        r.text()
    );
    // Opening it is not a wrong password (401 sent scripts to check the token).
    let r = post(&s2, "/api/open", &json!({"password": PASSWORD}));
    assert_eq!(r.status, 503, "{}", r.text());
    drop(f);
}

#[test]
fn listening_beyond_loopback_needs_tls() {
    let f = Fixture::new();
    let mut o = f.options(None);
    o.listen = Some("0.0.0.0:0".into());
    let e = arca_ui::Server::start(o).err().unwrap().to_string();
    assert!(
        e.starts_with("refusing to listen on 0.0.0.0:0 without TLS"),
        "{e}"
    );
    let mut o = f.options(None);
    o.listen = Some("0.0.0.0:0".into());
    o.tls = Some((
        f.tmp.path().join("missing.pem"),
        f.tmp.path().join("key.pem"),
    ));
    let e = arca_ui::Server::start(o).err().unwrap().to_string();
    assert!(e.starts_with("TLS certificate"), "{e}");
    let mut o = f.options(None);
    o.listen = Some("here".into());
    assert!(arca_ui::Server::start(o).is_err());
    // 127.0.0.1 written as an IPv4-mapped IPv6 address is loopback.
    let mut o = f.options(None);
    o.listen = Some("[::ffff:127.0.0.1]:0".into());
    assert!(arca_ui::Server::start(o).is_ok());
    let _ = Path::new("/");
}

/// Under `arca --no-lock ui`, forget and prune still lock exclusively, as on the CLI: a prune
/// job took no lock and deleted the packs of a backup running meanwhile (hunt 20). A prune dry
/// run changes nothing and still skips it.
#[test]
fn no_lock_never_lets_prune_or_forget_run_beside_a_backup() {
    let f = Fixture::new();
    let s = arca_ui::Server::start(arca_ui::UiOptions {
        no_lock: true,
        ..f.options(Some(PASSWORD))
    })
    .unwrap();
    let repo = arca_repo::Repository::open(
        std::sync::Arc::new(arca_backend::LocalBackend::new(&f.repo)),
        PASSWORD.as_bytes(),
    )
    .unwrap();
    let backup = repo
        .lock_for(arca_repo::LockKind::Shared, "backup")
        .unwrap();
    let job = |url: &str, body: serde_json::Value| {
        let r = post(&s, url, &body);
        assert_eq!(r.status, 202, "{url}: {}", r.text());
        wait_job(&s, r.json()["job"]["id"].as_u64().unwrap())
    };
    let j = job("/api/prune", json!({"dry_run": false}));
    assert_eq!(j["state"], "failed", "{j}");
    assert!(j["error"].as_str().unwrap().contains("locked"), "{j}");
    // The lock is taken or refused at once: nothing waits for it.
    assert_eq!(j["progress"]["phase"], "taking the exclusive lock", "{j}");
    let j = job("/api/forget", json!({"keep_last": 1, "expect": []}));
    assert_eq!(j["state"], "failed", "{j}");
    assert!(j["error"].as_str().unwrap().contains("locked"), "{j}");
    assert_eq!(j["progress"]["phase"], "taking the exclusive lock", "{j}");
    assert_eq!(get(&s, "/api/overview").json()["snapshots"], 2);
    let j = job("/api/prune", json!({"dry_run": true}));
    assert_eq!(j["state"], "done", "{j}");
    drop(backup);
    // A backup writes: it locks too, so it does not run beside a prune (hunt 29).
    let prune = repo
        .lock_for(arca_repo::LockKind::Exclusive, "prune")
        .unwrap();
    let j = job("/api/backup", json!({"profile": "home"}));
    assert_eq!(j["state"], "failed", "{j}");
    assert!(j["error"].as_str().unwrap().contains("locked"), "{j}");
    drop(prune);
}

/// The page handed to the browser (instead of the URL, whose token would be in the
/// arguments of `xdg-open` and of the browser) is readable by this user only, in a private
/// folder, sends the browser on to the URL, and goes when the server stops.
#[test]
fn the_browser_opens_a_private_page_that_goes_when_the_server_stops() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let mut s = f.start();
    let page = s.write_open_page().unwrap();
    assert!(!page.contains(TOKEN), "{page}");
    let file = s.open_page().unwrap().to_path_buf();
    assert_eq!(page, format!("file://{}", file.display()));
    let dir = file.parent().unwrap().to_path_buf();
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    assert_eq!(dir.parent(), Some(base.as_path()));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&dir), 0o700);
    let html = std::fs::read_to_string(&file).unwrap();
    let url = s.url().to_string();
    assert!(
        html.contains(&format!(
            "<meta http-equiv=\"refresh\" content=\"0;url={url}\">"
        )),
        "{html}"
    );
    assert!(html.contains(&format!("<a href=\"{url}\">")), "{html}");
    // The address it sends to opens the interface.
    let path = url.split_once(&s.addr().to_string()).unwrap().1;
    assert_eq!(request(s.addr(), "GET", path, &[], b"").status, 303);
    s.stop(std::time::Duration::from_secs(10));
    assert!(!file.exists() && !dir.exists(), "{}", dir.display());
    // Dropped without stop, it goes too; a second page replaces the first.
    let mut s = f.start();
    s.write_open_page().unwrap();
    let first = s.open_page().unwrap().to_path_buf();
    s.write_open_page().unwrap();
    let second = s.open_page().unwrap().to_path_buf();
    assert!(!first.exists() && second.exists());
    drop(s);
    assert!(!second.exists());
    // A folder that cannot take it is named.
    let e = arca_ui::OpenPage::create_in(&f.tmp.path().join("missing"), &url).unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
}

/// Cookies ignore ports: another local app's cookie whose value is not ASCII (`prefs=café`)
/// came in the same header and made the whole header unreadable, so every page answered 401.
#[test]
fn another_cookie_that_is_not_ascii_hides_nothing() {
    let f = Fixture::new();
    let s = f.start();
    let addr = s.addr();
    let port = addr.port();
    let ours = session_jar(addr);
    for jar in [
        format!("prefs=café; {ours}"),
        format!("{ours}; prefs=caf\u{e9}"),
        format!("arca_ui_{port}=stale; x=\u{1f600}; {ours}"),
    ] {
        let r = request(addr, "GET", "/api/status", &[("Cookie", &jar)], b"");
        assert_eq!(r.status, 200, "{jar}: {}", r.text());
    }
    let jar = format!("prefs=café; arca_ui_{port}=nope");
    let r = request(addr, "GET", "/api/status", &[("Cookie", &jar)], b"");
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (401, Some("wrong access token"))
    );
}

/// The Host check refuses other names (DNS rebinding) but takes loopback names and
/// addresses on any port: an SSH tunnel or port forward (`ssh -L 9000:127.0.0.1:PORT`)
/// reaches the server with the port of its own end.
#[test]
fn loopback_hosts_are_taken_on_any_port() {
    let f = Fixture::new();
    let s = f.start();
    let addr = s.addr();
    let auth = format!("Bearer {TOKEN}");
    for host in [
        "127.0.0.1:9000",
        "localhost:9000",
        "LOCALHOST:80",
        "[::1]:9000",
        "127.0.0.1",
        "localhost",
        "127.0.0.2:1",
    ] {
        let r = request(
            addr,
            "GET",
            "/api/status",
            &[("Authorization", &auth), ("Host", host)],
            b"",
        );
        assert_eq!(r.status, 200, "{host}: {}", r.text());
    }
    let port = addr.port();
    for host in [
        format!("evil.example:{port}"),
        "evil.example:9000".to_string(),
        format!("localhost.:{port}"),
        format!("127.0.0.1.evil.example:{port}"),
        format!("localhost.evil.example:{port}"),
        "localhost:".to_string(),
        "127.0.0.1:99999".to_string(),
    ] {
        let r = request(
            addr,
            "GET",
            "/api/status",
            &[("Authorization", &auth), ("Host", &host)],
            b"",
        );
        assert_eq!(r.status, 403, "{host}: {}", r.text());
    }
    // The CSRF check's Origin follows the Host the browser used (here a forwarded port).
    let jar = session_jar(addr);
    let page = request(
        addr,
        "GET",
        "/check",
        &[("Cookie", &jar), ("Host", "127.0.0.1:9000")],
        b"",
    )
    .text();
    let csrf = page
        .split("name=\"arca-csrf\" content=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string();
    let r = request(
        addr,
        "POST",
        "/api/check",
        &[
            ("Cookie", &jar),
            ("Host", "127.0.0.1:9000"),
            ("X-Arca-CSRF", &csrf),
            ("Origin", "http://127.0.0.1:9000"),
        ],
        b"{}",
    );
    assert_eq!(r.status, 202, "{}", r.text());
    wait_job(&s, r.json()["job"]["id"].as_u64().unwrap());
}

/// Browsers read `\` as `/` in http addresses: the `?token=` redirect of `/\evil.example/x`
/// sent them to http://evil.example/x.
#[test]
fn the_token_redirect_never_leaves_this_server() {
    let f = Fixture::new();
    let s = f.start();
    let addr = s.addr();
    for (path, location) in [
        ("/\\evil.example/x", "/evil.example/x"),
        ("/\\\\evil.example/x", "/evil.example/x"),
        ("/\\/evil.example/x", "/evil.example/x"),
        ("//\\evil.example", "/evil.example"),
        ("/snapshots/a\\b", "/snapshots/a%5Cb"),
    ] {
        let r = request(addr, "GET", &format!("{path}?token={TOKEN}"), &[], b"");
        assert_eq!(r.status, 303, "{path}");
        assert_eq!(r.header("location"), Some(location), "{path}");
    }
    let r = request(
        addr,
        "GET",
        &format!("/\\evil.example?a=1&token={TOKEN}&b=2"),
        &[],
        b"",
    );
    assert_eq!(r.header("location"), Some("/evil.example?a=1&b=2"));
}

/// A request refused for its Host header gets the security headers of every response, a
/// message about the Host (not the token) and the API's error shape.
#[test]
fn a_refused_host_gets_the_headers_a_fitting_message_and_the_error_shape() {
    let f = Fixture::new();
    let s = f.start();
    let addr = s.addr();
    let host = format!("evil.example:{}", addr.port());
    let auth = format!("Bearer {TOKEN}");
    let headers = [("Authorization", auth.as_str()), ("Host", host.as_str())];
    let check_headers = |r: &Resp| {
        assert!(
            r.header("content-security-policy")
                .is_some_and(|v| v.contains("frame-ancestors 'none'")),
            "{:?}",
            r.headers
        );
        assert_eq!(r.header("x-frame-options"), Some("DENY"));
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(r.header("referrer-policy"), Some("no-referrer"));
        assert_eq!(r.header("cache-control"), Some("no-store"));
    };
    let r = request(addr, "GET", "/api/status", &headers, b"");
    assert_eq!(r.status, 403);
    check_headers(&r);
    let j = r.json();
    assert_eq!(j["needs_password"], false, "{j}");
    let error = j["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("unexpected Host header \"{host}\": ")),
        "{error}"
    );
    assert!(error.contains("loopback"), "{error}");
    assert!(!error.contains("token"), "{error}");
    let r = request(addr, "GET", "/", &headers, b"");
    assert_eq!(r.status, 403);
    check_headers(&r);
    let page = r.text();
    assert!(page.contains("unexpected Host header"), "{page}");
    assert!(!page.contains("access token"), "{page}");
    assert!(
        !page.contains("<style"),
        "the CSP blocks inline styles: {page}"
    );
    // A request without a Host header (HTTP/1.0) is refused the same way.
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    use std::io::{Read, Write};
    write!(
        c,
        "GET /api/status HTTP/1.0\r\nAuthorization: {auth}\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    c.read_to_string(&mut raw).unwrap();
    assert!(
        raw.starts_with("HTTP/1.") && raw[..12].ends_with(" 403"),
        "{raw}"
    );
    assert!(raw.contains("no Host header"), "{raw}");
    assert!(
        raw.to_lowercase().contains("x-frame-options: deny"),
        "{raw}"
    );
    // The other refusals have the error shape too.
    let r = request(addr, "GET", "/api/status", &[], b"");
    assert_eq!(
        (r.status, r.json()["needs_password"].as_bool()),
        (401, Some(false))
    );
}

/// The restore target is used exactly as given, as the command line's `--target`: it was
/// trimmed, so a leading space (a relative path) was accepted and trailing spaces (part of
/// a folder's name) were dropped, restoring somewhere else than the job's `params` said.
#[test]
fn the_restore_target_is_used_exactly_as_given() {
    let f = Fixture::new();
    let s = f.start();
    let file = f.src.join("small.txt");
    let spaced = format!("{} ", f.tmp.path().join("rt").display());
    let r = post(
        &s,
        "/api/restore",
        &json!({"snapshot": "latest", "paths": [q(&file)], "target": format!(" {spaced}")}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let error = r.json()["error"].as_str().unwrap().to_string();
    assert!(
        error.contains(&format!("{:?}", format!(" {spaced}"))),
        "{error}"
    );
    assert!(error.contains("starts with whitespace"), "{error}");
    let r = post(
        &s,
        "/api/restore",
        &json!({"snapshot": "latest", "paths": [q(&file)], "target": spaced}),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let j = wait_job(&s, r.json()["job"]["id"].as_u64().unwrap());
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["params"]["target"], spaced.as_str());
    assert!(
        j["title"]
            .as_str()
            .unwrap()
            .ends_with(&format!("{spaced:?}")),
        "{j}"
    );
    let restored = Path::new(&spaced).join(file.strip_prefix("/").unwrap());
    assert_eq!(
        std::fs::read(&restored).unwrap(),
        std::fs::read(&file).unwrap()
    );
    assert!(!f.tmp.path().join("rt").exists());
}

#[test]
fn profiles_reading_a_pipe_or_standard_input_are_refused_and_the_server_keeps_answering() {
    let f = Fixture::new();
    let fifo = f.tmp.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    assert!(made, "mkfifo");
    std::fs::write(
        f.profiles.join("pipe.toml"),
        format!("[backup]\nfiles-from = {:?}\n", fifo.display().to_string()),
    )
    .unwrap();
    std::fs::write(
        f.profiles.join("stdin.toml"),
        "[backup]\nfiles-from = \"-\"\n",
    )
    .unwrap();
    std::fs::write(
        f.profiles.join("elsewhere.toml"),
        format!(
            "[backup]\nrepo = \"/elsewhere\"\npaths = [{:?}]\n",
            f.src.display().to_string()
        ),
    )
    .unwrap();
    let s = f.start();
    // Reading the pipe would block; asked twice, both runtime workers would be stuck.
    let addr = s.addr();
    let (tx, rx) = std::sync::mpsc::channel();
    for path in ["/api/profiles", "/backup", "/api/profiles"] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let auth = format!("Bearer {TOKEN}");
            let r = request(addr, "GET", path, &[("Authorization", &auth)], b"");
            let _ = tx.send((path, r));
        });
    }
    for _ in 0..3 {
        let (path, r) = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the server answers");
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        if path == "/api/profiles" {
            let list = r.json()["profiles"].as_array().unwrap().clone();
            let problem = |name: &str| {
                list.iter()
                    .find(|p| p["name"] == name)
                    .and_then(|p| p["problem"].as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            assert!(problem("pipe").contains("not a regular file"), "{list:?}");
            assert!(problem("stdin").contains("standard input"), "{list:?}");
            assert!(
                problem("elsewhere").contains("another repository"),
                "{list:?}"
            );
            assert_eq!(problem("home"), "");
        }
    }
    assert_eq!(get(&s, "/api/status").status, 200);
    // None of them runs.
    for name in ["pipe", "stdin", "elsewhere"] {
        let r = post(&s, "/api/backup", &json!({"profile": name}));
        assert_eq!(r.status, 400, "{name}: {}", r.text());
    }
}

#[test]
fn the_back_link_of_error_pages_works_under_the_content_security_policy() {
    let f = Fixture::new();
    let s = f.start();
    let r = get(&s, "/snapshots/nosuchsnapshot");
    assert!(r.status >= 400, "{}", r.text());
    let page = r.text();
    assert!(page.contains("Something went wrong"), "{page}");
    // `javascript:` addresses are script the CSP (`script-src 'self'`) refuses to run.
    assert!(!page.contains("javascript:"), "{page}");
    assert!(page.contains("<a href=\"/\" data-back>Back</a>"), "{page}");
    assert!(
        get(&s, "/static/app.js").text().contains("a[data-back]"),
        "the script handles the link"
    );
}

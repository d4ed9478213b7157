//! `arca copy` and `init --copy-chunker-params` end to end: translated copies and copies by
//! id (a second copy stores only what is new), skipped snapshots, filters, dry runs, exact
//! output, copies from and to S3 restored and compared, and the errors naming the source.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use arca_testkit::s3d::S3Server;
use arca_testkit::{compare, random_bytes};
use common::*;
use serde_json::Value;

/// `init --copy-chunker-params --from-repo SRC` (small KDF cost); its output.
fn init_copying(dst: &Env, src: &Env) -> String {
    run_ok(from_cmd(
        dst,
        src,
        &[
            "init",
            "--kdf-memory-kib",
            "256",
            "--kdf-iterations",
            "1",
            "--copy-chunker-params",
        ],
    ))
}

/// `1 thing`, `2 things`, as the command counts.
fn n(count: &Value, what: &str) -> String {
    let c = count.as_u64().unwrap();
    format!("{c} {what}{}", if c == 1 { "" } else { "s" })
}

fn backup(e: &Env, args: &[&str]) -> Value {
    e.json(&[&["backup", "--json"], args].concat())
}

fn snapshots(e: &Env) -> Vec<Value> {
    e.json(&["snapshots", "--json"]).as_array().unwrap().clone()
}

fn config(e: &Env) -> Value {
    serde_json::from_str(&e.ok(&["cat", "config"])).unwrap()
}

fn assert_clean(e: &Env) {
    let check = e.json(&["check", "--read-data", "--json"]);
    assert_eq!(check["errors"].as_array().map_or(0, Vec::len), 0, "{check}");
}

/// Restores `snapshot` of `e` and compares it with `src` (bytes and metadata).
fn assert_restores(
    e: &Env,
    snapshot: &str,
    src: &Path,
    expected: &BTreeMap<PathBuf, compare::Entry>,
) {
    let target = e.path(&format!("restore-{snapshot}"));
    e.ok(&["restore", snapshot, "--target", target.to_str().unwrap()]);
    let out: PathBuf = target.join(src.strip_prefix("/").unwrap());
    let diffs = compare::diff(expected, src, &compare::snapshot(&out).unwrap(), &out);
    assert!(diffs.is_empty(), "restore differs:\n{}", diffs.join("\n"));
}

#[test]
fn translated_copy_then_copy_by_id_after_copy_chunker_params() {
    let src = Env::new();
    src.init(&SMALL_CHUNKS);
    let data = src.path("data");
    sample(&data);
    let d = data.to_str().unwrap();
    let first = backup(&src, &[d]);
    let (n_data, n_trees) = (
        first["data_blobs"].as_u64().unwrap(),
        first["tree_blobs"].as_u64().unwrap(),
    );
    assert!(n_data > 10, "{first}");
    let expected = compare::snapshot(&data).unwrap();

    // A repository of its own: every blob is translated; tree ids change.
    let plain = Env::new();
    plain.init(&[]);
    let out = from_cmd(&plain, &src, &["copy", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("init --copy-chunker-params"),
        "{}",
        stderr(&out)
    );
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["by_id"], false);
    assert_eq!(c["snapshots_copied"], 1);
    assert_eq!(c["data_blobs"], n_data, "{c}");
    assert_eq!(c["tree_blobs"], n_trees, "{c}");
    assert_eq!(c["data_blobs_read"], n_data);
    let src_snap = &snapshots(&src)[0];
    let copied = &c["snapshots"][0];
    assert_eq!(copied["status"], "copied");
    assert_eq!(copied["source"], src_snap["id"]);
    assert_ne!(copied["tree"], src_snap["tree"]);
    let target_snaps = snapshots(&plain);
    assert_eq!(target_snaps.len(), 1);
    assert_eq!(copied["target"], target_snaps[0]["id"]);
    for field in [
        "time", "hostname", "username", "paths", "tags", "uid", "gid",
    ] {
        assert_eq!(target_snaps[0][field], src_snap[field], "{field}");
    }
    assert_eq!(target_snaps[0]["parent"], Value::Null);
    assert_restores(&plain, "latest", &data, &expected);
    assert_clean(&plain);

    // A repository chunking and identifying blobs as the source does.
    let twin = Env::new();
    let said = init_copying(&twin, &src);
    assert!(
        said.contains(&format!(
            "chunker parameters (16.00 KiB / 64.00 KiB / 256.00 KiB), chunker key and blob-id \
             key copied from {}",
            location(&src)
        )),
        "{said}"
    );
    let (cs, ct) = (config(&src), config(&twin));
    // Version 1, and 2 with copied keys; 3 for both with a cipher other than XChaCha20-Poly1305
    // (the default where the processor has AES instructions).
    let chacha = |c: &serde_json::Value| c["cipher"] == "xchacha20-poly1305";
    assert_eq!(cs["version"], if chacha(&cs) { 1 } else { 3 });
    assert_eq!(ct["version"], if chacha(&ct) { 2 } else { 3 });
    assert_eq!(ct["chunker"], cs["chunker"]);
    assert_ne!(ct["id"], cs["id"]);
    let c = copy_json(&twin, &src, &[]);
    assert_eq!(c["by_id"], true);
    assert_eq!(c["data_blobs"], n_data, "{c}");
    assert_eq!(c["tree_blobs"], n_trees, "{c}");
    assert_eq!(
        c["snapshots"][0]["tree"], src_snap["tree"],
        "trees keep their ids"
    );
    assert_restores(&twin, "latest", &data, &expected);
    assert_clean(&twin);
    // Backing the same data up into the twin directly finds every chunk: same boundaries,
    // same ids.
    let direct = backup(&twin, &[d, "--force", "--tag", "direct"]);
    assert_eq!(direct["data_blobs"], 0, "{direct}");

    // A new snapshot with one new file: only its blobs travel, read by id; translated, every
    // data blob of the snapshot is read again but the same few are stored.
    fs::write(data.join("new.bin"), random_bytes(77, 100_000)).unwrap();
    let second = backup(&src, &[d]);
    let new_blobs = second["data_blobs"].as_u64().unwrap();
    assert!((1..=8).contains(&new_blobs), "{second}");
    let c = copy_json(&twin, &src, &[]);
    assert_eq!(
        (
            c["snapshots_copied"].as_u64(),
            c["snapshots_skipped"].as_u64()
        ),
        (Some(1), Some(1)),
        "{c}"
    );
    assert_eq!(c["snapshots"][0]["status"], "skipped");
    assert_eq!(c["data_blobs"], new_blobs, "{c}");
    assert_eq!(c["data_blobs_read"], new_blobs, "{c}");
    let c = copy_json(&plain, &src, &[]);
    assert_eq!(c["data_blobs"], new_blobs, "{c}");
    assert!(c["data_blobs_read"].as_u64().unwrap() > n_data, "{c}");
    let expected = compare::snapshot(&data).unwrap();
    assert_restores(&plain, "latest", &data, &expected);
    assert_clean(&plain);
    assert_clean(&twin);

    // Nothing left to copy: exact text output.
    let out = run_ok(from_cmd(&plain, &src, &["copy"]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    let src_snaps = snapshots(&src);
    let plain_snaps = snapshots(&plain);
    for (i, (s, t)) in src_snaps.iter().zip(&plain_snaps).enumerate() {
        let prefix = format!(
            "snapshot {} of [{}] at ",
            s["short_id"].as_str().unwrap(),
            d
        );
        let suffix = format!(
            " by {}: skipped (already in the target as {})",
            s["hostname"].as_str().unwrap(),
            t["short_id"].as_str().unwrap()
        );
        assert!(
            lines[i].starts_with(&prefix) && lines[i].ends_with(&suffix),
            "{}",
            lines[i]
        );
    }
    assert_eq!(
        lines[2],
        "copied 0 snapshots, skipped 2 already in the target"
    );
    assert_eq!(
        lines[3],
        "stored 0 data blobs (0 B), 0 tree blobs; wrote 0 packs (0 B) and 0 index files"
    );
    // The twin's own backup is not in the source: copying back skips the two copies.
    let back = copy_json(&src, &twin, &[]);
    assert_eq!(back["snapshots_skipped"], 2, "{back}");
    assert_eq!(back["snapshots_copied"], 1, "{back}");
    assert_eq!(back["data_blobs"], 0, "{back}");
}

#[test]
fn filters_dry_run_and_snapshot_arguments() {
    let src = Env::new();
    src.init(&SMALL_CHUNKS);
    let (a, b) = (src.path("a"), src.path("b"));
    fs::create_dir_all(&a).unwrap();
    fs::write(a.join("f"), random_bytes(1, 200_000)).unwrap();
    fs::create_dir_all(&b).unwrap();
    fs::write(b.join("g"), random_bytes(2, 50_000)).unwrap();
    let sa = backup(&src, &[a.to_str().unwrap(), "--tag", "one"]);
    let sb = backup(
        &src,
        &[b.to_str().unwrap(), "--tag", "two", "--host", "other"],
    );
    let dst = Env::new();
    dst.init(&SMALL_CHUNKS);

    // Dry run: counted, nothing written.
    let dry = copy_json(&dst, &src, &["--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["snapshots"][0]["status"], "would_copy");
    assert_eq!(dry["snapshots"][0]["target"], Value::Null);
    let all = sa["data_blobs"].as_u64().unwrap() + sb["data_blobs"].as_u64().unwrap();
    assert_eq!(dry["data_blobs"], all, "{dry}");
    assert_eq!(dry["packs_written"], 0);
    assert!(snapshots(&dst).is_empty());
    let text = run_ok(from_cmd(&dst, &src, &["copy", "--dry-run", "--tag", "two"]));
    let first_line = text.lines().next().unwrap();
    assert!(
        first_line.starts_with(&format!(
            "snapshot {} of [{}] at ",
            &sb["snapshot_id"].as_str().unwrap()[..8],
            b.display()
        )) && first_line.ends_with(&format!(
            " by other: would be copied ({} (48.83 KiB), {})",
            n(&sb["data_blobs"], "data blob"),
            n(&sb["tree_blobs"], "tree blob")
        )),
        "{text}"
    );
    assert!(text.contains("would copy 1 snapshot, skipped 0"), "{text}");

    // --tag, --host and --path select; an id prefix too.
    let c = copy_json(&dst, &src, &["--tag", "two"]);
    assert_eq!(c["snapshots_copied"], 1, "{c}");
    assert_eq!(snapshots(&dst)[0]["tags"], serde_json::json!(["two"]));
    let c = copy_json(&dst, &src, &["--host", "other"]);
    assert_eq!(
        (
            c["snapshots_copied"].as_u64(),
            c["snapshots_skipped"].as_u64()
        ),
        (Some(0), Some(1))
    );
    let c = copy_json(&dst, &src, &["--path", "/nowhere"]);
    assert_eq!(c["snapshots"], serde_json::json!([]));
    let prefix = &sa["snapshot_id"].as_str().unwrap()[..8];
    let c = copy_json(&dst, &src, &[prefix]);
    assert_eq!(c["snapshots_copied"], 1, "{c}");
    assert_eq!(c["snapshots"][0]["source"], sa["snapshot_id"]);
    assert_eq!(snapshots(&dst).len(), 2);
    let c = copy_json(&dst, &src, &["latest"]);
    assert_eq!(c["snapshots_skipped"], 1, "{c}");
    assert_clean(&dst);
}

#[test]
fn errors_name_the_source() {
    let src = Env::new();
    src.init(&[]);
    let dst = Env::new();
    dst.init(&[]);
    let pw = dst.path("wrong");
    fs::write(&pw, "not the password\n").unwrap();
    let mut c = from_cmd(&dst, &src, &["copy"]);
    c.env("ARCA_FROM_PASSWORD_FILE", &pw);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(12), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("source repository"), "{err}");
    assert!(err.contains("wrong password"), "{err}");
    assert!(err.contains(&location(&src)), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // The right password from a file (which wins over ARCA_FROM_PASSWORD).
    let right = dst.path("right");
    fs::write(&right, "test password\n").unwrap();
    let mut c = from_cmd(
        &dst,
        &src,
        &["copy", "--from-password-file", right.to_str().unwrap()],
    );
    c.env("ARCA_FROM_PASSWORD", "wrong");
    assert_eq!(run_ok(c).lines().last(), Some("no snapshots to copy"));

    // The same for init: and nothing is created.
    let fresh = Env::new();
    let mut c = from_cmd(
        &fresh,
        &src,
        &[
            "init",
            "--kdf-memory-kib",
            "256",
            "--kdf-iterations",
            "1",
            "--copy-chunker-params",
        ],
    );
    c.env("ARCA_FROM_PASSWORD", "nope");
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(12));
    assert!(stderr(&o).contains(&location(&src)), "{}", stderr(&o));
    assert!(!fresh.repo.join("config").exists());

    let o = dst.run(&["copy"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    assert!(
        stderr(&o).contains("no source repository given"),
        "{}",
        stderr(&o)
    );
    let o = from_cmd(&dst, &src, &["copy", "deadbeef"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("deadbeef"), "{}", stderr(&o));
    let o = from_cmd(&dst, &dst, &["copy"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("same repository"), "{}", stderr(&o));
    // Also by another spelling of its path.
    let mut other_spelling = dst.repo.join("..");
    other_spelling.push(dst.repo.file_name().unwrap());
    let o = dst
        .cmd(&["copy"])
        .env("ARCA_FROM_REPOSITORY", &other_spelling)
        .env("ARCA_FROM_PASSWORD", "test password")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("same repository"), "{}", stderr(&o));
    // Chunk sizes with --copy-chunker-params are refused (they were ignored silently).
    let o = from_cmd(
        &Env::new(),
        &src,
        &["init", "--copy-chunker-params", "--chunk-max", "8MiB"],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--chunk-max"), "{}", stderr(&o));
    // init --from-repo without --copy-chunker-params says the source is not used.
    let plain = Env::new();
    let o = from_cmd(
        &plain,
        &src,
        &["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is ignored without --copy-chunker-params"),
        "{}",
        stderr(&o)
    );
    let missing = Env::new();
    let o = from_cmd(&dst, &missing, &["copy"]).output().unwrap();
    assert_eq!(o.status.code(), Some(10));
    assert!(stderr(&o).contains(&location(&missing)), "{}", stderr(&o));
}

#[test]
fn copy_between_local_and_s3_both_ways() {
    let e0 = Env::new();
    let s3 = S3Server::start(&e0.path("s3"));
    s3.bucket("copies");
    let local = Env::new();
    local.init(&SMALL_CHUNKS);
    let src = local.path("src");
    arca_testkit::generate::every_kind(&src.join("kinds"), 5).unwrap();
    sample(&src.join("sample"));
    let expected = compare::snapshot(&src).unwrap();
    let s = src.to_str().unwrap();
    let first = backup(&local, &[s]);
    assert_eq!(first["errors"], 0, "{first}");

    // Local → S3, into a repository made to chunk like the local one (its source options
    // given with --from-option when the source is the bucket, below).
    let remote = Env::remote(s3.location("copies", "remote"), s3.env());
    init_copying(&remote, &local);
    let c = copy_json(&remote, &local, &[]);
    assert_eq!(c["by_id"], true);
    assert_eq!(c["data_blobs"], first["data_blobs"], "{c}");
    assert_restores(&remote, "latest", &src, &expected);
    assert_clean(&remote);

    // S3 → a new local repository (translated), with the source's backend options.
    let back = Env::new();
    back.init(&[]);
    let c = copy_json(&back, &remote, &["--from-option", "s3.bucket-lookup=path"]);
    assert_eq!(c["by_id"], false);
    assert_eq!(c["snapshots_copied"], 1, "{c}");
    assert_eq!(c["data_blobs"], first["data_blobs"], "{c}");
    assert_restores(&back, "latest", &src, &expected);
    assert_clean(&back);
    let again = copy_json(&back, &remote, &[]);
    assert_eq!(again["snapshots_skipped"], 1, "{again}");
    assert_eq!(again["data_blobs_read"], 0, "{again}");
    let bad = from_cmd(&back, &remote, &["copy", "--from-option", "s3.nonsense=1"])
        .output()
        .unwrap();
    // Refused by clap before anything is opened: a usage error.
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("nonsense"), "{}", stderr(&bad));
}

#[test]
fn a_copy_run_again_after_an_interruption_uses_the_packs_it_uploaded() {
    let src = Env::new();
    src.init(&SMALL_CHUNKS);
    let a = src.path("a");
    fs::create_dir_all(&a).unwrap();
    fs::write(a.join("f"), random_bytes(3, 300_000)).unwrap();
    backup(&src, &[a.to_str().unwrap()]);
    let dst = Env::new();
    dst.init(&SMALL_CHUNKS);
    let first = copy_json(&dst, &src, &[]);
    assert!(first["packs_written"].as_u64().unwrap() > 0, "{first}");
    // As a copy killed after its uploads leaves it: packs that no index names, no snapshot.
    for dir in ["index", "snapshots"] {
        for f in fs::read_dir(dst.repo.join(dir)).unwrap() {
            fs::remove_file(f.unwrap().path()).unwrap();
        }
    }
    let again = copy_json(&dst, &src, &[]);
    assert_eq!(again["snapshots_copied"], 1, "{again}");
    assert_eq!(again["packs_written"], 0, "{again}");
    assert_clean(&dst);
}

/// A dry run after an interrupted copy counts what the real run then stores: the blobs in
/// the packs the interrupted run left in the target (no index names them) are not counted
/// again (the dry run counted them, and the real run, adopting those packs, did not store
/// them). The dry run writes nothing, not even the index of those packs. Translated and by
/// id.
#[test]
fn a_dry_run_after_an_interrupted_copy_counts_what_the_real_run_stores() {
    for by_id in [false, true] {
        let src = Env::new();
        src.init(&SMALL_CHUNKS);
        let (a, b) = (src.path("a"), src.path("b"));
        fs::create_dir_all(&a).unwrap();
        fs::write(a.join("f"), random_bytes(5, 300_000)).unwrap();
        fs::create_dir_all(&b).unwrap();
        fs::write(b.join("g"), random_bytes(6, 100_000)).unwrap();
        backup(&src, &[a.to_str().unwrap(), "--tag", "one"]);
        let sb = backup(&src, &[b.to_str().unwrap(), "--tag", "two"]);
        let dst = Env::new();
        if by_id {
            init_copying(&dst, &src);
        } else {
            dst.init(&SMALL_CHUNKS);
        }
        let first = copy_json(&dst, &src, &["--tag", "one"]);
        assert!(first["packs_written"].as_u64().unwrap() > 0, "{first}");
        // As a copy killed after its uploads leaves it: packs that no index names, no snapshot.
        for dir in ["index", "snapshots"] {
            for f in fs::read_dir(dst.repo.join(dir)).unwrap() {
                fs::remove_file(f.unwrap().path()).unwrap();
            }
        }
        let dry = copy_json(&dst, &src, &["--dry-run"]);
        assert_eq!(
            fs::read_dir(dst.repo.join("index")).unwrap().count(),
            0,
            "the dry run wrote an index file"
        );
        let real = copy_json(&dst, &src, &[]);
        assert_eq!(real["snapshots_copied"], 2, "{real}");
        assert_eq!(
            real["data_blobs"], sb["data_blobs"],
            "by id {by_id}: {real}"
        );
        for k in ["data_blobs", "data_bytes", "tree_blobs", "tree_bytes"] {
            assert_eq!(
                dry[k], real[k],
                "by id {by_id}, {k}: dry {dry}\nreal {real}"
            );
        }
        assert_clean(&dst);
    }
}

/// Two source snapshots alike in time, host, paths and tags but not in content (two imports
/// with the same `--time`) are both copied: a copy names its original, as restic's does, and
/// is matched by it. Copying again, and copying a tagged source, adds nothing.
#[test]
fn snapshots_alike_but_for_their_content_are_both_copied() {
    let src = Env::new();
    src.init(&[]);
    let dir = src.path("d");
    fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let mut ids = vec![];
    for text in ["one", "two"] {
        fs::write(dir.join("f"), text).unwrap();
        let b = backup(&src, &["--time", "2025-05-05 05:05:05", d]);
        ids.push(b["snapshot_id"].as_str().unwrap().to_string());
    }
    let dst = Env::new();
    dst.init(&[]);
    let first = copy_json(&dst, &src, &[]);
    assert_eq!(first["snapshots_copied"], 2, "{first}");
    let copies = snapshots(&dst);
    assert_eq!(copies.len(), 2);
    let mut originals: Vec<&str> = copies
        .iter()
        .map(|s| s["original"].as_str().unwrap())
        .collect();
    originals.sort_unstable();
    let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(originals, want);
    let f = format!("{d}/f");
    let mut texts: Vec<String> = copies
        .iter()
        .map(|s| dst.ok(&["dump", s["id"].as_str().unwrap(), &f]))
        .collect();
    texts.sort();
    assert_eq!(texts, ["one", "two"]);
    let again = copy_json(&dst, &src, &[]);
    assert_eq!(again["snapshots_copied"], 0, "{again}");
    // A snapshot retagged in the source keeps its original: its copy is still recognised
    // once the tags agree again.
    src.ok(&["tag", "--add", "x", &ids[0]]);
    let with_x = snapshots(&src)
        .into_iter()
        .find(|s| s["tags"] == serde_json::json!(["x"]))
        .unwrap();
    src.ok(&["tag", "--remove", "x", with_x["id"].as_str().unwrap()]);
    let tagged = snapshots(&src);
    assert!(
        tagged.iter().any(|s| s["original"] == ids[0].as_str()),
        "{tagged:?}"
    );
    let third = copy_json(&dst, &src, &[]);
    assert_eq!(third["snapshots_copied"], 0, "{third}");
    assert_clean(&dst);
}

/// A repository copied with `cp -a` has the same id, but it is another repository: copy takes
/// its new snapshots, as restic does (it was refused as "the same repository").
#[test]
fn a_cp_a_clone_is_another_repository() {
    let orig = Env::new();
    orig.init(&[]);
    let dir = orig.path("d");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("f"), "first").unwrap();
    backup(&orig, &[dir.to_str().unwrap()]);
    let clone = Env::new();
    let st = Command::new("cp")
        .arg("-a")
        .arg(&orig.repo)
        .arg(&clone.repo)
        .status()
        .unwrap();
    assert!(st.success());
    fs::write(dir.join("f"), random_bytes(3, 300_000)).unwrap();
    let b = backup(&clone, &[dir.to_str().unwrap()]);
    let copied = copy_json(&orig, &clone, &[]);
    assert_eq!(copied["snapshots_copied"], 1, "{copied}");
    assert_eq!(snapshots(&orig).len(), 2);
    let id = snapshots(&orig)
        .into_iter()
        .find(|s| s["original"] == b["snapshot_id"])
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let f = format!("{}/f", dir.display());
    let got = orig.cmd(&["dump", &id, &f]).output().unwrap();
    assert_eq!(got.stdout, random_bytes(3, 300_000));
    assert_clean(&orig);
}

/// A snapshot rewritten with `--forget` keeps its original, time and tags: between
/// repositories that identify blobs differently (trees cannot be compared), copy took it for
/// the copy it already had and skipped it, so the target kept the files the rewrite dropped.
#[test]
fn a_rewritten_snapshot_is_copied_again() {
    let src = Env::new();
    src.init(&[]);
    let dir = src.path("d");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("keep"), "kept").unwrap();
    fs::write(dir.join("secret.bin"), "secret").unwrap();
    let d = dir.to_str().unwrap();
    backup(&src, &[d]);
    let dst = Env::new();
    dst.init(&[]);
    assert_eq!(copy_json(&dst, &src, &[])["snapshots_copied"], 1);
    src.ok(&["rewrite", "--forget", "--exclude", "*.bin", "latest"]);
    let again = copy_json(&dst, &src, &[]);
    assert_eq!(again["snapshots_copied"], 1, "{again}");
    let newest = snapshots(&dst)
        .into_iter()
        .max_by_key(|s| s["summary"]["total_files_processed"].as_u64() == Some(1))
        .unwrap();
    let listing = dst.ok(&["ls", newest["id"].as_str().unwrap()]);
    assert!(
        listing.contains("keep") && !listing.contains("secret.bin"),
        "{listing}"
    );
    // And once copied, it is recognised.
    assert_eq!(copy_json(&dst, &src, &[])["snapshots_copied"], 0);
}

/// A source snapshot file that cannot be read is named and left out, the others are
/// copied, and the exit code is 3, not 0 (hunt 29 compat F6: it exited 0, the target
/// silently lacking that snapshot).
#[test]
fn an_unreadable_source_snapshot_exits_3_after_copying_the_others() {
    let src = Env::new();
    src.init(&SMALL_CHUNKS);
    let data = src.path("data");
    sample(&data);
    let d = data.to_str().unwrap();
    backup(&src, &[d]);
    fs::write(data.join("more"), b"more").unwrap();
    backup(&src, &[d]);
    let mut files: Vec<PathBuf> = fs::read_dir(src.repo.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut b = fs::read(&files[0]).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    fs::write(&files[0], b).unwrap();
    let dst = Env::new();
    dst.init(&SMALL_CHUNKS);
    let o = from_cmd(&dst, &src, &["copy"]).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let name = files[0].file_name().unwrap().to_str().unwrap();
    assert!(err.contains(&name[..8]), "{err}");
    assert!(err.contains("1 source snapshot could not be read"), "{err}");
    // The advice names the source (`arca forget` alone would run on the target).
    assert!(
        err.contains(&format!(
            "`arca -r {} forget {}`",
            src.repo.display(),
            &name[..8]
        )),
        "{err}"
    );
    assert_eq!(snapshots(&dst).len(), 1);
}

/// Two source snapshots alike in all that copy compares (the same time, host, paths, tags and
/// tree, one naming the other as its original: a snapshot moved to another host and back by
/// `rewrite`, with the `rewrite` tag removed): the real run copies one and skips the other as
/// copied earlier in the run, and the dry run before it said it would copy both, counting
/// the blobs of one. The dry run's counts are now the real run's.
#[test]
fn a_dry_run_counts_alike_snapshots_as_the_real_run_does() {
    let src = Env::new();
    src.init(&[]);
    let dir = src.path("d");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("f"), "some data").unwrap();
    let a = backup(&src, &["--host", "h1", dir.to_str().unwrap()])["snapshot_id"]
        .as_str()
        .unwrap()
        .to_string();
    src.ok(&["rewrite", "--new-host", "h2", &a[..8]]);
    src.ok(&[
        "rewrite",
        "--forget",
        "--new-host",
        "h1",
        "--host",
        "h2",
        "latest",
    ]);
    src.ok(&[
        "tag", "--remove", "rewrite", "--tag", "rewrite", "--host", "h1",
    ]);
    let alike: Vec<Value> = snapshots(&src)
        .into_iter()
        .filter(|s| s["hostname"] == "h1")
        .collect();
    assert_eq!(alike.len(), 2, "{alike:?}");
    assert_eq!(alike[0]["tree"], alike[1]["tree"]);
    assert_eq!(alike[0]["tags"], alike[1]["tags"]);

    let dst = Env::new();
    dst.init(&[]);
    let counts = |v: &Value| {
        let statuses: Vec<Value> = v["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["status"].clone())
            .collect();
        (
            v["snapshots_copied"].clone(),
            v["snapshots_skipped"].clone(),
            v["data_blobs"].clone(),
            v["tree_blobs"].clone(),
            statuses,
        )
    };
    let dry = copy_json(&dst, &src, &["--dry-run"]);
    let real = copy_json(&dst, &src, &[]);
    assert_eq!(real["snapshots_copied"], 1, "{real}");
    assert_eq!(real["snapshots_skipped"], 1, "{real}");
    let (c, sk, d, t, mut st) = counts(&dry);
    st.iter_mut()
        .filter(|s| *s == "would_copy")
        .for_each(|s| *s = "copied".into());
    assert_eq!((c, sk, d, t, st), counts(&real), "{dry}\n{real}");
    // The dry run names the snapshot the skipped one is alike.
    let skipped = dry["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["status"] == "skipped")
        .unwrap();
    assert!(skipped["target"].is_null(), "{skipped}");
    let fresh = Env::new();
    fresh.init(&[]);
    let text = run_ok(from_cmd(&fresh, &src, &["copy", "--dry-run"]));
    assert!(
        text.contains("would be skipped (alike snapshot")
            && text.contains("would copy 1 snapshot, skipped 1"),
        "{text}"
    );
    assert!(
        skipped["alike"].as_str().is_some_and(|a| dry["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["source"] == a && s["status"] == "would_copy")),
        "{dry}"
    );
}

/// A copy stopped after it saved its first snapshot (the disk full for the second): the
/// rerun says the first is already in the target (`skipped`, naming it), not copied again,
/// and copies the second; its JSON tells the two apart (`skipped` with the target id, and
/// `copied`). Already right: this test proves it.
#[test]
fn a_rerun_of_a_stopped_copy_says_which_snapshot_was_already_there() {
    let src = Env::new();
    src.init(&[]);
    let dir = src.path("d");
    fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    fs::write(dir.join("f"), "one").unwrap();
    backup(&src, &[d]);
    fs::write(dir.join("f"), "two").unwrap();
    backup(&src, &[d]);
    let dst = Env::new();
    dst.init(&[]);
    let o = from_cmd(&dst, &src, &["copy"])
        .env("ARCA_TEST_FAULTS", "write:snapshot:from=2:nospace")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let first = snapshots(&dst);
    assert_eq!(first.len(), 1);
    let saved = first[0]["id"].as_str().unwrap().to_string();
    let text = run_ok(from_cmd(&dst, &src, &["copy", "--dry-run"]));
    assert!(
        text.contains(&format!(
            "skipped (already in the target as {})",
            &saved[..8]
        )),
        "{text}"
    );
    let v = copy_json(&dst, &src, &[]);
    let st: Vec<(&str, &str)> = v["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["status"].as_str().unwrap(), s["target"].as_str().unwrap()))
        .collect();
    assert_eq!(st[0], ("skipped", saved.as_str()), "{v}");
    assert_eq!(st[1].0, "copied", "{v}");
    assert_ne!(st[1].1, saved, "{v}");
    assert_eq!(snapshots(&dst).len(), 2);
}

/// Between repositories that identify blobs differently, a snapshot of the target is taken
/// for a copy of a source snapshot only when it is one: a backup of other content with the
/// same time and totals (case A), or a copy rewritten in the target dropping only a symlink
/// (case B), was taken for one, and the source snapshot was never copied (hunt H18).
#[test]
fn only_a_copy_is_taken_for_a_copy() {
    let src = Env::new();
    src.init(&[]);
    let dst = Env::new();
    dst.init(&[]);
    let dir = src.path("d");
    fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink("f", dir.join("ln")).unwrap();
    let d = dir.to_str().unwrap();
    let when = ["--time", "2020-01-01 00:00:00"];
    // Case A: the same size, other bytes, backed up into each with the same time.
    fs::write(dir.join("f"), "AAAA").unwrap();
    backup(&dst, &[&when[..], &[d]].concat());
    fs::write(dir.join("f"), "BBBB").unwrap();
    backup(&src, &[&when[..], &[d]].concat());
    let v = copy_json(&dst, &src, &[]);
    assert_eq!(v["snapshots_copied"], 1, "{v}");
    let f = format!("{d}/f");
    let mut texts: Vec<String> = snapshots(&dst)
        .iter()
        .map(|s| dst.ok(&["dump", s["id"].as_str().unwrap(), &f]))
        .collect();
    texts.sort();
    assert_eq!(texts, ["AAAA", "BBBB"]);
    // Case B: the copy rewritten in the target without the symlink is no copy any more: the
    // source snapshot is copied again.
    let copy = snapshots(&dst)
        .into_iter()
        .find(|s| s["original"].is_string())
        .unwrap();
    dst.ok(&[
        "rewrite",
        "--forget",
        "-e",
        &format!("{d}/ln"),
        copy["id"].as_str().unwrap(),
    ]);
    let v = copy_json(&dst, &src, &[]);
    assert_eq!(v["snapshots_copied"], 1, "{v}");
    // And then it is there: nothing more to copy.
    let v = copy_json(&dst, &src, &[]);
    assert_eq!(v["snapshots_copied"], 0, "{v}");
    assert_clean(&dst);
}

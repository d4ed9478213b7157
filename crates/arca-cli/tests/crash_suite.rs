//! The crash suite: SIGKILL at 20 pseudo-random points of a backup and at 20 of a prune (the
//! kill times spread over each command's whole run, so they land between and inside writes
//! and deletes). After each kill, `check --read-data` is clean (leftovers it notes are harmless
//! and a rerun or the next prune takes them), and every snapshot that was not forgotten
//! restores byte for byte. Last, a flipped byte in a pack is found by check and by restore, and
//! restore still brings back every other file.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use arca_testkit::{compare, random_bytes, text_bytes};
use common::*;

/// Kill points per command.
const KILLS: u64 = 20;

/// A small deterministic generator for kill times.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A fraction in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() % 10_000) as f64 / 10_000.0
    }
}

/// Generation `g` of the source: 24 files of 100-600 KB, a few changing per generation.
fn generation(src: &Path, g: u64) {
    for i in 0..24u64 {
        let dir = src.join(format!("d{}", i % 4));
        fs::create_dir_all(&dir).unwrap();
        let seed = if i % 6 == g % 6 { 1000 * g + i } else { i };
        let len = 100_000 + (i * 7919 % 5) as usize * 100_000;
        let data = if i % 3 == 0 {
            text_bytes(seed, len)
        } else {
            random_bytes(seed, len)
        };
        fs::write(dir.join(format!("f{i:02}")), data).unwrap();
    }
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

fn restored(target: &Path, src: &Path) -> PathBuf {
    target.join(src.strip_prefix("/").unwrap())
}

fn check_clean(e: &Env, when: &str) {
    let o = e.run(&["check", "--read-data", "--json"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{when}: check failed: {out}\n{}",
        stderr(&o)
    );
}

/// Runs `args` and kills it with SIGKILL after `after`; `Err(time taken)` when it finished
/// first.
fn kill_after(e: &Env, args: &[&str], after: Duration) -> Result<(), Duration> {
    let mut child = e.cmd(args).spawn().unwrap();
    let start = Instant::now();
    while start.elapsed() < after {
        if child.try_wait().unwrap().is_some() {
            return Err(start.elapsed());
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let _ = child.kill();
    child.wait().unwrap();
    Ok(())
}

/// How long a command takes when it is not killed (the range the kill points spread over).
fn duration_of(e: &Env, args: &[&str]) -> Duration {
    let start = Instant::now();
    e.ok(args);
    start.elapsed()
}

/// The same files with the same bytes and modes (the copies' access times moved when the
/// backup read them, so full metadata is compared by the other tests).
fn same_content(expected: &Path, actual: &Path, what: &str) {
    use std::os::unix::fs::PermissionsExt;
    let list = |root: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = arca_testkit::files_under(root)
            .into_iter()
            .map(|p| p.strip_prefix(root).unwrap().to_path_buf())
            .collect();
        v.sort();
        v
    };
    let files = list(expected);
    assert_eq!(files, list(actual), "{what}: different files");
    for f in files {
        let (a, b) = (expected.join(&f), actual.join(&f));
        assert!(
            fs::read(&a).unwrap() == fs::read(&b).unwrap(),
            "{what}: {} differs",
            f.display()
        );
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode();
        assert_eq!(mode(&a), mode(&b), "{what}: mode of {}", f.display());
    }
}

/// Every snapshot restores to the generation it was made from.
fn all_restore(e: &Env, src: &Path, generations: &Path, when: &str) {
    let snaps = e.json(&["snapshots", "--json"]);
    for s in snaps.as_array().unwrap() {
        let id = s["id"].as_str().unwrap();
        let tag = s["tags"][0].as_str().unwrap();
        let target = e.path(&format!("restore-{id}"));
        e.ok(&["restore", id, "--target", target.to_str().unwrap()]);
        let expected = generations.join(tag);
        same_content(
            &expected,
            &restored(&target, src),
            &format!("{when}: snapshot {tag}"),
        );
        fs::remove_dir_all(&target).unwrap();
    }
}

#[test]
fn kills_during_backup_and_prune_lose_nothing() {
    let e = Env::new();
    let src = e.path("src");
    let generations = e.path("generations");
    e.init(&[&["--pack-size", "1MiB"][..], &SMALL_CHUNKS].concat());
    let s = src.to_str().unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);

    // Three generations backed up in full, each kept as a copy to compare restores with.
    for g in 0..3u64 {
        generation(&src, g);
        copy_tree(&src, &generations.join(format!("g{g}")));
        e.ok(&["backup", "--quiet", "--tag", &format!("g{g}"), s]);
    }

    // Backup kills: each on a new generation, spread over a backup's whole run.
    generation(&src, 3);
    copy_tree(&src, &generations.join("g3"));
    let mut full = duration_of(&e, &["backup", "--quiet", "--tag", "g3", "--force", s]);
    let mut killed = 0;
    for k in 0..KILLS {
        let g = 4 + k;
        generation(&src, g);
        let tag = format!("g{g}");
        // Kept whether or not the kill lands before the snapshot is written.
        copy_tree(&src, &generations.join(&tag));
        let at = full.mul_f64(rng.unit() * 1.2);
        match kill_after(&e, &["backup", "--quiet", "--tag", &tag, "--force", s], at) {
            Ok(()) => killed += 1,
            // Faster than measured (the machine got less busy): spread later kills over
            // the run actually seen.
            Err(took) => full = full.min(took),
        }
        check_clean(&e, &format!("backup kill {k} at {at:?}"));
    }
    assert!(killed >= KILLS / 2, "only {killed} backups were killed");
    // The rerun after the kills completes and everything restores.
    let g = 4 + KILLS;
    generation(&src, g);
    copy_tree(&src, &generations.join(format!("g{g}")));
    e.ok(&["backup", "--quiet", "--tag", &format!("g{g}"), s]);
    check_clean(&e, "after the backup kills");
    all_restore(&e, &src, &generations, "after the backup kills");

    // Prune kills: forget all but the last three snapshots, then kill prunes of copies of
    // that repository at points spread over a prune's run.
    e.ok(&["forget", "--keep-last", "3"]);
    let template = e.path("template");
    copy_tree(&e.repo, &template);
    let mut full = duration_of(&e, &["prune", "--max-unused", "0%"]);
    check_clean(&e, "after an uninterrupted prune");
    let mut killed = 0;
    for k in 0..KILLS {
        fs::remove_dir_all(&e.repo).unwrap();
        copy_tree(&template, &e.repo);
        let at = full.mul_f64(rng.unit() * 1.2);
        match kill_after(&e, &["prune", "--max-unused", "0%"], at) {
            Ok(()) => killed += 1,
            Err(took) => full = full.min(took),
        }
        let when = format!("prune kill {k} at {at:?}");
        check_clean(&e, &when);
        all_restore(&e, &src, &generations, &when);
        // The next prune finishes the job.
        e.ok(&["prune", "--max-unused", "0%"]);
        check_clean(&e, &format!("{when}, pruned again"));
    }
    assert!(killed >= KILLS / 2, "only {killed} prunes were killed");
    all_restore(&e, &src, &generations, "at the end");
}

#[test]
fn a_flipped_byte_in_a_pack_is_found_and_the_rest_restores() {
    let e = Env::new();
    let src = e.path("src");
    generation(&src, 0);
    e.init(&[&["--pack-size", "1MiB"][..], &SMALL_CHUNKS].concat());
    e.ok(&["backup", "--quiet", src.to_str().unwrap()]);
    // The largest pack holds file data; flip a byte in its middle.
    let mut packs: Vec<PathBuf> = arca_testkit::files_under(&e.repo.join("data"))
        .into_iter()
        .filter(|p| p.file_name().unwrap().len() == 64)
        .collect();
    packs.sort_by_key(|p| fs::metadata(p).unwrap().len());
    let victim = packs.last().unwrap();
    let len = fs::metadata(victim).unwrap().len();
    arca_testkit::flip_byte(victim, len / 2).unwrap();
    let name = victim.file_name().unwrap().to_string_lossy().into_owned();

    let check = e.run(&["check", "--read-data"]);
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        stderr(&check)
    );
    assert!(
        report.contains(&name[..10]),
        "the pack is not named:\n{report}"
    );

    let target = e.path("t");
    let r = e.run(&["restore", "latest", "--target", target.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(3), "{}", stderr(&r));
    // Every file the damage did not touch is back, byte for byte; the others are named.
    let out = restored(&target, &src);
    let diffs = compare::diff_trees(&src, &out);
    assert!(!diffs.is_empty(), "the damage went unnoticed");
    let err = stderr(&r);
    let mut intact = 0;
    for f in arca_testkit::files_under(&src) {
        let rel = f.strip_prefix(&src).unwrap();
        let back = out.join(rel);
        if fs::read(&back).ok().as_deref() == Some(&fs::read(&f).unwrap()[..]) {
            intact += 1;
        } else {
            assert!(
                err.contains(&rel.to_string_lossy().to_string()),
                "{} is wrong but not reported:\n{err}",
                rel.display()
            );
        }
    }
    assert!(intact >= 20, "only {intact} of 24 files restored");
}

//! A random-operations soak of the `arca` binary: a source tree is changed at random (files
//! created, edited, appended to, cut, renamed, deleted, linked, copied, chmod'ed, re-timed;
//! folders and symlinks created; names that are not UTF-8; empty, sparse and zero-filled
//! files up to a few MB) and backed up, and now and then the repository goes through
//! `forget --keep-last N --prune`, `prune --max-unused 0`, a backup killed with SIGKILL
//! mid-run, `repair index` after every index file is deleted, a backup running while prune
//! runs (`--retry-lock`), `copy` into a second repository restored from there, a prune
//! killed in one of its phases (then `check`, a second prune, `check --read-data` and every
//! kept snapshot restored), and a restore killed midway then run again there. Every
//! iteration restores a random kept snapshot into a fresh target or over an older restore
//! (with or without `--delete`, `--overwrite always`, `--verify`) and compares every entry
//! (kind, content hash, mode, mtime in ns, symlink target, hard-link groups) with what the
//! source held when it was backed up; the end runs `check --read-data`.
//!
//! Deterministic: a seeded generator drives everything (but where exactly a kill lands,
//! amid the stalled requests, depends on the machine's speed). `ARCA_SOAK_SEED` and
//! `ARCA_SOAK_ITERS` override the seed and the iteration count for longer runs by hand. A
//! failure names the seed, the iteration, the last operations, the command's stderr and the
//! first differing entries; `ARCA_SOAK_LOG=1` prints every operation as it runs.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use arca_testkit::{compare, generate, random_bytes};
use common::*;

/// How long one command may take before the soak fails.
const LIMIT: Duration = Duration::from_secs(120);
/// Operations kept in the log printed on failure.
const LOG_LEN: usize = 40;
/// The maintenance operations an iteration may run; each runs at least once per seed.
const SPECIAL: [&str; 8] = [
    "forget",
    "prune",
    "kill",
    "repair",
    "concurrent",
    "copy",
    "kill-prune",
    "kill-restore",
];

/// splitmix64: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
    fn bytes(&mut self, len: u64) -> Vec<u8> {
        random_bytes(self.next(), len as usize)
    }
}

/// One entry of a tree as the soak compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    kind: char,
    /// Permission bits (not for symlinks).
    mode: u32,
    /// mtime (s, ns) of files and symlinks.
    mtime: (i64, i64),
    link: Vec<u8>,
    /// blake3 of a file's bytes.
    hash: Option<String>,
    /// The names of a file's hard-link group (sorted), empty for a single name.
    group: Vec<PathBuf>,
}

type Manifest = BTreeMap<PathBuf, Item>;

/// Every entry below `root`, file contents hashed now.
fn manifest(root: &Path) -> std::io::Result<Manifest> {
    let snap = compare::snapshot(root)?;
    let mut groups: BTreeMap<u64, Vec<PathBuf>> = BTreeMap::new();
    for (p, e) in &snap {
        if e.kind == 'f' {
            groups.entry(e.ino).or_default().push(p.clone());
        }
    }
    let mut out = Manifest::new();
    for (p, e) in snap {
        let file = e.kind == 'f';
        let group = groups.get(&e.ino).filter(|g| file && g.len() > 1);
        let hash = if file {
            Some(blake3::hash(&fs::read(root.join(&p))?).to_hex().to_string())
        } else {
            None
        };
        let item = Item {
            kind: e.kind,
            mode: if e.kind == 'l' { 0 } else { e.mode },
            mtime: e.mtime,
            link: e.link,
            hash,
            group: group.cloned().unwrap_or_default(),
        };
        out.insert(p, item);
    }
    Ok(out)
}

/// The first differences between `want` and `got`, as lines (empty: the same).
fn differences(want: &Manifest, got: &Manifest) -> Vec<String> {
    let mut keys: Vec<&PathBuf> = want.keys().chain(got.keys()).collect();
    keys.sort();
    keys.dedup();
    let bad: Vec<&PathBuf> = keys
        .into_iter()
        .filter(|k| want.get(*k) != got.get(*k))
        .collect();
    if bad.is_empty() {
        return vec![];
    }
    let mut out = vec![format!("{} entries differ", bad.len())];
    for k in bad.iter().take(10) {
        out.push(format!(
            "  {k:?}:\n    want {:?}\n    got  {:?}",
            want.get(*k),
            got.get(*k)
        ));
    }
    out
}

/// A child process killed and reaped when dropped, so a failing soak leaves none behind.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for `child` at most `limit`; `None` if it is still running then.
fn wait_bounded(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Pack files (64 hex digits) under `repo/data`.
fn pack_count(repo: &Path) -> usize {
    arca_testkit::files_under(&repo.join("data"))
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n.len() == 64))
        .count()
}

fn dir_len(dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |d| d.count())
}

struct Soak {
    e: Env,
    /// The second repository, made by the first `copy`.
    e2: Option<Env>,
    seed: u64,
    iter: usize,
    rng: Rng,
    log: VecDeque<String>,
    src: PathBuf,
    /// Kept snapshots: id and the source's manifest when it was backed up.
    snaps: Vec<(String, Manifest)>,
    targets: usize,
}

impl Soak {
    fn new(seed: u64) -> Self {
        let e = Env::new();
        let src = e.path("src");
        fs::create_dir_all(&src).unwrap();
        e.init(&[&["--pack-size", "1MiB"][..], &SMALL_CHUNKS].concat());
        Self {
            e,
            e2: None,
            seed,
            iter: 0,
            rng: Rng(seed),
            log: VecDeque::new(),
            src,
            snaps: vec![],
            targets: 0,
        }
    }

    fn note(&mut self, s: String) {
        if std::env::var_os("ARCA_SOAK_LOG").is_some() {
            eprintln!("soak {} [{}] {s}", self.seed, self.iter);
        }
        if self.log.len() == LOG_LEN {
            self.log.pop_front();
        }
        self.log.push_back(format!("[{}] {s}", self.iter));
    }

    fn fail(&self, what: &str) -> ! {
        let log: Vec<&str> = self.log.iter().map(String::as_str).collect();
        panic!(
            "soak failed: seed {} (ARCA_SOAK_SEED={}), iteration {}: {what}\nlast operations:\n  {}",
            self.seed,
            self.seed,
            self.iter,
            log.join("\n  ")
        );
    }

    /// Runs `c` (arca `args`), bounded by [`LIMIT`]; fails unless it exits with `ok`.
    fn run_cmd(&mut self, mut c: Command, args: &[&str], ok: &[i32]) -> Output {
        self.note(format!("arca {}", args.join(" ")));
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = c.spawn().unwrap();
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(child.wait_with_output()));
        let out = match rx.recv_timeout(LIMIT) {
            Ok(o) => o.unwrap(),
            Err(_) => {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                self.fail(&format!("arca {args:?} still running after {LIMIT:?}"));
            }
        };
        if !out.status.code().is_some_and(|c| ok.contains(&c)) {
            self.fail(&format!(
                "arca {args:?} failed: {}\nstderr:\n{}",
                out.status,
                stderr(&out)
            ));
        }
        out
    }

    fn arca(&mut self, args: &[&str]) -> Output {
        let c = self.e.cmd(args);
        self.run_cmd(c, args, &[0])
    }

    fn manifest_of(&self, root: &Path) -> Manifest {
        manifest(root).unwrap_or_else(|e| self.fail(&format!("reading {}: {e}", root.display())))
    }

    fn compare(&self, want: &Manifest, got: &Manifest, what: &str) {
        let d = differences(want, got);
        if !d.is_empty() {
            self.fail(&format!("{what}: {}", d.join("\n")));
        }
    }

    /// A random name: short letters, sometimes not UTF-8, with spaces or non-ASCII.
    fn name(&mut self) -> Vec<u8> {
        let len = self.rng.range(1, 8);
        let mut n: Vec<u8> = (0..len).map(|_| b'a' + self.rng.below(8) as u8).collect();
        match self.rng.below(20) {
            0 => n.extend_from_slice(b"\xff\xfe"),
            1 => n.extend_from_slice(b" sp ace"),
            2 => n.extend_from_slice("é中".as_bytes()),
            _ => {}
        }
        n
    }

    /// Writes a new file at `p` with random content: empty, small, medium, zeros, sparse
    /// (long holes around a little data) or a few MB of random bytes.
    fn write_content(&mut self, p: &Path, append: bool) -> std::io::Result<String> {
        use std::io::Write;
        let mut f = fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(p)?;
        let r = self.rng.below(100);
        let what = if r < 20 {
            "empty".to_string()
        } else if r < 50 {
            let n = self.rng.range(1, 5000);
            f.write_all(&self.rng.bytes(n))?;
            format!("{n} bytes")
        } else if r < 80 {
            let n = self.rng.range(5000, 300_000);
            f.write_all(&self.rng.bytes(n))?;
            format!("{n} bytes")
        } else if r < 88 {
            let n = self.rng.range(100_000, 2_000_000);
            f.write_all(&vec![0; n as usize])?;
            format!("{n} zeros")
        } else if r < 95 {
            // A sparse file: a hole, some data, another hole.
            let start = f.metadata()?.len();
            let hole = self.rng.range(200_000, 3_000_000);
            let data = self.rng.range(1, 70_000);
            drop(f);
            let f = fs::OpenOptions::new().write(true).open(p)?;
            use std::os::unix::fs::FileExt;
            f.write_all_at(&self.rng.bytes(data), start + hole)?;
            let tail = self.rng.range(0, 1_000_000);
            f.set_len(start + hole + data + tail)?;
            format!("sparse {hole}+{data}+{tail}")
        } else {
            let n = self.rng.range(1_000_000, 3_000_000);
            f.write_all(&self.rng.bytes(n))?;
            format!("{n} random bytes")
        };
        Ok(what)
    }

    /// `n` random changes to the source tree.
    fn mutate(&mut self, n: u64) {
        for _ in 0..n {
            let all = compare::snapshot(&self.src).unwrap();
            let files: Vec<PathBuf> = all
                .iter()
                .filter(|(_, e)| matches!(e.kind, 'f' | 'l'))
                .map(|(p, _)| self.src.join(p))
                .collect();
            let mut dirs = vec![self.src.clone()];
            dirs.extend(
                all.iter()
                    .filter(|(_, e)| e.kind == 'd')
                    .map(|(p, _)| self.src.join(p)),
            );
            let dir = self.rng.pick(&dirs).clone();
            let new = dir.join(OsStr::from_bytes(&self.name()));
            let op = self.rng.below(100);
            let f = if files.is_empty() {
                None
            } else {
                Some(self.rng.pick(&files).clone())
            };
            let regular = f.as_ref().filter(|f| f.is_file() && !f.is_symlink());
            let src = self.src.clone();
            let rel = |p: &Path| p.strip_prefix(&src).unwrap().display().to_string();
            let done: std::io::Result<String> = match (op, &f, regular) {
                (_, _, _) if new.symlink_metadata().is_ok() && !(35..82).contains(&op) => continue,
                (0..25, _, _) | (_, None, _) => self
                    .write_content(&new, false)
                    .map(|w| format!("create {} ({w})", rel(&new))),
                (25..35, _, _) => fs::create_dir(&new).map(|()| format!("mkdir {}", rel(&new))),
                (35..45, _, Some(f)) => fs::read(f).and_then(|mut data| {
                    if !data.is_empty() {
                        let i = self.rng.below(data.len());
                        let k = self.rng.range(1, 100);
                        data.splice(i..i + 1, self.rng.bytes(k));
                    }
                    fs::write(f, &data).map(|()| format!("edit {}", rel(f)))
                }),
                (45..52, Some(f), _) => fs::remove_file(f).map(|()| format!("rm {}", rel(f))),
                (52..58, _, Some(f)) => self
                    .write_content(f, true)
                    .map(|w| format!("append to {} ({w})", rel(f))),
                (58..64, _, Some(f)) => {
                    let len = f.metadata().map_or(0, |m| m.len());
                    let to = self.rng.range(0, len);
                    fs::OpenOptions::new()
                        .write(true)
                        .open(f)
                        .and_then(|h| h.set_len(to))
                        .map(|()| format!("cut {} to {to}", rel(f)))
                }
                (64..70, Some(f), _) => {
                    fs::rename(f, &new).map(|()| format!("mv {} {}", rel(f), rel(&new)))
                }
                (70..75, _, Some(f)) => {
                    let mode = *self.rng.pick(&[0o600, 0o644, 0o755, 0o400]);
                    fs::set_permissions(f, fs::Permissions::from_mode(mode))
                        .map(|()| format!("chmod {mode:o} {}", rel(f)))
                }
                (75..82, Some(f), _) => {
                    let t = |r: &mut Rng| (r.range(1, 1 << 31) as i64, r.range(0, 999_999) as i64);
                    let (a, m) = (t(&mut self.rng), t(&mut self.rng));
                    generate::set_times(f, a, m).map(|()| format!("touch {} {m:?}", rel(f)))
                }
                (82..88, _, _) => {
                    let to = match self.rng.below(4) {
                        0 => b"../x".to_vec(),
                        1 => b"/etc/passwd".to_vec(),
                        2 => b"nowhere".to_vec(),
                        _ => self.name(),
                    };
                    std::os::unix::fs::symlink(OsStr::from_bytes(&to), &new)
                        .map(|()| format!("symlink {}", rel(&new)))
                }
                (88..94, _, Some(f)) => {
                    fs::hard_link(f, &new).map(|()| format!("link {} {}", rel(f), rel(&new)))
                }
                (94.., _, Some(f)) => {
                    fs::copy(f, &new).map(|_| format!("copy {} {}", rel(f), rel(&new)))
                }
                _ => continue,
            };
            // Races with the tree's own shape (a folder moved into itself, a name taken)
            // are skipped, as the operation would be by hand.
            if let Ok(s) = done {
                self.note(s);
            }
        }
    }

    fn backup(&mut self) -> (String, Manifest) {
        let m = self.manifest_of(&self.src.clone());
        let src = self.src.to_str().unwrap().to_string();
        let out = self.arca(&["backup", &src, "--json"]);
        let id = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .and_then(|v| v["snapshot_id"].as_str().map(String::from))
            .unwrap_or_else(|| self.fail(&format!("no snapshot id in {:?}", out.stdout)));
        (id, m)
    }

    /// The restored source inside `target`.
    fn restored(&self, target: &Path) -> PathBuf {
        target.join(self.src.strip_prefix("/").unwrap())
    }

    /// A backup killed with SIGKILL while it runs, once `k - 1` of its packs are written: its
    /// snapshot write stalls, so it cannot finish first, and either its pack writes from
    /// the `k`th on stall too (killed between writes) or they run on (killed amid writes).
    fn killed_backup(&mut self) {
        let big = self.src.join(format!("big{}", self.iter));
        let n = self.rng.range(2_500_000, 4_000_000);
        fs::write(&big, self.rng.bytes(n)).unwrap();
        let k = self.rng.range(2, 3);
        self.note(format!(
            "create big{} ({n} bytes); backup killed once {} packs are written",
            self.iter,
            k - 1
        ));
        let (packs, snaps) = (
            pack_count(&self.e.repo),
            dir_len(&self.e.repo.join("snapshots")),
        );
        let stall = self.rng.chance(0.5);
        let mut faults = "write:snapshot:always:delay=10m".to_string();
        if stall {
            faults += &format!(",write:pack:from={k}:delay=10m");
        }
        let mut c = self.e.cmd(&["backup", self.src.to_str().unwrap(), "-q"]);
        c.env("ARCA_TEST_FAULTS", faults)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = Reaped(c.spawn().unwrap());
        let start = Instant::now();
        // k-1 packs written; the stalls outlast the wait, so the backup cannot finish.
        while pack_count(&self.e.repo) < packs + k as usize - 1
            || start.elapsed() < Duration::from_millis(50)
        {
            if let Some(s) = child.0.try_wait().unwrap() {
                self.fail(&format!("the backup to be killed ended first: {s}"));
            }
            if start.elapsed() > LIMIT / 2 {
                self.fail(&format!("the backup to be killed wrote no {} packs", k - 1));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        if let Some(s) = child.0.try_wait().unwrap() {
            self.fail(&format!("the backup to be killed ended first: {s}"));
        }
        child.0.kill().unwrap();
        let status = wait_bounded(&mut child.0, Duration::from_secs(10))
            .unwrap_or_else(|| self.fail("the killed backup did not end"));
        if status.signal() != Some(9) {
            self.fail(&format!("the killed backup ended with {status}"));
        }
        let (packs_now, snaps_now) = (
            pack_count(&self.e.repo),
            dir_len(&self.e.repo.join("snapshots")),
        );
        if snaps_now != snaps {
            self.fail("the killed backup wrote a snapshot");
        }
        if packs_now <= packs {
            self.fail("the killed backup left no pack: killed too early");
        }
        self.note(format!(
            "killed after {:?} (later packs stalled: {stall}), {} packs left",
            start.elapsed(),
            packs_now - packs
        ));
        // Its leftovers harm nothing: prune and check are clean, every snapshot restores.
        self.arca(&["prune", "--max-unused", "0"]);
        self.arca(&["check", "--read-data"]);
        self.restore_all("after-kill");
    }

    /// Every kept snapshot restored into a fresh target and compared.
    fn restore_all(&mut self, what: &str) {
        for i in 0..self.snaps.len() {
            let (id, want) = self.snaps[i].clone();
            let t = self.e.path(&format!("{what}{}-{i}", self.iter));
            self.arca(&["restore", &id, "--target", t.to_str().unwrap()]);
            let got = self.manifest_of(&self.restored(&t));
            self.compare(&want, &got, &format!("snapshot {id} restored {what}"));
            fs::remove_dir_all(&t).unwrap();
        }
    }

    /// `arca args` killed with SIGKILL `after` its start, unless it ends first; `stall`
    /// (`ARCA_TEST_FAULTS` rules) holds it at some request meanwhile.
    fn killed(&mut self, args: &[&str], after: Duration, stall: &str) {
        let mut c = self.e.cmd(args);
        c.env("ARCA_TEST_FAULTS", stall)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = Reaped(c.spawn().unwrap());
        let how = match wait_bounded(&mut child.0, after) {
            Some(s) => format!("ended first: {s}"),
            None => {
                child.0.kill().unwrap();
                wait_bounded(&mut child.0, Duration::from_secs(10))
                    .unwrap_or_else(|| self.fail("a killed arca did not end"));
                format!("killed after {after:?}")
            }
        };
        self.note(format!(
            "arca {} ({how}; stalled at {stall:?})",
            args.join(" ")
        ));
    }

    /// forget, then a prune killed midway: the repository stays consistent, and a second
    /// prune finishes the job.
    fn killed_prune(&mut self) {
        let keep = self.rng.range(1, 3) as usize;
        self.arca(&["forget", "--keep-last", &keep.to_string()]);
        let drop = self.snaps.len().saturating_sub(keep);
        self.snaps.drain(..drop);
        // Stalled in one of its phases (repacking, writing the index, deleting the old
        // index, deleting packs) or not, then killed.
        let stall = *self.rng.pick(&[
            "",
            "write:pack:nth=1:delay=10m",
            "write:index:nth=1:delay=10m",
            "delete:index:nth=1:delay=10m",
            "delete:pack:nth=1:delay=10m",
            "delete:pack:nth=2:delay=10m",
        ]);
        let after = Duration::from_millis(self.rng.range(0, 1000));
        self.killed(&["prune", "--max-unused", "0"], after, stall);
        self.arca(&["check"]);
        self.arca(&["prune", "--max-unused", "0"]);
        self.arca(&["check", "--read-data"]);
        self.restore_all("after-killed-prune");
    }

    /// A restore killed midway, into a fresh target or over an earlier restore (with or
    /// without --delete), then run again there with --delete.
    fn killed_restore(&mut self) {
        let (id, want) = self.snaps[self.rng.below(self.snaps.len())].clone();
        if self.targets == 0 || self.rng.chance(0.5) {
            self.targets += 1;
        }
        let delete = if self.rng.chance(0.5) {
            "--delete"
        } else {
            "-q"
        };
        let t = self.e.path(&format!("t{}", self.targets));
        let ts = t.to_str().unwrap().to_string();
        let stall = format!("read:pack:nth={}:delay=10m", self.rng.range(1, 30));
        let after = Duration::from_millis(self.rng.range(0, 1000));
        self.killed(&["restore", &id, "--target", &ts, delete], after, &stall);
        self.arca(&["restore", &id, "--target", &ts, "--delete"]);
        let got = self.manifest_of(&self.restored(&t));
        self.compare(
            &want,
            &got,
            &format!("restore of {id} into {ts} after a killed one"),
        );
    }

    /// A backup started, then a prune while it runs; both wait for the other's lock.
    fn concurrent_backup(&mut self) {
        let n = self.rng.range(1, 10);
        self.mutate(n);
        let m = self.manifest_of(&self.src.clone());
        let out = self.e.path("concurrent.out");
        let err = self.e.path("concurrent.err");
        let src = self.src.to_str().unwrap().to_string();
        let args = ["backup", &src, "--json", "--retry-lock", "60s"];
        self.note(format!("arca {} (in the background)", args.join(" ")));
        let mut c = self.e.cmd(&args);
        c.stdout(fs::File::create(&out).unwrap())
            .stderr(fs::File::create(&err).unwrap());
        let mut child = Reaped(c.spawn().unwrap());
        std::thread::sleep(Duration::from_millis(self.rng.range(0, 200)));
        self.arca(&["prune", "--max-unused", "0", "--retry-lock", "60s"]);
        let status = wait_bounded(&mut child.0, LIMIT)
            .unwrap_or_else(|| self.fail("the backup running beside prune did not end"));
        if !status.success() {
            let e = fs::read_to_string(&err).unwrap_or_default();
            self.fail(&format!("the backup beside prune failed: {status}\n{e}"));
        }
        let stdout = fs::read_to_string(&out).unwrap();
        let id = stdout
            .lines()
            .last()
            .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .and_then(|v| v["snapshot_id"].as_str().map(String::from))
            .unwrap_or_else(|| self.fail(&format!("no snapshot id in {stdout:?}")));
        self.snaps.push((id, m));
    }

    /// The newest snapshot copied into a second repository, restored from there.
    fn copy(&mut self) {
        if self.e2.is_none() {
            let e2 = Env::new();
            e2.init(&[]);
            self.e2 = Some(e2);
        }
        let (id, want) = self.snaps.last().unwrap().clone();
        let e2 = self.e2.take().unwrap();
        let from = self.e.repo.to_str().unwrap().to_string();
        let args = ["copy", "--from-repo", &from, &id];
        let mut c = e2.cmd(&args);
        c.env("ARCA_FROM_PASSWORD", "test password");
        self.run_cmd(c, &args, &[0]);
        let t = e2.path("copied");
        let _ = fs::remove_dir_all(&t);
        let args = ["restore", "latest", "--target", t.to_str().unwrap()];
        let c = e2.cmd(&args);
        self.run_cmd(c, &args, &[0]);
        let got = self.manifest_of(&self.restored(&t));
        self.e2 = Some(e2);
        self.compare(
            &want,
            &got,
            &format!("copy of {id} restored from the second repository"),
        );
    }

    fn special(&mut self, op: &str) {
        match op {
            "forget" => {
                let keep = self.rng.range(1, 4) as usize;
                let mut args = vec!["forget", "--keep-last"];
                let k = keep.to_string();
                args.extend([k.as_str(), "--prune"]);
                if self.rng.chance(0.5) {
                    args.extend(["--max-unused", "0"]);
                }
                self.arca(&args);
                let drop = self.snaps.len().saturating_sub(keep);
                self.snaps.drain(..drop);
            }
            "prune" => {
                if self.rng.chance(0.5) {
                    self.arca(&["prune", "--max-unused", "0"]);
                } else {
                    self.arca(&["prune"]);
                }
            }
            "kill" => self.killed_backup(),
            "repair" => {
                for f in fs::read_dir(self.e.repo.join("index")).unwrap() {
                    fs::remove_file(f.unwrap().path()).unwrap();
                }
                self.note("deleted every index file".into());
                self.arca(&["repair", "index"]);
            }
            "concurrent" => self.concurrent_backup(),
            "kill-prune" => self.killed_prune(),
            "kill-restore" => self.killed_restore(),
            _ => self.copy(),
        }
    }

    /// A random kept snapshot restored into a fresh target or over the last one.
    fn restore_one(&mut self) {
        let (id, mut want) = self.snaps[self.rng.below(self.snaps.len())].clone();
        if self.targets == 0 || self.rng.chance(0.5) {
            self.targets += 1;
        }
        let t = self.e.path(&format!("t{}", self.targets));
        let mut extra = vec![];
        if self.rng.chance(0.5) {
            extra.push("--delete");
        }
        if self.rng.chance(0.2) {
            extra.extend(["--overwrite", "always"]);
        }
        if self.rng.chance(0.2) {
            extra.push("--verify");
        }
        let existed = t.exists();
        let ts = t.to_str().unwrap().to_string();
        let mut args = vec!["restore", &id, "--target", &ts];
        args.extend(&extra);
        self.arca(&args);
        let mut got = self.manifest_of(&self.restored(&t));
        let what = format!("restore of {id} into {ts} {extra:?} (target existed: {existed})");
        if existed && !extra.contains(&"--delete") {
            // Without --delete entries of the earlier restore may remain, and with them
            // further names of a hard-link group: every entry of the snapshot must be right.
            got.retain(|k, _| want.contains_key(k));
            for i in want.values_mut().chain(got.values_mut()) {
                i.group.clear();
            }
        }
        self.compare(&want, &got, &what);
    }

    fn run(&mut self, iters: usize) {
        self.mutate(40);
        let mut pending: Vec<&str> = SPECIAL.to_vec();
        for it in 0..iters {
            self.iter = it;
            let n = self.rng.range(1, 20);
            self.mutate(n);
            let s = self.backup();
            self.snaps.push(s);
            // Each special operation at least once: forced when the iterations left are
            // as many as those not yet run.
            let op = if iters - it <= pending.len() && self.snaps.len() > 1 {
                Some(pending[0])
            } else if self.rng.chance(0.45) && self.snaps.len() > 1 {
                Some(*self.rng.pick(&SPECIAL))
            } else {
                None
            };
            if let Some(op) = op {
                pending.retain(|p| *p != op);
                self.special(op);
            }
            self.restore_one();
        }
        self.iter = iters;
        self.arca(&["check", "--read-data"]);
        // (Fewer iterations than operations, by hand, cannot run them all.)
        if iters > SPECIAL.len() && !pending.is_empty() {
            self.fail(&format!("operations never run: {pending:?}"));
        }
    }
}

fn soak(default_seed: u64) {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("ARCA_SOAK_SEED").unwrap_or(default_seed);
    let iters = env("ARCA_SOAK_ITERS").unwrap_or(15) as usize;
    let start = Instant::now();
    Soak::new(seed).run(iters);
    eprintln!(
        "soak seed {seed}: {iters} iterations in {:?}",
        start.elapsed()
    );
}

#[test]
fn soak_first_seed() {
    soak(1);
}

#[test]
fn soak_second_seed() {
    if std::env::var_os("ARCA_SOAK_SEED").is_some() {
        return;
    }
    soak(2);
}

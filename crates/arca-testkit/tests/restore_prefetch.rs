//! The prefetcher: a local repository is told which pack ranges the restore reads next, never
//! more than the set distance ahead of the reads; every hinted range is then read; a remote
//! repository gets no hints, and `prefetch: Some(0)` turns them off.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arca_backend::{Backend, BackendHints, FileInfo, FileType, LocalBackend, Result};
use arca_restore::Tuning;
use arca_testkit::{compare, random_bytes};
use common::*;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    /// A hint, with the pack bytes read before it.
    Hint {
        name: String,
        offset: u64,
        len: u64,
        read_before: u64,
    },
    /// A completed read of a pack range.
    Read { name: String, offset: u64, len: u64 },
}

/// A local repository that records hints and pack reads, and says it is local or not.
#[derive(Debug)]
struct Recording {
    inner: LocalBackend,
    local: bool,
    read: AtomicU64,
    log: Mutex<Vec<Event>>,
}

impl Backend for Recording {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> Result<()> {
        self.inner.create()
    }
    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        self.inner.list(t)
    }
    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        self.inner.read(t, name)
    }
    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.inner.read_range(t, name, offset, len)
    }
    fn read_range_bulk(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<usize> {
        let at = self.inner.read_range_bulk(t, name, offset, len, buf)?;
        if t == FileType::Pack {
            // Counted before the restore hears of it, so the restore's own count is never
            // ahead of this one.
            self.read.fetch_add(len, Ordering::SeqCst);
            self.log.lock().unwrap().push(Event::Read {
                name: name.to_string(),
                offset,
                len,
            });
        }
        Ok(at)
    }
    fn hints(&self) -> BackendHints {
        BackendHints {
            local: self.local,
            ..self.inner.hints()
        }
    }
    fn prefetch(&self, t: FileType, name: &str, offset: u64, len: u64) {
        assert_eq!(t, FileType::Pack);
        let mut log = self.log.lock().unwrap();
        log.push(Event::Hint {
            name: name.to_string(),
            offset,
            len,
            read_before: self.read.load(Ordering::SeqCst),
        });
        self.inner.prefetch(t, name, offset, len);
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        self.inner.write(t, name, data)
    }
    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        self.inner.delete(t, name)
    }
    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        self.inner.stat(t, name)
    }
    fn remove_stale_temp(&self, older_than: Duration, remove: bool) -> Result<u64> {
        self.inner.remove_stale_temp(older_than, remove)
    }
}

/// A repository on a recording backend holding one backup of 40 files of 200 kB of random
/// data (about 8 packs of 1 MiB); the source folder.
fn backed_up(root: &Path, local: bool) -> (Arc<Recording>, arca_repo::Repository, PathBuf) {
    let src = root.join("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..40u64 {
        fs::write(src.join(format!("f{i:02}")), random_bytes(i, 200_000)).unwrap();
    }
    let rec = recording(root, local);
    let repo = init(rec.clone());
    do_backup(&repo, &src).unwrap();
    (rec, repo, src)
}

fn recording(root: &Path, local: bool) -> Arc<Recording> {
    Arc::new(Recording {
        inner: LocalBackend::new(root.join("repo")),
        local,
        read: AtomicU64::new(0),
        log: Mutex::new(vec![]),
    })
}

#[test]
fn hints_run_ahead_of_the_reads_within_the_distance_and_are_all_read() {
    let tmp = tempfile::tempdir().unwrap();
    let (rec, repo, src) = backed_up(tmp.path(), true);
    rec.log.lock().unwrap().clear();
    rec.read.store(0, Ordering::SeqCst);

    let ahead = 300_000u64;
    let target = tmp.path().join("t");
    let (r, _) = restore_with(&repo, "latest", &target, |o| {
        o.tuning = Tuning {
            prefetch: Some(ahead),
            ..Tuning::default()
        }
    });
    let r = r.unwrap();
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    let d = compare::diff_trees(&src, &restored(&target, &src));
    assert!(d.is_empty(), "restore differs:\n{}", d.join("\n"));

    let log = rec.log.lock().unwrap().clone();
    let hints: Vec<&Event> = log
        .iter()
        .filter(|e| matches!(e, Event::Hint { .. }))
        .collect();
    let reads: Vec<(&str, u64, u64)> = log
        .iter()
        .filter_map(|e| match e {
            Event::Read { name, offset, len } => Some((name.as_str(), *offset, *len)),
            Event::Hint { .. } => None,
        })
        .collect();
    assert!(hints.len() > 1, "hints: {hints:?}");
    let mut hinted = 0u64;
    for h in &hints {
        let Event::Hint {
            name,
            offset,
            len,
            read_before,
        } = h
        else {
            unreachable!()
        };
        // Never more than `ahead` hinted beyond what was read when the hint was given.
        assert!(
            hinted < read_before + ahead,
            "{hinted} bytes hinted before {h:?}, {ahead} ahead allowed"
        );
        hinted += len;
        // Every byte of a hint is read.
        let covered = reads
            .iter()
            .any(|&(n, o, l)| n == name && o <= *offset && offset + len <= o + l);
        assert!(covered, "{h:?} is not read: {reads:?}");
    }
    assert_eq!(r.bytes_hinted, hinted);
    assert!(
        hinted <= r.fetched_bytes && hinted > r.fetched_bytes / 2,
        "{r:?}"
    );
}

#[test]
fn no_hints_to_a_remote_repository_or_when_turned_off() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, repo, _) = backed_up(tmp.path(), false);
    let (r, _) = restore_with(&repo, "latest", &tmp.path().join("t1"), |_| {});
    assert_eq!(r.unwrap().bytes_hinted, 0);

    let rec = recording(tmp.path(), true);
    let repo = arca_repo::Repository::open(rec.clone(), b"password").unwrap();
    let (r, _) = restore_with(&repo, "latest", &tmp.path().join("t2"), |o| {
        o.tuning = Tuning {
            prefetch: Some(0),
            ..Tuning::default()
        }
    });
    assert_eq!(r.unwrap().bytes_hinted, 0);
    let log = rec.log.lock().unwrap();
    assert!(!log.iter().any(|e| matches!(e, Event::Hint { .. })));
    assert!(log.iter().any(|e| matches!(e, Event::Read { .. })));
}

//! Shared set-up of the library-level integration tests.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arca_backend::{Backend, LocalBackend};
use arca_backup::{BackupOptions, BackupReport, Progress, Warning, backup};
use arca_format::{ChunkerParams, Cipher, KdfParams};
use arca_repo::{InitOptions, Repository};
use arca_restore::{RestoreIssue, RestoreOptions, RestoreReport, restore};

/// Cheap key derivation and small chunks/packs so tests exercise many packs quickly. These
/// round trips seal with XChaCha20-Poly1305, the cipher of every repository before config
/// version 3; the other suites take the default (XAES-256-GCM on processors with AES).
pub fn init_opts() -> InitOptions {
    InitOptions {
        kdf: KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        },
        chunker: ChunkerParams {
            min: 16 << 10,
            avg: 64 << 10,
            max: 256 << 10,
        },
        compression: 3,
        pack_size: 1 << 20,
        cipher: Cipher::XChaCha20Poly1305,
    }
}

pub fn local(dir: &Path) -> Arc<dyn Backend> {
    Arc::new(LocalBackend::new(dir))
}

pub fn init(b: Arc<dyn Backend>) -> Repository {
    Repository::init(b, b"password", &init_opts()).expect("init")
}

pub fn do_backup(repo: &Repository, path: &Path) -> Result<BackupReport, arca_backup::BackupError> {
    let opts = BackupOptions {
        paths: vec![path.to_path_buf()],
        ..BackupOptions::default()
    };
    backup(repo, &opts, &Progress::default(), &|_: &Warning| {})
}

/// A backup whose packs hold the blobs in walk order (one reader, one sealer), for tests
/// that depend on where blobs lie.
pub fn do_backup_ordered(
    repo: &Repository,
    path: &Path,
) -> Result<BackupReport, arca_backup::BackupError> {
    let opts = BackupOptions {
        paths: vec![path.to_path_buf()],
        read_concurrency: 1,
        workers: 1,
        ..BackupOptions::default()
    };
    backup(repo, &opts, &Progress::default(), &|_: &Warning| {})
}

pub fn do_restore(
    repo: &Repository,
    snapshot: &str,
    target: &Path,
) -> Result<RestoreReport, arca_restore::RestoreError> {
    let (_, snap) = repo
        .find_snapshot(snapshot, &Default::default())
        .expect("snapshot");
    let index = repo.load_index().expect("index");
    let opts = RestoreOptions {
        target: target.to_path_buf(),
        ..RestoreOptions::default()
    };
    restore(
        repo,
        &index,
        &snap,
        &opts,
        &arca_restore::Progress::default(),
        &|_: &RestoreIssue| {},
    )
}

/// Where `src` (absolute) lands under `target`.
pub fn restored(target: &Path, src: &Path) -> PathBuf {
    target.join(src.strip_prefix("/").expect("absolute"))
}

/// Total size of all files under `dir`.
pub fn du(dir: &Path) -> u64 {
    arca_testkit::files_under(dir)
        .iter()
        .filter_map(|p| p.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Everything a restore reported through its observer.
#[derive(Default)]
pub struct Seen {
    pub issues: std::sync::Mutex<Vec<String>>,
    pub stalls: std::sync::Mutex<Vec<String>>,
    pub planned: std::sync::Mutex<Vec<(PathBuf, arca_restore::Action, u64)>>,
}

impl arca_restore::Observer for Seen {
    fn issue(&self, i: &RestoreIssue) {
        self.issues.lock().unwrap().push(i.message.clone());
    }
    fn stall(&self, report: &str) {
        self.stalls.lock().unwrap().push(report.to_string());
    }
    fn planned(&self, e: &arca_restore::PlannedEntry<'_>) {
        self.planned
            .lock()
            .unwrap()
            .push((e.path.to_path_buf(), e.action, e.bytes));
    }
}

/// Restores `snapshot` into `target` with options adjusted by `f`.
pub fn restore_with(
    repo: &Repository,
    snapshot: &str,
    target: &Path,
    f: impl FnOnce(&mut RestoreOptions),
) -> (Result<RestoreReport, arca_restore::RestoreError>, Seen) {
    let (_, snap) = repo
        .find_snapshot(snapshot, &Default::default())
        .expect("snapshot");
    let index = repo.load_index().expect("index");
    let mut opts = RestoreOptions {
        target: target.to_path_buf(),
        ..RestoreOptions::default()
    };
    f(&mut opts);
    let seen = Seen::default();
    let r = restore(
        repo,
        &index,
        &snap,
        &opts,
        &arca_restore::Progress::default(),
        &seen,
    );
    (r, seen)
}

/// A tree with every entry kind plus duplicated content: whole-file copies, a file holding
/// the same block twice, and a read-only directory with files inside.
pub fn with_duplicates(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    arca_testkit::generate::every_kind(root, 7).unwrap();
    let dup = root.join("dups");
    std::fs::create_dir_all(&dup).unwrap();
    let big = arca_testkit::random_bytes(70, 600_000);
    std::fs::write(dup.join("a.bin"), &big).unwrap();
    std::fs::write(dup.join("b.bin"), &big).unwrap();
    std::fs::write(dup.join("c.bin"), &big).unwrap();
    let mut twice = big[..200_000].to_vec();
    twice.extend_from_slice(&arca_testkit::random_bytes(71, 50_000));
    twice.extend_from_slice(&big[..200_000]);
    std::fs::write(dup.join("twice.bin"), &twice).unwrap();
    for i in 0..12u64 {
        let data = if i % 2 == 0 {
            arca_testkit::text_bytes(100 + i, 40_000 + i as usize * 9_000)
        } else {
            arca_testkit::random_bytes(100 + i, 30_000 + i as usize * 7_000)
        };
        std::fs::write(dup.join(format!("f{i:02}")), data).unwrap();
    }
    let ro = root.join("read-only");
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::write(
        ro.join("inside"),
        b"written before the directory became read-only",
    )
    .unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
}

/// Regular files under `dir` (recursive), sorted.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    arca_testkit::files_under(dir)
}

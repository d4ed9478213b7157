//! Shared set-up of the library-level integration tests.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arca_backend::{Backend, LocalBackend};
use arca_backup::{BackupOptions, BackupReport, Progress, Warning, backup};
use arca_format::{ChunkerParams, KdfParams};
use arca_repo::{InitOptions, Repository};
use arca_restore::{RestoreIssue, RestoreOptions, RestoreReport, restore};

/// Cheap key derivation and small chunks/packs so tests exercise many packs quickly.
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

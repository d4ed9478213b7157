//! The local repository a restore reads from, when the target reaches it: a target inside it
//! is refused, and inside the target it is left alone (never written into, never deleted).
//! Folders are told by device and inode, not by path: a symlink, a bind mount or `..` reaches
//! the same folder under another name.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::RestoreError;

/// The repository's folder and the folders holding it, by (device, inode).
#[derive(Debug)]
pub(crate) struct Repository {
    /// The repository's folder.
    pub folder: (u64, u64),
    /// It and every folder above it, up to `/`.
    pub holders: HashSet<(u64, u64)>,
}

impl Repository {
    /// Whether the folder `(dev, ino)` holds the repository (or is it).
    pub fn held_by(&self, id: (u64, u64)) -> bool {
        self.holders.contains(&id)
    }
}

fn id(m: &fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

/// `path` as the restore will reach it: each existing part with its symlinks resolved, the
/// missing ones as the restore creates them (real folders, so `..` after one goes back up).
fn resolved(path: &Path) -> PathBuf {
    let mut out = match std::env::current_dir() {
        Ok(cwd) if path.is_relative() => cwd,
        _ => PathBuf::new(),
    };
    for c in path.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => out.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => {
                out.push(n);
                if let Ok(real) = fs::canonicalize(&out) {
                    out = real;
                }
            }
        }
    }
    out
}

/// The repository at `repo` when it is a folder here. Refuses a target that is the
/// repository or lies inside it (restoring there overwrites and, with `--delete`, deletes its
/// files), however the target names it.
pub(crate) fn repository(target: &Path, repo: &Path) -> Result<Option<Repository>, RestoreError> {
    let Ok(real) = fs::canonicalize(repo) else {
        return Ok(None);
    };
    let Ok(m) = fs::metadata(&real) else {
        return Ok(None);
    };
    let folder = id(&m);
    let holders = real
        .ancestors()
        .filter_map(|a| fs::metadata(a).ok())
        .map(|m| id(&m))
        .collect();
    let inside = resolved(target)
        .ancestors()
        .filter_map(|a| fs::metadata(a).ok())
        .any(|m| id(&m) == folder);
    if inside {
        return Err(RestoreError::TargetInRepository {
            target: target.to_path_buf(),
            repository: real,
        });
    }
    Ok(Some(Repository { folder, holders }))
}

/// Why the repository's folder of the snapshot is not restored.
pub(crate) fn reason(path: &Path) -> String {
    format!(
        "{}: the repository this restore reads from; left as it is (restoring the snapshot's \
         copy of it over it would damage it)",
        arca_format::text::shown(path)
    )
}

/// Why a folder holding the repository is not replaced by the snapshot's file.
pub(crate) fn holder_reason(path: &Path) -> String {
    format!(
        "{}: holds the repository this restore reads from; not replaced",
        arca_format::text::shown(path)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_in_the_repository_is_refused_however_it_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("data/repo");
        fs::create_dir_all(repo.join("index")).unwrap();
        std::os::unix::fs::symlink(&repo, tmp.path().join("link")).unwrap();
        for target in [
            repo.clone(),
            repo.join("index"),
            repo.join("new/folder"),
            tmp.path().join("link/data"),
            // Through a folder the restore would create, then back up (hunt 14).
            tmp.path().join("data/missing/../repo"),
            tmp.path().join("data/missing/../repo/x"),
        ] {
            let err = repository(&target, &repo).unwrap_err().to_string();
            assert!(err.contains("inside the repository"), "{target:?}: {err}");
        }
        for target in [
            tmp.path().join("data"),
            tmp.path().to_path_buf(),
            tmp.path().join("elsewhere"),
            tmp.path().join("data/repo2"),
            tmp.path().join("data/missing/.."),
        ] {
            let r = repository(&target, &repo).unwrap().unwrap();
            let holds = |p: &Path| r.held_by(id(&fs::metadata(p).unwrap()));
            assert!(holds(&repo) && holds(&tmp.path().join("data")));
            assert!(!holds(&repo.join("index")));
        }
    }
}

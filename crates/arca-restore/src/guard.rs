//! The local repository a restore reads from, when the target reaches it: a target inside it
//! is refused, and inside the target it is left alone (never written into, never deleted).

use std::fs;
use std::path::{Path, PathBuf};

use crate::RestoreError;

/// `path` made absolute with its symlinks resolved, as far as it exists; the rest (folders a
/// restore would create) appended as given.
fn canonical(path: &Path) -> PathBuf {
    let mut rest = vec![];
    let mut at = path;
    loop {
        if let Ok(c) = fs::canonicalize(at) {
            return rest.iter().rev().fold(c, |p, n| p.join(n));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = if parent.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent
                };
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Where the repository at `repo` lies in the plan's terms (`target` joined with its path
/// below the target) when the target holds it; an error when the target is the repository
/// or lies inside it (restoring there overwrites and, with `--delete`, deletes its files).
pub(crate) fn repository_in_target(
    target: &Path,
    repo: &Path,
) -> Result<Option<PathBuf>, RestoreError> {
    let Ok(repo) = fs::canonicalize(repo) else {
        return Ok(None);
    };
    let target_c = canonical(target);
    if target_c.starts_with(&repo) {
        return Err(RestoreError::TargetInRepository {
            target: target.to_path_buf(),
            repository: repo,
        });
    }
    Ok(repo
        .strip_prefix(&target_c)
        .ok()
        .map(|rel| target.join(rel)))
}

/// Why the repository's folder of the snapshot is not restored.
pub(crate) fn reason(path: &Path) -> String {
    format!(
        "{}: the repository this restore reads from; left as it is (restoring the snapshot's \
         copy of it over it would damage it)",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_in_the_repository_is_refused_and_one_holding_it_is_told_where() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("data/repo");
        fs::create_dir_all(repo.join("index")).unwrap();
        std::os::unix::fs::symlink(&repo, tmp.path().join("link")).unwrap();
        for target in [
            repo.clone(),
            repo.join("index"),
            repo.join("new/folder"),
            tmp.path().join("link/data"),
        ] {
            let err = repository_in_target(&target, &repo)
                .unwrap_err()
                .to_string();
            assert!(err.contains("inside the repository"), "{err}");
        }
        let data = tmp.path().join("data");
        assert_eq!(
            repository_in_target(&data, &repo).unwrap(),
            Some(repo.clone())
        );
        assert_eq!(
            repository_in_target(tmp.path(), &repo).unwrap(),
            Some(tmp.path().join("data/repo"))
        );
        assert_eq!(
            repository_in_target(&tmp.path().join("elsewhere"), &repo).unwrap(),
            None
        );
    }
}

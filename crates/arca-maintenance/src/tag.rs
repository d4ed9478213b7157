//! `arca tag`: tags added to, removed from or set on snapshots. A changed snapshot is saved as
//! a new file first and its old file deleted after, so a crash leaves both, never neither.
//!
//! Snapshot files are named by the hash of their sealed bytes, so a change of tags is a new
//! file with a new id; everything else in the snapshot (time, host, paths, tree, parent,
//! summary) is kept. Call [`retag`] with the repository locked exclusively (it deletes
//! snapshot files, as `forget` does).

use std::fmt;

use arca_backend::FileType;
use arca_format::{Id, Snapshot};
use arca_repo::{RepoError, Repository};

/// What to do with the tags: set them to a list, or add some and remove others (added
/// first, then removed, as restic does).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagChange {
    /// Replace every tag with these (an empty list removes all tags).
    pub set: Option<Vec<String>>,
    /// Tags added when missing, in this order, after the snapshot's own.
    pub add: Vec<String>,
    /// Tags removed (every occurrence).
    pub remove: Vec<String>,
}

impl TagChange {
    /// Whether the change does nothing to any snapshot.
    pub fn is_empty(&self) -> bool {
        self.set.is_none() && self.add.is_empty() && self.remove.is_empty()
    }

    /// The tags after the change, or `None` when they stay as they are.
    pub fn apply(&self, tags: &[String]) -> Option<Vec<String>> {
        let mut new: Vec<String> = match &self.set {
            Some(set) => {
                let mut v: Vec<String> = vec![];
                for t in set {
                    if !v.contains(t) {
                        v.push(t.clone());
                    }
                }
                v
            }
            None => {
                let mut v = tags.to_vec();
                for t in &self.add {
                    if !v.contains(t) {
                        v.push(t.clone());
                    }
                }
                v
            }
        };
        new.retain(|t| !self.remove.contains(t));
        (new != tags).then_some(new)
    }
}

/// A snapshot whose tags changed (or would, in a dry run).
#[derive(Debug, Clone)]
pub struct Retagged {
    /// The original snapshot's id.
    pub original: Id,
    /// Its tags.
    pub old_tags: Vec<String>,
    /// The snapshot with its new tags.
    pub snapshot: Snapshot,
    /// The new file's id (`None` in a dry run).
    pub new_id: Option<Id>,
    /// The new file was in the repository already, saved by an earlier run stopped before it
    /// removed the original: it is taken and nothing is saved.
    pub adopted: bool,
}

/// A snapshot whose change could not be completed.
#[derive(Debug)]
pub struct TagError {
    /// The original snapshot.
    pub snapshot: Id,
    /// The new copy, when it was saved but the original could not be deleted (both exist).
    pub saved: Option<Id>,
    /// What failed.
    pub source: Box<RepoError>,
}

impl fmt::Display for TagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.saved {
            None => write!(
                f,
                "snapshot {}: cannot save the copy with the new tags: {}",
                self.snapshot.short(),
                self.source
            ),
            Some(new) => write!(
                f,
                "snapshot {}: its copy {} with the new tags was saved, but the original cannot \
                 be removed ({}); remove it with `arca forget {}`",
                self.snapshot.short(),
                new.short(),
                self.source,
                self.snapshot.short()
            ),
        }
    }
}

impl std::error::Error for TagError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// Applies `change` to snapshot `id`: `Ok(None)` when its tags stay as they are (nothing is
/// written); otherwise the copy with the new tags is saved, then the original deleted (only
/// computed with `dry_run`). `saved` are the repository's snapshots: a copy that a stopped
/// run saved among them is taken instead of saving another.
pub fn retag(
    repo: &Repository,
    id: Id,
    snapshot: &Snapshot,
    change: &TagChange,
    saved: &[(Id, Snapshot)],
    dry_run: bool,
) -> Result<Option<Retagged>, TagError> {
    let Some(tags) = change.apply(&snapshot.tags) else {
        return Ok(None);
    };
    let mut new = snapshot.clone();
    new.tags = tags;
    new.original.get_or_insert(id);
    let mut r = Retagged {
        original: id,
        old_tags: snapshot.tags.clone(),
        snapshot: new,
        new_id: None,
        adopted: false,
    };
    if dry_run {
        return Ok(Some(r));
    }
    let fail = |saved, source| TagError {
        snapshot: id,
        saved,
        source: Box::new(source),
    };
    let new_id = match crate::saved_copy(saved, &r.snapshot) {
        Some(copy) => {
            r.adopted = true;
            copy
        }
        None => repo
            .save_snapshot_replacing(&r.snapshot, &id)
            .map_err(|e| fail(None, e))?,
    };
    match repo.backend().delete(FileType::Snapshot, &id.to_hex()) {
        Ok(()) => {}
        // Gone already (another tag run): the copy stands for it.
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(fail(Some(new_id), e.into())),
    }
    r.new_id = Some(new_id);
    Ok(Some(r))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::repair::fixture::build;

    fn v(t: &[&str]) -> Vec<String> {
        t.iter().map(|s| s.to_string()).collect()
    }

    fn change(set: Option<&[&str]>, add: &[&str], remove: &[&str]) -> TagChange {
        TagChange {
            set: set.map(v),
            add: v(add),
            remove: v(remove),
        }
    }

    #[test]
    fn add_remove_and_set_as_restic() {
        let tags = v(&["a", "b"]);
        assert_eq!(
            change(None, &["c", "a", "c"], &[]).apply(&tags),
            Some(v(&["a", "b", "c"]))
        );
        assert_eq!(change(None, &["a"], &[]).apply(&tags), None, "nothing new");
        assert_eq!(
            change(None, &[], &["x"]).apply(&tags),
            None,
            "nothing to remove"
        );
        assert_eq!(change(None, &[], &["a"]).apply(&tags), Some(v(&["b"])));
        assert_eq!(
            change(None, &["x"], &["x", "b"]).apply(&tags),
            Some(v(&["a"])),
            "added first, then removed"
        );
        assert_eq!(
            change(Some(&["z", "z", "y"]), &[], &[]).apply(&tags),
            Some(v(&["z", "y"]))
        );
        assert_eq!(
            change(Some(&["a", "b"]), &[], &[]).apply(&tags),
            None,
            "same tags"
        );
        assert_eq!(change(Some(&[]), &[], &[]).apply(&tags), Some(vec![]));
        assert_eq!(change(Some(&[]), &[], &[]).apply(&[]), None);
        assert!(change(None, &[], &[]).is_empty());
        assert!(!change(Some(&[]), &[], &[]).is_empty());
    }

    #[test]
    fn the_copy_is_saved_and_the_original_removed() {
        let fx = build();
        let old = fx.repo.load_snapshot(&fx.snapshot).unwrap();
        let c = change(None, &["kept"], &["daily"]);

        let dry = retag(&fx.repo, fx.snapshot, &old, &c, &[], true)
            .unwrap()
            .unwrap();
        assert_eq!(dry.new_id, None);
        assert_eq!(dry.snapshot.tags, v(&["kept"]));
        assert_eq!(
            fx.ids(FileType::Snapshot),
            vec![fx.snapshot],
            "a dry run writes nothing"
        );

        let r = retag(&fx.repo, fx.snapshot, &old, &c, &[], false)
            .unwrap()
            .unwrap();
        let new_id = r.new_id.unwrap();
        assert_eq!(fx.ids(FileType::Snapshot), vec![new_id]);
        assert_eq!(r.old_tags, v(&["daily"]));
        let new = fx.repo.load_snapshot(&new_id).unwrap();
        let mut want = old.clone();
        want.tags = v(&["kept"]);
        want.original = Some(fx.snapshot);
        assert_eq!(new, want, "only the tags change, and it names its original");

        assert!(
            retag(&fx.repo, new_id, &new, &c, &[], false)
                .unwrap()
                .is_none()
        );
        assert_eq!(
            fx.ids(FileType::Snapshot),
            vec![new_id],
            "unchanged: left alone"
        );
    }

    /// A field a newer arca added to the snapshot's JSON is kept in the retagged copy
    /// (hunt 29 compat F5: it was dropped).
    #[test]
    fn unknown_snapshot_fields_are_kept() {
        let fx = build();
        let body = fx.repo.load_file(FileType::Snapshot, &fx.snapshot).unwrap();
        let mut nb = body[..6].to_vec();
        nb.extend_from_slice(b"{\"future_field\":{\"keep\":\"me\"},");
        nb.extend_from_slice(&body[7..]);
        let id = fx.repo.save_file(FileType::Snapshot, &nb).unwrap();
        fx.delete(FileType::Snapshot, &fx.snapshot);
        let old = fx.repo.load_snapshot(&id).unwrap();
        let r = retag(&fx.repo, id, &old, &change(None, &["new"], &[]), &[], false)
            .unwrap()
            .unwrap();
        let saved = fx
            .repo
            .load_file(FileType::Snapshot, &r.new_id.unwrap())
            .unwrap();
        let text = String::from_utf8_lossy(&saved[6..]);
        assert!(text.contains(r#""future_field":{"keep":"me"}"#), "{text}");
        let new = fx.repo.load_snapshot(&r.new_id.unwrap()).unwrap();
        assert_eq!(new.tags, v(&["daily", "new"]));
    }

    /// A run stopped between saving the copy and removing the original left both; the rerun
    /// tagged the original again and saved a second copy, equal to the first. It now takes
    /// the first and removes the original.
    #[test]
    fn a_rerun_after_a_stop_takes_the_copy_already_saved() {
        let fx = build();
        let old = fx.repo.load_snapshot(&fx.snapshot).unwrap();
        let c = change(None, &["kept"], &[]);
        let mut copy = old.clone();
        copy.tags.push("kept".into());
        copy.original = Some(fx.snapshot);
        let copy_id = fx.repo.save_snapshot_checked(&copy).unwrap();
        let saved = fx.repo.list_snapshots(&Default::default()).unwrap();
        assert_eq!(saved.len(), 2);
        let r = retag(&fx.repo, fx.snapshot, &old, &c, &saved, false)
            .unwrap()
            .unwrap();
        assert_eq!(r.new_id, Some(copy_id));
        assert_eq!(fx.ids(FileType::Snapshot), vec![copy_id]);
    }
}

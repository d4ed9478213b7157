//! A forget run's decisions for every group ([`plan`]), and the removal of the snapshot files
//! ([`remove_snapshots`]): what `arca forget` and the web interface both carry out.

use std::collections::HashMap;

use arca_backend::{BackendError, FileType};
use arca_format::{Id, Snapshot};
use arca_repo::Repository;
use chrono::{DateTime, Utc};

use super::{Decision, GroupBy, GroupKey, Policy, apply, group};

/// What happens to one group.
#[derive(Debug, Clone)]
pub struct GroupPlan {
    /// What the group's snapshots share.
    pub key: GroupKey,
    /// Kept snapshots, newest first, with their decisions.
    pub keep: Vec<(Id, Snapshot, Decision)>,
    /// Snapshots to remove, newest first.
    pub remove: Vec<(Id, Snapshot)>,
}

/// Groups `snapshots` by `group_by` and applies `policy` to each group (`now` bounds the
/// `within` rules as in [`apply`]).
pub fn plan(
    snapshots: Vec<(Id, Snapshot)>,
    policy: &Policy,
    group_by: GroupBy,
    now: DateTime<Utc>,
) -> Vec<GroupPlan> {
    let mut plans = vec![];
    for grp in group(snapshots, group_by) {
        let decisions = apply(policy, &grp.snapshots, now);
        let mut by_id: HashMap<Id, Snapshot> = grp.snapshots.into_iter().collect();
        let mut p = GroupPlan {
            key: grp.key,
            keep: vec![],
            remove: vec![],
        };
        for d in decisions {
            let Some(s) = by_id.remove(&d.id) else {
                continue;
            };
            if d.keep {
                p.keep.push((d.id, s, d));
            } else {
                p.remove.push((d.id, s));
            }
        }
        plans.push(p);
    }
    plans
}

/// The groups whose every snapshot the plans remove. A policy that keeps nothing of a group
/// is almost always a mistake (`--keep-tag` with a misspelt tag removed every snapshot):
/// restic refuses it unless told otherwise, and so does `arca forget`.
pub fn emptied_groups(plans: &[GroupPlan]) -> Vec<&GroupPlan> {
    plans
        .iter()
        .filter(|p| p.keep.is_empty() && !p.remove.is_empty())
        .collect()
}

/// The ids the plans remove, in order.
pub fn removed_ids(plans: &[GroupPlan]) -> Vec<Id> {
    plans
        .iter()
        .flat_map(|p| p.remove.iter().map(|(id, _)| *id))
        .collect()
}

/// Deletes the files of snapshots `ids` (the caller holds the exclusive lock); returns the
/// ones that could not be deleted, with why. Every id is tried. Fails, deleting nothing, when
/// the lock could not be refreshed for long ([`arca_repo::lock::check_held`]).
pub fn remove_snapshots(
    repo: &Repository,
    ids: &[Id],
) -> Result<Vec<(Id, BackendError)>, arca_repo::RepoError> {
    arca_repo::lock::check_held()?;
    Ok(repo
        .remove_files(FileType::Snapshot, ids, &|| {})
        .into_iter()
        .zip(ids)
        .filter_map(|(r, id)| r.err().map(|e| (*id, e)))
        .collect())
}

//! Repository maintenance. [`check`] verifies the structure (every snapshot's trees and blobs
//! are indexed, every indexed pack exists with the right size) and, with `read_data`,
//! decrypts and verifies every blob, naming the packs, snapshots and files affected.
//! [`forget`] holds the retention policy of `arca forget`: grouping snapshots and deciding,
//! with restic's semantics, which ones a policy keeps and why. [`prune`] removes the data no
//! snapshot uses: it deletes unused packs and repacks mixed ones, writing before deleting.

pub mod check;
pub mod copy;
pub mod forget;
pub mod prune;
pub mod recover;
pub mod repair;
pub mod rewrite;
pub mod tag;

#[cfg(test)]
mod recorder;

pub use check::{Affected, CheckOptions, CheckReport, DamagedPack, check};
pub use forget::{
    CalendarDuration, Counters, Decision, Group, GroupBy, GroupKey, Policy, apply, group,
};
pub use prune::{
    MaxUnused, PackAction, PackPlan, PlanStats, PruneError, PruneOptions, PrunePlan, PruneReport,
    TreeFault,
};

/// The snapshot among `saved` (the repository's) equal to `new` in every field: the copy that
/// an earlier run of `tag` or `rewrite`, stopped before it removed the original, saved. A
/// rerun takes it and removes the original, instead of saving one more copy that nothing
/// tells apart from the first.
pub(crate) fn saved_copy(
    saved: &[(arca_format::Id, arca_format::Snapshot)],
    new: &arca_format::Snapshot,
) -> Option<arca_format::Id> {
    saved.iter().find(|(_, s)| s == new).map(|(id, _)| *id)
}

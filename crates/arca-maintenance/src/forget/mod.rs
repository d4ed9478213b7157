//! `forget`'s retention policy, with restic's semantics: snapshots are divided into groups
//! ([`group`], by host, paths and tags), and within each group [`apply`] decides, newest
//! first, which snapshots a [`Policy`] keeps and why.
//!
//! * `--keep-last N` keeps the N newest snapshots.
//! * `--keep-hourly/daily/weekly/monthly/yearly N` keeps the newest snapshot of each of the N
//!   most recent hours, days, ISO weeks, months or years that have snapshots. Buckets are read
//!   in the time zone the snapshot recorded (the backing-up machine's local time), as restic
//!   does. [`UNLIMITED`] (-1) keeps the newest snapshot of every bucket.
//! * When a rule still has counts left at the oldest snapshot of the group, that snapshot is
//!   kept too ("oldest daily snapshot"): the longest history the policy allows.
//! * `--keep-within 1y2m3d4h` keeps every snapshot newer than that span before the newest
//!   snapshot of the group (snapshots in the future, after `now`, do not count as newest);
//!   `--keep-within-daily 1m` (and hourly, weekly, monthly, yearly) keeps the newest snapshot
//!   of each day (...) within such a span.
//! * `--keep-tag a,b` keeps every snapshot carrying all of `a` and `b`; the option may be
//!   given several times, a snapshot matching any of the lists is kept.
//!
//! Each rule is evaluated on its own: the kept set of a policy is the union of the kept sets
//! of its rules.

mod buckets;
mod decide;
mod duration;
mod grouping;
mod plan;
mod policy;

#[cfg(test)]
mod tests;

use std::fmt;

pub use decide::{Counters, Decision, apply};
pub use duration::CalendarDuration;
pub use grouping::{Group, GroupBy, GroupKey, group};
pub use plan::{GroupPlan, emptied_groups, plan, remove_snapshots, removed_ids};
pub use policy::{Policy, parse_count};

/// A keep count meaning "every bucket" (restic's `unlimited`).
pub const UNLIMITED: i32 = -1;

/// A malformed [`CalendarDuration`], [`GroupBy`] or keep count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

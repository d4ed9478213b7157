//! [`apply`]: one group's snapshots walked newest first, each rule keeping what it keeps;
//! a [`Decision`] per snapshot with the reasons and the counts left ([`Counters`]).

use arca_format::{Id, Snapshot};
use chrono::{DateTime, FixedOffset, Utc};

use super::buckets::{Period, count_name};
use super::{CalendarDuration, Policy};

/// Counts left per count rule after a snapshot was considered (restic's `counters`);
/// -1 for an unlimited rule, 0 for a rule that is off or used up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// `--keep-last`.
    pub last: i32,
    /// `--keep-hourly`.
    pub hourly: i32,
    /// `--keep-daily`.
    pub daily: i32,
    /// `--keep-weekly`.
    pub weekly: i32,
    /// `--keep-monthly`.
    pub monthly: i32,
    /// `--keep-yearly`.
    pub yearly: i32,
}

/// What the policy decided for one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The snapshot.
    pub id: Id,
    /// Kept (true) or to be removed.
    pub keep: bool,
    /// Why it is kept, e.g. "last snapshot", "daily snapshot", "oldest monthly snapshot",
    /// "within 2d", "daily within 1m", "tag 'keep'"; empty when removed.
    pub reasons: Vec<String>,
    /// The counts left after it was considered.
    pub counters: Counters,
}

/// The bucket of the last snapshot a rule kept while a group is walked, newest first.
#[derive(Default)]
struct LastBucket(Option<i64>);

impl LastBucket {
    /// Whether the rule keeps the snapshot in `bucket`: the newest of its bucket, or the
    /// group's oldest snapshot (`oldest`) when the rule still considers it. `Some` with the
    /// reason's prefix (`""`, or `"oldest "` for the oldest snapshot of a bucket already kept).
    fn keep(&mut self, bucket: i64, oldest: bool) -> Option<&'static str> {
        let repeat = self.0 == Some(bucket);
        if repeat && !oldest {
            return None;
        }
        self.0 = Some(bucket);
        Some(if repeat { "oldest " } else { "" })
    }
}

/// One count rule while a group is walked.
struct CountRule {
    left: i32,
    /// `None` for `--keep-last`: every snapshot is its own bucket.
    period: Option<Period>,
    last: LastBucket,
}

/// One `--keep-within-*` rule while a group is walked.
struct WithinRule {
    span: CalendarDuration,
    period: Period,
    /// Snapshots after this moment are within (`None`: all of them).
    threshold: Option<DateTime<FixedOffset>>,
    last: LastBucket,
}

/// Decides, newest first, which of `snapshots` (one group) `policy` keeps. `now` only serves
/// to ignore snapshots dated in the future when the newest snapshot is looked for.
///
/// Snapshots are ordered by time, newest first, equal times by id, the larger first (as
/// `latest` takes it: `rewrite` leaves two of one time). An empty policy keeps
/// everything with the reason "policy is empty". A negative count other than -1 (which
/// [`Policy::validate`] rejects) counts as unlimited.
pub fn apply(policy: &Policy, snapshots: &[(Id, Snapshot)], now: DateTime<Utc>) -> Vec<Decision> {
    let mut order: Vec<&(Id, Snapshot)> = snapshots.iter().collect();
    order.sort_by(|a, b| b.1.time.cmp(&a.1.time).then_with(|| b.0.cmp(&a.0)));
    if policy.is_empty() {
        return order
            .iter()
            .map(|(id, _)| Decision {
                id: *id,
                keep: true,
                reasons: vec!["policy is empty".into()],
                counters: Counters::default(),
            })
            .collect();
    }
    // The newest snapshot not in the future; with none, every snapshot is "within" any span.
    let latest = order
        .iter()
        .map(|(_, s)| s.time)
        .filter(|t| t.to_utc() < now)
        .max();
    let threshold = |span: &CalendarDuration| latest.and_then(|l| span.before(&l));
    let within =
        |t: &DateTime<FixedOffset>, th: &Option<DateTime<FixedOffset>>| th.is_none_or(|th| *t > th);
    let within_all = threshold(&policy.within);

    let mut counts = policy.counts().map(|(left, period)| CountRule {
        left,
        period,
        last: LastBucket::default(),
    });
    let mut spans: Vec<WithinRule> = policy
        .spans()
        .into_iter()
        .filter(|(d, _)| !d.is_zero())
        .map(|(span, period)| WithinRule {
            span,
            period,
            threshold: threshold(&span),
            last: LastBucket::default(),
        })
        .collect();

    let oldest = order.len().saturating_sub(1);
    let mut out = Vec::with_capacity(order.len());
    for (nr, (id, s)) in order.iter().enumerate() {
        let mut reasons = vec![];
        for list in &policy.tags {
            if list.iter().all(|t| s.tags.contains(t)) {
                // restic's words: "has tags [a, b]" (its tag list's String).
                reasons.push(format!("has tags [{}]", list.join(", ")));
            }
        }
        if !policy.within.is_zero() && within(&s.time, &within_all) {
            reasons.push(format!("within {}", policy.within));
        }
        for rule in &mut counts {
            if rule.left == 0 {
                continue;
            }
            let bucket = rule.period.map_or(nr as i64, |p| p.bucket(&s.time));
            if let Some(oldest_of) = rule.last.keep(bucket, nr == oldest) {
                reasons.push(format!("{oldest_of}{} snapshot", count_name(rule.period)));
                if rule.left > 0 {
                    rule.left -= 1;
                }
            }
        }
        for rule in &mut spans {
            if !within(&s.time, &rule.threshold) {
                continue;
            }
            if let Some(oldest_of) = rule.last.keep(rule.period.bucket(&s.time), nr == oldest) {
                reasons.push(format!(
                    "{oldest_of}{} within {}",
                    rule.period.name(),
                    rule.span
                ));
            }
        }
        let [last, hourly, daily, weekly, monthly, yearly] = counts.each_ref().map(|r| r.left);
        out.push(Decision {
            id: *id,
            keep: !reasons.is_empty(),
            reasons,
            counters: Counters {
                last,
                hourly,
                daily,
                weekly,
                monthly,
                yearly,
            },
        });
    }
    out
}

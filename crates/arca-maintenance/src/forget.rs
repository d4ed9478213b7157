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

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use arca_format::{Id, Snapshot};
use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, TimeDelta, Timelike, Utc};

/// A keep count meaning "every bucket" (restic's `unlimited`).
pub const UNLIMITED: i32 = -1;

/// A calendar span like restic's `1y2m3d4h`: years, months and days are taken off the
/// calendar date, hours are exact hours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CalendarDuration {
    /// Years.
    pub years: i32,
    /// Months.
    pub months: i32,
    /// Days.
    pub days: i32,
    /// Hours.
    pub hours: i32,
}

impl CalendarDuration {
    /// Whether every part is zero (the rule is off).
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    /// The moment this span before `t`, in `t`'s offset: years and months are taken off the
    /// month, then days off the day, a day past the end of its month rolling over into the
    /// next (31 March less one month is 3 March, or 2 March in a leap year, as Go's
    /// `AddDate`), then the hours. `None` when the result is out of range.
    pub fn before(&self, t: &DateTime<FixedOffset>) -> Option<DateTime<FixedOffset>> {
        let local = t.naive_local();
        let months = i64::from(local.year()) * 12 + i64::from(local.month0())
            - i64::from(self.years) * 12
            - i64::from(self.months);
        let year = i32::try_from(months.div_euclid(12)).ok()?;
        let month0 = u32::try_from(months.rem_euclid(12)).ok()?;
        let first = NaiveDate::from_ymd_opt(year, month0 + 1, 1)?;
        let day_offset = i64::from(local.day()) - 1 - i64::from(self.days);
        let date = first.checked_add_signed(TimeDelta::try_days(day_offset)?)?;
        let naive = date
            .and_time(local.time())
            .checked_sub_signed(TimeDelta::try_hours(i64::from(self.hours))?)?;
        naive.and_local_timezone(*t.offset()).single()
    }
}

impl fmt::Display for CalendarDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_zero() {
            return f.write_str("0h");
        }
        for (n, unit) in [
            (self.years, 'y'),
            (self.months, 'm'),
            (self.days, 'd'),
            (self.hours, 'h'),
        ] {
            if n != 0 {
                write!(f, "{n}{unit}")?;
            }
        }
        Ok(())
    }
}

/// A malformed [`CalendarDuration`], [`GroupBy`] or keep count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

impl FromStr for CalendarDuration {
    type Err = ParseError;

    /// Parses `1y2m3d4h`: numbers each followed by a unit `y`, `m`, `d` or `h`, in any order,
    /// each unit at most once.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let bad = |why: &str| ParseError(format!("invalid duration {s:?}: {why} (e.g. 1y2m3d4h)"));
        let mut rest = s.trim();
        if rest.is_empty() {
            return Err(bad("empty"));
        }
        let mut d = Self::default();
        let mut seen = [false; 4];
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits == 0 {
                return Err(bad("expected a number"));
            }
            let n: i32 = rest[..digits]
                .parse()
                .map_err(|_| bad("number too large"))?;
            let mut chars = rest[digits..].chars();
            let (slot, field) = match chars.next() {
                Some('y') => (0, &mut d.years),
                Some('m') => (1, &mut d.months),
                Some('d') => (2, &mut d.days),
                Some('h') => (3, &mut d.hours),
                Some(_) => return Err(bad("unknown unit, expected y, m, d or h")),
                None => return Err(bad("missing unit after the last number")),
            };
            if std::mem::replace(&mut seen[slot], true) {
                return Err(bad("unit given twice"));
            }
            *field = n;
            rest = chars.as_str();
        }
        Ok(d)
    }
}

/// Parses a keep count: a number of at least -1, or `unlimited` (-1).
pub fn parse_count(s: &str) -> Result<i32, ParseError> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("unlimited") {
        return Ok(UNLIMITED);
    }
    match t.parse::<i32>() {
        Ok(n) if n >= UNLIMITED => Ok(n),
        _ => Err(ParseError(format!(
            "invalid keep count {s:?}: expected a number of at least 0, or -1 or \"unlimited\" for all"
        ))),
    }
}

/// What to keep. Counts are 0 for off, N for the N most recent buckets, [`UNLIMITED`] (-1) for
/// every bucket; zero spans are off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// The newest N snapshots.
    pub last: i32,
    /// The newest snapshot of each of the N most recent hours with snapshots.
    pub hourly: i32,
    /// ... days.
    pub daily: i32,
    /// ... ISO weeks.
    pub weekly: i32,
    /// ... months.
    pub monthly: i32,
    /// ... years.
    pub yearly: i32,
    /// Every snapshot newer than this span before the group's newest snapshot.
    pub within: CalendarDuration,
    /// The newest snapshot of each hour within this span of the newest.
    pub within_hourly: CalendarDuration,
    /// ... of each day.
    pub within_daily: CalendarDuration,
    /// ... of each ISO week.
    pub within_weekly: CalendarDuration,
    /// ... of each month.
    pub within_monthly: CalendarDuration,
    /// ... of each year.
    pub within_yearly: CalendarDuration,
    /// Every snapshot carrying all tags of any of these lists.
    pub tags: Vec<Vec<String>>,
}

impl Policy {
    /// Whether no rule is set: such a policy keeps everything.
    pub fn is_empty(&self) -> bool {
        self.counts().iter().all(|(n, _)| *n == 0)
            && self.spans().iter().all(|(d, _)| d.is_zero())
            && self.within.is_zero()
            && self.tags.is_empty()
    }

    /// Rejects counts below -1, negative spans and empty tag lists.
    pub fn validate(&self) -> Result<(), ParseError> {
        if let Some((n, name)) = self.counts().into_iter().find(|(n, _)| *n < UNLIMITED) {
            return Err(ParseError(format!(
                "invalid {name} keep count {n}: use -1 or \"unlimited\" for all"
            )));
        }
        let spans = self.spans().map(|(d, _)| d);
        for d in spans.iter().chain([&self.within]) {
            if d.years < 0 || d.months < 0 || d.days < 0 || d.hours < 0 {
                return Err(ParseError(format!("negative duration {d}")));
            }
        }
        if self.tags.iter().any(|l| l.is_empty()) {
            return Err(ParseError("empty tag list to keep".into()));
        }
        Ok(())
    }

    fn counts(&self) -> [(i32, &'static str); 6] {
        [
            (self.last, "last"),
            (self.hourly, "hourly"),
            (self.daily, "daily"),
            (self.weekly, "weekly"),
            (self.monthly, "monthly"),
            (self.yearly, "yearly"),
        ]
    }

    fn spans(&self) -> [(CalendarDuration, Period); 5] {
        [
            (self.within_hourly, Period::Hour),
            (self.within_daily, Period::Day),
            (self.within_weekly, Period::Week),
            (self.within_monthly, Period::Month),
            (self.within_yearly, Period::Year),
        ]
    }
}

impl fmt::Display for Policy {
    /// `keep 3 latest, 7 daily, all monthly snapshots, daily snapshots within 1m, all
    /// snapshots with tags [a] and all snapshots within 2d of the newest`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("keep all snapshots (no policy)");
        }
        let mut parts = vec![];
        let counts: Vec<String> = self
            .counts()
            .iter()
            .filter(|(n, _)| *n != 0)
            .map(|(n, name)| {
                let name = if *name == "last" { "latest" } else { name };
                if *n < 0 {
                    format!("all {name}")
                } else {
                    format!("{n} {name}")
                }
            })
            .collect();
        if !counts.is_empty() {
            parts.push(format!("{} snapshots", counts.join(", ")));
        }
        for (d, p) in self.spans() {
            if !d.is_zero() {
                parts.push(format!("{} snapshots within {d}", p.name()));
            }
        }
        let mut s = parts.join(", ");
        let mut and = |part: String| {
            if !s.is_empty() {
                s.push_str(" and ");
            }
            s.push_str(&part);
        };
        if !self.tags.is_empty() {
            let lists: Vec<String> = self.tags.iter().map(|l| l.join(",")).collect();
            and(format!(
                "all snapshots with tags [{}]",
                lists.join("] or [")
            ));
        }
        if !self.within.is_zero() {
            and(format!(
                "all snapshots within {} of the newest",
                self.within
            ));
        }
        write!(f, "keep {s}")
    }
}

/// The calendar buckets of the time rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Period {
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl Period {
    fn name(self) -> &'static str {
        match self {
            Period::Hour => "hourly",
            Period::Day => "daily",
            Period::Week => "weekly",
            Period::Month => "monthly",
            Period::Year => "yearly",
        }
    }

    /// The bucket of `t`, read in `t`'s own offset: `YYYYMMDDHH`, `YYYYMMDD`, `YYYYWW` (ISO
    /// week and its year), `YYYYMM` or `YYYY`.
    fn bucket(self, t: &DateTime<FixedOffset>) -> i64 {
        let (y, m, d, h) = (
            i64::from(t.year()),
            i64::from(t.month()),
            i64::from(t.day()),
            i64::from(t.hour()),
        );
        match self {
            Period::Hour => ((y * 100 + m) * 100 + d) * 100 + h,
            Period::Day => (y * 100 + m) * 100 + d,
            Period::Week => {
                let w = t.iso_week();
                i64::from(w.year()) * 100 + i64::from(w.week())
            }
            Period::Month => y * 100 + m,
            Period::Year => y,
        }
    }
}

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

/// One count rule while a group is walked.
struct CountRule {
    left: i32,
    /// `None` for `--keep-last`: every snapshot is its own bucket.
    period: Option<Period>,
    last: Option<i64>,
}

/// One `--keep-within-*` rule while a group is walked.
struct WithinRule {
    span: CalendarDuration,
    period: Period,
    last: Option<i64>,
}

/// Decides, newest first, which of `snapshots` (one group) `policy` keeps. `now` only serves
/// to ignore snapshots dated in the future when the newest snapshot is looked for.
///
/// Snapshots are ordered by time, newest first, equal times by id. An empty policy keeps
/// everything with the reason "policy is empty". A negative count other than -1 (which
/// [`Policy::validate`] rejects) counts as unlimited.
pub fn apply(policy: &Policy, snapshots: &[(Id, Snapshot)], now: DateTime<Utc>) -> Vec<Decision> {
    let mut order: Vec<&(Id, Snapshot)> = snapshots.iter().collect();
    order.sort_by(|a, b| b.1.time.cmp(&a.1.time).then_with(|| a.0.cmp(&b.0)));
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

    let mut counts: Vec<CountRule> = policy
        .counts()
        .iter()
        .zip([
            None,
            Some(Period::Hour),
            Some(Period::Day),
            Some(Period::Week),
            Some(Period::Month),
            Some(Period::Year),
        ])
        .map(|((n, _), period)| CountRule {
            left: *n,
            period,
            last: None,
        })
        .collect();
    let mut spans: Vec<(WithinRule, Option<DateTime<FixedOffset>>)> = policy
        .spans()
        .into_iter()
        .filter(|(d, _)| !d.is_zero())
        .map(|(span, period)| {
            let th = threshold(&span);
            (
                WithinRule {
                    span,
                    period,
                    last: None,
                },
                th,
            )
        })
        .collect();

    let oldest = order.len().saturating_sub(1);
    let mut out = Vec::with_capacity(order.len());
    for (nr, (id, s)) in order.iter().enumerate() {
        let mut reasons = vec![];
        for list in &policy.tags {
            if list.iter().all(|t| s.tags.contains(t)) {
                reasons.push(match list.as_slice() {
                    [one] => format!("tag '{one}'"),
                    _ => format!("tags '{}'", list.join(",")),
                });
            }
        }
        if !policy.within.is_zero() && within(&s.time, &within_all) {
            reasons.push(format!("within {}", policy.within));
        }
        for rule in &mut counts {
            if rule.left == 0 {
                continue;
            }
            let val = rule.period.map_or(nr as i64, |p| p.bucket(&s.time));
            let repeat = rule.last == Some(val);
            if !repeat || nr == oldest {
                let name = rule.period.map_or("last", Period::name);
                let oldest_of = if repeat { "oldest " } else { "" };
                reasons.push(format!("{oldest_of}{name} snapshot"));
                rule.last = Some(val);
                if rule.left > 0 {
                    rule.left -= 1;
                }
            }
        }
        for (rule, th) in &mut spans {
            if !within(&s.time, th) {
                continue;
            }
            let val = rule.period.bucket(&s.time);
            let repeat = rule.last == Some(val);
            if !repeat || nr == oldest {
                let oldest_of = if repeat { "oldest " } else { "" };
                reasons.push(format!(
                    "{oldest_of}{} within {}",
                    rule.period.name(),
                    rule.span
                ));
                rule.last = Some(val);
            }
        }
        let counters = Counters {
            last: counts[0].left,
            hourly: counts[1].left,
            daily: counts[2].left,
            weekly: counts[3].left,
            monthly: counts[4].left,
            yearly: counts[5].left,
        };
        out.push(Decision {
            id: *id,
            keep: !reasons.is_empty(),
            reasons,
            counters,
        });
    }
    out
}

/// Which snapshot fields divide snapshots into groups (restic's `--group-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupBy {
    /// By host name.
    pub host: bool,
    /// By the (sorted) backed-up paths.
    pub paths: bool,
    /// By the (sorted) tags.
    pub tags: bool,
}

impl Default for GroupBy {
    /// `host,paths`, as restic.
    fn default() -> Self {
        Self {
            host: true,
            paths: true,
            tags: false,
        }
    }
}

impl FromStr for GroupBy {
    type Err = ParseError;

    /// Parses a comma-separated list of `host`, `paths`, `tags` (or `hosts`, `path`, `tag`);
    /// an empty string means one group for all snapshots.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let mut g = Self {
            host: false,
            paths: false,
            tags: false,
        };
        for part in s.split(',').map(str::trim) {
            match part {
                "host" | "hosts" => g.host = true,
                "path" | "paths" => g.paths = true,
                "tag" | "tags" => g.tags = true,
                "" => {}
                other => {
                    return Err(ParseError(format!(
                        "unknown grouping option {other:?}: expected host, paths or tags"
                    )));
                }
            }
        }
        Ok(g)
    }
}

impl fmt::Display for GroupBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<&str> = [
            (self.host, "host"),
            (self.paths, "paths"),
            (self.tags, "tags"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
        f.write_str(&parts.join(","))
    }
}

/// What the snapshots of a group share; `None` for the fields not grouped by.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKey {
    /// Host name.
    pub hostname: Option<String>,
    /// Backed-up paths, sorted.
    pub paths: Option<Vec<String>>,
    /// Tags, sorted.
    pub tags: Option<Vec<String>>,
}

impl GroupKey {
    /// The key of `s` under `by`.
    pub fn of(s: &Snapshot, by: GroupBy) -> Self {
        let sorted = |v: &[String]| {
            let mut v = v.to_vec();
            v.sort();
            v
        };
        Self {
            hostname: by.host.then(|| s.hostname.clone()),
            paths: by.paths.then(|| sorted(&s.paths)),
            tags: by.tags.then(|| sorted(&s.tags)),
        }
    }
}

impl fmt::Display for GroupKey {
    /// `host [h], paths [/a, /b], tags [t]`, or `all snapshots` when nothing is grouped by.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = vec![];
        if let Some(h) = &self.hostname {
            parts.push(format!("host [{h}]"));
        }
        if let Some(p) = &self.paths {
            parts.push(format!("paths [{}]", p.join(", ")));
        }
        if let Some(t) = &self.tags {
            parts.push(format!("tags [{}]", t.join(", ")));
        }
        if parts.is_empty() {
            f.write_str("all snapshots")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// Snapshots sharing a [`GroupKey`].
#[derive(Debug, Clone)]
pub struct Group {
    /// What they share.
    pub key: GroupKey,
    /// The snapshots, in the order given to [`group`].
    pub snapshots: Vec<(Id, Snapshot)>,
}

/// Divides `snapshots` into groups by `by`, ordered by key.
pub fn group(snapshots: Vec<(Id, Snapshot)>, by: GroupBy) -> Vec<Group> {
    let mut groups: BTreeMap<GroupKey, Vec<(Id, Snapshot)>> = BTreeMap::new();
    for (id, s) in snapshots {
        groups
            .entry(GroupKey::of(&s, by))
            .or_default()
            .push((id, s));
    }
    groups
        .into_iter()
        .map(|(key, snapshots)| Group { key, snapshots })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::{BTreeSet, HashSet};

    use arca_format::SnapshotSummary;
    use chrono::{NaiveDateTime, TimeZone};
    use proptest::prelude::*;

    use super::*;

    fn snap(time: DateTime<FixedOffset>, host: &str, paths: &[&str], tags: &[&str]) -> Snapshot {
        Snapshot {
            time,
            tree: Id::default(),
            paths: paths.iter().map(|p| p.to_string()).collect(),
            hostname: host.into(),
            username: "u".into(),
            uid: 1,
            gid: 1,
            tags: tags.iter().map(|t| t.to_string()).collect(),
            parent: None,
            program_version: "arca test".into(),
            complete: true,
            summary: SnapshotSummary::default(),
        }
    }

    /// A distinct id from a number.
    fn id(n: u64) -> Id {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&n.to_le_bytes());
        b[31] = 1;
        Id(b)
    }

    /// `2023-01-02 03:04:05` at offset `off_h` hours.
    fn at(s: &str, off_h: i32) -> DateTime<FixedOffset> {
        let naive = NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap();
        FixedOffset::east_opt(off_h * 3600)
            .unwrap()
            .from_local_datetime(&naive)
            .single()
            .unwrap()
    }

    fn list(times: &[DateTime<FixedOffset>]) -> Vec<(Id, Snapshot)> {
        times
            .iter()
            .enumerate()
            .map(|(i, t)| (id(i as u64), snap(*t, "h", &["/p"], &[])))
            .collect()
    }

    fn far_future() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2100, 1, 1, 0, 0, 0).unwrap()
    }

    /// The times of the kept snapshots, newest first, as `YYYY-MM-DD HH:MM:SS`.
    fn kept(policy: &Policy, l: &[(Id, Snapshot)]) -> Vec<String> {
        let by_id: BTreeMap<Id, &Snapshot> = l.iter().map(|(i, s)| (*i, s)).collect();
        apply(policy, l, far_future())
            .iter()
            .filter(|d| d.keep)
            .map(|d| by_id[&d.id].time.format("%Y-%m-%d %H:%M:%S").to_string())
            .collect()
    }

    /// Every day of 2023 at 12:00 UTC: 365 snapshots, oldest first.
    fn daily_2023() -> Vec<(Id, Snapshot)> {
        let start = at("2023-01-01 12:00:00", 0);
        list(
            &(0..365)
                .map(|d| start + TimeDelta::days(d))
                .collect::<Vec<_>>(),
        )
    }

    /// Every hour of 2023 (UTC): 8760 snapshots.
    fn hourly_2023() -> Vec<(Id, Snapshot)> {
        let start = at("2023-01-01 00:00:00", 0);
        list(
            &(0..8760)
                .map(|h| start + TimeDelta::hours(h))
                .collect::<Vec<_>>(),
        )
    }

    fn policy(f: impl FnOnce(&mut Policy)) -> Policy {
        let mut p = Policy::default();
        f(&mut p);
        p
    }

    #[test]
    fn durations_parse_and_print() {
        let d: CalendarDuration = "1y2m3d4h".parse().unwrap();
        assert_eq!(
            d,
            CalendarDuration {
                years: 1,
                months: 2,
                days: 3,
                hours: 4
            }
        );
        assert_eq!(d.to_string(), "1y2m3d4h");
        assert_eq!(
            "4h2d".parse::<CalendarDuration>().unwrap().to_string(),
            "2d4h"
        );
        assert_eq!(" 30d ".parse::<CalendarDuration>().unwrap().days, 30);
        assert!("0d".parse::<CalendarDuration>().unwrap().is_zero());
        for bad in ["", "d", "5", "5x", "1d2d", "-1d", "1.5d", "99999999999d"] {
            assert!(bad.parse::<CalendarDuration>().is_err(), "{bad}");
        }
        assert_eq!(parse_count("unlimited").unwrap(), -1);
        assert_eq!(parse_count("-1").unwrap(), -1);
        assert_eq!(parse_count("7").unwrap(), 7);
        assert!(parse_count("-2").is_err());
        assert!(parse_count("many").is_err());
    }

    #[test]
    fn calendar_arithmetic_follows_go_add_date() {
        let fmt = |d: CalendarDuration, t: &str| {
            d.before(&at(t, 2))
                .unwrap()
                .format("%Y-%m-%d %H:%M:%S %z")
                .to_string()
        };
        let p = |s: &str| s.parse::<CalendarDuration>().unwrap();
        // 31 March less a month is "31 February": 2 March in a leap year, 3 March otherwise.
        assert_eq!(
            fmt(p("1m"), "2024-03-31 12:00:00"),
            "2024-03-02 12:00:00 +0200"
        );
        assert_eq!(
            fmt(p("1m"), "2023-03-31 12:00:00"),
            "2023-03-03 12:00:00 +0200"
        );
        assert_eq!(
            fmt(p("1y"), "2024-02-29 00:00:00"),
            "2023-03-01 00:00:00 +0200"
        );
        assert_eq!(
            fmt(p("2d5h"), "2024-01-01 03:00:00"),
            "2023-12-29 22:00:00 +0200"
        );
        assert_eq!(
            fmt(p("14m"), "2024-01-15 00:00:00"),
            "2022-11-15 00:00:00 +0200"
        );
    }

    #[test]
    fn empty_policy_keeps_everything() {
        let p = Policy::default();
        assert!(p.is_empty());
        assert_eq!(p.to_string(), "keep all snapshots (no policy)");
        let l = daily_2023();
        let d = apply(&p, &l, far_future());
        assert_eq!(d.len(), 365);
        assert!(d.iter().all(|d| d.keep && d.reasons == ["policy is empty"]));
        assert!(apply(&p, &[], far_future()).is_empty());
        let p = policy(|p| p.daily = 3);
        assert!(!p.is_empty());
        assert!(apply(&p, &[], far_future()).is_empty());
    }

    #[test]
    fn keep_last() {
        let l = daily_2023();
        let p = policy(|p| p.last = 3);
        assert_eq!(
            kept(&p, &l),
            [
                "2023-12-31 12:00:00",
                "2023-12-30 12:00:00",
                "2023-12-29 12:00:00"
            ]
        );
        let d = apply(&p, &l, far_future());
        assert_eq!(d[0].reasons, ["last snapshot"]);
        assert_eq!(d[0].counters.last, 2);
        assert_eq!(d[2].counters.last, 0);
        assert!(d[3].reasons.is_empty() && !d[3].keep);
        // More than there are: all kept, none as "oldest" (every snapshot is its own bucket).
        let p = policy(|p| p.last = 1000);
        let d = apply(&p, &l, far_future());
        assert!(d.iter().all(|d| d.keep && d.reasons == ["last snapshot"]));
    }

    #[test]
    fn a_year_of_daily_snapshots() {
        let l = daily_2023();
        let count = |p: Policy| kept(&p, &l).len();
        assert_eq!(count(policy(|p| p.daily = 7)), 7);
        assert_eq!(count(policy(|p| p.daily = 365)), 365);
        assert_eq!(count(policy(|p| p.daily = 400)), 365);
        assert_eq!(count(policy(|p| p.daily = UNLIMITED)), 365);
        // 31 December 2023 is a Sunday: ISO weeks end on Sundays.
        assert_eq!(
            kept(&policy(|p| p.weekly = 4), &l),
            [
                "2023-12-31 12:00:00",
                "2023-12-24 12:00:00",
                "2023-12-17 12:00:00",
                "2023-12-10 12:00:00"
            ]
        );
        // 1 January 2023 (a Sunday) is in ISO week 52 of 2022: 53 weeks have snapshots.
        assert_eq!(count(policy(|p| p.weekly = 53)), 53);
        assert_eq!(count(policy(|p| p.weekly = UNLIMITED)), 53);
        // Month ends, and the oldest snapshot once counts are left over.
        let months = kept(&policy(|p| p.monthly = 12), &l);
        assert_eq!(months.len(), 12);
        assert_eq!(months[1], "2023-11-30 12:00:00");
        assert_eq!(months[10], "2023-02-28 12:00:00");
        assert_eq!(months[11], "2023-01-31 12:00:00");
        let p = policy(|p| p.monthly = 13);
        let months = kept(&p, &l);
        assert_eq!(months.len(), 13);
        assert_eq!(months[12], "2023-01-01 12:00:00");
        let d = apply(&p, &l, far_future());
        assert_eq!(d[364].reasons, ["oldest monthly snapshot"]);
        assert_eq!(d[364].counters.monthly, 0);
        assert_eq!(d[0].reasons, ["monthly snapshot"]);
        assert_eq!(count(policy(|p| p.monthly = UNLIMITED)), 13);
        assert_eq!(kept(&policy(|p| p.yearly = 1), &l), ["2023-12-31 12:00:00"]);
        assert_eq!(
            kept(&policy(|p| p.yearly = 5), &l),
            ["2023-12-31 12:00:00", "2023-01-01 12:00:00"]
        );
    }

    #[test]
    fn a_year_of_hourly_snapshots() {
        let l = hourly_2023();
        let count = |p: Policy| kept(&p, &l).len();
        assert_eq!(count(policy(|p| p.hourly = 24)), 24);
        assert_eq!(count(policy(|p| p.hourly = UNLIMITED)), 8760);
        let days = kept(&policy(|p| p.daily = 30), &l);
        assert_eq!(days.len(), 30);
        assert!(days.iter().all(|t| t.ends_with("23:00:00")));
        assert_eq!(days[29], "2023-12-02 23:00:00");
        // 24 hours of the last day, and the 6 days before it: the newest hour counts for both.
        let p = policy(|p| {
            p.hourly = 24;
            p.daily = 7;
        });
        assert_eq!(count(p.clone()), 30);
        let d = apply(&p, &l, far_future());
        assert_eq!(d[0].reasons, ["hourly snapshot", "daily snapshot"]);
        assert_eq!(d[1].reasons, ["hourly snapshot"]);
        assert_eq!(d[24].reasons, ["daily snapshot"]);
        // Unlimited daily: 365 day ends and the very first hour.
        assert_eq!(count(policy(|p| p.daily = UNLIMITED)), 366);
        // The usual 7 daily, 4 weekly, 12 monthly, 2 yearly, hand-counted: days 31.12 to
        // 25.12; weeks ending 31.12 (same), 24.12, 17.12, 10.12; months ending 31.12 (same),
        // 30.11, ..., 31.1 (11 more); years: 31.12 (same), then counts left: 1.1 00:00.
        let p = policy(|p| {
            p.daily = 7;
            p.weekly = 4;
            p.monthly = 12;
            p.yearly = 2;
        });
        assert_eq!(count(p), 7 + 3 + 11 + 1);
    }

    #[test]
    fn bucket_boundaries() {
        // 23:59:59 and 00:00:00 are different days, hours, and here years; 1 January 2023 is
        // still in ISO week 2022-W52, 2 January 2023 starts 2023-W01.
        let l = list(&[
            at("2022-12-31 23:59:59", 0),
            at("2023-01-01 00:00:00", 0),
            at("2023-01-01 23:59:59", 0),
            at("2023-01-02 00:00:00", 0),
        ]);
        let k = |p: Policy| kept(&p, &l);
        assert_eq!(
            k(policy(|p| p.daily = UNLIMITED)),
            [
                "2023-01-02 00:00:00",
                "2023-01-01 23:59:59",
                "2022-12-31 23:59:59"
            ]
        );
        assert_eq!(k(policy(|p| p.hourly = UNLIMITED)).len(), 4);
        assert_eq!(
            k(policy(|p| p.weekly = 2)),
            ["2023-01-02 00:00:00", "2023-01-01 23:59:59"]
        );
        assert_eq!(
            k(policy(|p| p.yearly = 2)),
            ["2023-01-02 00:00:00", "2022-12-31 23:59:59"]
        );
        assert_eq!(k(policy(|p| p.monthly = 1)), ["2023-01-02 00:00:00"]);
        // Buckets are read in each snapshot's own offset: 23:30 UTC on 1 March and 00:30:01 on
        // 2 March at +01:00 are a second apart but on different days (in UTC the older one
        // would only be kept as the "oldest daily snapshot").
        let l = list(&[at("2024-03-01 23:30:00", 0), at("2024-03-02 00:30:01", 1)]);
        let d = apply(&policy(|p| p.daily = 2), &l, far_future());
        assert_eq!(d[0].reasons, ["daily snapshot"]);
        assert_eq!(d[1].reasons, ["daily snapshot"]);
    }

    #[test]
    fn keep_within() {
        let l = list(&[
            at("2024-03-08 12:00:00", 0),
            at("2024-03-08 12:00:01", 0),
            at("2024-03-09 00:00:00", 0),
            at("2024-03-10 12:00:00", 0),
        ]);
        let p = policy(|p| p.within = "2d".parse().unwrap());
        // Strictly newer than 2 days before the newest.
        assert_eq!(kept(&p, &l).len(), 3);
        let d = apply(&p, &l, far_future());
        assert_eq!(d[0].reasons, ["within 2d"]);
        assert!(!d[3].keep);
        // Months by the calendar: 31 March less 1m is 2 March in 2024.
        let l = list(&[
            at("2024-03-01 12:00:00", 0),
            at("2024-03-02 12:00:00", 0),
            at("2024-03-02 12:00:01", 0),
            at("2024-03-31 12:00:00", 0),
        ]);
        let p = policy(|p| p.within = "1m".parse().unwrap());
        assert_eq!(kept(&p, &l), ["2024-03-31 12:00:00", "2024-03-02 12:00:01"]);
        // Relative to the newest snapshot, not now: a year of dailies within 1y keeps all.
        let p = policy(|p| p.within = "1y".parse().unwrap());
        assert_eq!(kept(&p, &daily_2023()).len(), 365);
    }

    #[test]
    fn future_snapshots_do_not_count_as_newest() {
        let l = list(&[
            at("2024-01-01 00:00:00", 0),
            at("2024-01-05 00:00:00", 0),
            at("2030-01-01 00:00:00", 0),
        ]);
        let now = Utc.with_ymd_and_hms(2024, 6, 1, 0, 0, 0).unwrap();
        let p = policy(|p| p.within = "2d".parse().unwrap());
        let keep: Vec<bool> = apply(&p, &l, now).iter().map(|d| d.keep).collect();
        assert_eq!(keep, [true, true, false]);
        // All in the future: there is no newest, everything is within.
        let now = Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).unwrap();
        assert!(apply(&p, &l, now).iter().all(|d| d.keep));
    }

    #[test]
    fn keep_within_buckets() {
        let l = hourly_2023();
        // Within 3d of 31.12 23:00 is after 28.12 23:00: the day ends of 29.12 to 31.12. The
        // group's oldest snapshot (1.1) is not within, so it is not kept.
        let p = policy(|p| p.within_daily = "3d".parse().unwrap());
        assert_eq!(
            kept(&p, &l),
            [
                "2023-12-31 23:00:00",
                "2023-12-30 23:00:00",
                "2023-12-29 23:00:00"
            ]
        );
        let d = apply(&p, &l, far_future());
        assert_eq!(d[0].reasons, ["daily within 3d"]);
        // A whole group within: the oldest snapshot is kept as well.
        let short = list(&[
            at("2023-05-01 01:00:00", 0),
            at("2023-05-01 02:00:00", 0),
            at("2023-05-02 01:00:00", 0),
        ]);
        let d = apply(&p, &short, far_future());
        assert_eq!(d[0].reasons, ["daily within 3d"]);
        assert_eq!(d[1].reasons, ["daily within 3d"]);
        assert_eq!(d[2].reasons, ["oldest daily within 3d"]);
        let p = policy(|p| p.within_monthly = "1y".parse().unwrap());
        // A year before 31.12 23:00 is 31.12.2022 23:00: every hour of 2023 is within, so the
        // 12 month ends and the oldest snapshot (1.1 00:00) are kept.
        assert_eq!(kept(&p, &l).len(), 13);
        let p = policy(|p| p.within_hourly = "5h".parse().unwrap());
        assert_eq!(kept(&p, &l).len(), 5);
    }

    #[test]
    fn keep_tags() {
        let l = vec![
            (
                id(1),
                snap(at("2024-01-01 00:00:00", 0), "h", &["/p"], &["keep"]),
            ),
            (
                id(2),
                snap(at("2024-01-02 00:00:00", 0), "h", &["/p"], &["a", "b"]),
            ),
            (
                id(3),
                snap(at("2024-01-03 00:00:00", 0), "h", &["/p"], &["a"]),
            ),
            (id(4), snap(at("2024-01-04 00:00:00", 0), "h", &["/p"], &[])),
        ];
        let p = policy(|p| p.tags = vec![vec!["keep".into()], vec!["a".into(), "b".into()]]);
        let d = apply(&p, &l, far_future());
        let ids: Vec<(Id, bool)> = d.iter().map(|d| (d.id, d.keep)).collect();
        assert_eq!(
            ids,
            [(id(4), false), (id(3), false), (id(2), true), (id(1), true)]
        );
        assert_eq!(d[2].reasons, ["tags 'a,b'"]);
        assert_eq!(d[3].reasons, ["tag 'keep'"]);
        let p = policy(|p| {
            p.tags = vec![vec!["keep".into()]];
            p.last = 1;
        });
        assert_eq!(
            p.to_string(),
            "keep 1 latest snapshots and all snapshots with tags [keep]"
        );
        let d = apply(&p, &l, far_future());
        assert_eq!(d[0].reasons, ["last snapshot"]);
        assert!(!d[1].keep && !d[2].keep);
        assert_eq!(d[3].reasons, ["tag 'keep'"]);
    }

    #[test]
    fn policy_text_and_validation() {
        let p = policy(|p| {
            p.last = 3;
            p.daily = 7;
            p.monthly = UNLIMITED;
            p.within_daily = "1m".parse().unwrap();
            p.within = "2d".parse().unwrap();
        });
        assert_eq!(
            p.to_string(),
            "keep 3 latest, 7 daily, all monthly snapshots, daily snapshots within 1m and all snapshots within 2d of the newest"
        );
        assert!(p.validate().is_ok());
        assert!(policy(|p| p.weekly = -2).validate().is_err());
        assert!(policy(|p| p.tags = vec![vec![]]).validate().is_err());
        assert!(policy(|p| p.within.days = -1).validate().is_err());
    }

    #[test]
    fn grouping() {
        let l = vec![
            (
                id(1),
                snap(
                    at("2024-01-01 00:00:00", 0),
                    "b",
                    &["/y", "/x"],
                    &["t2", "t1"],
                ),
            ),
            (
                id(2),
                snap(at("2024-01-02 00:00:00", 0), "a", &["/x", "/y"], &[]),
            ),
            (
                id(3),
                snap(at("2024-01-03 00:00:00", 0), "b", &["/x", "/y"], &["t1"]),
            ),
            (
                id(4),
                snap(at("2024-01-04 00:00:00", 0), "b", &["/z"], &["t1", "t2"]),
            ),
        ];
        let ids = |gs: &[Group]| -> Vec<Vec<Id>> {
            gs.iter()
                .map(|g| g.snapshots.iter().map(|(i, _)| *i).collect())
                .collect()
        };
        let g = group(l.clone(), GroupBy::default());
        assert_eq!(ids(&g), [vec![id(2)], vec![id(1), id(3)], vec![id(4)]]);
        assert_eq!(g[1].key.to_string(), "host [b], paths [/x, /y]");
        assert_eq!(g[1].key.tags, None);
        let g = group(l.clone(), "tags".parse().unwrap());
        assert_eq!(ids(&g), [vec![id(2)], vec![id(3)], vec![id(1), id(4)]]);
        assert_eq!(g[2].key.to_string(), "tags [t1, t2]");
        let g = group(l.clone(), "host,paths,tags".parse().unwrap());
        assert_eq!(g.len(), 4);
        let g = group(l.clone(), "".parse().unwrap());
        assert_eq!(ids(&g), [vec![id(1), id(2), id(3), id(4)]]);
        assert_eq!(g[0].key.to_string(), "all snapshots");
        assert!("host,colour".parse::<GroupBy>().is_err());
        assert_eq!(
            "hosts, path".parse::<GroupBy>().unwrap(),
            GroupBy::default()
        );
        assert_eq!(GroupBy::default().to_string(), "host,paths");
    }

    /// The model of one count rule: the newest snapshot of each of the `n` most recent
    /// buckets, and the oldest snapshot when fewer than `n` buckets have snapshots.
    fn model(
        times: &[DateTime<FixedOffset>],
        n: i32,
        bucket: impl Fn(usize) -> i64,
    ) -> BTreeSet<usize> {
        // `times` is sorted newest first.
        let mut seen = vec![];
        let mut keep = BTreeSet::new();
        for i in 0..times.len() {
            let b = bucket(i);
            if !seen.contains(&b) {
                seen.push(b);
                if n < 0 || seen.len() <= n as usize {
                    keep.insert(i);
                }
            }
        }
        if !times.is_empty() && (n < 0 || seen.len() < n as usize) {
            keep.insert(times.len() - 1);
        }
        keep
    }

    fn arb_times() -> impl Strategy<Value = (Vec<DateTime<FixedOffset>>, i32)> {
        (
            proptest::collection::btree_set(1_600_000_000i64..1_700_000_000, 0..60),
            -12i32..=14,
        )
            .prop_map(|(secs, off)| {
                let o = FixedOffset::east_opt(off * 3600).unwrap();
                let mut v: Vec<_> = secs
                    .into_iter()
                    .map(|s| DateTime::from_timestamp(s, 0).unwrap().with_timezone(&o))
                    .collect();
                v.reverse();
                (v, off)
            })
    }

    fn arb_policy() -> impl Strategy<Value = Policy> {
        let count = prop_oneof![Just(0), Just(UNLIMITED), 1i32..8];
        let span = prop_oneof![
            Just(CalendarDuration::default()),
            (0i32..2, 0i32..13, 0i32..40, 0i32..48).prop_map(|(years, months, days, hours)| {
                CalendarDuration {
                    years,
                    months,
                    days,
                    hours,
                }
            })
        ];
        (
            proptest::collection::vec(count, 6),
            proptest::collection::vec(span, 6),
            proptest::collection::vec(proptest::collection::vec("[ab]", 1..3), 0..2),
        )
            .prop_map(|(c, s, tags)| Policy {
                last: c[0],
                hourly: c[1],
                daily: c[2],
                weekly: c[3],
                monthly: c[4],
                yearly: c[5],
                within: s[0],
                within_hourly: s[1],
                within_daily: s[2],
                within_weekly: s[3],
                within_monthly: s[4],
                within_yearly: s[5],
                tags,
            })
    }

    /// The policies of single rules whose union is `p`.
    fn single_rules(p: &Policy) -> Vec<Policy> {
        let mut v = vec![];
        let d = Policy::default();
        let counts = [
            Policy {
                last: p.last,
                ..d.clone()
            },
            Policy {
                hourly: p.hourly,
                ..d.clone()
            },
            Policy {
                daily: p.daily,
                ..d.clone()
            },
            Policy {
                weekly: p.weekly,
                ..d.clone()
            },
            Policy {
                monthly: p.monthly,
                ..d.clone()
            },
            Policy {
                yearly: p.yearly,
                ..d.clone()
            },
            Policy {
                within: p.within,
                ..d.clone()
            },
            Policy {
                within_hourly: p.within_hourly,
                ..d.clone()
            },
            Policy {
                within_daily: p.within_daily,
                ..d.clone()
            },
            Policy {
                within_weekly: p.within_weekly,
                ..d.clone()
            },
            Policy {
                within_monthly: p.within_monthly,
                ..d.clone()
            },
            Policy {
                within_yearly: p.within_yearly,
                ..d.clone()
            },
        ];
        for c in counts {
            if !c.is_empty() {
                v.push(c);
            }
        }
        for l in &p.tags {
            v.push(Policy {
                tags: vec![l.clone()],
                ..d.clone()
            });
        }
        v
    }

    /// The count rule number `rule` (last, hourly, daily, weekly, monthly, yearly).
    fn count_mut(p: &mut Policy, rule: usize) -> &mut i32 {
        match rule {
            0 => &mut p.last,
            1 => &mut p.hourly,
            2 => &mut p.daily,
            3 => &mut p.weekly,
            4 => &mut p.monthly,
            _ => &mut p.yearly,
        }
    }

    fn with_tags(times: &[DateTime<FixedOffset>]) -> Vec<(Id, Snapshot)> {
        times
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let tags: &[&str] = match i % 4 {
                    0 => &[],
                    1 => &["a"],
                    2 => &["b"],
                    _ => &["a", "b"],
                };
                (id(i as u64), snap(*t, "h", &["/p"], tags))
            })
            .collect()
    }

    fn kept_ids(p: &Policy, l: &[(Id, Snapshot)]) -> HashSet<Id> {
        apply(p, l, far_future())
            .into_iter()
            .filter(|d| d.keep)
            .map(|d| d.id)
            .collect()
    }

    proptest! {
        #[test]
        fn count_rules_match_the_model((times, _off) in arb_times(), n in prop_oneof![Just(UNLIMITED), 1i32..10], rule in 0usize..6) {
            let l = list(&times);
            let mut p = Policy::default();
            let period = [None, Some(Period::Hour), Some(Period::Day), Some(Period::Week), Some(Period::Month), Some(Period::Year)][rule];
            *count_mut(&mut p, rule) = n;
            let d = apply(&p, &l, far_future());
            // `times` is newest first, as the decisions: decision i is snapshot id(i).
            let kept: BTreeSet<usize> = d.iter().enumerate().filter(|(_, d)| d.keep).map(|(i, _)| i).collect();
            let want = model(&times, n, |i| period.map_or(i as i64, |p| p.bucket(&times[i])));
            prop_assert_eq!(kept, want);
            prop_assert_eq!(d.len(), times.len());
            for (i, dec) in d.iter().enumerate() {
                prop_assert_eq!(dec.id, id(i as u64));
            }
        }

        #[test]
        fn a_policy_keeps_the_union_of_its_rules((times, _off) in arb_times(), p in arb_policy()) {
            let l = with_tags(&times);
            let all = kept_ids(&p, &l);
            if p.is_empty() {
                prop_assert_eq!(all.len(), l.len());
            } else {
                let union: HashSet<Id> = single_rules(&p).iter().flat_map(|r| kept_ids(r, &l)).collect();
                prop_assert_eq!(all, union);
            }
            // Every snapshot is decided once; kept ones have reasons, removed ones none.
            let d = apply(&p, &l, far_future());
            prop_assert_eq!(d.len(), l.len());
            prop_assert_eq!(d.iter().map(|d| d.id).collect::<HashSet<_>>().len(), l.len());
            prop_assert!(d.iter().all(|d| d.keep != d.reasons.is_empty()));
        }

        #[test]
        fn more_counts_never_keep_less((times, _off) in arb_times(), p in arb_policy(), rule in 0usize..6) {
            let l = with_tags(&times);
            let mut more = p.clone();
            let c = count_mut(&mut more, rule);
            if *c >= 0 {
                *c += 1;
            }
            prop_assert!(kept_ids(&p, &l).is_subset(&kept_ids(&more, &l)));
        }

        #[test]
        fn keep_within_is_a_time_window((times, _off) in arb_times(), days in 1i32..400) {
            let l = list(&times);
            let span = CalendarDuration { days, ..Default::default() };
            let p = Policy { within: span, ..Default::default() };
            let d = apply(&p, &l, far_future());
            if let Some(newest) = times.first() {
                let th = *newest - TimeDelta::days(i64::from(days));
                for (i, dec) in d.iter().enumerate() {
                    prop_assert_eq!(dec.keep, times[i] > th);
                }
            }
        }
    }
}

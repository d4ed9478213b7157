//! [`Policy`]: what `forget` keeps (counts, spans and tag lists), its validation and its
//! one-line description; [`parse_count`] for the keep counts.

use std::fmt;

use super::buckets::{COUNT_PERIODS, Period, count_name};
use super::{CalendarDuration, ParseError, UNLIMITED};

/// Parses a keep count: a number of at least -1, or `unlimited` (-1). A count past
/// `i32::MAX` (restic takes any 64-bit count) is `i32::MAX`: no group has that many buckets.
pub fn parse_count(s: &str) -> Result<i32, ParseError> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("unlimited") {
        return Ok(UNLIMITED);
    }
    match t.parse::<i64>() {
        Ok(n) if n >= i64::from(UNLIMITED) => Ok(i32::try_from(n).unwrap_or(i32::MAX)),
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
        if let Some((n, period)) = self.counts().into_iter().find(|(n, _)| *n < UNLIMITED) {
            return Err(ParseError(format!(
                "invalid {} keep count {n}: use -1 or \"unlimited\" for all",
                count_name(period)
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

    /// The count rules with their buckets ([`COUNT_PERIODS`]).
    pub(super) fn counts(&self) -> [(i32, Option<Period>); 6] {
        let n = [
            self.last,
            self.hourly,
            self.daily,
            self.weekly,
            self.monthly,
            self.yearly,
        ];
        std::array::from_fn(|i| (n[i], COUNT_PERIODS[i]))
    }

    /// The `--keep-within-*` rules with their buckets.
    pub(super) fn spans(&self) -> [(CalendarDuration, Period); 5] {
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
            .map(|(n, period)| {
                let name = period.map_or("latest", Period::name);
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

//! [`CalendarDuration`]: the spans of `--keep-within*` (`1y2m3d4h`), parsed, printed, and
//! taken off a moment by the calendar as Go's `AddDate` does.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, TimeDelta};

use super::ParseError;

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

    /// The moment this span before `t`, as restic computes it (`AddDate` then `Add`): years
    /// and months are taken off the month, then days off the day, a day past the end of its
    /// month rolling over into the next (31 March less one month is 3 March, or 2 March in a
    /// leap year), on the wall clock of `t`'s zone; then the hours, as elapsed time. `t`'s
    /// zone is the machine's local zone when `t`'s offset is the one it had then (as Go reads
    /// such a time), so that the calendar step crosses a daylight-saving change as the clock
    /// does; otherwise `t`'s fixed offset. `None` when the result is out of range.
    pub fn before(&self, t: &DateTime<FixedOffset>) -> Option<DateTime<FixedOffset>> {
        self.before_in(t, &chrono::Local)
    }

    /// [`Self::before`] with `zone` as the local zone.
    pub fn before_in<Z: chrono::TimeZone>(
        &self,
        t: &DateTime<FixedOffset>,
        zone: &Z,
    ) -> Option<DateTime<FixedOffset>> {
        use chrono::Offset;
        let local = t.naive_local();
        let months = i64::from(local.year()) * 12 + i64::from(local.month0())
            - i64::from(self.years) * 12
            - i64::from(self.months);
        let year = i32::try_from(months.div_euclid(12)).ok()?;
        let month0 = u32::try_from(months.rem_euclid(12)).ok()?;
        let first = NaiveDate::from_ymd_opt(year, month0 + 1, 1)?;
        let day_offset = i64::from(local.day()) - 1 - i64::from(self.days);
        let date = first.checked_add_signed(TimeDelta::try_days(day_offset)?)?;
        let naive = date.and_time(local.time());
        let in_zone = zone.offset_from_utc_datetime(&t.naive_utc()).fix() == *t.offset();
        let day = if in_zone {
            arca_format::text::from_wall_clock(zone, naive)?
        } else {
            naive.and_local_timezone(*t.offset()).single()?
        };
        day.checked_sub_signed(TimeDelta::try_hours(i64::from(self.hours))?)
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

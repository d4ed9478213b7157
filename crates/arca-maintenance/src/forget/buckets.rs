//! The calendar buckets of the time rules ([`Period`]), by which `--keep-hourly` ...
//! `--keep-yearly` and `--keep-within-*` keep the newest snapshot of each bucket.

use chrono::{DateTime, Datelike, FixedOffset, Timelike};

/// The calendar buckets of the time rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Period {
    Hour,
    Day,
    Week,
    Month,
    Year,
}

/// The buckets of the count rules, in the order of [`super::Policy`]'s fields (last, hourly,
/// daily, weekly, monthly, yearly): `None` for `--keep-last`, where every snapshot is its own
/// bucket.
pub(super) const COUNT_PERIODS: [Option<Period>; 6] = [
    None,
    Some(Period::Hour),
    Some(Period::Day),
    Some(Period::Week),
    Some(Period::Month),
    Some(Period::Year),
];

/// The name of the count rule over `period`: `last`, `hourly`, ... `yearly`.
pub(super) fn count_name(period: Option<Period>) -> &'static str {
    period.map_or("last", Period::name)
}

impl Period {
    pub(super) fn name(self) -> &'static str {
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
    pub(super) fn bucket(self, t: &DateTime<FixedOffset>) -> i64 {
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

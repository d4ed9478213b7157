//! Text forms shared by the command line and the web interface: `ls -l` mode strings, sizes
//! with units (`16MiB`, `1.23 GiB`), `1:02:03` durations and times, read and printed the same
//! way.

use crate::NodeKind;

/// `rwxr-xr-x`-style mode string with the type letter first (setuid, setgid and sticky bits
/// as `s`/`S` and `t`/`T`, as `ls -l`).
pub fn mode_string(kind: NodeKind, mode: u32) -> String {
    let t = match kind {
        NodeKind::File => '-',
        NodeKind::Dir => 'd',
        NodeKind::Symlink => 'l',
        NodeKind::Fifo => 'p',
        NodeKind::CharDev => 'c',
        NodeKind::BlockDev => 'b',
        NodeKind::Socket => 's',
    };
    let mut s = String::with_capacity(10);
    s.push(t);
    let bits = [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ];
    for (i, (b, c)) in bits.iter().enumerate() {
        let special = match i {
            2 => mode & 0o4000 != 0,
            5 => mode & 0o2000 != 0,
            8 => mode & 0o1000 != 0,
            _ => false,
        };
        let set = mode & b != 0;
        s.push(match (special, set, i) {
            (true, true, 8) => 't',
            (true, false, 8) => 'T',
            (true, true, _) => 's',
            (true, false, _) => 'S',
            (false, true, _) => *c,
            (false, false, _) => '-',
        });
    }
    s
}

/// Splits `12.5ms` into 12.5 and `ms`; `what` names the kind of value in errors.
pub fn number_and_unit<'a>(s: &'a str, what: &str) -> Result<(f64, &'a str), String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("invalid {what} {s:?}"))?;
    Ok((n, unit))
}

/// Parses sizes like `16MiB`, `100MB`, `4096`, `1.5G`; the error names the value. A bare
/// `K`, `M`, `G` or `T` is binary (1024-based) as in restic, so `--exclude-larger-than 2G`
/// means the same in both; `KB`, `MB`… are decimal and `KiB`, `MiB`… binary.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (n, unit) = number_and_unit(s, "size")?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "k" | "ki" | "kib" => 1024.0,
        "m" | "mi" | "mib" => 1024.0 * 1024.0,
        "g" | "gi" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "ti" | "tib" => 1024.0f64.powi(4),
        u => return Err(format!("invalid size unit {u:?} in {s:?}")),
    };
    let v = n * mult;
    if !(0.0..1.8e19).contains(&v) {
        return Err(format!("size {s:?} out of range"));
    }
    // A size must name a whole number of bytes: a fraction written in bytes (`0.5`, `1.5B`)
    // or below one byte in a larger unit (`0.0001K`) was truncated, and
    // `--exclude-larger-than 0.5` left out every file that is not empty (hunt 25). A
    // fraction in a larger unit (`1.5K`, `1.1GiB`) is truncated to whole bytes.
    if (mult == 1.0 && n.fract() != 0.0) || (n > 0.0 && v < 1.0) {
        return Err(format!("size {s:?} {NOT_WHOLE_BYTES}"));
    }
    Ok(v as u64)
}

/// How [`parse_size`] refuses a size that is a fraction of a byte.
pub const NOT_WHOLE_BYTES: &str = "is not a whole number of bytes";

/// A path as text: as it is where it is UTF-8, each other byte shown as `\xNN`, as restic
/// shows them (`Path::display` shows them all as U+FFFD, so two different names printed the
/// same and a warning did not say which file it was about). Control characters are shown
/// so too (`\x0a`; `\u{9b}` for C1): a name holding a newline or an escape sequence forged
/// lines of the listing, or drove the terminal (hunt 30).
pub fn shown(p: &std::path::Path) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write;
    use std::os::unix::ffi::OsStrExt;
    let bytes = p.as_os_str().as_bytes();
    if let Ok(s) = std::str::from_utf8(bytes)
        && !s.chars().any(char::is_control)
    {
        return s.into();
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                c if c.is_ascii_control() => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c if c.is_control() => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out.into()
}

/// `1.23 GiB`-style sizes.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// A count and what it counts, in the singular for one: `1 file`, `0 files`, `2 entries`
/// (`what` is the singular; see [`noun`]). Every "N things" the command line and the web
/// interface's job logs print goes through it: they said "1 files".
pub fn count<N: std::fmt::Display + TryInto<u64> + Copy>(n: N, what: &str) -> String {
    format!("{n} {}", noun(n, what))
}

/// `what` (a singular noun, or a phrase ending in one: `index file`) as it follows the
/// number `n`: itself for 1, else its plural: `ies` for a consonant and `y` (`entry`), `es`
/// after `s`, `x`, `ch` or `sh`, else `s`.
pub fn noun<N: TryInto<u64>>(n: N, what: &str) -> std::borrow::Cow<'_, str> {
    if n.try_into().is_ok_and(|n| n == 1) {
        return what.into();
    }
    let b = what.as_bytes();
    match b {
        [.., c, b'y'] if !b"aeiou".contains(c) => format!("{}ies", &what[..what.len() - 1]).into(),
        [.., b's' | b'x'] | [.., b'c' | b's', b'h'] => format!("{what}es").into(),
        _ => format!("{what}s").into(),
    }
}

/// `1:02:03` / `2:03` durations.
pub fn human_duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// How [`entry_time`] shows a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeStyle {
    /// `2024-05-01 12:30:00`, as `ls -l` lines show it.
    Short,
    /// RFC 3339 with nanoseconds and the offset, `2024-05-01T12:30:00.000000000+02:00`, as
    /// JSON carries it.
    Rfc3339,
}

/// An entry's time (mtime, atime, ctime) in local time. A file system can hold times that
/// chrono cannot (years beyond ±262,143: tmpfs and XFS keep 64-bit seconds); those are shown
/// in UTC from the proleptic Gregorian calendar, the year with its sign past four digits
/// (`+287168-08-24 16:00:00`), so no time is ever shown blank or as raw seconds.
pub fn entry_time(t: crate::Timespec, style: TimeStyle) -> String {
    if let Some(d) = chrono::DateTime::from_timestamp(t.sec, t.nsec) {
        let local = d.with_timezone(&chrono::Local);
        return match style {
            TimeStyle::Short => local.format("%Y-%m-%d %H:%M:%S").to_string(),
            TimeStyle::Rfc3339 => local.to_rfc3339_opts(chrono::SecondsFormat::Nanos, false),
        };
    }
    let (y, mo, d) = civil_from_days(t.sec.div_euclid(86_400));
    let s = t.sec.rem_euclid(86_400);
    let year = if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else {
        format!("{y:+05}")
    };
    let (h, mi, sec) = (s / 3600, s / 60 % 60, s % 60);
    match style {
        TimeStyle::Short => format!("{year}-{mo:02}-{d:02} {h:02}:{mi:02}:{sec:02}"),
        TimeStyle::Rfc3339 => format!(
            "{year}-{mo:02}-{d:02}T{h:02}:{mi:02}:{sec:02}.{:09}+00:00",
            t.nsec
        ),
    }
}

/// Year, month (1-12) and day (1-31) of the day `z` days after 1970-01-01 in the proleptic
/// Gregorian calendar, for every `i64` day count a time in seconds can reach (Howard
/// Hinnant's `civil_from_days`, counting in 400-year eras of 146,097 days).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A time as restic's options take it: RFC 3339 with its own offset
/// (`2006-01-02T15:04:05+07:00`), or local `2006-01-02 15:04:05` or `2006-01-02 15:04`, and
/// with `date_alone` also `2006-01-02` (midnight, local).
/// A second 60 (a leap second, which restic refuses) is refused: it was kept, and recorded a
/// time that never was.
pub fn parse_time(s: &str, date_alone: bool) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    use chrono::{Local, NaiveDate, NaiveDateTime, Timelike};
    let t = s.trim();
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(t) {
        return (d.nanosecond() < 1_000_000_000).then_some(d);
    }
    let naive = ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
        .or_else(|| {
            date_alone
                .then(|| NaiveDate::parse_from_str(t, "%Y-%m-%d").ok())
                .flatten()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
        .filter(|n| n.nanosecond() < 1_000_000_000)?;
    from_wall_clock(&Local, naive)
}

/// `naive` on the wall clock of `zone`, read as Go's `time.Date` reads it (and so restic):
/// the offset in force at `naive` taken as UTC, unless the instant it gives falls on the other
/// side of a change of offset, then the offset in force there. So a time the clock skips
/// (02:30 on a night that goes from 02:00 to 03:00) moves on by the gap in zones east of UTC
/// (03:30) and back in zones west of it (01:30), and a time it shows twice is the later one
/// east of UTC and the earlier one west of it, as restic records them. Shown with the offset
/// in force at the instant. `None` out of range.
pub fn from_wall_clock<Z: chrono::TimeZone>(
    zone: &Z,
    naive: chrono::NaiveDateTime,
) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    use chrono::{FixedOffset, Offset, TimeDelta};
    let offset_at = |utc: chrono::NaiveDateTime| zone.offset_from_utc_datetime(&utc).fix();
    let utc_with = |o: FixedOffset| {
        naive.checked_sub_signed(TimeDelta::try_seconds(i64::from(o.local_minus_utc()))?)
    };
    let guess = offset_at(naive);
    let first = utc_with(guess)?;
    let utc = match offset_at(first) {
        o if o == guess => first,
        o => utc_with(o)?,
    };
    Some(chrono::DateTime::from_naive_utc_and_offset(
        utc,
        offset_at(utc),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_singular_for_one() {
        assert_eq!(count(1, "file"), "1 file");
        assert_eq!(count(0, "file"), "0 files");
        assert_eq!(count(2, "index file"), "2 index files");
        assert_eq!(count(1, "entry"), "1 entry");
        assert_eq!(count(3, "entry"), "3 entries");
        assert_eq!(count(2, "key"), "2 keys");
        assert_eq!(count(2, "match"), "2 matches");
        assert_eq!(count(2, "byte"), "2 bytes");
    }

    #[test]
    fn civil_dates_agree_with_chrono_where_it_reaches() {
        // Every 97th day over chrono's whole range, and the days around the epoch and the
        // ends of centuries, give chrono's date.
        let (lo, hi) = (
            chrono::NaiveDate::MIN
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc()
                .timestamp()
                / 86_400,
            chrono::NaiveDate::MAX
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc()
                .timestamp()
                / 86_400,
        );
        let days = (lo..=hi).step_by(97).chain(-800_000..800_000);
        for z in days {
            let want = chrono::DateTime::from_timestamp(z * 86_400, 0)
                .unwrap()
                .date_naive();
            let (y, m, d) = civil_from_days(z);
            use chrono::Datelike;
            assert_eq!(
                (y, m, d),
                (i64::from(want.year()), want.month(), want.day()),
                "day {z}"
            );
        }
    }

    #[test]
    fn entry_times_beyond_chrono_are_shown_in_utc() {
        use crate::Timespec;
        // `stat` shows 9e12 s as 287168-08-24 16:00:00 UTC.
        let t = Timespec {
            sec: 9_000_000_000_000,
            nsec: 5,
        };
        assert_eq!(entry_time(t, TimeStyle::Short), "+287168-08-24 16:00:00");
        assert_eq!(
            entry_time(t, TimeStyle::Rfc3339),
            "+287168-08-24T16:00:00.000000005+00:00"
        );
        // Before the first year chrono holds, and at the ends of i64.
        let past = Timespec {
            sec: -9_000_000_000_000,
            nsec: 0,
        };
        assert!(
            entry_time(past, TimeStyle::Short).starts_with("-283"),
            "{}",
            entry_time(past, TimeStyle::Short)
        );
        for sec in [i64::MIN, i64::MAX] {
            let s = entry_time(Timespec { sec, nsec: 0 }, TimeStyle::Short);
            assert!(s.len() > 19, "{s}");
        }
        // Times chrono holds are shown by chrono, in local time.
        let now = Timespec {
            sec: 1_700_000_000,
            nsec: 0,
        };
        let want = chrono::DateTime::from_timestamp(1_700_000_000, 0)
            .unwrap()
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string();
        assert_eq!(entry_time(now, TimeStyle::Short), want);
    }

    /// A zone whose offset changes once, at `at` (UTC), from `before` to `after`.
    #[derive(Debug, Clone, Copy)]
    struct Switch {
        at: chrono::NaiveDateTime,
        before: chrono::FixedOffset,
        after: chrono::FixedOffset,
    }

    impl chrono::TimeZone for Switch {
        type Offset = chrono::FixedOffset;
        fn from_offset(o: &chrono::FixedOffset) -> Self {
            Switch {
                at: chrono::NaiveDateTime::MIN,
                before: *o,
                after: *o,
            }
        }
        fn offset_from_local_date(
            &self,
            _: &chrono::NaiveDate,
        ) -> chrono::LocalResult<chrono::FixedOffset> {
            chrono::LocalResult::None
        }
        fn offset_from_local_datetime(
            &self,
            _: &chrono::NaiveDateTime,
        ) -> chrono::LocalResult<chrono::FixedOffset> {
            chrono::LocalResult::None
        }
        fn offset_from_utc_date(&self, d: &chrono::NaiveDate) -> chrono::FixedOffset {
            self.offset_from_utc_datetime(&d.and_hms_opt(0, 0, 0).unwrap())
        }
        fn offset_from_utc_datetime(&self, t: &chrono::NaiveDateTime) -> chrono::FixedOffset {
            if *t < self.at {
                self.before
            } else {
                self.after
            }
        }
    }

    #[test]
    fn paths_that_are_not_utf8_show_their_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let p = |b: &[u8]| std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b));
        assert_eq!(shown(&p(b"/src/x\xe8y")), "/src/x\\xe8y");
        assert_eq!(shown(&p(b"/src/x\xe9y")), "/src/x\\xe9y");
        assert_eq!(shown(&p("/src/été".as_bytes())), "/src/été");
        // Control characters cannot forge lines or drive the terminal.
        assert_eq!(shown(&p(b"/a\nerror: x")), "/a\\x0aerror: x");
        assert_eq!(shown(&p(b"/a\x1b[2Jb\x7f")), "/a\\x1b[2Jb\\x7f");
        assert_eq!(shown(&p(b"/a\xc2\x9bb\xff")), "/a\\u{9b}b\\xff");
    }

    #[test]
    fn a_leap_second_is_refused_as_restic_refuses_it() {
        assert!(parse_time("2026-10-25T02:30:60Z", false).is_none());
        assert!(parse_time("2026-10-25 02:30:60", false).is_none());
        assert!(parse_time("2026-10-25T02:30:59Z", false).is_some());
    }

    /// Wall-clock times on nights the clock changes read as restic (Go's `time.Date`) reads
    /// them, east and west of UTC (east of UTC arca read them as west: an hour off restic).
    #[test]
    fn wall_clock_times_on_clock_change_nights_read_as_restic() {
        let at = |s: &str| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap();
        let h = |n: i32| chrono::FixedOffset::east_opt(n * 1800).unwrap();
        let berlin_spring = Switch {
            at: at("2026-03-29 01:00"),
            before: h(2),
            after: h(4),
        };
        let berlin_autumn = Switch {
            at: at("2026-10-25 01:00"),
            before: h(4),
            after: h(2),
        };
        let ny_spring = Switch {
            at: at("2026-03-08 07:00"),
            before: h(-10),
            after: h(-8),
        };
        let ny_autumn = Switch {
            at: at("2026-11-01 06:00"),
            before: h(-8),
            after: h(-10),
        };
        let lord_howe = Switch {
            at: at("2026-04-04 15:00"),
            before: h(22),
            after: h(21),
        };
        for (zone, wall, want) in [
            (
                berlin_spring,
                "2026-03-29 02:30",
                "2026-03-29T03:30:00+02:00",
            ),
            (
                berlin_autumn,
                "2026-10-25 02:30",
                "2026-10-25T02:30:00+01:00",
            ),
            (ny_spring, "2026-03-08 02:30", "2026-03-08T01:30:00-05:00"),
            (ny_autumn, "2026-11-01 01:30", "2026-11-01T01:30:00-04:00"),
            (lord_howe, "2026-04-05 01:45", "2026-04-05T01:45:00+10:30"),
            (
                berlin_spring,
                "2026-03-29 12:00",
                "2026-03-29T12:00:00+02:00",
            ),
        ] {
            let got = from_wall_clock(&zone, at(wall)).unwrap().to_rfc3339();
            assert_eq!(got, want, "{wall}");
        }
    }

    #[test]
    fn modes_and_sizes() {
        assert_eq!(mode_string(NodeKind::Dir, 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string(NodeKind::File, 0o4755), "-rwsr-xr-x");
        assert_eq!(mode_string(NodeKind::Symlink, 0o2644), "lrw-r-Sr--");
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        // restic's units: a bare letter is binary.
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert_eq!(parse_size(" 4096 "), Ok(4096));
        assert!(parse_size("12XB").unwrap_err().contains("\"12XB\""));
        assert!(parse_size("").is_err());
        assert!(parse_size("1e30").is_err());
    }
}

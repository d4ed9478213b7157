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
    Ok(v as u64)
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

/// `1:02:03` / `2:03` durations.
pub fn human_duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// A time as restic's options take it: RFC 3339 with its own offset
/// (`2006-01-02T15:04:05+07:00`), or local `2006-01-02 15:04:05` or `2006-01-02 15:04`, and
/// with `date_alone` also `2006-01-02` (midnight, local).
pub fn parse_time(s: &str, date_alone: bool) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    use chrono::{Local, NaiveDate, NaiveDateTime};
    let t = s.trim();
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(t) {
        return Some(d);
    }
    let naive = ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
        .or_else(|| {
            date_alone
                .then(|| NaiveDate::parse_from_str(t, "%Y-%m-%d").ok())
                .flatten()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })?;
    from_wall_clock(&Local, naive)
}

/// `naive` on the wall clock of `zone`, read as Go's `time.Date` reads it (and so restic): a
/// time the clock shows twice (set back) is the first, one it skips (set forward) takes the
/// offset after the change (02:30 on a night that skips from 02:00 to 03:00 is 01:30 before
/// the change, in the offset before it). `None` out of range.
pub fn from_wall_clock<Z: chrono::TimeZone>(
    zone: &Z,
    naive: chrono::NaiveDateTime,
) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    use chrono::{FixedOffset, Offset, TimeDelta};
    let day = TimeDelta::try_days(1)?;
    let offset_at = |utc: chrono::NaiveDateTime| zone.offset_from_utc_datetime(&utc).fix();
    let before = offset_at(naive.checked_sub_signed(day)?);
    let after = offset_at(naive.checked_add_signed(day)?);
    let utc_with = |o: FixedOffset| {
        naive.checked_sub_signed(TimeDelta::try_seconds(i64::from(o.local_minus_utc()))?)
    };
    let mut valid: Vec<(chrono::NaiveDateTime, FixedOffset)> = [before, after]
        .into_iter()
        .filter_map(|o| utc_with(o).filter(|&u| offset_at(u) == o).map(|u| (u, o)))
        .collect();
    valid.sort_by_key(|(u, _)| *u);
    let (utc, offset) = match valid.first() {
        Some(&first) => first,
        // Shown with the offset the clock had at that moment, as Go shows it.
        None => {
            let utc = utc_with(after)?;
            (utc, offset_at(utc))
        }
    };
    Some(chrono::DateTime::from_naive_utc_and_offset(utc, offset))
}

#[cfg(test)]
mod tests {
    use super::*;

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

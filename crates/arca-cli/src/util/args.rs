//! The values of command-line options: clap's checks of sizes, durations, counts, times,
//! tags, patterns and backend options, and the parsing of sizes and durations.

use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use arca_remote::RemoteOptions;

fn number_and_unit<'a>(s: &'a str, what: &str) -> Result<(f64, &'a str)> {
    arca_format::text::number_and_unit(s, what).map_err(|e| anyhow!(e))
}

/// Parses sizes like `16MiB`, `100MB`, `4096`, `1.5G`.
pub fn parse_size(s: &str) -> Result<u64> {
    arca_format::text::parse_size(s).map_err(|e| anyhow!(e))
}

/// clap's check of a SIZE option (kept as written, parsed where it is used): a bad value is
/// a usage error naming the option, with exit code 2.
pub fn size_arg(s: &str) -> Result<String, String> {
    arca_format::text::parse_size(s)
        .map(|_| s.to_string())
        .map_err(|e| {
            // A size too large is a size: say so (it was told sizes look like 4096).
            if e.ends_with("out of range") {
                "out of range: a size must stay below 1.8e19 bytes (18000000TB)".into()
            } else if e.ends_with(arca_format::text::NOT_WHOLE_BYTES) {
                format!(
                    "{s:?} {}: write a whole number of bytes (4096), or a unit (1.5K, 2MiB)",
                    arca_format::text::NOT_WHOLE_BYTES
                )
            } else {
                "expected a size such as 4096, 512KiB, 64MiB or 2G".into()
            }
        })
}

/// clap's check of `check --read-data-subset`, as [`size_arg`].
pub fn subset_arg(s: &str) -> Result<String, String> {
    arca_maintenance::check::DataSubset::parse(s)
        .map(|_| s.to_string())
        .map_err(|_| {
            "expected a group n/m (m up to 256), a percentage above 0% and at most 100%, or a \
             size such as 500M"
                .into()
        })
}

/// clap's check of `backup --stdin-filename`: a name, or names joined by `/` (restic's
/// `db/dump.sql` stores the file in a folder `db`); given back without empty components.
pub fn stdin_path_arg(s: std::ffi::OsString) -> Result<std::ffi::OsString, String> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let parts: Vec<&[u8]> = s
        .as_bytes()
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .collect();
    if parts.is_empty()
        || parts
            .iter()
            .any(|c| arca_format::tree::validate_name(c).is_err())
    {
        return Err(
            "expected a file name or a path of names (`db/dump.sql`), without `.` or `..`".into(),
        );
    }
    Ok(std::ffi::OsString::from_vec(parts.join(&b'/')))
}

/// A snapshot time (`backup --time`): `2006-01-02 15:04:05` or `2006-01-02 15:04` in local
/// time, or RFC 3339 with its own offset.
pub fn parse_snapshot_time(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    arca_format::text::parse_time(s, false)
}

/// clap's check of `backup --time`.
pub fn snapshot_time_arg(s: &str) -> Result<String, String> {
    parse_snapshot_time(s)
        .map(|_| s.to_string())
        .ok_or_else(|| {
            "expected a time such as \"2006-01-02 15:04:05\" (local) or 2006-01-02T15:04:05+07:00"
                .into()
        })
}

/// clap's reading of a `--group-by` list (host, paths, tags).
pub fn group_by_arg(
    s: &str,
) -> Result<arca_maintenance::forget::GroupBy, arca_maintenance::forget::ParseError> {
    s.parse()
}

/// clap's check of a value that may not be empty (`--exclude-if-present ''` was refused only
/// after the repository was opened, exit 1: hunt 30).
pub fn non_empty_arg(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("expected a value, not an empty one".into());
    }
    Ok(s.to_string())
}

/// clap's check of a `--keep-tag` list: at least one tag (an empty list kept nothing and
/// was refused only after the repository was opened, exit 1).
pub fn keep_tag_arg(s: &str) -> Result<String, String> {
    if s.split(',').all(|t| t.trim().is_empty()) {
        return Err("expected a tag, or tags separated by commas".into());
    }
    Ok(s.to_string())
}

/// clap's check of a backend option: KEY=VALUE with a known key (exit 2, before anything
/// is opened).
pub fn backend_option_arg(s: &str) -> Result<String, String> {
    RemoteOptions::parse_extended(&[s.to_string()])?;
    Ok(s.to_string())
}

/// clap's check of a count that must be at least 1.
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a whole number of at least 1".into()),
    }
}

/// Most threads (or reads, or uploads in flight) an option may ask for: far more than helps
/// on any machine, and few enough that the threads can be made (a spawn that fails aborts).
pub const MAX_THREADS: usize = 256;

/// clap's check of a thread count: 1 to [`MAX_THREADS`].
pub fn thread_count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number from 1 to {MAX_THREADS}")),
    }
}

/// clap's check of a DURATION option, as [`size_arg`].
pub fn duration_arg(s: &str) -> Result<String, String> {
    parse_duration(s).map(|_| s.to_string()).map_err(|e| {
        // What is wrong, when more is known than that it is no duration (a duration too
        // long, an unknown unit: it said only what durations look like).
        let why = e.to_string();
        if why.ends_with("out of range") {
            "out of range: a duration must stay below 1e9 s (about 31 years)".into()
        } else if why.contains("unit") {
            format!("{why}: expected a duration such as 100us, 20ms, 1.5s, 2m or 1h30m")
        } else {
            "expected a duration such as 100us, 20ms, 1.5s, 2m or 1h30m".into()
        }
    })
}

/// Parses durations like `20ms`, `1.5s`, `100us`, `2h`, and Go's sums such as `1h30m`; a
/// bare number alone is seconds. In a sum every number has its unit, as Go's
/// `time.ParseDuration` wants: `10ms5` was read as 10 ms and 5 s.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let whole = s.trim();
    let mut rest = whole;
    if rest.is_empty() {
        bail!("invalid duration {s:?}");
    }
    let mut secs = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let unit_len = rest[digits..]
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len() - digits);
        let term = &rest[..digits + unit_len];
        let (n, unit) = number_and_unit(term, "duration")?;
        secs += n * match unit.trim() {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            // Seconds without a unit only when the number is all there is (`5`, not `1m5`,
            // nor `5 10ms`).
            "" if term.len() != whole.len() => {
                bail!("invalid duration {s:?}: a number without a unit in a sum")
            }
            "" | "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            u => bail!("invalid duration unit {u:?} in {s:?}"),
        };
        rest = &rest[digits + unit_len..];
    }
    if !(0.0..1e9).contains(&secs) {
        bail!("duration {s:?} out of range");
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A pattern option's value: text, and a glob. A value that is not UTF-8 is refused naming the
/// option and the value (clap said only "invalid UTF-8 was detected in one or more
/// arguments").
#[derive(Clone, Copy, Debug)]
pub struct TextPattern;

impl clap::builder::TypedValueParser for TextPattern {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let text = value.to_str().map(str::to_string).ok_or_else(|| {
            let option = arg
                .map(|a| a.to_string())
                .unwrap_or_else(|| "a pattern".into());
            // Not InvalidUtf8: that kind is clap's own unnamed error, which `cli` rewrites.
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "{option} \"{}\": a pattern must be text (UTF-8); match a name that is \
                     not with a wildcard in place of its other bytes (e.g. `caf*`)\n",
                    arca_format::text::shown(std::path::Path::new(value))
                ),
            )
        })?;
        // A pattern that is not a glob is a bad value, exit 2 as the others (it was 1).
        match arca_fs::pattern::PathMatcher::new(std::slice::from_ref(&text)) {
            Ok(_) => Ok(text),
            Err(e) => {
                let option = arg.map(|a| a.to_string()).unwrap_or_default();
                Err(clap::Error::raw(
                    clap::error::ErrorKind::ValueValidation,
                    format!("{option}: {e}\n"),
                ))
            }
        }
    }
}

/// A `--reuse-from` folder: one that is missing, not a folder, or cannot be read (a typo) is a
/// bad value, exit 2, named once as clap names others (it was exit 1, after the parse; and
/// before that taken in silence, every block fetched: hunt 16, 26). Its bytes that are not
/// UTF-8 are shown escaped (`\xff`).
#[derive(Clone, Copy, Debug)]
pub struct ReuseDir;

impl clap::builder::TypedValueParser for ReuseDir {
    type Value = std::path::PathBuf;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<std::path::PathBuf, clap::Error> {
        let dir = std::path::Path::new(value);
        let why = match std::fs::metadata(dir) {
            Ok(m) if !m.is_dir() => Some("not a folder".to_string()),
            Ok(_) => std::fs::read_dir(dir)
                .err()
                .map(|e| format!("cannot read the folder: {e}")),
            Err(e) => Some(e.to_string()),
        };
        match why {
            None => Ok(dir.to_path_buf()),
            Some(why) => {
                let option = arg.map_or_else(|| "--reuse-from".into(), |a| a.to_string());
                Err(clap::Error::raw(
                    clap::error::ErrorKind::ValueValidation,
                    format!(
                        "invalid value '{}' for '{option}': {why}\n",
                        arca_format::text::shown(dir)
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A size that names no whole number of bytes is refused (`0.5` was 0 bytes, and
    /// `--exclude-larger-than 0.5` left out every file that is not empty); a fraction in a
    /// larger unit is truncated to whole bytes.
    #[test]
    fn sizes_are_whole_numbers_of_bytes() {
        for bad in ["0.5", "1.5B", "1.5b", "2.25", "0.0001K", "0.5 B"] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{bad:?}: {e}");
            assert!(
                size_arg(bad).unwrap_err().contains(&format!("{bad:?}")),
                "{bad:?}"
            );
        }
        assert_eq!(parse_size("1.5K").unwrap(), 1536);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("1.1K").unwrap(), 1126);
        assert_eq!(parse_size("1.0").unwrap(), 1);
        assert_eq!(parse_size("0").unwrap(), 0);
        assert_eq!(parse_size("0.0K").unwrap(), 0);
        assert_eq!(size_arg("1.5K").unwrap(), "1.5K");
    }

    /// As Go's `time.ParseDuration`: every number of a sum has its unit (`10ms5` was 10 ms
    /// and 5 s); a bare number alone stays seconds.
    #[test]
    fn durations_want_a_unit_after_each_number_of_a_sum() {
        for bad in [
            "10ms5", "1m5", "5 10ms", "1h-5m", "-5m", "", " ", "1h 5", ".", "1..5s", "ms", "5e3",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
            assert!(duration_arg(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration(" 5 ").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("0.5").unwrap(), Duration::from_millis(500));
        assert_eq!(
            parse_duration("1h2m3s4ms").unwrap(),
            Duration::from_millis(3_723_004)
        );
        assert_eq!(parse_duration(".5s").unwrap(), Duration::from_millis(500));
    }

    /// A refused duration says what is wrong with it when that is known: too long, or a
    /// unit it does not know (both said only what durations look like).
    #[test]
    fn a_refused_duration_says_why() {
        assert!(
            duration_arg("300000h")
                .unwrap_err()
                .contains("out of range")
        );
        let e = duration_arg("5x").unwrap_err();
        assert!(
            e.contains("unit \"x\"") && e.contains("such as 100us"),
            "{e}"
        );
        assert!(
            duration_arg("soon")
                .unwrap_err()
                .starts_with("expected a duration")
        );
    }
}

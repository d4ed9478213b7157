//! The times `find --oldest/--newest` take: a local date, date and minute, date and second,
//! or an RFC 3339 instant with its own offset.

use arca_format::Timespec;

use super::FindError;

/// Parses `2006-01-02`, `2006-01-02 15:04`, `2006-01-02 15:04:05` (local time) or RFC 3339
/// (`2006-01-02T15:04:05+07:00`).
pub fn parse_time(s: &str) -> Result<Timespec, FindError> {
    let t = arca_format::text::parse_time(s, true).ok_or_else(|| FindError::Time {
        value: s.to_string(),
    })?;
    Ok(Timespec {
        sec: t.timestamp(),
        nsec: t.timestamp_subsec_nanos(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let utc = parse_time("2006-01-02T15:04:05Z").unwrap();
        assert_eq!(
            utc,
            Timespec {
                sec: 1136214245,
                nsec: 0
            }
        );
        let off = parse_time("2006-01-02T15:04:05.5+01:00").unwrap();
        assert_eq!(
            off,
            Timespec {
                sec: 1136214245 - 3600,
                nsec: 500_000_000
            }
        );
        // Local forms differ from each other by what they leave out, whatever the zone.
        let day = parse_time("2006-01-02").unwrap();
        let minute = parse_time("2006-01-02 15:04").unwrap();
        let second = parse_time("2006-01-02 15:04:05").unwrap();
        assert_eq!(minute.sec - day.sec, 15 * 3600 + 4 * 60);
        assert_eq!(second.sec - minute.sec, 5);
        for bad in [
            "",
            "yesterday",
            "2006-13-01",
            "2006-01-02 25:00",
            "02.01.2006",
        ] {
            let e = parse_time(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}

//! The snapshot table of `snapshots` and `forget`: columns as wide as their longest value,
//! one tag, reason and path per line (so a path holding a space reads as one), as restic's;
//! `--compact` puts the tags on one line and leaves the paths out.

use anyhow::Result;
use arca_format::{Id, Snapshot};

/// One row: the snapshot and, for `forget`, why it is kept.
pub(crate) struct Row<'a> {
    pub id: &'a Id,
    pub snapshot: &'a Snapshot,
    pub reasons: &'a [String],
}

/// Prints `rows` with a column of reasons when `reasons`, compactly with `compact`, then the
/// count; returns nothing but output errors.
pub(crate) fn print(rows: &[Row<'_>], reasons: bool, compact: bool) -> Result<()> {
    // Control characters shown escaped: a host, tag or path holding a newline or an escape
    // sequence broke the table or drove the terminal.
    let text = |s: &str| arca_format::text::shown(std::path::Path::new(s)).into_owned();
    let cells = |r: &Row<'_>| -> [Vec<String>; 6] {
        let time = r
            .snapshot
            .time
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string();
        let flag = if r.snapshot.complete { " " } else { "!" };
        let tags = if compact {
            vec![text(&r.snapshot.tags.join(","))]
        } else {
            r.snapshot.tags.iter().map(|t| text(t)).collect()
        };
        [
            vec![format!("{flag}{}", r.id.short())],
            vec![time],
            vec![text(&r.snapshot.hostname)],
            tags,
            if reasons { r.reasons.to_vec() } else { vec![] },
            if compact {
                vec![]
            } else {
                r.snapshot.paths.iter().map(|p| text(p)).collect()
            },
        ]
    };
    let table: Vec<[Vec<String>; 6]> = rows.iter().map(cells).collect();
    let header = ["ID", "Time", "Host", "Tags", "Reasons", "Paths"];
    let shown = [true, true, true, true, reasons, !compact];
    let width = |c: usize| {
        table
            .iter()
            .flat_map(|row| row[c].iter().map(|s| s.chars().count()))
            .chain([header[c].len()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..6).map(width).collect();
    let line = |texts: [&str; 6]| {
        let mut out = String::new();
        for c in (0..6).filter(|&c| shown[c]) {
            if !out.is_empty() {
                out.push_str("  ");
            }
            out.push_str(&format!("{:<w$}", texts[c], w = widths[c]));
        }
        out.trim_end().to_string()
    };
    let head = line(header.map(|h| if h == "ID" { " ID" } else { h }));
    let rule = "-".repeat(head.chars().count().max(40));
    super::out(&head)?;
    super::out(&rule)?;
    for row in &table {
        let lines = row.iter().map(Vec::len).max().unwrap_or(1).max(1);
        for k in 0..lines {
            let at = |c: usize| row[c].get(k).map_or("", String::as_str);
            super::out(&line([at(0), at(1), at(2), at(3), at(4), at(5)]))?;
        }
    }
    super::out(&rule)?;
    super::out(&crate::util::count(rows.len(), "snapshot"))
}

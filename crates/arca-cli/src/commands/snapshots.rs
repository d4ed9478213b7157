//! `arca snapshots`: list snapshots.

use anyhow::Result;
use serde_json::json;

use crate::cli::{Global, SnapshotsArgs};
use crate::util;

pub fn run(g: &Global, a: &SnapshotsArgs) -> Result<u8> {
    let opened = util::open(g)?;
    let mut list = super::tag::select(&opened.repo, &super::filter(&a.filter), &a.snapshots)?;
    list.sort_by_key(|(id, s)| (s.time, *id));
    if let Some(n) = a.latest {
        list = newest_per_group(list, n);
    }
    if a.json {
        let v: Vec<_> = list
            .iter()
            .map(|(id, s)| {
                let mut o = serde_json::to_value(s).unwrap_or_else(|_| json!({}));
                if let Some(m) = o.as_object_mut() {
                    m.insert("id".into(), json!(id.to_hex()));
                    m.insert("short_id".into(), json!(id.short()));
                }
                o
            })
            .collect();
        super::out(&serde_json::Value::Array(v).to_string())?;
        return Ok(0);
    }
    super::out(&format!(
        "{:<10} {:<20} {:<16} {:<16} Paths",
        "ID", "Time", "Host", "Tags"
    ))?;
    super::out(&"-".repeat(80))?;
    for (id, s) in &list {
        let time = s
            .time
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M:%S");
        let flag = if s.complete { " " } else { "!" };
        super::out(&format!(
            "{}{:<9} {:<20} {:<16} {:<16} {}",
            flag,
            id.short(),
            time,
            s.hostname,
            s.tags.join(","),
            s.paths.join(" ")
        ))?;
    }
    super::out(&"-".repeat(80))?;
    super::out(&format!("{} snapshots", list.len()))?;
    if list.iter().any(|(_, s)| !s.complete) {
        super::out("! = incomplete: some entries could not be read during the backup")?;
    }
    Ok(0)
}

/// The newest `n` snapshots of each host and set of paths (restic's `--latest`), oldest first
/// as listed.
fn newest_per_group(
    list: Vec<(arca_format::Id, arca_format::Snapshot)>,
    n: usize,
) -> Vec<(arca_format::Id, arca_format::Snapshot)> {
    let mut seen: std::collections::HashMap<(String, Vec<String>), usize> = Default::default();
    let mut keep = vec![false; list.len()];
    for (i, (_, s)) in list.iter().enumerate().rev() {
        let mut paths = s.paths.clone();
        paths.sort();
        let c = seen.entry((s.hostname.clone(), paths)).or_default();
        if *c < n {
            *c += 1;
            keep[i] = true;
        }
    }
    list.into_iter()
        .zip(keep)
        .filter_map(|(x, k)| k.then_some(x))
        .collect()
}

//! `arca snapshots`: list snapshots.

use anyhow::Result;
use serde_json::json;

use crate::cli::{Global, SnapshotsArgs};
use crate::util;

pub fn run(g: &Global, a: &SnapshotsArgs) -> Result<u8> {
    let opened = util::open(g)?;
    // As restic's: a shared lock, so that no forget removes files being read.
    let _lock = util::lock(g, &opened.repo, arca_repo::LockKind::Shared, "snapshots")?;
    // A listing leaves a damaged file out with a warning (named once) and exits 0.
    let (mut list, _) = super::tag::select(&opened.repo, &super::filter(&a.filter), &a.snapshots)?;
    list.sort_by_key(|(id, s)| (s.time, *id));
    // As restic's: `-g ''` groups by nothing, so the snapshots are listed ungrouped (a plain
    // table and a plain JSON array), not as one group keyed "all snapshots".
    let group_by = a.group_by.filter(|b| b.host || b.paths || b.tags);
    // As restic's, --latest applies within each group (0: no limit).
    let latest = |l| match a.latest {
        Some(n) if n > 0 => newest_per_group(l, n),
        _ => l,
    };
    let groups = group_by.map(|by| {
        let mut groups = arca_maintenance::forget::group(list.clone(), by);
        for g in &mut groups {
            g.snapshots = latest(std::mem::take(&mut g.snapshots));
        }
        groups
    });
    let list = latest(list);
    if a.json {
        let array = |list: &[(arca_format::Id, arca_format::Snapshot)]| {
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
            serde_json::Value::Array(v)
        };
        let v = match &groups {
            None => array(&list),
            // As restic's: the groups, each with its key and its snapshots.
            Some(groups) => groups
                .iter()
                .map(|g| {
                    json!({
                        "group_key": {
                            "hostname": g.key.hostname.clone().unwrap_or_default(),
                            "paths": g.key.paths,
                            "tags": g.key.tags,
                        },
                        "snapshots": array(&g.snapshots),
                    })
                })
                .collect(),
        };
        super::out(&v.to_string())?;
        return Ok(0);
    }
    let print = |list: &[(arca_format::Id, arca_format::Snapshot)]| {
        let rows: Vec<super::table::Row<'_>> = list
            .iter()
            .map(|(id, snapshot)| super::table::Row {
                id,
                snapshot,
                reasons: &[],
            })
            .collect();
        super::table::print(&rows, false, a.compact)
    };
    match &groups {
        None => print(&list)?,
        Some(groups) => {
            for group in groups {
                super::out(&format!("snapshots for {}:", group.key))?;
                print(&group.snapshots)?;
                super::out("")?;
            }
        }
    }
    let incomplete =
        |l: &[(arca_format::Id, arca_format::Snapshot)]| l.iter().any(|(_, s)| !s.complete);
    let any_incomplete = match &groups {
        Some(groups) => groups.iter().any(|g| incomplete(&g.snapshots)),
        None => incomplete(&list),
    };
    if any_incomplete {
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

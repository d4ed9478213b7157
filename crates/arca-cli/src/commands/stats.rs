//! `arca stats`: restic's counting modes over chosen snapshots (all by default), compression
//! and dedup ratios, each snapshot's restore fragmentation and restore plan, and the
//! repository's totals.

use anyhow::{Result, anyhow};
use arca_browse::stats::{Fragmentation, Mode, RepoTotals, Selection, SnapshotStats, Stats};
use arca_format::{Id, Snapshot};
use arca_restore::PlanFootprint;
use clap::Args;
use serde_json::{Value, json};

use crate::cli::{FilterArgs, Global};
use crate::util::{self, count};

/// Options of `arca stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Snapshots (ids, id prefixes or "latest"); every snapshot passing the filters when none
    /// is given
    #[arg(value_name = "SNAPSHOT")]
    pub snapshots: Vec<String>,
    /// Counting mode: restore-size (bytes a restore writes), files-by-contents (distinct
    /// files), raw-data (distinct blobs as stored, compression, dedup), blobs-per-file
    #[arg(long, default_value = "restore-size", value_name = "MODE", value_parser = ["restore-size", "files-by-contents", "raw-data", "blobs-per-file"])]
    pub mode: String,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Print JSON (restic's fields, then arca's)
    #[arg(long)]
    pub json: bool,
}

fn parse_mode(s: &str) -> Result<Mode> {
    Mode::parse(s).ok_or_else(|| {
        let names: Vec<_> = Mode::ALL.iter().map(|m| m.name()).collect();
        anyhow!("unknown counting mode {s:?} (use {})", names.join(", "))
    })
}

/// Sizes as restic prints them (three decimals, binary units).
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (size, unit) in UNITS {
        if n >= size {
            return format!("{:.3} {unit}", n as f64 / size as f64);
        }
    }
    format!("{n} B")
}

fn fragmentation_json(f: &Fragmentation) -> Value {
    json!({
        "restore_bytes": f.restore_bytes,
        "packs": f.packs,
        "pack_bytes": f.pack_bytes,
        "blob_bytes": f.blob_bytes,
        "packs_per_mib": f.packs_per_mib(),
        "speed_factor": f.speed_factor(),
        "pack_utilisation": f.utilisation(),
    })
}

fn plan_json(p: &PlanFootprint) -> Value {
    json!({
        "dirs": p.dirs,
        "files": p.files,
        "others": p.others,
        "hardlinks": p.hardlinks,
        "blocks": p.blocks,
        "blobs": p.blobs,
        "zero_blobs": p.zero_blobs,
        "missing_blobs": p.missing_blobs,
        "packs": p.packs,
        "file_bytes": p.file_bytes,
        "fetch_bytes": p.fetch_bytes,
        "pack_bytes": p.pack_bytes,
        "memory_bytes": p.memory_bytes,
        "unreadable_listings": p.issues,
    })
}

fn snapshot_json(s: &SnapshotStats, snap: &Snapshot) -> Value {
    json!({
        "id": s.id.to_hex(),
        "short_id": s.id.short(),
        "time": snap.time.to_rfc3339(),
        "hostname": snap.hostname,
        "paths": snap.paths,
        "restore_size": s.restore_size,
        "entries": s.entries,
        "fragmentation": fragmentation_json(&s.fragmentation),
        "restore_plan": plan_json(&s.plan),
    })
}

fn repository_json(r: &RepoTotals) -> Value {
    json!({
        "packs": r.packs,
        "pack_bytes": r.pack_bytes,
        "data_packs": r.data_packs,
        "tree_packs": r.tree_packs,
        "index_files": r.index_files,
        "index_bytes": r.index_bytes,
        "snapshot_files": r.snapshot_files,
        "total_bytes": r.total_bytes,
        "index_blobs": r.index_blobs,
        "index_data_blobs": r.index_data_blobs,
        "index_tree_blobs": r.index_tree_blobs,
        "index_memory_bytes": r.index_memory_bytes,
    })
}

fn selection_json(s: &Selection) -> Value {
    json!({
        "fragmentation": fragmentation_json(&s.fragmentation),
        "data_blobs": s.data_blobs,
        "tree_blobs": s.tree_blobs,
        "data_plaintext_size": s.data_plaintext,
        "dedup_ratio": s.dedup_ratio,
        "missing_blobs": s.missing_blobs,
    })
}

fn line(label: &str, value: &str) -> Result<()> {
    super::out(&format!("{label:>24}:  {value}"))
}

fn fragmentation_text(f: &Fragmentation) -> String {
    format!(
        "{}, {:.3} per MiB restored (speed factor {:.3} MiB per pack), {:.2}% of their bytes used",
        count(f.packs, "pack"),
        f.packs_per_mib(),
        f.speed_factor(),
        f.utilisation() * 100.0
    )
}

fn print_snapshot(s: &SnapshotStats, snap: &Snapshot) -> Result<()> {
    let time = snap
        .time
        .with_timezone(&chrono::Local)
        .format("%Y-%m-%d %H:%M:%S");
    super::out("")?;
    super::out(&format!(
        "Snapshot {} of {time} ({}, {}):",
        s.id.short(),
        snap.hostname,
        snap.paths.join(" ")
    ))?;
    line(
        "Restore size",
        &format!("{} ({})", bytes(s.restore_size), count(s.entries, "entry")),
    )?;
    line("Fragmentation", &fragmentation_text(&s.fragmentation))?;
    let p = &s.plan;
    line(
        "Restore plan",
        &format!(
            "{}, {}, {}, {}; {}, {} in {}; {} in memory",
            count(p.files, "file"),
            count(p.dirs, "folder"),
            count(p.others, "other entry"),
            count(p.hardlinks, "hard link"),
            count(p.blocks, "block"),
            count(p.blobs, "distinct blob"),
            count(p.packs, "pack"),
            bytes(p.memory_bytes)
        ),
    )
}

pub fn run(g: &Global, a: &StatsArgs) -> Result<u8> {
    let mode = parse_mode(&a.mode)?;
    let opened = util::open(g)?;
    let repo = &opened.repo;
    let _lock = util::lock(g, repo, arca_repo::LockKind::Shared, "stats")?;
    let filter = super::filter(&a.filter);
    // Damaged snapshot files are named as found; the totals leave them out, and exit 3 says so.
    let mut left_out = 0;
    let mut chosen: Vec<(Id, Snapshot)> = if a.snapshots.is_empty() {
        let (list, left) = super::list_all(repo, &filter)?;
        left_out = left;
        list
    } else {
        let mut v = vec![];
        for spec in &a.snapshots {
            v.push(repo.find_snapshot(spec, &filter)?);
        }
        v
    };
    let mut seen = std::collections::HashSet::new();
    chosen.retain(|(id, _)| seen.insert(*id));
    if chosen.is_empty() && !a.snapshots.is_empty() {
        return Err(anyhow!("no snapshot matches"));
    }
    let index = repo.load_index()?;
    let mut stats = Stats::new(repo, &index, mode);
    let mut per = vec![];
    for (id, snap) in &chosen {
        per.push(stats.add(*id, snap)?);
    }
    let t = stats.totals();
    let sel = stats.selection();
    let repo_totals = if a.snapshots.is_empty() {
        Some(arca_browse::stats::repository(repo, &index)?)
    } else {
        None
    };
    if a.json {
        // restic's fields, zero ones left out as restic leaves them out.
        let mut m = serde_json::Map::new();
        m.insert("total_size".into(), json!(t.total_size));
        let omit = |m: &mut serde_json::Map<String, Value>, k: &str, v: Value, zero: bool| {
            if !zero {
                m.insert(k.into(), v);
            }
        };
        omit(
            &mut m,
            "total_uncompressed_size",
            json!(t.total_uncompressed_size),
            t.total_uncompressed_size == 0,
        );
        omit(
            &mut m,
            "compression_ratio",
            json!(t.compression_ratio),
            t.compression_ratio == 0.0,
        );
        omit(
            &mut m,
            "compression_progress",
            json!(t.compression_progress),
            t.compression_progress == 0.0,
        );
        omit(
            &mut m,
            "compression_space_saving",
            json!(t.compression_space_saving),
            t.compression_space_saving == 0.0,
        );
        omit(
            &mut m,
            "total_file_count",
            json!(t.total_file_count),
            t.total_file_count == 0,
        );
        omit(
            &mut m,
            "total_blob_count",
            json!(t.total_blob_count),
            t.total_blob_count == 0,
        );
        m.insert("snapshots_count".into(), json!(t.snapshots_count));
        m.insert("mode".into(), json!(mode.name()));
        if mode == Mode::RawData {
            m.insert("total_plaintext_size".into(), json!(t.total_plaintext_size));
            m.insert("dedup_ratio".into(), json!(sel.dedup_ratio));
        }
        let snaps: Vec<Value> = per
            .iter()
            .zip(&chosen)
            .map(|(s, (_, snap))| snapshot_json(s, snap))
            .collect();
        m.insert("snapshots".into(), Value::Array(snaps));
        m.insert("selection".into(), selection_json(&sel));
        if let Some(r) = &repo_totals {
            m.insert("repository".into(), repository_json(r));
        }
        super::out(&Value::Object(m).to_string())?;
    } else {
        super::out(&format!("Stats in {} mode:", mode.name()))?;
        line("Snapshots processed", &t.snapshots_count.to_string())?;
        if t.total_blob_count > 0 {
            line("Total Blob Count", &t.total_blob_count.to_string())?;
        }
        if t.total_file_count > 0 {
            line("Total File Count", &t.total_file_count.to_string())?;
        }
        if t.total_uncompressed_size > 0 {
            line("Total Uncompressed Size", &bytes(t.total_uncompressed_size))?;
        }
        line("Total Size", &bytes(t.total_size))?;
        if t.compression_progress > 0.0 {
            line(
                "Compression Progress",
                &format!("{:.2}%", t.compression_progress),
            )?;
        }
        if t.compression_ratio > 0.0 {
            line("Compression Ratio", &format!("{:.2}x", t.compression_ratio))?;
        }
        if t.compression_space_saving > 0.0 {
            line(
                "Compression Space Saving",
                &format!("{:.2}%", t.compression_space_saving),
            )?;
        }
        if mode == Mode::RawData && sel.dedup_ratio > 0.0 {
            line("Dedup Ratio", &format!("{:.2}x", sel.dedup_ratio))?;
        }
        for (s, (_, snap)) in per.iter().zip(&chosen) {
            print_snapshot(s, snap)?;
        }
        if per.len() > 1 {
            super::out("")?;
            super::out(&format!("All {} together:", count(per.len(), "snapshot")))?;
            let f = &sel.fragmentation;
            line("Restore size", &bytes(f.restore_bytes))?;
            line("Fragmentation", &fragmentation_text(f))?;
            line(
                "Distinct blobs",
                &format!(
                    "{} data ({} plaintext), {}; dedup ratio {:.2}x",
                    sel.data_blobs,
                    bytes(sel.data_plaintext),
                    count(sel.tree_blobs, "tree"),
                    sel.dedup_ratio
                ),
            )?;
        }
        if let Some(r) = &repo_totals {
            super::out("")?;
            super::out("Repository:")?;
            line(
                "Packs",
                &format!(
                    "{} ({} of data and {} of trees in the index), {}",
                    r.packs,
                    r.data_packs,
                    r.tree_packs,
                    bytes(r.pack_bytes)
                ),
            )?;
            line(
                "Index",
                &format!(
                    "{} ({} data, {}) in {} of {}; {} in memory",
                    count(r.index_blobs, "blob"),
                    r.index_data_blobs,
                    count(r.index_tree_blobs, "tree"),
                    count(r.index_files, "file"),
                    bytes(r.index_bytes),
                    bytes(r.index_memory_bytes)
                ),
            )?;
            line("Snapshots", &r.snapshot_files.to_string())?;
            line("Total on disk", &bytes(r.total_bytes))?;
        }
    }
    if sel.missing_blobs > 0 {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "warning: {} the snapshots use {} not in the index (run `arca check`)",
                count(sel.missing_blobs, "blob"),
                if sel.missing_blobs == 1 { "is" } else { "are" }
            );
        }
        return Ok(3);
    }
    Ok(super::left_out_exit(left_out))
}

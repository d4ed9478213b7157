//! `arca prune`: remove data no snapshot uses. Packs nothing uses are deleted, packs with
//! too much unused data repacked, the index rewritten into few files; new packs and index
//! are written before anything is deleted (see `arca_maintenance::prune`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::{Result, anyhow, bail};
use arca_maintenance::prune::{
    self, MaxUnused, PackAction, Phase, Progress, PruneOptions, PrunePlan, PruneReport,
};
use clap::Args;
use serde_json::{Value, json};

use crate::cli::Global;
use crate::progress::ProgressLine;
use crate::util::{self, Opened, human_bytes};

/// Packs listed one per line by `--dry-run`, per kind of action, at most.
const LISTED: usize = 1000;

/// Options of `prune` (also used by `forget --prune`).
#[derive(Debug, Args, Default, Clone)]
pub struct PruneArgs {
    /// Unused space to tolerate, as restic: a PERCENT of the repository or a SIZE (the packs
    /// with the largest unused share are repacked until at most that much is left; packs of
    /// listings with unused ones always are), or `unlimited` (only packs nothing uses are
    /// deleted) [default: 5%]
    #[arg(long, value_name = "PERCENT|SIZE", value_parser = max_unused_arg, allow_hyphen_values = true)]
    pub max_unused: Option<String>,
    /// Repack at most this many bytes of packs (e.g. 2GiB)
    #[arg(long, value_name = "SIZE", value_parser = crate::util::size_arg, allow_hyphen_values = true)]
    pub max_repack_size: Option<String>,
    /// Also repack packs smaller than 80% of the target pack size into full ones
    #[arg(long)]
    pub repack_small: bool,
    /// Delete all data when the repository has no snapshot (refused otherwise: a lost
    /// snapshots folder looks the same)
    #[arg(long)]
    pub unsafe_allow_remove_all: bool,
    /// Print what would be deleted and repacked, and the space freed; change nothing
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
    /// Snapshots counted as removed (`forget --prune --dry-run`); only with `dry_run`.
    #[arg(skip)]
    pub ignore_snapshots: Vec<arca_format::Id>,
}

/// Runs `prune`: opens the repository without the local cache (whose copies must not hide
/// the repository's state) and locks it exclusively; a dry run with `--no-lock` takes no
/// lock (as restic's: it changes nothing, and reads a repository it may not write).
pub fn run(g: &Global, a: &PruneArgs) -> Result<u8> {
    let opened = util::open_uncached(g)?;
    let _lock = if a.dry_run && g.no_lock {
        None
    } else {
        Some(util::take_lock(
            g,
            &opened.repo,
            arca_repo::LockKind::Exclusive,
            "prune",
        )?)
    };
    run_on(g, &opened, a)
}

/// Prunes an already opened (and exclusively locked) repository: `forget --prune` calls this.
pub fn run_on(g: &Global, opened: &Opened, a: &PruneArgs) -> Result<u8> {
    if let Some(v) = run_quiet_json(g, opened, a)? {
        super::out(&v.to_string())?;
    }
    Ok(0)
}

/// Runs prune; with `--json`, its document is returned instead of printed (`forget
/// --prune --json` puts it into its own).
pub fn run_quiet_json(g: &Global, opened: &Opened, a: &PruneArgs) -> Result<Option<Value>> {
    let opts = options(a)?;
    let repo = &opened.repo;
    let progress = Arc::new(Progress::default());
    let plan = {
        let _line = progress_line(g, a, &progress);
        prune::plan_repository(repo, &opts, &progress)?
    };
    if a.dry_run {
        let stale = prune::stale_temp_files(repo)?;
        if a.json {
            let mut v = plan_json(&plan);
            v["dry_run"] = json!(true);
            v["temp_files_stale"] = json!(stale);
            v["backend"] = util::stats_json(&opened.stats);
            return Ok(Some(v));
        } else if !g.quiet {
            print_plan(&plan)?;
            print_packs(&plan)?;
            if stale > 0 {
                super::out(&format!(
                    "would remove {stale} stale temporary files (left by interrupted writes)"
                ))?;
            }
            super::out(&format!(
                "would free about {}",
                human_bytes(plan.stats.freed_bytes)
            ))?;
        }
        return Ok(None);
    }
    if !a.json && !g.quiet {
        print_plan(&plan)?;
    }
    let report = {
        let _line = progress_line(g, a, &progress);
        match prune::execute(repo, &plan, &progress) {
            Ok(r) => r,
            // Run to free space, it needs some first: say how much, and what to do (only the
            // write's error was said).
            Err(prune::PruneError::Repo(e))
                if matches!(&*e, arca_repo::RepoError::Backend(b)
                    if b.kind == arca_backend::ErrorKind::NoSpace) =>
            {
                anyhow::bail!(
                    "{e}: the repository's disk is full. Prune writes the repacked packs \
                     (about {}) before it deletes the old ones, so no pack a snapshot needs was \
                     deleted. Free some space, or repack less: `--max-repack-size` caps it, \
                     and `--max-unused unlimited` only deletes packs nothing uses",
                    human_bytes(plan.stats.repack_used_bytes)
                );
            }
            Err(e) => return Err(e.into()),
        }
    };
    if a.json {
        let mut v = plan_json(&plan);
        v["dry_run"] = json!(false);
        for (k, x) in report_json(&report) {
            v[k] = x;
        }
        v["backend"] = util::stats_json(&opened.stats);
        return Ok(Some(v));
    }
    if !g.quiet {
        print_report(&report)?;
    }
    Ok(None)
}

/// The library's options from the command line.
fn options(a: &PruneArgs) -> Result<PruneOptions> {
    let max_unused = match a.max_unused.as_deref() {
        None => MaxUnused::default(),
        Some(s) => parse_max_unused(s)?,
    };
    let max_repack_bytes = a
        .max_repack_size
        .as_deref()
        .map(util::parse_size)
        .transpose()?;
    Ok(PruneOptions {
        max_unused,
        max_repack_bytes,
        repack_small: a.repack_small,
        threads: 0,
        allow_remove_all: a.unsafe_allow_remove_all,
        ignore_snapshots: a.ignore_snapshots.clone(),
    })
}

/// clap's check of `--max-unused` (a bad value is a usage error naming the option).
pub fn max_unused_arg(s: &str) -> Result<String, String> {
    parse_max_unused(s)
        .map(|_| s.to_string())
        .map_err(|_| "expected a percentage from 0% to 100% (5%), a size (2G) or unlimited".into())
}

fn parse_max_unused(s: &str) -> Result<MaxUnused> {
    Ok(match s.trim() {
        "" => MaxUnused::default(),
        "unlimited" => MaxUnused::Unlimited,
        s => match s.strip_suffix('%') {
            Some(p) => {
                let p: f64 = p
                    .trim()
                    .parse()
                    .map_err(|_| anyhow!("invalid --max-unused {s:?}: expected e.g. 5%"))?;
                if !(0.0..=100.0).contains(&p) {
                    bail!("invalid --max-unused {s:?}: a percentage from 0% to 100%");
                }
                MaxUnused::Percent(p)
            }
            None => MaxUnused::Bytes(util::parse_size(s).map_err(|e| {
                anyhow!("invalid --max-unused {s:?} (a percentage, a size or unlimited): {e}")
            })?),
        },
    })
}

/// The progress line while planning or executing (nothing without a terminal).
fn progress_line(g: &Global, a: &PruneArgs, p: &Arc<Progress>) -> ProgressLine {
    let p = Arc::clone(p);
    ProgressLine::start(util::interactive(g, a.json), move |elapsed| {
        let n = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let what = match p.phase() {
            Phase::Walking => format!("finding used data: {}", util::count(n(&p.trees), "tree")),
            Phase::Repacking => format!(
                "repacking: {} of {} read, {} written",
                n(&p.packs_read),
                util::count(n(&p.packs_to_read), "pack"),
                n(&p.packs_written)
            ),
            Phase::WritingIndex => {
                format!(
                    "writing the index: {}",
                    util::count(n(&p.index_files_written), "file")
                )
            }
            Phase::Deleting | Phase::Done => format!(
                "deleting: {} of {}",
                n(&p.files_deleted),
                util::count(n(&p.files_to_delete), "file")
            ),
        };
        format!("[{}] {what}", util::human_duration(elapsed.as_secs_f64()))
    })
}

fn print_plan(plan: &PrunePlan) -> Result<()> {
    let s = &plan.stats;
    let out = super::out;
    out(&format!(
        "{}, {} walked",
        util::count(s.snapshots, "snapshot"),
        util::count(s.trees, "tree")
    ))?;
    out(&format!(
        "used:    {}, {}",
        util::count(s.used_blobs, "blob"),
        human_bytes(s.used_bytes)
    ))?;
    let total = s.used_bytes + s.unused_bytes;
    let share = if total == 0 {
        0.0
    } else {
        s.unused_bytes as f64 * 100.0 / total as f64
    };
    let copies = if s.duplicate_blobs > 0 {
        format!(", {} of them extra copies", s.duplicate_blobs)
    } else {
        String::new()
    };
    out(&format!(
        "unused:  {}, {} ({share:.1}%){copies}",
        util::count(s.unused_blobs, "blob"),
        human_bytes(s.unused_bytes)
    ))?;
    let mut packs = format!(
        "packs:   keep {} ({}), repack {} ({}, {} of used blobs to copy), delete {} ({})",
        s.keep.packs,
        human_bytes(s.keep.bytes),
        s.repack.packs,
        human_bytes(s.repack.bytes),
        human_bytes(s.repack_used_bytes),
        s.delete.packs,
        human_bytes(s.delete.bytes),
    );
    if s.damaged.packs > 0 {
        packs += &format!(", of them {} damaged", s.damaged.packs);
    }
    if s.unreferenced.packs > 0 {
        packs += &format!(
            ", unreferenced {} ({})",
            s.unreferenced.packs,
            human_bytes(s.unreferenced.bytes)
        );
    }
    if s.missing.packs > 0 {
        packs += &format!(", missing {} (dropped from the index)", s.missing.packs);
    }
    out(&packs)?;
    if s.adopted.packs > 0 {
        out(&format!(
            "adopted: {} ({}, {}) written by an earlier prune that stopped: indexed, their \
             blobs not copied again",
            util::count(s.adopted.packs, "pack"),
            human_bytes(s.adopted.bytes),
            util::count(s.adopted_blobs, "blob")
        ))?;
    }
    out(&format!(
        "index:   {}{}",
        util::count(s.index_files, "file"),
        if plan.rewrite_index {
            ", rewritten"
        } else {
            ", unchanged"
        }
    ))
}

/// `--dry-run`: the packs that would go, one per line.
fn print_packs(plan: &PrunePlan) -> Result<()> {
    let mut lines: Vec<(&str, String)> = vec![];
    for p in &plan.packs {
        let what = match p.action {
            PackAction::Delete => "delete",
            PackAction::Repack => "repack",
            PackAction::Forget => "forget missing",
            PackAction::Keep => continue,
        };
        lines.push((
            what,
            format!(
                "would {what} {} pack {} ({}: {} used blobs, {} unused)",
                p.kind,
                p.id,
                human_bytes(p.size),
                p.used_blobs,
                p.unused_blobs
            ),
        ));
    }
    for (id, size) in &plan.unreferenced {
        lines.push((
            "unreferenced",
            format!(
                "would delete unreferenced pack {id} ({})",
                human_bytes(*size)
            ),
        ));
    }
    for p in &plan.adopted {
        lines.push((
            "adopt",
            format!(
                "would adopt {} pack {} ({}: {}, written by an earlier prune)",
                p.kind,
                p.id,
                human_bytes(p.size),
                util::count(p.blobs.len(), "blob")
            ),
        ));
    }
    for what in [
        "delete",
        "repack",
        "forget missing",
        "unreferenced",
        "adopt",
    ] {
        let of: Vec<&String> = lines
            .iter()
            .filter(|(w, _)| *w == what)
            .map(|(_, l)| l)
            .collect();
        for l in of.iter().take(LISTED) {
            super::out(l)?;
        }
        if of.len() > LISTED {
            super::out(&format!("... and {} more", of.len() - LISTED))?;
        }
    }
    Ok(())
}

fn print_report(r: &PruneReport) -> Result<()> {
    let out = super::out;
    if r.packs_adopted > 0 {
        out(&format!(
            "adopted {} ({}) written by an earlier run",
            util::count(r.packs_adopted, "pack"),
            human_bytes(r.bytes_adopted)
        ))?;
    }
    if r.blobs_repacked > 0 {
        out(&format!(
            "repacked {} into {} ({})",
            util::count(r.blobs_repacked, "blob"),
            util::count(r.packs_written, "new pack"),
            human_bytes(r.bytes_written)
        ))?;
    }
    if !r.index_files_written.is_empty() {
        out(&format!(
            "wrote {}, deleted {} old ones",
            util::count(r.index_files_written.len(), "index file"),
            r.index_files_deleted
        ))?;
    }
    out(&format!(
        "deleted {} ({})",
        util::count(r.packs_deleted, "pack"),
        human_bytes(r.bytes_deleted)
    ))?;
    if r.temp_files_removed > 0 {
        out(&format!(
            "removed {}",
            util::count(r.temp_files_removed, "stale temporary file")
        ))?;
    }
    out(&format!("freed {}", human_bytes(r.freed_bytes())))
}

fn ids(plan: &PrunePlan, action: PackAction) -> Value {
    plan.packs
        .iter()
        .filter(|p| p.action == action)
        .map(|p| json!(p.id.to_hex()))
        .collect()
}

fn plan_json(plan: &PrunePlan) -> Value {
    let s = &plan.stats;
    json!({
        "message_type": "summary",
        "snapshots": s.snapshots,
        "trees": s.trees,
        "used_blobs": s.used_blobs,
        "used_bytes": s.used_bytes,
        "unused_blobs": s.unused_blobs,
        "unused_bytes": s.unused_bytes,
        "duplicate_blobs": s.duplicate_blobs,
        "packs_keep": s.keep.packs,
        "packs_keep_bytes": s.keep.bytes,
        "packs_repack": s.repack.packs,
        "packs_repack_bytes": s.repack.bytes,
        "repack_blobs": s.repack_blobs,
        "repack_used_bytes": s.repack_used_bytes,
        "packs_delete": s.delete.packs,
        "packs_delete_bytes": s.delete.bytes,
        "packs_damaged": s.damaged.packs,
        "packs_unreferenced": s.unreferenced.packs,
        "packs_unreferenced_bytes": s.unreferenced.bytes,
        "packs_missing": s.missing.packs,
        "packs_adopted": s.adopted.packs,
        "packs_adopted_bytes": s.adopted.bytes,
        "adopted_blobs": s.adopted_blobs,
        "index_files": s.index_files,
        "rewrite_index": plan.rewrite_index,
        "freed_bytes": s.freed_bytes,
        "delete": ids(plan, PackAction::Delete),
        "repack": ids(plan, PackAction::Repack),
        "missing": ids(plan, PackAction::Forget),
        "unreferenced": plan
            .unreferenced
            .iter()
            .map(|(id, _)| id.to_hex())
            .collect::<Vec<_>>(),
        "adopted": plan
            .adopted
            .iter()
            .map(|p| p.id.to_hex())
            .collect::<Vec<_>>(),
    })
}

/// What was done; `freed_bytes` replaces the plan's estimate.
fn report_json(r: &PruneReport) -> Vec<(&'static str, Value)> {
    vec![
        ("packs_written", json!(r.packs_written)),
        ("bytes_written", json!(r.bytes_written)),
        ("blobs_repacked", json!(r.blobs_repacked)),
        ("index_files_written", json!(r.index_files_written.len())),
        ("index_files_deleted", json!(r.index_files_deleted)),
        ("packs_deleted", json!(r.packs_deleted)),
        ("bytes_deleted", json!(r.bytes_deleted)),
        ("temp_files_removed", json!(r.temp_files_removed)),
        ("packs_adopted", json!(r.packs_adopted)),
        ("bytes_adopted", json!(r.bytes_adopted)),
        ("freed_bytes", json!(r.freed_bytes())),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_unused_spellings() {
        let o = |s: &str| {
            options(&PruneArgs {
                max_unused: Some(s.into()),
                ..PruneArgs::default()
            })
            .map(|o| o.max_unused)
        };
        assert_eq!(
            options(&PruneArgs::default()).unwrap().max_unused,
            MaxUnused::Percent(5.0)
        );
        assert_eq!(o("10%").unwrap(), MaxUnused::Percent(10.0));
        assert_eq!(o("0%").unwrap(), MaxUnused::Percent(0.0));
        assert_eq!(o("100MiB").unwrap(), MaxUnused::Bytes(100 << 20));
        assert_eq!(o("0").unwrap(), MaxUnused::Bytes(0));
        assert_eq!(o("unlimited").unwrap(), MaxUnused::Unlimited);
        for bad in ["150%", "x%", "lots", "-1%"] {
            assert!(o(bad).is_err(), "{bad}");
        }
        let a = PruneArgs {
            max_repack_size: Some("2G".into()),
            repack_small: true,
            ..PruneArgs::default()
        };
        let opts = options(&a).unwrap();
        // restic's units: `G` is 2^30.
        assert_eq!(opts.max_repack_bytes, Some(2 << 30));
        assert!(opts.repack_small);
    }
}

//! `arca rewrite`: copies of snapshots without the paths matching `--exclude` patterns (the
//! same patterns as backup's) or with another host name or time (`--new-host`, `--new-time`,
//! as restic's), the originals kept or, with `--forget`, removed.
//!
//! Locks: shared without `--forget` (only new packs, an index file and snapshots are written,
//! as a backup does, so backups may run beside it and prune may not), exclusive with
//! `--forget` (snapshot files are deleted, as forget does); a dry run reads under a shared
//! lock.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use arca_backup::filter::read_list;
use arca_format::NodeKind;
use arca_fs::pattern::PathMatcher;
use arca_maintenance::rewrite::{
    NewMetadata, Removed, RewriteOptions, RewriteReport, RewrittenSnapshot, rewrite_snapshots,
};
use arca_repo::LockKind;
use clap::Args;
use serde_json::{Value, json};

use crate::cli::{ExcludeArgs, FilterArgs, Global};
use crate::util::{self, human_bytes};

/// Options of `arca rewrite`.
#[derive(Debug, Args)]
pub struct RewriteArgs {
    /// Snapshots to rewrite (ids, unique prefixes or "latest"; default: every snapshot
    /// passing --host/--tag/--path)
    #[arg(value_name = "SNAPSHOT")]
    pub snapshots: Vec<String>,
    /// Paths to drop, as backup's --exclude, --iexclude, --exclude-file, --iexclude-file
    #[command(flatten)]
    pub exclude: ExcludeArgs,
    /// Remove each original snapshot once its rewritten copy is saved (the copy then gets
    /// no "rewrite" tag); run prune afterwards to free the space
    #[arg(long)]
    pub forget: bool,
    /// Record this host name in the rewritten snapshots
    #[arg(long, value_name = "HOST", value_parser = crate::util::non_empty_arg)]
    pub new_host: Option<String>,
    /// Record this time in the rewritten snapshots: "2006-01-02 15:04:05" (local) or RFC 3339
    #[arg(long, value_name = "TIME", value_parser = crate::util::snapshot_time_arg)]
    pub new_time: Option<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Print what would be removed, write nothing
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

/// The patterns given directly and in files (given by `option`, which a file that cannot be
/// read is named with).
pub(crate) fn patterns(direct: &[String], files: &[PathBuf], option: &str) -> Result<Vec<String>> {
    let mut out = direct.to_vec();
    for f in files {
        out.extend(
            read_list(f)
                .with_context(|| format!("cannot read {option} {}", arca_format::text::shown(f)))?,
        );
    }
    Ok(out)
}

/// Compiles `patterns` (none: `None`).
fn matcher(patterns: &[String], ignore_case: bool) -> Result<Option<PathMatcher>> {
    if patterns.is_empty() {
        return Ok(None);
    }
    Ok(Some(PathMatcher::with_case(patterns, ignore_case)?))
}

/// Runs `rewrite`.
pub fn run(g: &Global, a: &RewriteArgs) -> Result<u8> {
    let x = &a.exclude;
    let exact = matcher(
        &patterns(&x.excludes, &x.exclude_files, "--exclude-file")?,
        false,
    )?;
    let folded = matcher(
        &patterns(&x.iexcludes, &x.iexclude_files, "--iexclude-file")?,
        true,
    )?;
    let metadata = NewMetadata {
        hostname: a.new_host.clone(),
        time: a.new_time.as_deref().and_then(util::parse_snapshot_time),
    };
    let has_patterns = exact.is_some() || folded.is_some();
    if !has_patterns && metadata == NewMetadata::default() {
        super::usage!(
            "nothing to do: give --exclude, --iexclude, a pattern file, --new-host or --new-time"
        );
    }
    // Backup's rule: a folder a `!` pattern may take something back from is kept, and what
    // it holds is judged entry by entry.
    let excluded = |p: &Path, dir: bool| {
        [&exact, &folded]
            .into_iter()
            .flatten()
            .any(|m| m.matches(p) && !(dir && m.takes_back_below(p)))
    };
    let opened = util::open(g)?;
    let repo = &opened.repo;
    let kind = if a.forget && !a.dry_run {
        LockKind::Exclusive
    } else {
        LockKind::Shared
    };
    // A dry run writes nothing: it takes no lock, as tag's and forget's (it failed on a
    // read-only repository, saying rewrite writes to it).
    // Whatever `--no-lock` says: a command that writes always locks (as backup's).
    let _lock = if a.dry_run {
        None
    } else {
        Some(util::take_lock(g, repo, kind, "rewrite")?)
    };
    let (chosen, left_out) = super::tag::select(repo, &super::filter(&a.filter), &a.snapshots)?;
    // Only the listings need it: a change of host or time alone does not load it.
    let index = if has_patterns {
        repo.load_index()?
    } else {
        arca_repo::Index::default()
    };
    let opts = RewriteOptions {
        forget: a.forget,
        dry_run: a.dry_run,
        metadata,
    };
    // Without patterns no listing is read: only the host name or time changes.
    let excluded: Option<&arca_maintenance::rewrite::Excluded<'_>> =
        has_patterns.then_some(&excluded);
    let rep = rewrite_snapshots(repo, &index, &chosen, excluded, &opts)?;
    if a.json {
        super::out(&report_json(&rep, a).to_string())?;
    } else if !g.quiet {
        print_report(&rep, a.dry_run, a.forget)?;
    }
    Ok(super::left_out_exit(left_out))
}

/// One removed entry: its path and what it held.
fn removed_line(r: &Removed) -> Vec<u8> {
    let what = match r.kind {
        NodeKind::File => format!("file, {}", human_bytes(r.bytes)),
        NodeKind::Dir => format!(
            "dir: {}, {}",
            util::count(r.files, "file"),
            human_bytes(r.bytes)
        ),
        k => k.name().to_string(),
    };
    let mut line = b"  ".to_vec();
    line.extend_from_slice(r.path.as_os_str().as_bytes());
    line.extend_from_slice(format!(" ({what})").as_bytes());
    line
}

/// The text report: per snapshot what is dropped and what was saved and removed.
fn print_report(rep: &RewriteReport, dry_run: bool, forget: bool) -> Result<()> {
    for s in &rep.snapshots {
        let short = s.original.short();
        if s.emptied {
            eprintln!(
                "warning: snapshot {short}: the patterns exclude every path it backed up; it is \
                 left as it is (`arca forget {short}` removes it)"
            );
            continue;
        }
        if s.new.is_none() {
            super::out(&format!("snapshot {short}: nothing to rewrite"))?;
            continue;
        }
        if !s.removed.is_empty() {
            super::out(&format!(
                "snapshot {short}: {} {} ({}, {})",
                if dry_run { "would remove" } else { "removing" },
                util::count(s.removed.len(), "entry"),
                util::count(s.files_removed, "file"),
                human_bytes(s.bytes_removed)
            ))?;
        }
        for r in &s.removed {
            super::out_bytes(&removed_line(r))?;
        }
        for line in metadata_lines(s, dry_run) {
            super::out(&line)?;
        }
        match s.new_id {
            // Saved by an earlier run (stopped before it removed the original, or run
            // without --forget): nothing was saved now.
            Some(new) if s.adopted => super::out(&format!(
                "found new snapshot {}, saved by an earlier run",
                new.short()
            ))?,
            Some(new) => super::out(&format!("saved new snapshot {}", new.short()))?,
            None => super::out("would save a new snapshot")?,
        }
        if s.forgotten {
            super::out(&format!("removed old snapshot {short}"))?;
        } else if dry_run && forget {
            super::out(&format!("would remove old snapshot {short}"))?;
        }
    }
    // A copy an earlier run saved, only found now, is not counted as modified here (a rerun
    // said "modified 1 snapshot" and wrote nothing).
    let found = rep.snapshots.iter().filter(|s| s.adopted).count();
    let n = rep.modified() - found;
    let line = match (n, dry_run) {
        (0, false) => "no snapshots were modified".to_string(),
        (0, true) => "no snapshots would be modified".to_string(),
        (n, false) => format!("modified {}", util::count(n, "snapshot")),
        (n, true) => format!("would modify {}", util::count(n, "snapshot")),
    };
    if found > 0 {
        super::out(&format!(
            "{line}; {} {} rewritten by an earlier run",
            util::count(found, "snapshot"),
            if found == 1 { "was" } else { "were" }
        ))
    } else {
        super::out(&line)
    }
}

/// `snapshot 1a7e2847: setting host to h2 (was h1)`, and the same for the time.
fn metadata_lines(s: &RewrittenSnapshot, dry_run: bool) -> Vec<String> {
    let (Some(new), short) = (&s.new, s.original.short()) else {
        return vec![];
    };
    let verb = if dry_run { "would set" } else { "setting" };
    let mut out = vec![];
    if let Some(old) = &s.old_hostname {
        out.push(format!(
            "snapshot {short}: {verb} host to {} (was {old})",
            new.hostname
        ));
    }
    if let Some(old) = &s.old_time {
        out.push(format!(
            "snapshot {short}: {verb} time to {} (was {})",
            shown_time(&new.time),
            shown_time(old)
        ));
    }
    out
}

/// A snapshot time as the listings show it (local time, to the second).
fn shown_time(t: &chrono::DateTime<chrono::FixedOffset>) -> String {
    t.with_timezone(&chrono::Local)
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// The JSON report: one document.
fn report_json(rep: &RewriteReport, a: &RewriteArgs) -> Value {
    let snaps: Vec<Value> = rep
        .snapshots
        .iter()
        .map(|s| {
            let mut v = json!({
                "snapshot_id": s.original.to_hex(),
                "modified": s.new.is_some(),
                "emptied": s.emptied,
                "new_snapshot_id": s.new_id.map(|i| i.to_hex()),
                "adopted": s.adopted,
                "forgotten": s.forgotten,
                "tags": s.new.as_ref().map(|n| n.tags.clone()),
                "files_removed": s.files_removed,
                "bytes_removed": s.bytes_removed,
                "removed": s.removed.iter().map(|r| json!({
                    "path": r.path.to_string_lossy(),
                    "type": r.kind.name(),
                    "files": r.files,
                    "bytes": r.bytes,
                })).collect::<Vec<_>>(),
            });
            if a.new_host.is_some() || a.new_time.is_some() {
                // What changed (`null`: kept), only when asked to change it.
                let new = |changed: bool| s.new.as_ref().filter(|_| changed);
                v["old_hostname"] = json!(s.old_hostname);
                v["hostname"] = json!(new(s.old_hostname.is_some()).map(|n| &n.hostname));
                v["old_time"] = json!(s.old_time.map(|t| t.to_rfc3339()));
                v["time"] = json!(new(s.old_time.is_some()).map(|n| n.time.to_rfc3339()));
            }
            v
        })
        .collect();
    json!({
        "message_type": "summary",
        "dry_run": a.dry_run,
        "forget": a.forget,
        "snapshots": snaps,
        "modified_snapshots": rep.modified(),
        "trees_written": rep.trees_written,
        "packs_written": rep.packs_written,
        "index_file": rep.index_file.map(|i| i.to_hex()),
    })
}

//! `arca restore`: restore a snapshot under a target directory, with progress, a dry run, a
//! profile of the restore network, and Ctrl-C that stops every stage.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Result, bail};
use arca_format::text::shown;
use arca_format::{Id, Node, Snapshot};
use arca_repo::{Index, Repository};
use arca_restore::{
    Action, PlannedEntry, Progress, RestoreError, RestoreIssue, RestoreOptions, RestoreReport,
    Tuning, restore,
};
use serde_json::json;

use crate::cli::{Global, RestoreArgs};
use crate::progress::{ProgressLine, Ticker};
use crate::util::{self, count, human_bytes, human_duration, noun, parse_duration, parse_size};

use super::subfolder;

/// Prints what happens during the restore: errors and stalls on stderr (above the progress
/// line), planned actions on stdout (dry run, verbose).
struct Printer<'a> {
    line: &'a ProgressLine,
    json: bool,
    list: bool,
    dry_run: bool,
}

impl arca_restore::Observer for Printer<'_> {
    fn issue(&self, i: &RestoreIssue) {
        if self.json {
            let v = json!({"message_type": "error", "error": {"message": i.message},
                "item": i.path.to_string_lossy()});
            self.line.println(&v.to_string());
        } else {
            self.line.println(&format!("error: {i}"));
        }
    }
    fn stall(&self, report: &str) {
        self.line.println(&format!("warning: {report}"));
    }
    fn planned(&self, e: &PlannedEntry<'_>) {
        if !self.list || (!self.dry_run && e.action == Action::Skip) {
            return;
        }
        let line = if self.json {
            // restic's names for what happened to an entry.
            let action = match e.action {
                Action::Restore => "restored",
                Action::Update | Action::Metadata => "updated",
                Action::Delete => "deleted",
                Action::Skip => "unchanged",
                Action::Blocked => "blocked",
            };
            json!({"message_type": "verbose_status", "action": action,
                "metadata_only": e.action == Action::Metadata,
                "item": e.path.to_string_lossy(), "type": e.kind, "size": e.bytes,
                "dry_run": self.dry_run})
            .to_string()
        } else {
            let verb = match (e.action, self.dry_run) {
                (Action::Restore, true) => "would restore",
                (Action::Update, true) => "would update",
                (Action::Metadata, true) => "would fix metadata of",
                (Action::Delete, true) => "would delete",
                (Action::Restore, false) => "restore",
                (Action::Update, false) => "update",
                (Action::Metadata, false) => "fix metadata of",
                (Action::Delete, false) => "delete",
                (Action::Skip, true) => "would leave",
                (Action::Skip, false) => "leave",
                (Action::Blocked, _) => "cannot restore",
            };
            let size = if e.bytes > 0 {
                format!(" ({})", human_bytes(e.bytes))
            } else {
                String::new()
            };
            format!("{verb} {} {}{size}", e.kind, shown(e.path))
        };
        // Listings go to stdout, where a pipe can take them.
        self.line.suspend(|| {
            let _ = super::out(&line);
        });
    }
}

fn tuning(a: &RestoreArgs) -> Result<Tuning> {
    let size = |s: &Option<String>| s.as_deref().map(parse_size).transpose();
    Ok(Tuning {
        fetchers: a.fetchers.unwrap_or(0),
        workers: a.workers.unwrap_or(0),
        memory: size(&a.memory)?.unwrap_or(0),
        read_gap: size(&a.read_gap)?,
        max_read: size(&a.max_read)?.unwrap_or(0),
        queue: a.queue.unwrap_or(0),
        window: size(&a.window)?.unwrap_or(0),
        stall_after: a.stall_after.as_deref().map(parse_duration).transpose()?,
        no_preallocate: a.no_preallocate,
        direct_io: if a.no_direct_io {
            arca_restore::DirectIo::Never
        } else {
            a.direct_io
        },
        prefetch: size(&a.prefetch)?,
    })
}

pub fn run(g: &Global, a: &RestoreArgs) -> Result<u8> {
    let cancel = super::cancel_on_signals(super::INTERRUPTED)?;
    // A `--reuse-from` folder that is not one, or cannot be read, was refused by the parse
    // (`util::ReuseDir`, exit 2).
    let opened = util::open(g)?;
    let _lock = util::lock(g, &opened.repo, arca_repo::LockKind::Shared, "restore")?;
    let repo = &opened.repo;
    // The snapshot is found before the index is read (see subfolder::find).
    let found = subfolder::find(repo, &a.snapshot, &super::filter(&a.filter))?;
    let index = repo.load_index()?;
    let (resolved, entry) = subfolder::resolve_entry(repo, &index, found)?;
    // The patterns given and those of the pattern files (`--include-file`, ...).
    let includes = super::rewrite::patterns(&a.includes, &a.include_files, "--include-file")?;
    let excludes = super::rewrite::patterns(&a.excludes, &a.exclude_files, "--exclude-file")?;
    let iincludes = super::rewrite::patterns(&a.iincludes, &a.iinclude_files, "--iinclude-file")?;
    let iexcludes = super::rewrite::patterns(&a.iexcludes, &a.iexclude_files, "--iexclude-file")?;
    let has_patterns = !(includes.is_empty()
        && excludes.is_empty()
        && iincludes.is_empty()
        && iexcludes.is_empty());
    if entry.is_some() && !(includes.is_empty() && iincludes.is_empty()) {
        bail!(
            "--include cannot narrow a restore of a single entry ({}); name its folder instead",
            arca_format::text::shown(std::path::Path::new(&a.snapshot))
        );
    }
    let id = resolved.id;
    let (snap, roots) = match &resolved.folder {
        None => (resolved.snap, None),
        Some((path, node)) => {
            let (snap, roots) = folder_as_snapshot(repo, &index, resolved.snap, path, node)?;
            // The folder's contents would stand for the whole file system, and `--delete`
            // would remove all that it lacks from `/` (restic does so).
            if a.delete
                && roots.iter().any(|r| r == Path::new("/"))
                && std::fs::canonicalize(&a.target).is_ok_and(|t| t == Path::new("/"))
            {
                bail!(
                    "--delete with {} into /: the folder would stand for the whole file system, \
                     and everything else in / would be deleted; restore it into a folder, or \
                     restore the whole snapshot",
                    arca_format::text::shown(Path::new(&a.snapshot))
                );
            }
            (snap, Some(roots))
        }
    };
    let opts = RestoreOptions {
        target: a.target.clone(),
        includes,
        excludes,
        iincludes,
        iexcludes,
        only: entry
            .map(|name| Path::new("/").join(OsStr::from_bytes(&name)))
            .into_iter()
            .collect(),
        overwrite: a.overwrite,
        delete: a.delete,
        roots,
        dry_run: a.dry_run,
        reuse_from: a.reuse_from.clone(),
        verify: a.verify,
        // Not a cache (kept under --no-cache too): whether the last restore into the target
        // may not have reached the disk.
        state_dir: arca_repo::cache::restore_markers(g.cache_dir.as_deref()),
        tuning: tuning(a)?,
        cancel: Some(Arc::clone(&cancel)),
        ..RestoreOptions::default()
    };
    let progress = Arc::new(Progress::default());
    let p = Arc::clone(&progress);
    let line = ProgressLine::start(util::interactive(g, a.json), move |el| render(&p, el));
    // As restic (and backup): `--quiet` leaves only the summary, also in JSON.
    let ticker = (a.json && !g.quiet).then(|| {
        let p = Arc::clone(&progress);
        Ticker::start(Duration::from_secs(1), move |el| {
            let _ = super::out(&status_json(&p, el).to_string());
        })
    });
    let printer = Printer {
        line: &line,
        json: a.json,
        list: a.dry_run || a.verbose,
        dry_run: a.dry_run,
    };
    let result = restore(repo, &index, &snap, &opts, &progress, &printer);
    drop(ticker);
    drop(line);
    let report = match result {
        Ok(r) => r,
        Err(RestoreError::Interrupted) => {
            let total = progress.files_total.load(Ordering::Relaxed);
            return Err(super::Stopped(if total == 0 {
                // Stopped while the plan was made: nothing was written yet.
                "interrupted before anything was restored".to_string()
            } else {
                format!(
                    "interrupted: {} of {} restored; run the same command again to finish \
                     (what is in place is not fetched again)",
                    progress.files.load(Ordering::Relaxed),
                    count(total, "file")
                )
            })
            .into());
        }
        Err(e) => return Err(e.into()),
    };
    // A dry run that finds entries it could not restore says so by its exit code, as the
    // real run would (it exited 0).
    let errors = report.issues.len() + usize::from(a.dry_run && report.plan.reported_blocked > 0);
    // An error line, printed under -q as the first of them was (in the JSON summary as
    // `owners_refused`).
    if report.owners_refused > 1 && !a.json {
        eprintln!(
            "error: {} more {} whose owner the file system refused, as above (their \
             contents and other metadata were restored)",
            report.owners_refused - 1,
            noun(report.owners_refused - 1, "entry")
        );
    }
    if a.json {
        super::out(&summary_json(&id, &report, &opened.stats).to_string())?;
    } else if !g.quiet {
        print_summary(&id, a, &report, has_patterns)?;
        if a.profile {
            print_profile(&report)?;
        }
    }
    Ok(if errors > 0 { 3 } else { 0 })
}

/// The snapshot restricted to one of its folders (`ID:SUBFOLDER`): the folder's listing is the
/// root, and the backed-up paths are seen from it, so `--delete` acts where it would have in the
/// whole snapshot (the folder itself when it lies inside a backed-up path).
fn folder_as_snapshot(
    repo: &Repository,
    index: &Index,
    mut snap: Snapshot,
    path: &[u8],
    node: &Node,
) -> Result<(Snapshot, Vec<PathBuf>)> {
    // The snapshot's paths have bytes that are not UTF-8 replaced: such a path is looked up
    // in the trees, and compared with the folder as the trees spell it (compared as
    // replaced, `backup /x/dir\xfe/sub /x/dir\xff` took the folder `/x/dir\xfe` for backed
    // up, and `--delete` emptied it: hunt 30).
    let resolved = arca_restore::roots::resolve(&snap.paths, snap.tree, |id: &Id| {
        let tree = repo.load_tree(index, id)?;
        Ok::<_, anyhow::Error>(
            tree.nodes
                .iter()
                .map(|n| (n.name.to_vec(), n.subtree.filter(|_| n.is_dir())))
                .collect(),
        )
    })?;
    let folder = Path::new(OsStr::from_bytes(path));
    let mut roots = Vec::new();
    for r in resolved {
        if let Ok(rest) = r.strip_prefix(folder) {
            roots.push(Path::new("/").join(rest));
        } else if folder.starts_with(&r) {
            roots.push(PathBuf::from("/"));
        }
    }
    roots.sort();
    roots.dedup();
    snap.paths = arca_restore::roots::spelled(&roots);
    if let Some(tree) = node.subtree {
        snap.tree = tree;
    }
    Ok((snap, roots))
}

fn render(p: &Progress, el: Duration) -> String {
    let bytes = p.bytes.load(Ordering::Relaxed);
    let total = p.bytes_total.load(Ordering::Relaxed);
    let secs = el.as_secs_f64().max(0.001);
    let rate = bytes as f64 / secs;
    let eta = if rate > 0.0 && total > bytes {
        format!(", ETA {}", human_duration((total - bytes) as f64 / rate))
    } else {
        String::new()
    };
    let pct = if total > 0 {
        format!("{:.0}% ", (bytes as f64 * 100.0 / total as f64).min(100.0))
    } else {
        String::new()
    };
    format!(
        "[{}] {pct}{} of {}, {} of {}, {}/s{eta}",
        human_duration(secs),
        p.files.load(Ordering::Relaxed),
        count(p.files_total.load(Ordering::Relaxed), "file"),
        human_bytes(bytes),
        human_bytes(total),
        human_bytes(rate as u64),
    )
}

fn status_json(p: &Progress, el: Duration) -> serde_json::Value {
    let bytes = p.bytes.load(Ordering::Relaxed);
    let total = p.bytes_total.load(Ordering::Relaxed);
    json!({
        "message_type": "status",
        "seconds_elapsed": el.as_secs_f64(),
        "percent_done": if total > 0 { (bytes as f64 / total as f64).min(1.0) } else { 0.0 },
        "total_files": p.files_total.load(Ordering::Relaxed),
        "files_restored": p.files.load(Ordering::Relaxed),
        "total_bytes": total,
        "bytes_restored": bytes,
    })
}

fn summary_json(
    id: &arca_format::Id,
    r: &RestoreReport,
    stats: &arca_backend::BackendStats,
) -> serde_json::Value {
    let p = &r.plan;
    let mb = (r.bytes as f64 / 1e6).max(1e-9);
    let plan = json!({
        "files": p.files, "dirs": p.dirs, "dirs_new": p.dirs_new, "others": p.others,
        "hardlinks": p.hardlinks, "files_new": p.files_new, "files_updated": p.files_updated,
        "files_metadata": p.files_metadata,
        "dirs_metadata": p.dirs_metadata, "others_metadata": p.others_metadata, "files_unchanged": p.files_unchanged,
        "files_skipped": p.files_skipped,
        "files_blocked": p.files_blocked, "bytes_total": p.bytes_total,
        "bytes_in_place": p.bytes_in_place, "bytes_to_place": p.bytes_to_place,
        "blobs_to_fetch": p.blobs_to_fetch, "bytes_to_fetch": p.bytes_to_fetch,
        "packs_to_read": p.packs_to_read, "bytes_to_write": p.bytes_to_write,
        "bytes_to_copy": p.bytes_to_copy, "bytes_to_reuse": p.bytes_to_reuse,
        "bytes_holes": p.bytes_holes, "deletes": p.deletes,
        "deletes_failed": r.deletes_failed,
    });
    let stages = super::stages_json(&r.stages);
    let phases: Vec<_> = r
        .phases
        .iter()
        .map(|(n, s)| json!({"name": n, "seconds": s}))
        .collect();
    let tuning = r.tuning.map(|t| {
        json!({"fetchers": t.fetchers, "workers": t.workers, "memory": t.memory,
            "read_gap": t.read_gap, "max_read": t.max_read, "queue": t.queue, "window": t.window,
            "stall_after_seconds": t.stall_after.as_secs_f64(), "preallocate": t.preallocate,
            "direct_writes": t.direct_writes})
    });
    let mut v = json!({
        "message_type": "summary",
        "snapshot_id": id.to_hex(),
        "dry_run": r.dry_run,
        "files_restored": r.files,
        "dirs_restored": r.dirs,
        "others_restored": r.others,
        "hardlinks": r.hardlinks,
        "bytes_restored": r.bytes,
        "bytes_written": r.bytes_written,
        "errors": r.issues.len(),
        "issues": r.issues.iter().map(|i| i.message.clone()).collect::<Vec<_>>(),
        "duration_seconds": r.duration_seconds,
        "fetched_bytes": r.fetched_bytes,
        "requests": r.requests,
        "tree_requests": r.tree_requests,
        "tree_bytes": r.tree_bytes,
        "packs_read": r.packs_read,
        "requests_per_mb": r.requests as f64 / mb,
        "packs_per_mb": r.packs_read as f64 / mb,
        "rereads": r.rereads,
        "cache_hits": r.cache_hits,
        "evictions": r.evictions,
        "blocks_decoded": r.blocks_decoded,
        "blocks_from_other_copies": r.other_copies,
        "blocks_copied": r.blocks_copied,
        "bytes_copied": r.bytes_copied,
        "blocks_reused": r.blocks_reused,
        "bytes_reused": r.bytes_reused,
        "bytes_holes": r.bytes_holes, "bytes_direct": r.bytes_direct,
        "bytes_hinted": r.bytes_hinted,
        "files_hashed": r.files_hashed,
        "bytes_hashed": r.bytes_hashed,
        "entries_warmed": r.entries_warmed,
        "files_verified": r.files_verified,
        "verify_failures": r.verify_failures,
        "owners_refused": r.owners_refused,
        "peak_memory": r.peak_memory,
        "retries": r.retries,
        "stalls": r.stalls,
        "backend": util::stats_json(stats),
    });
    // restic's names, for scripts written for it: files and bytes already in place (or left
    // as they are) are "skipped".
    if let Some(m) = v.as_object_mut() {
        for (k, x) in [
            ("seconds_elapsed", json!(r.duration_seconds)),
            ("total_files", json!(r.plan.files)),
            (
                "files_skipped",
                json!(r.plan.files_unchanged + r.plan.files_skipped),
            ),
            ("files_deleted", json!(r.plan.deletes)),
            ("total_bytes", json!(r.plan.bytes_total)),
            ("bytes_skipped", json!(r.plan.bytes_in_place)),
        ] {
            m.insert(k.into(), x);
        }
    }
    v["plan"] = plan;
    v["profile"] = json!({"stages": stages, "phases": phases, "tuning": tuning});
    v
}

/// "N" files whose metadata a dry run would fix, and the directories and other entries.
fn metadata_fixes(p: &arca_restore::PlanSummary) -> String {
    let mut others = vec![];
    if p.dirs_metadata > 0 {
        others.push(count(p.dirs_metadata, "directory"));
    }
    if p.others_metadata > 0 {
        others.push(count(p.others_metadata, "other entry"));
    }
    if others.is_empty() {
        p.files_metadata.to_string()
    } else {
        format!("{} (and of {})", p.files_metadata, others.join(", "))
    }
}

fn print_summary(
    id: &arca_format::Id,
    a: &RestoreArgs,
    r: &RestoreReport,
    has_patterns: bool,
) -> Result<()> {
    let p = &r.plan;
    if r.dry_run {
        super::out(&format!(
            "dry run of snapshot {} into {}: would restore {}, update {} ({} to put in place), \
             fix the metadata of {}, leave {} unchanged and {} alone{}; create {}; delete {}",
            id.short(),
            shown(&a.target),
            count(p.files_new, "file"),
            p.files_updated,
            human_bytes(p.bytes_to_place),
            metadata_fixes(p),
            p.files_unchanged,
            p.files_skipped,
            if p.files_blocked > 0 {
                format!(", and could not restore {}", p.files_blocked)
            } else {
                String::new()
            },
            count(p.dirs_new, "directory"),
            count(p.deletes, "entry")
        ))?;
        super::out(&format!(
            "would fetch {} ({} from {}), write {} from them, copy {} locally, take {} from \
             --reuse-from; {} already in place, {} of holes",
            human_bytes(p.bytes_to_fetch),
            count(p.blobs_to_fetch, "blob"),
            count(p.packs_to_read, "pack"),
            human_bytes(p.bytes_to_write),
            human_bytes(p.bytes_to_copy),
            human_bytes(p.bytes_to_reuse),
            human_bytes(p.bytes_in_place),
            human_bytes(p.bytes_holes)
        ))?;
        if r.deletes_failed > 0 {
            super::out(&format!(
                "{} would not be deleted (see the errors above)",
                count(r.deletes_failed, "entry")
            ))?;
        }
        return Ok(());
    }
    // The breakdown is the plan's; a file that failed is in it but not among those restored.
    let planned = p.files_new + p.files_updated + p.files_unchanged + p.files_metadata;
    let (restored, label) = if r.files < planned {
        (
            format!(
                "{} of {}",
                r.files + r.hardlinks,
                count(planned + r.hardlinks, "file")
            ),
            "planned: ",
        )
    } else {
        (count(r.files + r.hardlinks, "file"), "")
    };
    // Files whose contents were right and whose metadata was put back are named as the dry
    // run and `--json` name them, not counted as unchanged.
    let fixed = if p.files_metadata > 0 {
        format!(", {} metadata fixed", p.files_metadata)
    } else {
        String::new()
    };
    let files = format!(
        "{restored} ({label}{} new, {} updated{fixed}, {} unchanged)",
        p.files_new, p.files_updated, p.files_unchanged
    );
    super::out(&format!(
        "restored snapshot {} to {}: {files}, {}, {} other, {}, {} in {}",
        id.short(),
        shown(&a.target),
        count(r.dirs, "dir"),
        r.others,
        count(r.hardlinks, "hard link"),
        human_bytes(r.bytes),
        human_duration(r.duration_seconds)
    ))?;
    // Patterns that select nothing: the target holds nothing of the snapshot, whatever the
    // fetch line would suggest.
    let nothing_selected = r.files + r.hardlinks + r.others + r.dirs == 0
        && p.files_skipped + p.files_blocked == 0
        && has_patterns;
    if p.files_new + p.files_updated > 0 || r.fetched_bytes > 0 || p.deletes > 0 {
        super::out(&format!(
            "fetched {} in {} from {}; copied {} locally; {} already in place; deleted {}",
            human_bytes(r.fetched_bytes),
            count(r.requests, "read"),
            count(r.packs_read, "pack"),
            human_bytes(r.bytes_copied + r.bytes_reused),
            human_bytes(p.bytes_in_place),
            count(p.deletes, "entry")
        ))?;
    } else if p.files_skipped + p.files_blocked > 0
        || nothing_selected
        || !r.issues.is_empty()
        || p.dirs_new + p.others_new > 0
    {
        // With listings lost, what the target holds is not known to be the snapshot's; the
        // folders and links made here were not there already.
        super::out("nothing to fetch")?;
    } else {
        super::out("nothing to fetch: the target already holds the snapshot's content")?;
    }
    if p.files_skipped > 0 {
        super::out(&format!(
            "{} left as {} (--overwrite {}), whatever {}",
            count(p.files_skipped, "file"),
            if p.files_skipped == 1 {
                "it is"
            } else {
                "they are"
            },
            a.overwrite,
            if p.files_skipped == 1 {
                "it holds"
            } else {
                "they hold"
            }
        ))?;
    }
    if p.files_blocked > 0 {
        super::out(&format!(
            "{} of the snapshot's files {} not restored (see the errors above)",
            p.files_blocked,
            if p.files_blocked == 1 { "was" } else { "were" }
        ))?;
    }
    if nothing_selected {
        eprintln!(
            "warning: nothing in snapshot {} matches the --include/--exclude patterns",
            id.short()
        );
    }
    if a.verify {
        super::out(&format!("verified {}", count(r.files_verified, "file")))?;
    }
    if r.other_copies > 0 {
        eprintln!(
            "warning: {} {} read from another copy in the repository: the one read first was \
             damaged or missing (run `arca check --read-data`)",
            r.other_copies,
            if r.other_copies == 1 {
                "block was"
            } else {
                "blocks were"
            }
        );
    }
    // Entries, not errors: one entry may have several (an owner and attributes not set).
    let paths: std::collections::HashSet<&Path> =
        r.issues.iter().map(|i| i.path.as_path()).collect();
    // The files not restored (something in the way) are counted above already.
    // Owners the file system refused: the first is among the errors, the others counted.
    let failed = (paths.len() as u64 + r.owners_refused.saturating_sub(1))
        .saturating_sub(r.verify_failures + r.deletes_failed + p.files_blocked);
    if failed > 0 {
        super::out(&format!(
            "{failed} {}{} could not be restored (see the errors above)",
            if p.files_blocked > 0 { "more " } else { "" },
            noun(failed, "entry")
        ))?;
    }
    if r.deletes_failed > 0 {
        super::out(&format!(
            "{} could not be deleted (see the errors above)",
            count(r.deletes_failed, "entry")
        ))?;
    }
    if r.verify_failures > 0 {
        super::out(&format!(
            "{} of the files read back differ from the snapshot (see the errors above); a \
             restore with `--overwrite always` rewrites them",
            r.verify_failures
        ))?;
    }
    Ok(())
}

fn print_profile(r: &RestoreReport) -> Result<()> {
    super::print_stages(&r.stages)?;
    super::print_phases(&r.phases)?;
    let mb = (r.bytes as f64 / 1e6).max(1e-9);
    let speed = if r.packs_read > 0 {
        format!("{:.1}", mb / r.packs_read as f64)
    } else {
        "-".into()
    };
    super::out(&format!(
        "fetched {} for {} restored ({:.2} bytes fetched per byte); {} reads ({:.2} per MB), \
         {} packs ({:.3} per MB; FAST'13 speed factor {speed} MB per pack); {} hinted to \
         the repository ahead of the reads; directory listings: {} reads, {}",
        human_bytes(r.fetched_bytes),
        human_bytes(r.bytes),
        r.fetched_bytes as f64 / (r.bytes as f64).max(1.0),
        r.requests,
        r.requests as f64 / mb,
        r.packs_read,
        r.packs_read as f64 / mb,
        human_bytes(r.bytes_hinted),
        r.tree_requests,
        human_bytes(r.tree_bytes)
    ))?;
    let budget = r.tuning.map_or(0, |t| t.memory);
    super::out(&format!(
        "cache: {} hits, {} evictions, {} re-reads; peak block memory {} (budget {}); {} \
         retries, {} stall reports",
        r.cache_hits,
        r.evictions,
        r.rereads,
        human_bytes(r.peak_memory),
        human_bytes(budget),
        r.retries,
        r.stalls
    ))?;
    super::out(&format!(
        "local: {} blocks ({}) copied instead of fetched, {} blocks ({}) from --reuse-from, {} \
         of holes, {} written direct; {} files hashed ({} read); {} target entries looked at \
         while the trees loaded",
        r.blocks_copied,
        human_bytes(r.bytes_copied),
        r.blocks_reused,
        human_bytes(r.bytes_reused),
        human_bytes(r.bytes_holes),
        human_bytes(r.bytes_direct),
        r.files_hashed,
        human_bytes(r.bytes_hashed),
        r.entries_warmed
    ))?;
    if let Some(t) = r.tuning {
        super::out(&format!(
            "knobs: fetchers {}, workers {}, memory {}, read gap {}, max read {}, queue {}, \
             window {}, preallocate {}, direct writes {}, prefetch {}",
            t.fetchers,
            t.workers,
            human_bytes(t.memory),
            human_bytes(t.read_gap),
            human_bytes(t.max_read),
            t.queue,
            human_bytes(t.window),
            t.preallocate,
            t.direct_writes,
            human_bytes(t.prefetch)
        ))?;
    }
    Ok(())
}

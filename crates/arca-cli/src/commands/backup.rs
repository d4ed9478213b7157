//! `arca backup`: back up paths into a new snapshot.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use arca_backup::estimate::{Estimator, Reading};
use arca_backup::filter::{ListForm, expand_files_from, read_path_list_as};
use arca_backup::{
    BackupError, BackupOptions, Excludes, FileChange, Observer, ParentMode, Progress, ReadAhead,
    Warning, WarningKind, backup_reader, backup_with,
};
use arca_repo::SnapshotFilter;
use serde_json::json;

use crate::cli::{BackupArgs, Global};
use crate::progress::{BarState, ProgressLine, Ticker};
use crate::util::{self, count, human_bytes, human_duration};

/// `--cap` when not given (see docs/BENCHMARKS.md for the figures behind it).
const DEFAULT_CAP: usize = 0;

pub fn run(g: &Global, a: &BackupArgs) -> Result<u8> {
    let memory = match &a.memory {
        Some(m) => util::parse_size(m).with_context(|| format!("invalid --memory {m:?}"))?,
        None => 0,
    };
    let cancel = super::cancel_on_signals(super::INTERRUPTED)?;
    let mut paths = a.paths.clone();
    for (files, form, option) in [
        (&a.files_from, ListForm::Trimmed, "--files-from"),
        (
            &a.files_from_verbatim,
            ListForm::Verbatim,
            "--files-from-verbatim",
        ),
        (&a.files_from_raw, ListForm::Raw, "--files-from-raw"),
    ] {
        for f in files {
            let listed = read_path_list_as(f, form)
                .with_context(|| format!("cannot read {option} {}", arca_format::text::shown(f)))?;
            // restic globs the lines of `--files-from`; the verbatim and raw forms are names.
            match form {
                ListForm::Trimmed => {
                    // As restic: a pattern that matches nothing is skipped, said so.
                    let (found, warnings) = expand_files_from(&listed, f);
                    for w in warnings {
                        eprintln!("warning: {w}");
                    }
                    paths.extend(found);
                }
                _ => paths.extend(listed),
            }
        }
    }
    if paths.is_empty() && !a.stdin {
        anyhow::bail!(
            "no paths to back up (the --files-from lists are empty, or their patterns match \
             no file)"
        );
    }
    let x = &a.exclude;
    let patterns = super::rewrite::patterns(&x.excludes, &x.exclude_files, "--exclude-file")?;
    let ipatterns = super::rewrite::patterns(&x.iexcludes, &x.iexclude_files, "--iexclude-file")?;
    let larger_than = match &a.exclude_larger_than {
        Some(s) => Some(
            util::parse_size(s).with_context(|| format!("invalid --exclude-larger-than {s:?}"))?,
        ),
        None => None,
    };
    let excludes = Excludes {
        patterns,
        ipatterns,
        if_present: a.exclude_if_present.clone(),
        caches: a.exclude_caches,
        larger_than,
    };
    // The sources' metadata starts loading while the password's key is derived.
    let ahead = if a.stdin {
        None
    } else {
        Some(ReadAhead::start(&paths, &excludes)?)
    };
    let opened = util::open(g)?;
    // A dry run writes nothing: it takes no lock (as restic's, and tag's and forget's), so it
    // works on a read-only repository too. A backup locks whatever `--no-lock` says, as
    // restic's: without its lock, a prune running beside it deleted the data it referenced
    // (hunt 29).
    let _lock = if a.dry_run {
        None
    } else {
        Some(util::take_lock(
            g,
            &opened.repo,
            arca_repo::LockKind::Shared,
            "backup",
        )?)
    };
    let repo = &opened.repo;
    let parent = match &a.parent {
        // As restic: the newest of this host with at least these paths, as without --parent (it
        // was the newest snapshot of any host and paths).
        Some(p) if p == "latest" => ParentMode::Auto,
        Some(p) => ParentMode::Id(
            repo.find_snapshot(p, &SnapshotFilter::default())
                .with_context(|| format!("invalid --parent {p:?}"))?
                .0,
        ),
        None => ParentMode::Auto,
    };
    let opts = BackupOptions {
        paths,
        excludes,
        dry_run: a.dry_run,
        skip_if_unchanged: a.skip_if_unchanged,
        tags: arca_repo::split_tags(&a.tags),
        time: a.time.as_deref().and_then(util::parse_snapshot_time),
        // As restic: an empty --host is this machine's name (an empty one could not be told
        // apart in listings nor chosen with --host).
        hostname: a.host.clone().filter(|h| !h.trim().is_empty()),
        parent,
        force: a.force,
        ignore_ctime: a.ignore_ctime,
        ignore_inode: a.ignore_inode,
        compression: a.compression,
        one_file_system: a.one_file_system,
        read_concurrency: a.read_concurrency.unwrap_or(0),
        upload_queue: a.upload_queue.unwrap_or(0),
        workers: a.workers.unwrap_or(0),
        memory,
        cap: a.cap.unwrap_or(DEFAULT_CAP),
        cancel: Some(Arc::clone(&cancel)),
        ..BackupOptions::default()
    };
    let progress = Arc::new(Progress::default());
    let errors = Arc::new(AtomicU64::new(0));
    let show = util::interactive(g, a.json);
    // As restic: `--quiet` leaves only the summary, also in JSON.
    let status_lines = a.json && !g.quiet;
    // Totals for a percentage and an ETA come from a scan running beside the backup.
    let scanner = ((show || status_lines) && !a.stdin && !a.no_scan)
        .then(|| Estimator::start(&opts, &progress));
    let (p, n) = (Arc::clone(&progress), Arc::clone(&errors));
    let line = ProgressLine::start_bar(show, move |el| Status::read(&p, &n, el).render());
    let ticker = status_lines.then(|| {
        let (p, n) = (Arc::clone(&progress), Arc::clone(&errors));
        Ticker::start(Duration::from_secs(1), move |el| {
            let _ = super::out(&Status::read(&p, &n, el).json().to_string());
        })
    });
    let warn = Told {
        errors: &errors,
        line: &line,
        verbose: if g.quiet { 0 } else { a.verbose },
        json: a.json,
    };
    let result = if a.stdin {
        let mut input = std::io::stdin().lock();
        backup_reader(
            repo,
            &opts,
            std::os::unix::ffi::OsStrExt::as_bytes(a.stdin_filename.as_os_str()),
            &mut input,
            &progress,
            &warn,
        )
    } else {
        backup_with(repo, &opts, ahead, &progress, &warn)
    };
    let report = match result {
        Ok(r) => r,
        Err(e @ BackupError::Cancelled { .. }) => {
            drop(scanner);
            drop(ticker);
            drop(line);
            return Err(super::Stopped(e.to_string()).into());
        }
        Err(e) => return Err(e.into()),
    };
    drop(scanner);
    drop(ticker);
    drop(line);
    if let Some((id, why)) = report.parent_unreadable.first() {
        eprintln!(
            "arca: warning: {} directory listings of the parent snapshot could not be read \
             (first: {}: {why}); their folders were read again and stored again, so this \
             snapshot does not need them; run `arca check --read-data` to find the damage",
            report.parent_unreadable.len(),
            id.short()
        );
    }
    // In the JSON summary as `files_renumbered`.
    if let Some(note) = renumbered_note(&report).filter(|_| !a.json && !g.quiet) {
        eprintln!("arca: note: {note}");
    }
    // A report that cannot be written (stdout on a full disk) fails the command, but the
    // snapshot is there: the error says so.
    print_summary(g, a, &report, &opened).map_err(|e| {
        if report.dry_run || report.skipped {
            e
        } else {
            e.context(format!(
                "snapshot {} saved; its report could not be written",
                report.snapshot_id.short()
            ))
        }
    })?;
    Ok(exit_code(report.snapshot.summary.errors, &report.warnings))
}

/// 3 when entries could not be read (the snapshot is incomplete) or files changed while
/// they were read (stored as read, possibly inconsistent: the snapshot is complete, but the
/// run exits 3, as documented; it exited 0, and a script could not tell); else 0.
fn exit_code(errors: u64, warnings: &[Warning]) -> u8 {
    if errors > 0 || changed_while_read(warnings) > 0 {
        3
    } else {
        0
    }
}

/// How many files changed while they were read.
fn changed_while_read(warnings: &[Warning]) -> usize {
    warnings
        .iter()
        .filter(|w| w.kind == WarningKind::ChangedWhileRead)
        .count()
}

/// Files read again fewer than this many times for a new inode number alone say nothing.
const RENUMBERED_NOTE_MIN: u64 = 10;

/// A note when most files that looked unchanged were read again only because their inode
/// numbers changed: a file system that numbers files anew at each mount (FUSE and SMB mounts,
/// exFAT) makes every backup read everything, and `--ignore-inode` is the way out.
fn renumbered_note(report: &arca_backup::BackupReport) -> Option<String> {
    let n = report.renumbered;
    let trusted = report.snapshot.summary.files_unmodified;
    (n >= RENUMBERED_NOTE_MIN && n >= trusted).then(|| {
        format!(
            "{} read again only because their inode numbers are not those of the parent \
             snapshot (size and times unchanged); file systems that number files anew at each \
             mount (FUSE and SMB mounts, exFAT) do that, and on those `--ignore-inode` trusts \
             size and times",
            count(n, "file")
        )
    })
}

/// Prints the summary of a finished backup (text, or the JSON summary line).
fn print_summary(
    g: &Global,
    a: &BackupArgs,
    report: &arca_backup::BackupReport,
    opened: &util::Opened,
) -> Result<()> {
    let s = &report.snapshot.summary;
    if a.json {
        let v = json!({
            "message_type": "summary",
            "snapshot_id": (!(report.dry_run || report.skipped)).then(|| report.snapshot_id.to_hex()),
            "dry_run": report.dry_run,
            "skipped": report.skipped,
            "excluded": report.excluded,
            "files_renumbered": report.renumbered,
            "parent": report.snapshot.parent.map(|p| p.to_hex()),
            "files_new": s.files_new,
            "files_changed": s.files_changed,
            "files_unmodified": s.files_unmodified,
            "dirs_new": s.dirs_new,
            "dirs_changed": s.dirs_changed,
            "dirs_unmodified": s.dirs_unmodified,
            "data_blobs": s.data_blobs,
            "tree_blobs": s.tree_blobs,
            "data_added": s.data_added,
            "data_added_packed": s.data_added_packed,
            "total_files_processed": s.total_files_processed,
            "total_bytes_processed": s.total_bytes_processed,
            "errors": s.errors,
            "changed_while_read": changed_while_read(&report.warnings),
            "complete": report.snapshot.complete,
            "warnings": report.warnings.iter().map(|w| w.message.clone()).collect::<Vec<_>>(),
            "duration_seconds": report.duration_seconds,
            // restic's names, for scripts written for it.
            "total_duration": report.duration_seconds,
            "backup_start": s.backup_start.map(|t| t.to_rfc3339()),
            "backup_end": s.backup_end.map(|t| t.to_rfc3339()),
            "backend": util::stats_json(&opened.stats),
            "profile": super::stages_json(&report.profile),
            "phases": report.phases.iter()
                .map(|(n, s)| json!({"name": n, "seconds": s})).collect::<Vec<_>>(),
            "capped_blobs": report.capped.0,
            "capped_bytes": report.capped.1,
            "parent_listings_unreadable": report.parent_unreadable.iter()
                .map(|(id, why)| json!({"tree": id.to_hex(), "error": why})).collect::<Vec<_>>(),
        });
        super::out(&v.to_string())?;
    } else if !g.quiet {
        // As restic's "using parent snapshot": which one the unchanged files were taken from.
        super::out(&match report.snapshot.parent {
            Some(p) => format!("Parent:      snapshot {}", p.short()),
            None => "Parent:      none, every file read".to_string(),
        })?;
        super::out(&format!(
            "Files:       {} new, {} changed, {} unmodified",
            s.files_new, s.files_changed, s.files_unmodified
        ))?;
        super::out(&format!(
            "Dirs:        {} new, {} changed, {} unmodified",
            s.dirs_new, s.dirs_changed, s.dirs_unmodified
        ))?;
        super::out(&format!(
            "Added:       {} ({} stored)",
            human_bytes(s.data_added),
            human_bytes(s.data_added_packed)
        ))?;
        super::out(&format!(
            "Processed:   {}, {} in {}",
            count(s.total_files_processed, "file"),
            human_bytes(s.total_bytes_processed),
            human_duration(report.duration_seconds)
        ))?;
        if report.excluded > 0 {
            super::out(&format!("Excluded:    {}", count(report.excluded, "entry")))?;
        }
        if report.capped.0 > 0 {
            super::out(&format!(
                "Capped:      {} blocks ({}) stored again to keep the snapshot in fewer packs",
                report.capped.0,
                human_bytes(report.capped.1)
            ))?;
        }
        if report.dry_run {
            super::out("dry run: nothing was written to the repository")?;
        } else if report.skipped {
            super::out("nothing changed since the parent snapshot: no snapshot written")?;
        } else if s.errors > 0 {
            super::out(&format!(
                "snapshot {} saved, INCOMPLETE: {} {} could not be read",
                report.snapshot_id.short(),
                s.errors,
                if s.errors == 1 { "entry" } else { "entries" }
            ))?;
        } else {
            super::out(&format!("snapshot {} saved", report.snapshot_id.short()))?;
        }
        let changed = changed_while_read(&report.warnings);
        if changed > 0 && !report.dry_run {
            super::out(&format!(
                "{} changed while read: stored as read, possibly inconsistent (named above)",
                count(changed as u64, "file")
            ))?;
        }
        if a.profile {
            super::print_stages(&report.profile)?;
            super::print_phases(&report.phases)?;
        }
    }
    Ok(())
}

/// One reading of the backup's progress, for the terminal display and JSON status lines.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Status {
    /// The library's reading: counters, totals, fraction and ETA (shared with the web UI).
    r: Reading,
    errors: u64,
}

impl Status {
    fn read(p: &Progress, errors: &AtomicU64, el: Duration) -> Self {
        Self {
            r: Reading::read(p, el),
            errors: errors.load(Ordering::Relaxed),
        }
    }

    fn fraction(&self) -> f64 {
        self.r.fraction()
    }

    fn eta(&self) -> Option<f64> {
        self.r.eta()
    }

    /// `[0:05] 42.10%  1234 files 1.20 GiB, total 3000 files 2.90 GiB, 0 errors` (restic's
    /// line; the totals are "found" while the scan runs), then the bar and `12.00 MiB/s, ETA
    /// 0:07`.
    fn render(&self) -> BarState {
        let bar = self.r.done_of_total();
        let mut text = format!("[{}] ", human_duration(self.r.secs));
        if bar.is_some() {
            text += &format!("{:.2}%  ", self.fraction() * 100.0);
        }
        text += &format!(
            "{} {}",
            count(self.r.files, "file"),
            human_bytes(self.r.bytes)
        );
        if bar.is_some() {
            text += &format!(
                ", {} {} {}",
                if self.r.totals_final {
                    "total"
                } else {
                    "found"
                },
                count(self.r.total_files, "file"),
                human_bytes(self.r.total_bytes)
            );
        }
        text += &format!(", {}", count(self.errors, "error"));
        let mut detail = format!("{}/s", human_bytes(self.r.rate() as u64));
        if let Some(eta) = self.eta() {
            detail += &format!(", ETA {}", human_duration(eta));
        }
        BarState { text, bar, detail }
    }

    /// A status line with restic's field names.
    fn json(&self) -> serde_json::Value {
        let mut v = json!({
            "message_type": "status",
            "seconds_elapsed": self.r.secs,
            "percent_done": self.fraction(),
            "total_files": self.r.total_files,
            "files_done": self.r.files,
            "total_bytes": self.r.total_bytes,
            "bytes_done": self.r.bytes,
            "bytes_read": self.r.bytes_read,
            "error_count": self.errors,
            "totals_final": self.r.totals_final,
        });
        if let Some(eta) = self.eta() {
            v["seconds_remaining"] = json!(eta.round() as u64);
        }
        v
    }
}

/// What the backup tells as it goes: warnings (counted) above the progress line, and with
/// `-v` each file met.
struct Told<'a> {
    errors: &'a AtomicU64,
    line: &'a ProgressLine,
    verbose: u8,
    json: bool,
}

impl Observer for Told<'_> {
    fn warning(&self, w: &Warning) {
        if w.is_error() {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.line.println(&warning_line(w, self.json));
    }

    fn file(&self, path: &std::path::Path, change: FileChange) {
        let wanted = match change {
            FileChange::Unchanged => self.verbose >= 2,
            _ => self.verbose >= 1,
        };
        if !wanted {
            return;
        }
        let text = if self.json {
            json!({"message_type": "verbose_status", "action": change.name(),
                   "item": path.to_string_lossy()})
            .to_string()
        } else {
            format!("{:<10}{}", change.name(), arca_format::text::shown(path))
        };
        self.line.suspend(|| {
            let _ = super::out(&text);
        });
    }
}

/// A warning as printed on stderr: text, or under `--json` restic's error message
/// (`message_type` "error", the entry as `item`, what was being done as `during`).
fn warning_line(w: &Warning, json: bool) -> String {
    if !json {
        return format!("warning: {w}");
    }
    json!({"message_type": "error", "error": {"message": w.message},
    "during": "archival", "item": w.path.to_string_lossy(),
    "kind": match w.kind {
        WarningKind::Unreadable => "unreadable",
        WarningKind::Vanished => "vanished",
        WarningKind::ChangedWhileRead => "changed_while_read",
        WarningKind::Loop => "loop",
        WarningKind::Followed => "followed",
    }})
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_warning_is_one_json_line() {
        let w = Warning {
            path: "/src/a\"b".into(),
            kind: WarningKind::Vanished,
            message: "/src/a\"b: vanished".into(),
        };
        let v: serde_json::Value = serde_json::from_str(&warning_line(&w, true)).expect("json");
        assert_eq!(v["message_type"], "error");
        assert_eq!(v["item"], "/src/a\"b");
        assert_eq!(v["error"]["message"], "/src/a\"b: vanished");
        assert_eq!(v["kind"], "vanished");
        assert_eq!(warning_line(&w, false), "warning: /src/a\"b: vanished");
    }

    /// A file that changed while it was read makes the run exit 3, though the snapshot is
    /// complete; a symlink stored as the folder it leads to does not.
    #[test]
    fn a_file_changed_while_read_exits_3() {
        let w = |kind| Warning {
            path: "/src/f".into(),
            kind,
            message: String::new(),
        };
        assert_eq!(exit_code(0, &[]), 0);
        assert_eq!(exit_code(0, &[w(WarningKind::Followed)]), 0);
        assert_eq!(exit_code(0, &[w(WarningKind::ChangedWhileRead)]), 3);
        assert_eq!(exit_code(1, &[w(WarningKind::Unreadable)]), 3);
    }

    fn status(files: u64, bytes: u64, total_files: u64, total_bytes: u64, fin: bool) -> Status {
        Status {
            r: Reading {
                secs: 10.0,
                files,
                bytes,
                bytes_read: bytes,
                total_files,
                total_bytes,
                totals_final: fin,
            },
            errors: 0,
        }
    }

    #[test]
    fn percent_and_eta_stay_sane() {
        // Halfway at 10 MB/s: 10 s left.
        let s = status(5, 100_000_000, 10, 200_000_000, true);
        assert_eq!(s.fraction(), 0.5);
        assert_eq!(s.eta(), Some(10.0));
        assert!(
            s.render().text.contains("50.00%  5 files"),
            "{:?}",
            s.render()
        );
        assert_eq!(s.render().detail, "9.54 MiB/s, ETA 0:10");
        assert_eq!(s.json()["seconds_remaining"], 10);
        // Files grew: clamped to 100 %, no ETA.
        let s = status(10, 300, 10, 200, true);
        assert_eq!(s.fraction(), 1.0);
        assert_eq!(s.eta(), None);
        assert_eq!(s.render().bar, Some((200, 200)));
        // Scan behind the backup: no ETA yet; ahead: ETA.
        assert_eq!(status(5, 100, 3, 50, false).eta(), None);
        assert!(status(5, 100, 30, 500, false).eta().is_some());
        assert!(
            status(5, 100, 30, 500, false)
                .render()
                .text
                .contains("found 30 files")
        );
        // Nothing yet: no bar, no NaN.
        let mut s = status(0, 0, 0, 0, false);
        s.r.secs = 0.0;
        assert_eq!(s.fraction(), 0.0);
        assert_eq!(s.eta(), None);
        assert_eq!(s.render().bar, None);
        assert!(s.json()["percent_done"].as_f64().is_some());
        // Only empty files: by file count.
        assert_eq!(status(1, 0, 4, 0, true).fraction(), 0.25);
    }
}

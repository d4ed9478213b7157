//! `arca backup`: back up paths into a new snapshot.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::{Context, Result};
use arca_backup::filter::read_list;
use arca_backup::{BackupOptions, Excludes, ParentMode, Progress, Warning, backup, backup_reader};
use arca_repo::SnapshotFilter;
use serde_json::json;

use crate::cli::{BackupArgs, Global};
use crate::progress::ProgressLine;
use crate::util::{self, human_bytes, human_duration};

pub fn run(g: &Global, a: &BackupArgs) -> Result<u8> {
    let opened = util::open(g)?;
    let repo = &opened.repo;
    let parent = match &a.parent {
        Some(p) => ParentMode::Id(repo.find_snapshot(p, &SnapshotFilter::default())?.0),
        None => ParentMode::Auto,
    };
    let list = |files: &[std::path::PathBuf]| -> Result<Vec<String>> {
        let mut out = vec![];
        for f in files {
            out.extend(read_list(f).with_context(|| format!("cannot read {}", f.display()))?);
        }
        Ok(out)
    };
    let mut paths = a.paths.clone();
    paths.extend(
        list(&a.files_from)?
            .into_iter()
            .map(std::path::PathBuf::from),
    );
    if paths.is_empty() && !a.stdin {
        anyhow::bail!("no paths to back up (the --files-from lists are empty)");
    }
    let mut patterns = a.excludes.clone();
    patterns.extend(list(&a.exclude_files)?);
    let mut ipatterns = a.iexcludes.clone();
    ipatterns.extend(list(&a.iexclude_files)?);
    let larger_than = match &a.exclude_larger_than {
        Some(s) => Some(
            util::parse_size(s).with_context(|| format!("invalid --exclude-larger-than {s:?}"))?,
        ),
        None => None,
    };
    let opts = BackupOptions {
        paths,
        excludes: Excludes {
            patterns,
            ipatterns,
            if_present: a.exclude_if_present.clone(),
            caches: a.exclude_caches,
            larger_than,
        },
        dry_run: a.dry_run,
        tags: a.tags.clone(),
        hostname: a.host.clone(),
        parent,
        force: a.force,
        compression: a.compression,
        one_file_system: a.one_file_system,
        ..BackupOptions::default()
    };
    let progress = Arc::new(Progress::default());
    let p = Arc::clone(&progress);
    let line = ProgressLine::start(util::interactive(g, a.json), move |el| {
        let bytes = p.bytes.load(Ordering::Relaxed);
        let rate = bytes as f64 / el.as_secs_f64().max(0.001);
        format!(
            "[{}] {} files, {} processed, {}/s",
            human_duration(el.as_secs_f64()),
            p.files.load(Ordering::Relaxed),
            human_bytes(bytes),
            human_bytes(rate as u64)
        )
    });
    let warn = |w: &Warning| line.println(&format!("warning: {w}"));
    let report = if a.stdin {
        let mut input = std::io::stdin().lock();
        backup_reader(repo, &opts, &a.stdin_filename, &mut input, &progress, &warn)?
    } else {
        backup(repo, &opts, &progress, &warn)?
    };
    drop(line);
    let s = &report.snapshot.summary;
    if a.json {
        let v = json!({
            "message_type": "summary",
            "snapshot_id": (!report.dry_run).then(|| report.snapshot_id.to_hex()),
            "dry_run": report.dry_run,
            "excluded": report.excluded,
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
            "complete": report.snapshot.complete,
            "warnings": report.warnings.iter().map(|w| w.message.clone()).collect::<Vec<_>>(),
            "duration_seconds": report.duration_seconds,
            "backend": util::stats_json(&opened.stats),
        });
        super::out(&v.to_string())?;
    } else if !g.quiet {
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
            "Processed:   {} files, {} in {}",
            s.total_files_processed,
            human_bytes(s.total_bytes_processed),
            human_duration(report.duration_seconds)
        ))?;
        if report.excluded > 0 {
            super::out(&format!("Excluded:    {} entries", report.excluded))?;
        }
        if report.dry_run {
            super::out("dry run: nothing was written to the repository")?;
        } else if s.errors > 0 {
            super::out(&format!(
                "snapshot {} saved, INCOMPLETE: {} entries could not be read",
                report.snapshot_id.short(),
                s.errors
            ))?;
        } else {
            super::out(&format!("snapshot {} saved", report.snapshot_id.short()))?;
        }
    }
    Ok(if s.errors > 0 { 3 } else { 0 })
}

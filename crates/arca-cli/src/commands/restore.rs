//! `arca restore`: restore a snapshot under a target directory.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::Result;
use arca_restore::{Progress, RestoreIssue, RestoreOptions, restore};
use serde_json::json;

use crate::cli::{Global, RestoreArgs};
use crate::progress::ProgressLine;
use crate::util::{self, human_bytes, human_duration};

pub fn run(g: &Global, a: &RestoreArgs) -> Result<u8> {
    let opened = util::open(g)?;
    let repo = &opened.repo;
    let (id, snap) = repo.find_snapshot(&a.snapshot, &super::filter(&a.filter))?;
    let index = repo.load_index()?;
    let opts = RestoreOptions {
        target: a.target.clone(),
        includes: a.includes.clone(),
        excludes: a.excludes.clone(),
        ..RestoreOptions::default()
    };
    let progress = Arc::new(Progress::default());
    let p = Arc::clone(&progress);
    let line = ProgressLine::start(util::interactive(g, a.json), move |el| {
        let bytes = p.bytes.load(Ordering::Relaxed);
        format!(
            "[{}] {} entries, {} restored, {}/s",
            human_duration(el.as_secs_f64()),
            p.entries.load(Ordering::Relaxed),
            human_bytes(bytes),
            human_bytes((bytes as f64 / el.as_secs_f64().max(0.001)) as u64)
        )
    });
    let issue = |i: &RestoreIssue| line.println(&format!("error: {i}"));
    let report = restore(repo, &index, &snap, &opts, &progress, &issue)?;
    drop(line);
    let errors = report.issues.len();
    if a.json {
        let v = json!({
            "message_type": "summary",
            "snapshot_id": id.to_hex(),
            "files_restored": report.files,
            "dirs_restored": report.dirs,
            "others_restored": report.others,
            "hardlinks": report.hardlinks,
            "bytes_restored": report.bytes,
            "bytes_written": report.bytes_written,
            "errors": errors,
            "issues": report.issues.iter().map(|i| i.message.clone()).collect::<Vec<_>>(),
            "duration_seconds": report.duration_seconds,
            "backend": util::stats_json(&opened.stats),
        });
        super::out(&v.to_string())?;
    } else if !g.quiet {
        super::out(&format!(
            "restored snapshot {} to {}: {} files, {} dirs, {} other, {} in {}",
            id.short(),
            a.target.display(),
            report.files + report.hardlinks,
            report.dirs,
            report.others,
            human_bytes(report.bytes),
            human_duration(report.duration_seconds)
        ))?;
        if errors > 0 {
            super::out(&format!(
                "{errors} entries could not be restored (see the errors above)"
            ))?;
        }
    }
    Ok(if errors > 0 { 3 } else { 0 })
}

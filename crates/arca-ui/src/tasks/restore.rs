//! The restore job: chosen files and folders of a snapshot into a target folder, with an
//! overwrite mode, a dry run first, progress, ETA and cancel (`arca_restore::restore`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use arca_repo::LockKind;
use arca_restore::{
    Action, Overwrite, PlannedEntry, Progress as RestoreProgress, RestoreError, RestoreIssue,
    RestoreOptions, restore,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{rated, spawn};
use crate::html::bytes;
use crate::jobs::{Job, JobCtx};
use crate::state::{ApiError, App};
use arca_format::text::count;

/// Entries a dry run lists at most.
const PLANNED_LIMIT: usize = 1000;

/// `POST /api/restore`: unknown fields are refused (a misspelt `"dry-run": true` ran a real
/// restore, with `--delete` if asked).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    /// Snapshot id, prefix or `latest`.
    pub snapshot: String,
    /// Snapshot paths to restore, percent-encoded (as the listings' `path_q`); none or `/`:
    /// everything.
    #[serde(default)]
    pub paths: Vec<String>,
    /// The folder to restore into (absolute).
    pub target: String,
    /// `if-changed` (default), `always`, `if-newer`, `never`.
    #[serde(default)]
    pub overwrite: Option<String>,
    /// Plan only: list what would change, change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Delete entries of the target the snapshot does not have.
    #[serde(default)]
    pub delete: bool,
}

/// Collects what happens during the restore for the job's log.
struct Recorder<'a> {
    ctx: &'a JobCtx,
    planned: Mutex<(Vec<Value>, u64)>,
    list: bool,
}

impl arca_restore::Observer for Recorder<'_> {
    fn issue(&self, i: &RestoreIssue) {
        self.ctx.log(format!("error: {i}"));
    }
    fn stall(&self, report: &str) {
        self.ctx.log(format!("warning: {report}"));
    }
    fn planned(&self, e: &PlannedEntry<'_>) {
        if !self.list || e.action == Action::Skip {
            return;
        }
        let mut p = self.planned.lock().unwrap_or_else(|e| e.into_inner());
        if p.0.len() < PLANNED_LIMIT {
            p.0.push(json!({"action": e.action.name(), "type": e.kind,
                "path": e.path.to_string_lossy(), "size": e.bytes}));
        } else {
            p.1 += 1;
        }
    }
}

/// Checks `r` and starts the restore job.
pub fn start_restore(app: &Arc<App>, r: RestoreRequest) -> Result<Arc<Job>, ApiError> {
    let overwrite: Overwrite = r
        .overwrite
        .as_deref()
        .unwrap_or("if-changed")
        .parse()
        .map_err(ApiError::bad)?;
    if r.target.contains('\0') {
        return Err(ApiError::bad(format!(
            "the target folder {:?} contains a NUL byte, which no path can hold",
            r.target
        )));
    }
    // Exactly as given, as the command line's --target: trailing spaces belong to a folder's
    // name, and a leading one makes the path relative, which is refused.
    let target = PathBuf::from(&r.target);
    if !target.is_absolute() {
        let why = if r.target.starts_with(char::is_whitespace) {
            " (it starts with whitespace)"
        } else {
            ""
        };
        return Err(ApiError::bad(format!(
            "the target folder must be an absolute path, not {:?}{why}",
            r.target
        )));
    }
    // The snapshot and every chosen path are looked up before the job starts (404 when one
    // is not there), and the job restores that snapshot even if `latest` moves meanwhile.
    let repo = app.repo()?;
    let (id, snap) = crate::data::find_snapshot(&repo, &r.snapshot)?;
    let index = app.index(&repo)?;
    let mut only = vec![];
    for p in &r.paths {
        let raw: Vec<u8> = percent_encoding::percent_decode_str(p).collect();
        let clean = crate::data::clean_path(&raw)?;
        if clean == b"/" {
            only.clear();
            break;
        }
        crate::data::node_at(&repo, &index, &snap, &clean)?;
        // The exact bytes of the path: a name that is not UTF-8 selects that entry alone.
        only.push(PathBuf::from(OsStr::from_bytes(&clean)));
    }
    drop((repo, index));
    let shown: String = if r.snapshot.len() == 64 {
        r.snapshot.chars().take(8).collect()
    } else {
        r.snapshot.clone()
    };
    // Quoted when it ends in whitespace, which a title would hide.
    let into = if r.target.ends_with(char::is_whitespace) {
        format!("{:?}", r.target)
    } else {
        target.display().to_string()
    };
    let title = format!(
        "{}restore of {shown} into {into}",
        if r.dry_run { "dry run: " } else { "" },
    );
    let params = json!({"snapshot": r.snapshot, "paths": r.paths, "target": r.target,
        "overwrite": overwrite.name(), "dry_run": r.dry_run, "delete": r.delete});
    spawn(app, "restore", title, params, move |app, ctx| {
        let repo = app.repo().map_err(|e| e.message)?;
        let _lock = app.lock(&repo, LockKind::Shared, "restore", &|| ctx.cancelled())?;
        let index = app.index(&repo).map_err(|e| e.message)?;
        let opts = RestoreOptions {
            target: target.clone(),
            only,
            overwrite,
            delete: r.delete,
            dry_run: r.dry_run,
            state_dir: app.restore_markers(),
            cancel: Some(ctx.cancel_flag()),
            ..RestoreOptions::default()
        };
        let progress = Arc::new(RestoreProgress::default());
        let p = Arc::clone(&progress);
        let dry_run = r.dry_run;
        ctx.progress(move |el| {
            let total = p.bytes_total.load(Ordering::Relaxed);
            let files_total = p.files_total.load(Ordering::Relaxed);
            let (done, files) = (
                p.bytes.load(Ordering::Relaxed),
                p.files.load(Ordering::Relaxed),
            );
            if files_total == 0 && total == 0 {
                return crate::jobs::Progress {
                    phase: "planning".into(),
                    ..Default::default()
                };
            }
            if dry_run {
                // A dry run restores nothing: "0 of 3 files" beside 100% read wrong.
                return crate::jobs::Progress {
                    phase: "planned".into(),
                    text: format!(
                        "{}, {} to restore",
                        count(files_total, "file"),
                        bytes(total)
                    ),
                    ..Default::default()
                };
            }
            rated(
                "restoring",
                done,
                total,
                el.as_secs_f64(),
                format!(
                    "{files} of {}, {} of {}",
                    count(files_total, "file"),
                    bytes(done),
                    bytes(total)
                ),
            )
        });
        let rec = Recorder {
            ctx,
            planned: Mutex::new((vec![], 0)),
            list: r.dry_run,
        };
        let report = match restore(&repo, &index, &snap, &opts, &progress, &rec) {
            Ok(rep) => rep,
            Err(RestoreError::Interrupted) => {
                return Err(format!(
                    "cancelled: {} of {} restored; start the same restore again to finish \
                     (what is in place is not fetched again)",
                    progress.files.load(Ordering::Relaxed),
                    count(progress.files_total.load(Ordering::Relaxed), "file")
                ));
            }
            Err(e) => return Err(e.to_string()),
        };
        let (planned, more) = rec.planned.into_inner().unwrap_or_else(|e| e.into_inner());
        let p = &report.plan;
        Ok(json!({
            "snapshot_id": id.to_hex(),
            "target": target.to_string_lossy(),
            "dry_run": report.dry_run,
            "files_restored": report.files,
            "dirs_restored": report.dirs,
            "others_restored": report.others,
            "hardlinks": report.hardlinks,
            "bytes_restored": report.bytes,
            "bytes_written": report.bytes_written,
            "errors": report.issues.len(),
            "issues": report.issues.iter().map(|i| i.message.clone()).collect::<Vec<_>>(),
            "duration_seconds": report.duration_seconds,
            "plan": {
                "files": p.files, "dirs": p.dirs, "dirs_new": p.dirs_new, "others": p.others,
                "files_new": p.files_new, "files_updated": p.files_updated,
                "files_metadata": p.files_metadata, "files_unchanged": p.files_unchanged,
                "dirs_metadata": p.dirs_metadata, "others_metadata": p.others_metadata,
                "files_skipped": p.files_skipped,
                "files_blocked": p.files_blocked, "bytes_total": p.bytes_total,
                "bytes_in_place": p.bytes_in_place, "bytes_to_place": p.bytes_to_place,
                "bytes_to_fetch": p.bytes_to_fetch, "deletes": p.deletes,
            },
            "planned": planned,
            "planned_more": more,
        }))
    })
}

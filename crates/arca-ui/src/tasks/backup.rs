//! The backup job: a profile's `[backup]` section run through `arca_backup::backup`, with the
//! estimate scan beside it for a percentage and an ETA, warnings in the log, and cancel.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arca_backup::estimate::{Estimator, Reading};
use arca_backup::{Progress as BackupProgress, Warning, backup};
use arca_repo::LockKind;
use serde::Deserialize;
use serde_json::json;

use super::spawn;
use crate::html::bytes;
use crate::jobs::{Job, Progress};
use crate::profiles;
use crate::state::{ApiError, App};
use arca_format::text::count;

/// `POST /api/backup`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupRequest {
    /// The profile's name (its file is `NAME.toml` in the profiles folder).
    pub profile: String,
    /// Read and count everything, write nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// Checks the profile and starts the backup job.
pub fn start_backup(app: &Arc<App>, r: BackupRequest) -> Result<Arc<Job>, ApiError> {
    let (profile, mut opts) = profiles::find(
        app.profiles_dir.as_deref(),
        &r.profile,
        &app.location,
        app.profile_check.as_ref(),
    )
    .map_err(ApiError::bad)?;
    opts.dry_run = r.dry_run;
    let title = format!(
        "{}backup of profile {} ({})",
        if r.dry_run { "dry run: " } else { "" },
        profile.name,
        profile.paths.join(", ")
    );
    let params = json!({"profile": r.profile, "dry_run": r.dry_run});
    spawn(app, "backup", title, params, move |app, ctx| {
        // As `arca backup`: a `files-from` pattern that matches nothing is skipped, said so.
        for w in &profile.warnings {
            ctx.log(format!("warning: {w}"));
        }
        let repo = app.repo().map_err(|e| e.message)?;
        let _lock = app.lock(&repo, LockKind::Shared, "backup", &|| ctx.cancelled())?;
        opts.cancel = Some(ctx.cancel_flag());
        let progress = Arc::new(BackupProgress::default());
        let errors = Arc::new(AtomicU64::new(0));
        let (p, n) = (Arc::clone(&progress), Arc::clone(&errors));
        ctx.progress(move |el| {
            let r = Reading::read(&p, el);
            let total = r.done_of_total();
            let mut text = format!("{}, {}", count(r.files, "file"), bytes(r.bytes));
            if total.is_some() {
                text += &format!(
                    " of {} {}, {}",
                    if r.totals_final {
                        "total"
                    } else {
                        "found so far"
                    },
                    count(r.total_files, "file"),
                    bytes(r.total_bytes)
                );
            }
            text += &format!(", {}", count(n.load(Ordering::Relaxed), "error"));
            Progress {
                phase: "backing up".into(),
                fraction: total.map(|_| r.fraction()),
                text,
                eta_seconds: r.eta(),
            }
        });
        let estimator = Estimator::start(&opts, &progress);
        let warn = |w: &Warning| {
            if w.is_error() {
                errors.fetch_add(1, Ordering::Relaxed);
            }
            ctx.log(format!("warning: {w}"));
        };
        let result = backup(&repo, &opts, &progress, &warn);
        drop(estimator);
        // A cancel is said by the job's state; the error says what was kept.
        let report = result.map_err(|e| e.to_string())?;
        let s = &report.snapshot.summary;
        Ok(json!({
            "profile": profile.name,
            "snapshot_id": (!report.dry_run).then(|| report.snapshot_id.to_hex()),
            "dry_run": report.dry_run,
            "parent": report.snapshot.parent.map(|p| p.to_hex()),
            "files_new": s.files_new,
            "files_changed": s.files_changed,
            "files_unmodified": s.files_unmodified,
            "dirs_new": s.dirs_new,
            "dirs_changed": s.dirs_changed,
            "dirs_unmodified": s.dirs_unmodified,
            "data_added": s.data_added,
            "data_added_packed": s.data_added_packed,
            "total_files_processed": s.total_files_processed,
            "total_bytes_processed": s.total_bytes_processed,
            "excluded": report.excluded,
            "errors": s.errors,
            "complete": report.snapshot.complete,
            "duration_seconds": report.duration_seconds,
        }))
    })
}

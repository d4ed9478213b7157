//! The jobs the page starts, each over the library call the command line makes: restore
//! (`arca_restore::restore`), backup of a profile (`arca_backup::backup`), check
//! (`arca_maintenance::check`), forget by a policy and prune (`arca_maintenance`).

mod backup;
mod maintain;
mod restore;

use std::sync::Arc;

use arca_format::text::count;
use serde_json::Value;

pub use backup::start_backup;
pub use maintain::{PolicyFields, forget_preview, start_check, start_forget, start_prune};
pub use restore::start_restore;

use crate::jobs::{Job, JobCtx, Progress};
use crate::state::{ApiError, App};

/// Starts a job of `kind` running `work` with the open repository.
fn spawn<F>(
    app: &Arc<App>,
    kind: &'static str,
    title: String,
    params: Value,
    work: F,
) -> Result<Arc<Job>, ApiError>
where
    F: FnOnce(&Arc<App>, &JobCtx) -> Result<Value, String> + Send + 'static,
{
    let a = Arc::clone(app);
    app.jobs
        .spawn(kind, title, params, move |ctx| work(&a, ctx))
        .map_err(ApiError::failed)
}

/// `12.5%`-free progress text: `a of b` in a unit.
fn of(done: u64, total: u64, unit: &str) -> String {
    format!("{done} of {}", count(total, unit))
}

/// Progress with a fraction and an ETA from the rate so far.
fn rated(phase: &str, done: u64, total: u64, secs: f64, text: String) -> Progress {
    let fraction = (total > 0).then(|| (done as f64 / total as f64).clamp(0.0, 1.0));
    let rate = done as f64 / secs.max(0.001);
    let eta = (rate > 0.0 && total > done).then(|| (total - done) as f64 / rate);
    Progress {
        phase: phase.into(),
        fraction,
        text,
        eta_seconds: eta.filter(|e| e.is_finite()),
    }
}

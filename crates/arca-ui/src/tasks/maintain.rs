//! Maintenance jobs: check with progress and findings, forget by a policy previewed first (the
//! job refuses when the snapshots changed since the preview), then prune.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arca_format::{Id, Snapshot};
use arca_maintenance::CheckOptions;
use arca_maintenance::check::{CheckPhase, CheckProgress, DataSubset, check_with_progress};
use arca_maintenance::forget::{self, CalendarDuration, GroupBy, GroupPlan, Policy, parse_count};
use arca_maintenance::prune::{self, Phase, Progress as PruneProgress, PruneOptions};
use arca_repo::{LockKind, Repository, SnapshotFilter};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{of, rated, spawn};
use crate::data::{DamagedFile, SnapshotRow};
use crate::html::bytes;
use crate::jobs::{Job, JobCtx, Progress};
use crate::query::RawQuery;
use crate::state::{ApiError, App};
use arca_format::text::count;

/// `POST /api/check`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    /// Read and verify every pack.
    #[serde(default)]
    pub read_data: bool,
    /// Read only a part of the packs: `n/m`, `x%` or a size (restic's `--read-data-subset`).
    #[serde(default)]
    pub read_data_subset: Option<String>,
}

fn check_progress(p: &CheckProgress) -> Progress {
    let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
    match p.phase() {
        CheckPhase::Index => phase("loading the index"),
        CheckPhase::Packs => phase("comparing the packs with the index"),
        CheckPhase::Trees => Progress {
            phase: "checking snapshots".into(),
            fraction: (n(&p.snapshots) > 0)
                .then(|| n(&p.snapshots_done) as f64 / n(&p.snapshots) as f64),
            text: format!(
                "{}, {}",
                of(n(&p.snapshots_done), n(&p.snapshots), "snapshot"),
                count(n(&p.trees), "tree")
            ),
            eta_seconds: None,
        },
        CheckPhase::ReadingData => Progress {
            phase: "reading packs".into(),
            fraction: (n(&p.packs_to_read) > 0)
                .then(|| n(&p.packs_read) as f64 / n(&p.packs_to_read) as f64),
            text: of(n(&p.packs_read), n(&p.packs_to_read), "pack"),
            eta_seconds: None,
        },
        CheckPhase::Tracing => phase("finding the snapshots and files the damage hits"),
        CheckPhase::Done => phase("done"),
    }
}

fn phase(p: &str) -> Progress {
    Progress {
        phase: p.into(),
        ..Progress::default()
    }
}

/// Starts a check job (of the repository's own files, not the local cache's).
pub fn start_check(app: &Arc<App>, r: CheckRequest) -> Result<Arc<Job>, ApiError> {
    let subset = r
        .read_data_subset
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(DataSubset::parse)
        .transpose()
        .map_err(ApiError::bad)?;
    // Both given, one was dropped without a word (the command line refuses the pair too).
    if subset.is_some() && r.read_data {
        return Err(ApiError::bad(
            "read_data (all data) and read_data_subset (a part of it) exclude each other: \
             give one",
        ));
    }
    let title = match (subset, r.read_data) {
        (Some(s), _) => format!("check, reading {s} of the packs"),
        (None, true) => "check, reading all data".into(),
        (None, false) => "check of the structure".into(),
    };
    let params = json!({"read_data": r.read_data, "read_data_subset": r.read_data_subset});
    spawn(app, "check", title, params, move |app, ctx| {
        let repo = app.repo_uncached().map_err(|e| e.message)?;
        let _lock = app.lock(&repo, LockKind::Shared, "check", &|| ctx.cancelled())?;
        let progress = Arc::new(CheckProgress::with_cancel(ctx.cancel_flag()));
        let p = Arc::clone(&progress);
        ctx.progress(move |_| check_progress(&p));
        let opts = CheckOptions {
            read_data: r.read_data,
            workers: 0,
        };
        let rep = check_with_progress(&repo, opts, subset, &progress).map_err(|e| e.to_string())?;
        for e in &rep.errors {
            ctx.log(format!("error: {e}"));
        }
        for n in &rep.notes {
            ctx.log(format!("note: {n}"));
        }
        let v = json!({
            "ok": rep.is_ok(),
            "finished": chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string(),
            "errors": rep.errors,
            "notes": rep.notes,
            "snapshots": rep.snapshots,
            "trees": rep.trees,
            "packs": rep.packs,
            "packs_read": rep.packs_read,
            "blobs_read": rep.blobs_read,
            "bytes_read": rep.bytes_read,
            "damaged_packs": rep.damaged_packs.iter().map(|d| json!({
                "id": d.id.to_hex(), "problems": d.problems,
                "bad_blobs": d.bad_blobs.iter().map(|b| b.to_hex()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "affected": rep.affected.iter().map(|a| json!({
                "snapshot": a.snapshot.to_hex(),
                "paths": a.paths.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "repair": rep.repairs.iter().map(|p| json!({
                "command": p.command_line(), "reason": p.reason,
            })).collect::<Vec<_>>(),
        });
        if let Ok(mut last) = app.last_check.lock() {
            *last = Some(v.clone());
        }
        Ok(v)
    })
}

/// A forget policy and snapshot filter, as the form and the API give them.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PolicyFields {
    /// `--keep-last` (a number, `unlimited` or -1).
    #[serde(default)]
    pub keep_last: Option<Value>,
    /// `--keep-hourly`.
    #[serde(default)]
    pub keep_hourly: Option<Value>,
    /// `--keep-daily`.
    #[serde(default)]
    pub keep_daily: Option<Value>,
    /// `--keep-weekly`.
    #[serde(default)]
    pub keep_weekly: Option<Value>,
    /// `--keep-monthly`.
    #[serde(default)]
    pub keep_monthly: Option<Value>,
    /// `--keep-yearly`.
    #[serde(default)]
    pub keep_yearly: Option<Value>,
    /// `--keep-within` (e.g. `1y2m3d`).
    #[serde(default)]
    pub keep_within: Option<String>,
    /// `--keep-within-hourly`: the newest snapshot of each hour within this span.
    #[serde(default)]
    pub keep_within_hourly: Option<String>,
    /// `--keep-within-daily`.
    #[serde(default)]
    pub keep_within_daily: Option<String>,
    /// `--keep-within-weekly`.
    #[serde(default)]
    pub keep_within_weekly: Option<String>,
    /// `--keep-within-monthly`.
    #[serde(default)]
    pub keep_within_monthly: Option<String>,
    /// `--keep-within-yearly`.
    #[serde(default)]
    pub keep_within_yearly: Option<String>,
    /// `--keep-tag` lists (`a,b` needs both).
    #[serde(default)]
    pub keep_tag: Vec<String>,
    /// `--group-by` (default `host,paths`).
    #[serde(default)]
    pub group_by: Option<String>,
    /// Only snapshots of this host.
    #[serde(default)]
    pub host: Option<String>,
}

impl PolicyFields {
    /// The fields of a query string (the preview page).
    pub fn from_query(q: &RawQuery) -> Self {
        let v = |k: &str| q.text(k).map(Value::String);
        PolicyFields {
            keep_last: v("keep_last"),
            keep_hourly: v("keep_hourly"),
            keep_daily: v("keep_daily"),
            keep_weekly: v("keep_weekly"),
            keep_monthly: v("keep_monthly"),
            keep_yearly: v("keep_yearly"),
            keep_within: q.text("keep_within"),
            keep_within_hourly: q.text("keep_within_hourly"),
            keep_within_daily: q.text("keep_within_daily"),
            keep_within_weekly: q.text("keep_within_weekly"),
            keep_within_monthly: q.text("keep_within_monthly"),
            keep_within_yearly: q.text("keep_within_yearly"),
            keep_tag: q
                .all("keep_tag")
                .into_iter()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .collect(),
            // Given empty, it groups by nothing (as the CLI's `--group-by ''` and the job's
            // JSON); absent, by the default.
            group_by: q
                .bytes("group_by")
                .map(|b| String::from_utf8_lossy(b).into_owned()),
            host: q.text("host"),
        }
    }

    /// The keep-within spans as given: field name, the form's label, value.
    pub fn spans(&self) -> [(&'static str, &'static str, &Option<String>); 6] {
        [
            ("keep_within", "Keep everything within", &self.keep_within),
            (
                "keep_within_hourly",
                "Hourly within",
                &self.keep_within_hourly,
            ),
            ("keep_within_daily", "Daily within", &self.keep_within_daily),
            (
                "keep_within_weekly",
                "Weekly within",
                &self.keep_within_weekly,
            ),
            (
                "keep_within_monthly",
                "Monthly within",
                &self.keep_within_monthly,
            ),
            (
                "keep_within_yearly",
                "Yearly within",
                &self.keep_within_yearly,
            ),
        ]
    }

    /// The fields this API knows, to refuse others: an unsupported rule
    /// (`keep_minutely`) or filter (`tag`) silently ignored applies another policy.
    pub const KNOWN: [&'static str; 15] = [
        "keep_last",
        "keep_hourly",
        "keep_daily",
        "keep_weekly",
        "keep_monthly",
        "keep_yearly",
        "keep_within",
        "keep_within_hourly",
        "keep_within_daily",
        "keep_within_weekly",
        "keep_within_monthly",
        "keep_within_yearly",
        "keep_tag",
        "group_by",
        "host",
    ];

    /// Refuses `keys` that are neither the policy's nor `more` (the request's own fields),
    /// naming them and every field the request takes.
    pub fn refuse_unknown<'k>(
        keys: impl Iterator<Item = &'k str>,
        more: &[&str],
    ) -> Result<(), ApiError> {
        let known = |k: &&str| Self::KNOWN.contains(k) || more.contains(k);
        let mut unknown: Vec<&str> = keys.filter(|k| !known(k)).collect();
        unknown.sort_unstable();
        unknown.dedup();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(ApiError::bad(format!(
                "unknown field(s) {}: the request takes {}",
                unknown.join(", "),
                Self::KNOWN
                    .iter()
                    .chain(more)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    }

    /// Refuses a field given twice in a query, but the list `keep_tag`: one value was taken
    /// and the other dropped without a word (`host=a&host=b` previewed host `a` alone).
    pub fn refuse_repeated<'k>(keys: impl Iterator<Item = &'k str>) -> Result<(), ApiError> {
        let mut seen = std::collections::HashSet::new();
        for k in keys.filter(|k| *k != "keep_tag") {
            if !seen.insert(k) {
                return Err(ApiError::bad(format!(
                    "{k} given more than once: it takes one value"
                )));
            }
        }
        Ok(())
    }

    /// The policy; an invalid value is named.
    pub fn policy(&self) -> Result<Policy, ApiError> {
        let count = |name: &str, v: &Option<Value>| -> Result<i32, ApiError> {
            let s = match v {
                None | Some(Value::Null) => return Ok(0),
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::String(s)) if s.trim().is_empty() => return Ok(0),
                Some(Value::String(s)) => s.trim().to_string(),
                Some(other) => other.to_string(),
            };
            parse_count(&s).map_err(|e| ApiError::bad(format!("{name}: {e}")))
        };
        let span = |name: &str, v: &Option<String>| -> Result<CalendarDuration, ApiError> {
            match v.as_deref().map(str::trim) {
                None | Some("") => Ok(CalendarDuration::default()),
                Some(s) => s.parse().map_err(|e| ApiError::bad(format!("{name}: {e}"))),
            }
        };
        let p = Policy {
            last: count("keep last", &self.keep_last)?,
            hourly: count("keep hourly", &self.keep_hourly)?,
            daily: count("keep daily", &self.keep_daily)?,
            weekly: count("keep weekly", &self.keep_weekly)?,
            monthly: count("keep monthly", &self.keep_monthly)?,
            yearly: count("keep yearly", &self.keep_yearly)?,
            within: span("keep within", &self.keep_within)?,
            within_hourly: span("keep within hourly", &self.keep_within_hourly)?,
            within_daily: span("keep within daily", &self.keep_within_daily)?,
            within_weekly: span("keep within weekly", &self.keep_within_weekly)?,
            within_monthly: span("keep within monthly", &self.keep_within_monthly)?,
            within_yearly: span("keep within yearly", &self.keep_within_yearly)?,
            tags: self
                .keep_tag
                .iter()
                .map(|l| {
                    l.split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(String::from)
                        .collect::<Vec<_>>()
                })
                .filter(|l| !l.is_empty())
                .collect(),
        };
        p.validate().map_err(|e| ApiError::bad(e.to_string()))?;
        Ok(p)
    }

    fn group_by(&self) -> Result<GroupBy, ApiError> {
        self.group_by
            .as_deref()
            .unwrap_or("host,paths")
            .parse()
            .map_err(|e: forget::ParseError| ApiError::bad(format!("group by: {e}")))
    }

    fn filter(&self) -> SnapshotFilter {
        SnapshotFilter {
            hosts: self
                .host
                .iter()
                .filter(|h| !h.is_empty())
                .cloned()
                .collect(),
            ..SnapshotFilter::default()
        }
    }
}

/// The refusal of a policy without keep rules.
const NO_RULE: &str = "give at least one keep rule: a policy that keeps nothing is refused";

/// The decisions of `fields` on the repository's snapshots now, and the snapshot files left
/// out (damaged, or a newer arca's), as `arca forget` names them.
fn decide(
    repo: &Repository,
    fields: &PolicyFields,
) -> Result<(Policy, Vec<GroupPlan>, Vec<DamagedFile>), ApiError> {
    let policy = fields.policy()?;
    if policy.is_empty() {
        return Err(ApiError::bad(NO_RULE));
    }
    let (list, damaged) = crate::data::snapshots_report(repo, &fields.filter())?;
    let plans = forget::plan(list, &policy, fields.group_by()?, chrono::Utc::now());
    // As `arca forget`: a policy keeping none of a group (a misspelt tag) is refused.
    if let Some(first) = forget::emptied_groups(&plans).first() {
        return Err(ApiError::bad(format!(
            "the policy {policy} keeps none of the {} snapshot(s) of {}: refused (to remove \
             every snapshot, use the command line's forget --unsafe-allow-remove-all)",
            first.remove.len(),
            first.key
        )));
    }
    Ok((policy, plans, damaged))
}

fn row(id: &Id, s: &Snapshot) -> SnapshotRow {
    SnapshotRow::new(id, s)
}

/// What a policy keeps and removes, per group (no lock, changes nothing).
pub fn forget_preview(repo: &Repository, fields: &PolicyFields) -> Result<Value, ApiError> {
    let (policy, plans, damaged) = decide(repo, fields)?;
    let groups: Vec<Value> = plans
        .iter()
        .map(|g| {
            json!({
                "group_key": {"hostname": g.key.hostname, "paths": g.key.paths, "tags": g.key.tags},
                "keep": g.keep.iter().map(|(id, s, d)| json!({
                    "snapshot": row(id, s), "reasons": d.reasons,
                })).collect::<Vec<_>>(),
                "remove": g.remove.iter().map(|(id, s)| row(id, s)).collect::<Vec<_>>(),
            })
        })
        .collect();
    let remove: Vec<String> = forget::removed_ids(&plans).iter().map(Id::to_hex).collect();
    Ok(
        json!({"policy": policy.to_string(), "groups": groups, "remove": remove,
        "damaged": damaged}),
    )
}

/// `POST /api/forget`: the policy, and the ids the preview showed as removed.
#[derive(Debug, Clone, Deserialize)]
pub struct ForgetRequest {
    /// The policy and filter.
    #[serde(flatten)]
    pub fields: PolicyFields,
    /// The ids the preview removes; the job refuses if the policy now removes others.
    pub expect: Vec<String>,
    /// Prune after removing.
    #[serde(default)]
    pub prune: bool,
    /// Fields neither of the above knows (refused).
    #[serde(flatten)]
    pub unknown: std::collections::BTreeMap<String, Value>,
}

/// Starts the forget job (then prune when asked).
pub fn start_forget(app: &Arc<App>, r: ForgetRequest) -> Result<Arc<Job>, ApiError> {
    PolicyFields::refuse_unknown(r.unknown.keys().map(String::as_str), &["expect", "prune"])?;
    if r.fields.policy()?.is_empty() {
        return Err(ApiError::bad(NO_RULE));
    }
    r.fields.group_by()?;
    let title = format!(
        "forget {}{}",
        count(r.expect.len(), "snapshot"),
        if r.prune { ", then prune" } else { "" }
    );
    let params = json!({"expect": r.expect, "prune": r.prune});
    spawn(app, "forget", title, params, move |app, ctx| {
        // With prune, the repository's own files are read, as `forget --prune` does.
        let (cached, uncached);
        let repo: &Repository = if r.prune {
            uncached = app.repo_uncached().map_err(|e| e.message)?;
            &uncached
        } else {
            cached = app.repo().map_err(|e| e.message)?;
            &cached
        };
        ctx.phase("taking the exclusive lock");
        let _lock = app.lock(repo, LockKind::Exclusive, "forget", &|| ctx.cancelled())?;
        ctx.phase("deciding");
        let (policy, plans, damaged) = decide(repo, &r.fields).map_err(|e| e.message)?;
        for d in &damaged {
            ctx.log(d.message.clone());
        }
        let remove = forget::removed_ids(&plans);
        let mut now: Vec<String> = remove.iter().map(Id::to_hex).collect();
        let mut expected = r.expect.clone();
        now.sort();
        expected.sort();
        if now != expected {
            return Err(
                "the snapshots changed since the preview: nothing was removed; preview again"
                    .into(),
            );
        }
        ctx.log(format!("policy: {policy}"));
        ctx.phase("removing snapshots");
        let failures = forget::remove_snapshots(repo, &remove).map_err(|e| e.to_string())?;
        for (id, e) in &failures {
            ctx.log(format!("error: cannot remove snapshot {}: {e}", id.short()));
        }
        if !failures.is_empty() {
            return Err(format!(
                "{} of {} could not be removed",
                failures.len(),
                count(remove.len(), "snapshot")
            ));
        }
        ctx.log(format!("removed {}", count(remove.len(), "snapshot")));
        let mut v = json!({"removed": now, "policy": policy.to_string(), "damaged": damaged});
        if r.prune {
            v["prune"] = run_prune(repo, ctx)?;
        }
        Ok(v)
    })
}

/// `POST /api/prune`: unknown fields are refused, and `dry_run` must be given (an empty body
/// or a misspelt `"dry-run"` ran a real prune).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PruneRequest {
    /// Plan only.
    pub dry_run: bool,
}

fn prune_progress(p: &PruneProgress, el: std::time::Duration) -> Progress {
    let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
    match p.phase() {
        Phase::Walking => Progress {
            phase: "finding used data".into(),
            text: count(n(&p.trees), "tree"),
            ..Progress::default()
        },
        Phase::Repacking => rated(
            "repacking",
            n(&p.packs_read),
            n(&p.packs_to_read),
            el.as_secs_f64(),
            format!(
                "{} read, {} written",
                of(n(&p.packs_read), n(&p.packs_to_read), "pack"),
                n(&p.packs_written)
            ),
        ),
        Phase::WritingIndex => Progress {
            phase: "writing the index".into(),
            text: count(n(&p.index_files_written), "file"),
            ..Progress::default()
        },
        Phase::Deleting | Phase::Done => Progress {
            phase: "deleting".into(),
            fraction: (n(&p.files_to_delete) > 0)
                .then(|| n(&p.files_deleted) as f64 / n(&p.files_to_delete) as f64),
            text: of(n(&p.files_deleted), n(&p.files_to_delete), "file"),
            eta_seconds: None,
        },
    }
}

/// Plans and carries out a prune of `repo` (exclusively locked by the caller).
fn run_prune(repo: &Repository, ctx: &JobCtx) -> Result<Value, String> {
    prune_with(repo, ctx, false)
}

fn prune_with(repo: &Repository, ctx: &JobCtx, dry_run: bool) -> Result<Value, String> {
    let progress = Arc::new(PruneProgress::with_cancel(ctx.cancel_flag()));
    let p = Arc::clone(&progress);
    ctx.progress(move |el| prune_progress(&p, el));
    let plan = prune::plan_repository(repo, &PruneOptions::default(), &progress)
        .map_err(|e| e.to_string())?;
    let s = &plan.stats;
    let mut v = json!({
        "dry_run": dry_run,
        "snapshots": s.snapshots,
        "used_blobs": s.used_blobs,
        "used_bytes": s.used_bytes,
        "unused_blobs": s.unused_blobs,
        "unused_bytes": s.unused_bytes,
        "packs_keep": s.keep.packs,
        "packs_repack": s.repack.packs,
        "packs_delete": s.delete.packs,
        "packs_adopted": s.adopted.packs,
        "would_free": s.freed_bytes,
    });
    ctx.log(format!(
        "unused: {}, {}; packs: keep {}, repack {}, delete {}",
        count(s.unused_blobs, "blob"),
        bytes(s.unused_bytes),
        s.keep.packs,
        s.repack.packs,
        s.delete.packs
    ));
    if s.adopted.packs > 0 {
        ctx.log(format!(
            "adopted {} ({}) written by an earlier prune that stopped",
            count(s.adopted.packs, "pack"),
            bytes(s.adopted.bytes)
        ));
    }
    if dry_run {
        return Ok(v);
    }
    let report = prune::execute(repo, &plan, &progress).map_err(|e| e.to_string())?;
    v["packs_written"] = json!(report.packs_written);
    v["packs_deleted"] = json!(report.packs_deleted);
    v["bytes_deleted"] = json!(report.bytes_deleted);
    v["freed_bytes"] = json!(report.freed_bytes());
    ctx.log(format!("freed {}", bytes(report.freed_bytes())));
    Ok(v)
}

/// Starts a prune job.
pub fn start_prune(app: &Arc<App>, r: PruneRequest) -> Result<Arc<Job>, ApiError> {
    let title = if r.dry_run {
        "dry run: prune".to_string()
    } else {
        "prune".to_string()
    };
    spawn(
        app,
        "prune",
        title,
        json!({"dry_run": r.dry_run}),
        move |app, ctx| {
            let repo = app.repo_uncached().map_err(|e| e.message)?;
            ctx.phase("taking the exclusive lock");
            let command = if r.dry_run {
                "prune --dry-run"
            } else {
                "prune"
            };
            let _lock = app.lock(&repo, LockKind::Exclusive, command, &|| ctx.cancelled())?;
            prune_with(&repo, ctx, r.dry_run)
        },
    )
}

//! `arca forget`: remove snapshots by id or by a retention policy, optionally pruning after.
//!
//! The snapshots passing `--host`/`--tag`/`--path` are divided into groups (`--group-by`,
//! `host,paths` by default) and the policy of the `--keep-*` options is applied to each group
//! (see [`arca_maintenance::forget`]); per group, what is kept and why and what is removed is
//! printed, then the removed snapshots' files are deleted under the exclusive lock (not with
//! `--dry-run`). Without a policy and without ids nothing is removed.

use std::collections::HashSet;

use anyhow::{Result, bail};
use arca_format::{Id, Snapshot};
use arca_maintenance::forget::{self, CalendarDuration, GroupBy, Policy, parse_count};
use arca_repo::{LockKind, SnapshotFilter};
use clap::Args;
use serde_json::{Value, json};

use crate::cli::{FilterArgs, Global};
use crate::util::{self, Opened};

/// Options of `forget`.
#[derive(Debug, Args)]
pub struct ForgetArgs {
    /// Snapshot ids (or unique prefixes, or "latest") to remove
    #[arg(value_name = "SNAPSHOT")]
    pub snapshots: Vec<String>,
    /// Keep the last N snapshots ("unlimited" or -1: all)
    #[arg(short = 'l', long, value_name = "N", value_parser = count_arg, allow_negative_numbers = true)]
    pub keep_last: Option<i32>,
    /// Keep the newest snapshot of each of the last N hours with snapshots ("unlimited": all)
    #[arg(short = 'H', long, value_name = "N", value_parser = count_arg, allow_negative_numbers = true)]
    pub keep_hourly: Option<i32>,
    /// Keep the newest snapshot of each of the last N days with snapshots ("unlimited": all)
    #[arg(short = 'd', long, value_name = "N", value_parser = count_arg, allow_negative_numbers = true)]
    pub keep_daily: Option<i32>,
    /// Keep the newest snapshot of each of the last N ISO weeks with snapshots
    #[arg(short = 'w', long, value_name = "N", value_parser = count_arg, allow_negative_numbers = true)]
    pub keep_weekly: Option<i32>,
    /// Keep the newest snapshot of each of the last N months with snapshots
    #[arg(short = 'm', long, value_name = "N", value_parser = count_arg, allow_negative_numbers = true)]
    pub keep_monthly: Option<i32>,
    /// Keep the newest snapshot of each of the last N years with snapshots
    #[arg(short = 'y', long, value_name = "N", value_parser = count_arg, allow_negative_numbers = true)]
    pub keep_yearly: Option<i32>,
    /// Keep snapshots newer than DURATION (e.g. 1y5m7d2h) before the group's newest snapshot
    #[arg(long, value_name = "DURATION", value_parser = duration_arg, allow_hyphen_values = true)]
    pub keep_within: Option<CalendarDuration>,
    /// Keep the newest snapshot of each hour within DURATION of the newest snapshot
    #[arg(long, value_name = "DURATION", value_parser = duration_arg, allow_hyphen_values = true)]
    pub keep_within_hourly: Option<CalendarDuration>,
    /// Keep the newest snapshot of each day within DURATION of the newest snapshot
    #[arg(long, value_name = "DURATION", value_parser = duration_arg, allow_hyphen_values = true)]
    pub keep_within_daily: Option<CalendarDuration>,
    /// Keep the newest snapshot of each ISO week within DURATION of the newest snapshot
    #[arg(long, value_name = "DURATION", value_parser = duration_arg, allow_hyphen_values = true)]
    pub keep_within_weekly: Option<CalendarDuration>,
    /// Keep the newest snapshot of each month within DURATION of the newest snapshot
    #[arg(long, value_name = "DURATION", value_parser = duration_arg, allow_hyphen_values = true)]
    pub keep_within_monthly: Option<CalendarDuration>,
    /// Keep the newest snapshot of each year within DURATION of the newest snapshot
    #[arg(long, value_name = "DURATION", value_parser = duration_arg, allow_hyphen_values = true)]
    pub keep_within_yearly: Option<CalendarDuration>,
    /// Keep snapshots with this tag; "a,b" needs both (repeatable: any list matches)
    #[arg(long = "keep-tag", value_name = "TAG[,TAG]", value_parser = crate::util::keep_tag_arg)]
    pub keep_tags: Vec<String>,
    /// Apply the policy to each group of snapshots sharing these fields: host, paths, tags
    /// (comma-separated; "" for one group)
    #[arg(short = 'g', long, value_name = "FIELDS", default_value = "host,paths", value_parser = crate::util::group_by_arg)]
    pub group_by: GroupBy,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Print what would be kept and removed, remove nothing
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Compact tables: tags on one line, no paths
    #[arg(short = 'c', long)]
    pub compact: bool,
    /// Print the groups as JSON
    #[arg(long)]
    pub json: bool,
    /// Run prune after removing snapshots, to delete the data only they used
    #[arg(long)]
    pub prune: bool,
    /// With --prune: unused space to tolerate, as `prune --max-unused` [default: 5%]
    #[arg(long, value_name = "PERCENT|SIZE", value_parser = super::prune::max_unused_arg, requires = "prune", allow_hyphen_values = true)]
    pub max_unused: Option<String>,
    /// With --prune: repack at most this many bytes, as `prune --max-repack-size`
    #[arg(long, value_name = "SIZE", value_parser = crate::util::size_arg, requires = "prune", allow_hyphen_values = true)]
    pub max_repack_size: Option<String>,
    /// With --prune: also repack small packs, as `prune --repack-small`
    #[arg(long, requires = "prune")]
    pub repack_small: bool,
    /// Allow a policy to remove every snapshot of a group (refused otherwise: a misspelt
    /// --keep-tag would remove them all); without a policy, remove every snapshot that
    /// --host, --tag or --path selects
    #[arg(long)]
    pub unsafe_allow_remove_all: bool,
}

fn count_arg(s: &str) -> Result<i32, forget::ParseError> {
    parse_count(s)
}

fn duration_arg(s: &str) -> Result<CalendarDuration, forget::ParseError> {
    s.parse()
}

impl ForgetArgs {
    /// The policy of the `--keep-*` options.
    fn policy(&self) -> Result<Policy> {
        let span = |d: Option<CalendarDuration>| d.unwrap_or_default();
        let p = Policy {
            last: self.keep_last.unwrap_or(0),
            hourly: self.keep_hourly.unwrap_or(0),
            daily: self.keep_daily.unwrap_or(0),
            weekly: self.keep_weekly.unwrap_or(0),
            monthly: self.keep_monthly.unwrap_or(0),
            yearly: self.keep_yearly.unwrap_or(0),
            within: span(self.keep_within),
            within_hourly: span(self.keep_within_hourly),
            within_daily: span(self.keep_within_daily),
            within_weekly: span(self.keep_within_weekly),
            within_monthly: span(self.keep_within_monthly),
            within_yearly: span(self.keep_within_yearly),
            tags: self
                .keep_tags
                .iter()
                .map(|l| {
                    l.split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(String::from)
                        .collect()
                })
                .collect(),
        };
        p.validate()?;
        Ok(p)
    }
}

/// What happens to one group (see [`forget::GroupPlan`]).
type GroupReport = forget::GroupPlan;

/// Damaged snapshot files named for removal, each with why.
type Damaged = Vec<(Id, String)>;

/// Whether the command line itself, before any profile's options were added, gives a
/// policy (long or short options: `-l 1` was missed when only `--keep-` was looked for).
fn policy_typed() -> bool {
    let typed: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if crate::profile::profile_names(&typed).is_empty() {
        return true;
    }
    use clap::Parser;
    match crate::cli::Cli::try_parse_from(crate::hoist::hoist_flags(typed.clone())) {
        Ok(crate::cli::Cli {
            command: crate::cli::Command::Forget(f),
            ..
        }) => f.policy().is_ok_and(|p| !p.is_empty()),
        _ => typed
            .iter()
            .any(|x| x.as_encoded_bytes().starts_with(b"--keep-")),
    }
}

/// Runs `forget`.
pub fn run(g: &Global, a: &ForgetArgs) -> Result<u8> {
    let mut policy = a.policy()?;
    if !a.snapshots.is_empty() && !policy.is_empty() {
        // A policy typed with ids is refused; one that comes from a profile (`-P`, whose
        // repeatable --keep-tag cannot be cleared) yields to the ids, as restic's does.
        if policy_typed() {
            bail!("give snapshot ids or a policy (--keep-*), not both");
        }
        eprintln!("snapshot ids given: the profile's policy ({policy}) is not applied");
        policy = Policy::default();
    }
    // As restic: with no policy, --unsafe-allow-remove-all removes every snapshot that the
    // filter selects (a retired host's), and wants a filter.
    let remove_all = a.snapshots.is_empty() && policy.is_empty() && a.unsafe_allow_remove_all;
    let filter = super::filter(&a.filter);
    if remove_all && filter.hosts.is_empty() && filter.tags.is_empty() && filter.paths.is_empty() {
        bail!(
            "--unsafe-allow-remove-all without a policy removes every snapshot a filter \
             selects: give --host, --tag or --path (nothing was removed)"
        );
    }
    if a.snapshots.is_empty() && policy.is_empty() && !remove_all {
        eprintln!("no policy given: nothing removed");
        if a.json {
            super::out(if a.prune {
                r#"{"forget":[],"prune":null}"#
            } else {
                "[]"
            })?;
        }
        return Ok(0);
    }
    // Prune reads the repository's own files, never the local cache's copies.
    let opened = if a.prune {
        util::open_uncached(g)?
    } else {
        util::open(g)?
    };
    // The decisions are made on what the lock holder sees: nobody removes or adds snapshots
    // while they are carried out. A dry run changes nothing and takes no lock, but for its
    // prune's plan, which takes it as `prune --dry-run` does (unless --no-lock).
    let _lock = if a.dry_run && (!a.prune || g.no_lock) {
        None
    } else {
        Some(util::take_lock(
            g,
            &opened.repo,
            LockKind::Exclusive,
            "forget",
        )?)
    };
    // Snapshot files that cannot be read are left out of the policy (named once): the
    // command then exits 3, as copy and tag do.
    let mut left_out = 0;
    let (reports, damaged) = if remove_all {
        let (list, left) = super::list_all(&opened.repo, &filter)?;
        left_out = left;
        let all: Vec<String> = list.iter().map(|(id, _)| id.to_hex()).collect();
        by_ids(&opened, &filter, &all, a.group_by)?
    } else if a.snapshots.is_empty() {
        let (list, left) = super::list_all(&opened.repo, &filter)?;
        left_out = left;
        (
            forget::plan(list, &policy, a.group_by, chrono::Utc::now()),
            vec![],
        )
    } else {
        let filtered =
            !(filter.hosts.is_empty() && filter.tags.is_empty() && filter.paths.is_empty());
        if filtered && a.snapshots.iter().any(|s| s != "latest") {
            // As restic: the ids are removed whatever the filters say.
            eprintln!(
                "snapshot ids given: --host, --tag and --path only choose which snapshot \
                 `latest` is; the ids are removed whatever they say"
            );
        }
        by_ids(&opened, &filter, &a.snapshots, a.group_by)?
    };

    if a.snapshots.is_empty() && !a.unsafe_allow_remove_all {
        let emptied = forget::emptied_groups(&reports);
        if let Some(first) = emptied.first() {
            bail!(
                "refusing to remove every snapshot of {} ({} snapshot(s){}): the policy \
                 {policy} keeps none of them; nothing was removed (check the --keep-* values, or \
                 give --unsafe-allow-remove-all)",
                first.key,
                first.remove.len(),
                match emptied.len() {
                    1 => String::new(),
                    n => format!(", and {} more group(s)", n - 1),
                }
            );
        }
    }
    // With --prune, one document holds both: {"forget": [...], "prune": {...} or null}.
    let forget_json = Value::Array(reports.iter().map(report_json).collect());
    let both = |prune: Option<Value>| -> Result<()> {
        super::out(&json!({ "forget": forget_json, "prune": prune }).to_string())
    };
    if a.json {
        if !a.prune {
            super::out(&forget_json.to_string())?;
        }
    } else if !g.quiet {
        if a.snapshots.is_empty() {
            super::out(&format!("Applying policy: {policy}"))?;
        }
        for r in &reports {
            print_report(r, a.compact)?;
        }
    }

    // Damaged snapshot files named by id are removed too (nothing can be shown of them).
    for (id, why) in &damaged {
        // Named once: the cause names the snapshot file already, or not.
        if why.contains(&id.to_hex()) {
            eprintln!("remove a damaged snapshot file: {why}");
        } else {
            eprintln!("remove damaged snapshot {}: {why}", id.short());
        }
    }
    let mut remove: Vec<Id> = forget::removed_ids(&reports);
    remove.extend(damaged.iter().map(|(id, _)| *id));
    let say = |line: String| -> Result<()> {
        if a.json || g.quiet {
            Ok(())
        } else {
            super::out(&line)
        }
    };
    if remove.is_empty() && a.json && a.prune {
        both(None)?;
    }
    if remove.is_empty() {
        // As restic, prune runs only after a removal; a forget --prune stopped during its
        // prune leaves data of the snapshots it removed, which a rerun removes nothing of.
        say(if a.prune {
            "nothing to remove, so no prune run (`arca prune` removes the data of snapshots \
             removed earlier)"
                .into()
        } else {
            "nothing to remove".into()
        })?;
        return Ok(super::left_out_exit(left_out));
    }
    if a.dry_run {
        say(format!(
            "dry run: would remove {}{}",
            util::count(remove.len(), "snapshot"),
            if a.prune {
                ", then prune; the prune's plan as if removed:"
            } else {
                ""
            }
        ))?;
        if a.prune {
            // As restic: the prune's plan as if the snapshots were gone.
            let v = super::prune::run_quiet_json(
                g,
                &opened,
                &super::prune::PruneArgs {
                    dry_run: true,
                    ignore_snapshots: remove.clone(),
                    ..prune_args(a)
                },
            )?;
            if a.json {
                both(v)?;
            }
        }
        return Ok(super::left_out_exit(left_out));
    }
    let failures = forget::remove_snapshots(&opened.repo, &remove)?;
    for (id, e) in &failures {
        eprintln!("error: cannot remove snapshot {}: {e}", id.short());
    }
    let failed = failures.len();
    if failed > 0 {
        bail!(
            "{failed} of {} could not be removed",
            util::count(remove.len(), "snapshot")
        );
    }
    say(format!("removed {}", util::count(remove.len(), "snapshot")))?;
    if a.prune {
        say("running prune".into())?;
        let v = match super::prune::run_quiet_json(g, &opened, &prune_args(a)) {
            Ok(v) => v,
            Err(e) => {
                // The snapshots are removed all the same (a prune that failed, on a full
                // disk say, takes nothing back): the document still names them, with no
                // prune, and the prune's error follows on stderr.
                if a.json {
                    both(None)?;
                }
                return Err(e);
            }
        };
        if a.json {
            both(v)?;
        }
    }
    Ok(super::left_out_exit(left_out))
}

/// The options of `forget --prune`'s prune.
fn prune_args(a: &ForgetArgs) -> super::prune::PruneArgs {
    super::prune::PruneArgs {
        json: a.json,
        max_unused: a.max_unused.clone(),
        max_repack_size: a.max_repack_size.clone(),
        repack_small: a.repack_small,
        unsafe_allow_remove_all: a.unsafe_allow_remove_all,
        ..Default::default()
    }
}

/// Resolves the named snapshots (all of them before anything is removed) and groups them;
/// the named snapshot files that are damaged (they cannot be read, only removed) come apart,
/// with why.
fn by_ids(
    opened: &Opened,
    filter: &SnapshotFilter,
    specs: &[String],
    group_by: GroupBy,
) -> Result<(Vec<GroupReport>, Damaged)> {
    let mut seen = HashSet::new();
    let mut found = vec![];
    let mut damaged = vec![];
    for spec in specs {
        let id = opened.repo.resolve_snapshot(spec, filter)?;
        if !seen.insert(id) {
            continue;
        }
        match opened.repo.load_snapshot(&id) {
            Ok(s) => found.push((id, s)),
            Err(e) if e.is_corruption() => damaged.push((id, e.to_string())),
            Err(e) => return Err(e.into()),
        }
    }
    found.sort_by(|a, b| b.1.time.cmp(&a.1.time).then_with(|| b.0.cmp(&a.0)));
    let reports = forget::group(found, group_by)
        .into_iter()
        .map(|grp| GroupReport {
            key: grp.key,
            keep: vec![],
            remove: grp.snapshots,
        })
        .collect();
    Ok((reports, damaged))
}

/// A snapshot as `snapshots --json` prints it: its fields, `id` and `short_id`.
fn snapshot_json(id: &Id, s: &Snapshot) -> Value {
    let mut o = serde_json::to_value(s).unwrap_or_else(|_| json!({}));
    if let Some(m) = o.as_object_mut() {
        m.insert("id".into(), json!(id.to_hex()));
        m.insert("short_id".into(), json!(id.short()));
    }
    o
}

/// One group as restic's `forget --json` prints it (its `host`, `paths` and `tags`, and the
/// same in `group_key`).
fn report_json(r: &GroupReport) -> Value {
    json!({
        "host": r.key.hostname.clone().unwrap_or_default(),
        "paths": r.key.paths,
        "tags": r.key.tags,
        "group_key": {
            "hostname": r.key.hostname.clone().unwrap_or_default(),
            "paths": r.key.paths,
            "tags": r.key.tags,
        },
        "keep": r.keep.iter().map(|(id, s, _)| snapshot_json(id, s)).collect::<Vec<_>>(),
        "remove": r.remove.iter().map(|(id, s)| snapshot_json(id, s)).collect::<Vec<_>>(),
        "reasons": r.keep.iter().map(|(id, s, d)| {
            let counters: serde_json::Map<String, Value> = [
                ("last", d.counters.last),
                ("hourly", d.counters.hourly),
                ("daily", d.counters.daily),
                ("weekly", d.counters.weekly),
                ("monthly", d.counters.monthly),
                ("yearly", d.counters.yearly),
            ]
            .into_iter()
            .filter(|(_, n)| *n != 0)
            .map(|(k, n)| (k.to_string(), json!(n)))
            .collect();
            json!({
                "snapshot": snapshot_json(id, s),
                "matches": d.reasons,
                "counters": counters,
            })
        }).collect::<Vec<_>>(),
    })
}

/// The group's header, its kept snapshots with their reasons and its removed ones.
fn print_report(r: &GroupReport, compact: bool) -> Result<()> {
    use super::table::{Row, print};
    super::out(&format!("snapshots for {}:", r.key))?;
    if !r.keep.is_empty() {
        super::out(&format!("keep {}:", util::count(r.keep.len(), "snapshot")))?;
        let rows: Vec<Row<'_>> = r
            .keep
            .iter()
            .map(|(id, snapshot, d)| Row {
                id,
                snapshot,
                reasons: &d.reasons,
            })
            .collect();
        print(&rows, true, compact)?;
    }
    if !r.remove.is_empty() {
        super::out(&format!(
            "remove {}:",
            util::count(r.remove.len(), "snapshot")
        ))?;
        let rows: Vec<Row<'_>> = r
            .remove
            .iter()
            .map(|(id, snapshot)| Row {
                id,
                snapshot,
                reasons: &[],
            })
            .collect();
        print(&rows, false, compact)?;
    }
    super::out("")
}

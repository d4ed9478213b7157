//! `arca copy`: copy snapshots from another repository (`--from-repo`) into this one,
//! re-encrypted, skipping the snapshots and blobs it has (see `arca_maintenance::copy`).
//!
//! The source is opened with its own location, password and backend options
//! ([`FromRepoArgs`], shared with `init --copy-chunker-params`) and this command's
//! `--connections` and cache settings. Both repositories are locked shared, as backup does.

use std::collections::HashSet;

use anyhow::{Context, Result, bail};
use arca_format::{Id, Snapshot};
use arca_maintenance::copy::{
    Copier, CopyError, CopyOptions, CopyReport, Counts, SnapshotCopy, same_ids, same_snapshot,
};
use arca_repo::{LockKind, Repository, SnapshotFilter};
use clap::Args;
use serde_json::{Value, json};
use zeroize::Zeroizing;

use crate::cli::{FilterArgs, Global};
use crate::util::{self, human_bytes};

/// Options of `arca copy`.
#[derive(Debug, Args)]
pub struct CopyArgs {
    /// Snapshots to copy: ids, unique id prefixes or "latest" (default: every snapshot of
    /// the source passing --host/--tag/--path)
    #[arg(value_name = "SNAPSHOT")]
    pub snapshots: Vec<String>,
    #[command(flatten)]
    pub from: FromRepoArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Print what would be copied, write nothing
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

/// The source repository of `copy` and of `init --copy-chunker-params`.
#[derive(Debug, Args, Clone, Default)]
pub struct FromRepoArgs {
    /// Source repository location (same forms as --repo)
    #[arg(long, env = "ARCA_FROM_REPOSITORY", value_name = "REPO")]
    pub from_repo: Option<String>,
    /// Read the source repository's password from a file (first line)
    #[arg(long, env = "ARCA_FROM_PASSWORD_FILE", value_name = "FILE")]
    pub from_password_file: Option<std::path::PathBuf>,
    /// Run a shell command that prints the source repository's password (first line)
    #[arg(
        long,
        env = "ARCA_FROM_PASSWORD_COMMAND",
        value_name = "COMMAND",
        conflicts_with = "from_password_file"
    )]
    pub from_password_command: Option<String>,
    /// Backend option KEY=VALUE of the source repository (repeatable; as -o for --repo)
    #[arg(long = "from-option", value_name = "KEY=VALUE", value_parser = crate::util::backend_option_arg)]
    pub from_options: Vec<String>,
}

/// The source repository's password: `--from-password-file`, `--from-password-command`,
/// `ARCA_FROM_PASSWORD`, else a prompt on the terminal.
fn source_password(from: &FromRepoArgs) -> Result<Zeroizing<String>> {
    if let Some(f) = &from.from_password_file {
        return util::read_password_file(f);
    }
    if let Some(c) = &from.from_password_command {
        return util::password_from_command(c);
    }
    if let Some(p) = util::env_password("ARCA_FROM_PASSWORD")? {
        return Ok(p);
    }
    util::ask_password(
        "enter password for source repository: ",
        "no password given for the source repository (set ARCA_FROM_PASSWORD or \
         ARCA_FROM_PASSWORD_FILE, or use --from-password-file or --from-password-command)",
    )
}

/// Opens the source repository named by `from` (with `g`'s connections and cache settings);
/// returns it and its location as given.
pub fn open_source(g: &Global, from: &FromRepoArgs) -> Result<(Repository, String)> {
    let location = from
        .from_repo
        .as_deref()
        .filter(|r| !r.is_empty())
        .ok_or_else(|| {
            anyhow::Error::new(super::Usage(
                "no source repository given: use --from-repo or set ARCA_FROM_REPOSITORY".into(),
            ))
        })?;
    let (backend, _) = util::backend_at(g, location, &from.from_options)
        .with_context(|| format!("source repository {location}"))?;
    let pw = source_password(from)?;
    let repo = util::note_whitespace(
        Repository::open_cached(backend, pw.as_bytes(), &util::cache_mode(g)),
        &pw,
        "source ",
    )
    .context("cannot open the source repository")?;
    Ok((repo, location.to_string()))
}

/// Whether two repositories are stored in the same place: the same location, after
/// resolving symlinks and `..` for local folders.
fn same_place(a: &Repository, b: &Repository) -> bool {
    let place = |r: &Repository| {
        let loc = r.backend().location();
        let local = loc.strip_prefix("local:").unwrap_or(&loc);
        std::fs::canonicalize(local).map_or_else(|_| loc.clone().into(), |p| p.into_os_string())
    };
    place(a) == place(b)
}

/// The source snapshots to copy, oldest first, and how many source snapshot files could
/// not be read (damaged, or made by a newer arca): each is named on stderr and left out.
fn chosen(src: &Repository, location: &str, a: &CopyArgs) -> Result<(Vec<(Id, Snapshot)>, usize)> {
    let filter: SnapshotFilter = super::filter(&a.filter);
    if a.snapshots.is_empty() {
        let (list, unreadable) = src.list_snapshots_report(&filter)?;
        for (id, e) in &unreadable {
            // The advice is for the source: `arca forget` alone would run on the target.
            let short = id.short();
            eprintln!(
                "arca: source repository {location}: {}",
                arca_repo::damaged_snapshot_message(id, e).replace(
                    &format!("`arca forget {short}`"),
                    &format!("`arca -r {location} forget {short}`")
                )
            );
        }
        return Ok((list, unreadable.len()));
    }
    let mut seen = HashSet::new();
    let mut out = vec![];
    for spec in &a.snapshots {
        let (id, s) = src
            .find_snapshot(spec, &filter)
            .with_context(|| format!("source repository {location}"))?;
        if seen.insert(id) {
            out.push((id, s));
        }
    }
    out.sort_by(|a, b| a.1.time.cmp(&b.1.time).then(a.0.cmp(&b.0)));
    Ok((out, 0))
}

/// `snapshot 1a2b3c4d of [/data] at 2026-01-02 03:04:05 by host`.
fn describe(id: &Id, s: &Snapshot) -> String {
    format!(
        "snapshot {} of [{}] at {} by {}",
        id.short(),
        s.paths.join(" "),
        s.time
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M:%S"),
        s.hostname
    )
}

fn counts_text(c: &Counts) -> String {
    format!(
        "{} ({}), {}",
        util::count(c.data_blobs, "data blob"),
        human_bytes(c.data_bytes),
        util::count(c.tree_blobs, "tree blob")
    )
}

fn counts_json(m: &mut serde_json::Map<String, Value>, c: &Counts) {
    m.insert("data_blobs".into(), json!(c.data_blobs));
    m.insert("data_bytes".into(), json!(c.data_bytes));
    m.insert("tree_blobs".into(), json!(c.tree_blobs));
    m.insert("tree_bytes".into(), json!(c.tree_bytes));
}

/// What happened to one source snapshot.
enum Outcome {
    Copied(Box<SnapshotCopy>),
    Skipped(Id),
    /// Dry run: alike this source snapshot, which the run would copy first (the real run
    /// then skips it as copied earlier in the run).
    AlikeEarlier(Id),
}

pub fn run(g: &Global, a: &CopyArgs) -> Result<u8> {
    let opened = util::open(g).context("cannot open the target repository")?;
    let dst = &opened.repo;
    let (src, src_location) = open_source(g, &a.from)?;
    // A copy made with `cp -a` has the same id and is still another repository: only the same
    // place is refused.
    if src.config().repo_id == dst.config().repo_id && same_place(&src, dst) {
        bail!("the source {src_location} and the target are the same repository");
    }
    // The target is written: it is locked even with --no-lock, which lets the source be read
    // from read-only media (as restic's); a dry run writes nothing.
    let _dst_lock = if a.dry_run {
        util::lock(g, dst, LockKind::Shared, "copy")?
    } else {
        Some(util::take_lock(g, dst, LockKind::Shared, "copy")?)
    };
    // Named so that a read-only source is told to use --no-lock (copy only reads it).
    let _src_lock = util::lock(g, &src, LockKind::Shared, "copy from")
        .context("cannot lock the source repository")?;
    let (snaps, mut unreadable) = chosen(&src, &src_location, a)?;
    let by_id = same_ids(&src, dst);
    let mut noted = by_id || g.quiet;
    let mut existing = dst.list_snapshots(&SnapshotFilter::default())?;
    // Nothing to copy (a repeated run): the indexes are not even loaded.
    let any_new = snaps.iter().any(|(id, s)| {
        !existing
            .iter()
            .any(|(_, t)| same_snapshot(t, (id, s), by_id))
    });
    let (src_index, dst_index) = if any_new {
        let mut dst_index = dst.load_index()?;
        // The packs an interrupted copy (or backup) uploaded are indexed, as a backup does, so
        // that their blobs are not sent again; a dry run takes them into account in memory
        // (it counted their blobs as to be stored, which the real run then did not store).
        if a.dry_run {
            let adopted = arca_repo::recover::preview_unindexed_packs(dst, &mut dst_index)?;
            if adopted.packs > 0 && !g.quiet {
                eprintln!(
                    "arca: would index {} an interrupted run left in the target",
                    util::count(adopted.packs, "pack")
                );
            }
        } else {
            let adopted = arca_repo::recover::adopt_unindexed_packs(dst, &mut dst_index)?;
            if adopted.packs > 0 && !g.quiet {
                eprintln!(
                    "arca: indexed {} an interrupted run left in the target",
                    util::count(adopted.packs, "pack")
                );
            }
        }
        (src.load_index()?, dst_index)
    } else {
        Default::default()
    };
    let opts = CopyOptions {
        readers: 0,
        dry_run: a.dry_run,
    };
    let mut copier = Copier::new(&src, &src_index, dst, &dst_index, opts);
    let mut results = vec![];
    // A dry run saves nothing: the copies it would make, with their sources, so that a later
    // source snapshot alike one of them is counted as skipped, as the real run skips it.
    let mut would_copy: Vec<(Id, Snapshot)> = vec![];
    for (id, s) in &snaps {
        let found = existing
            .iter()
            .find(|(_, t)| same_snapshot(t, (id, s), by_id))
            .map(|(t, _)| Outcome::Skipped(*t))
            .or_else(|| {
                would_copy
                    .iter()
                    .find(|(_, t)| same_snapshot(t, (id, s), by_id))
                    .map(|(from, _)| Outcome::AlikeEarlier(*from))
            });
        let outcome = match found {
            Some(o) => o,
            None => {
                if !std::mem::replace(&mut noted, true) {
                    eprintln!(
                        "arca: note: the two repositories identify blobs differently, so every \
                         data blob is read and hashed again and the trees are rebuilt; a target \
                         created with `arca init --copy-chunker-params --from-repo SOURCE` \
                         copies by id and deduplicates with the source"
                    );
                }
                let c = match copier.copy_snapshot(id, s) {
                    Ok(c) => c,
                    // A newer arca's snapshot is left out, as one whose file is a newer
                    // arca's: the run stopped there, and the later snapshots were not copied
                    // (hunt 30).
                    Err(e @ CopyError::NewerTree { .. }) => {
                        eprintln!("arca: snapshot {} not copied: {e}", id.short());
                        unreadable += 1;
                        continue;
                    }
                    Err(e) => {
                        return Err(anyhow::Error::new(e))
                            .with_context(|| format!("copying snapshot {}", id.short()));
                    }
                };
                match c.id {
                    Some(new) => existing.push((new, c.snapshot.clone())),
                    None => would_copy.push((*id, c.snapshot.clone())),
                }
                Outcome::Copied(Box::new(c))
            }
        };
        if !a.json && !g.quiet {
            super::out(&line(id, s, &outcome))?;
        }
        results.push((*id, outcome));
    }
    let report = copier.report();
    if a.json {
        super::out(&summary_json(a, by_id, &results, &report, &opened).to_string())?;
    } else if !g.quiet {
        summary_text(a, &results, &report)?;
    }
    // The others were copied, but the target lacks these: not a success (exit 3, as a
    // backup that finished without some entries).
    if unreadable > 0 {
        eprintln!(
            "arca: {unreadable} source snapshot{} could not be read and {} not copied (named \
             above)",
            if unreadable == 1 { "" } else { "s" },
            if unreadable == 1 { "was" } else { "were" }
        );
        return Ok(3);
    }
    Ok(0)
}

fn line(id: &Id, s: &Snapshot, o: &Outcome) -> String {
    match o {
        Outcome::Skipped(t) => format!(
            "{}: skipped (already in the target as {})",
            describe(id, s),
            t.short()
        ),
        Outcome::AlikeEarlier(from) => format!(
            "{}: would be skipped (alike snapshot {}, which would be copied first)",
            describe(id, s),
            from.short()
        ),
        Outcome::Copied(c) => match c.id {
            Some(new) => format!(
                "{}: copied as {} ({})",
                describe(id, s),
                new.short(),
                counts_text(&c.stored)
            ),
            None => format!(
                "{}: would be copied ({})",
                describe(id, s),
                counts_text(&c.stored)
            ),
        },
    }
}

fn summary_text(a: &CopyArgs, results: &[(Id, Outcome)], r: &CopyReport) -> Result<()> {
    if results.is_empty() {
        return super::out("no snapshots to copy");
    }
    let copied = results
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Copied(_)))
        .count();
    let skipped = results.len() - copied;
    let (verb, store) = if a.dry_run {
        ("would copy", "would store")
    } else {
        ("copied", "stored")
    };
    super::out(&format!(
        "{verb} {}, skipped {skipped} already in the target",
        util::count(copied, "snapshot")
    ))?;
    let mut text = format!("{store} {}", counts_text(&r.stored));
    if !a.dry_run {
        text.push_str(&format!(
            "; wrote {} ({}) and {}",
            util::count(r.packs_written, "pack"),
            human_bytes(r.bytes_written),
            util::count(r.index_files_written, "index file")
        ));
    }
    super::out(&text)
}

fn summary_json(
    a: &CopyArgs,
    by_id: bool,
    results: &[(Id, Outcome)],
    r: &CopyReport,
    opened: &util::Opened,
) -> Value {
    let snapshots: Vec<Value> = results
        .iter()
        .map(|(id, o)| {
            let mut m = serde_json::Map::new();
            m.insert("source".into(), json!(id.to_hex()));
            let (status, target) = match o {
                Outcome::Skipped(t) => ("skipped", Some(*t)),
                Outcome::AlikeEarlier(from) => {
                    m.insert("alike".into(), json!(from.to_hex()));
                    ("skipped", None)
                }
                Outcome::Copied(c) => {
                    counts_json(&mut m, &c.stored);
                    let s = &c.snapshot;
                    m.insert("time".into(), json!(s.time.to_rfc3339()));
                    m.insert("hostname".into(), json!(s.hostname));
                    m.insert("paths".into(), json!(s.paths));
                    m.insert("tags".into(), json!(s.tags));
                    m.insert("tree".into(), json!(s.tree.to_hex()));
                    (
                        if c.id.is_some() {
                            "copied"
                        } else {
                            "would_copy"
                        },
                        c.id,
                    )
                }
            };
            m.insert("status".into(), json!(status));
            m.insert("target".into(), json!(target.map(|t| t.to_hex())));
            Value::Object(m)
        })
        .collect();
    let copied = results
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Copied(_)))
        .count();
    let mut m = serde_json::Map::new();
    m.insert("dry_run".into(), json!(a.dry_run));
    m.insert("by_id".into(), json!(by_id));
    m.insert("snapshots".into(), Value::Array(snapshots));
    m.insert("snapshots_copied".into(), json!(copied));
    m.insert("snapshots_skipped".into(), json!(results.len() - copied));
    counts_json(&mut m, &r.stored);
    m.insert("data_blobs_read".into(), json!(r.data_blobs_read));
    m.insert("bytes_read".into(), json!(r.bytes_read));
    m.insert("packs_written".into(), json!(r.packs_written));
    m.insert("bytes_written".into(), json!(r.bytes_written));
    m.insert("index_files_written".into(), json!(r.index_files_written));
    m.insert("backend".into(), util::stats_json(&opened.stats));
    Value::Object(m)
}

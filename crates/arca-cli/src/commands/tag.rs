//! `arca tag`: add, remove or set the tags of snapshots. Each changed snapshot is replaced by
//! a copy with the new tags, saved before the original is removed (under the exclusive lock).
//!
//! The snapshots are the ones named (ids, unique prefixes, `latest`), or without names every
//! snapshot passing `--host`/`--tag`/`--path`, as restic's `tag`. Tag values may be
//! comma-separated (`--add a,b`); `--set ""` removes every tag.

use std::collections::HashSet;

use anyhow::Result;
use arca_format::{Id, Snapshot};
use arca_maintenance::tag::{TagChange, retag};
use arca_repo::{LockKind, Repository, SnapshotFilter};
use clap::Args;
use serde_json::json;

use crate::cli::{FilterArgs, Global};
use crate::util;

/// Options of `arca tag`.
#[derive(Debug, Args)]
pub struct TagArgs {
    /// Snapshots to change (ids, unique prefixes or "latest"; default: every snapshot passing
    /// --host/--tag/--path)
    #[arg(value_name = "SNAPSHOT")]
    pub snapshots: Vec<String>,
    /// Add tags (comma-separated; repeatable)
    #[arg(long = "add", value_name = "TAG[,TAG]")]
    pub add: Vec<String>,
    /// Remove tags (comma-separated; repeatable)
    #[arg(long = "remove", value_name = "TAG[,TAG]")]
    pub remove: Vec<String>,
    /// Replace all tags with these (comma-separated; repeatable; "" removes every tag)
    #[arg(long = "set", value_name = "TAG[,TAG]")]
    pub set: Vec<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Print what would change, change nothing
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Print JSON lines: one per changed snapshot, then a summary
    #[arg(long)]
    pub json: bool,
}

impl TagArgs {
    /// The change the options ask for.
    fn change(&self) -> Result<TagChange> {
        let adds_or_removes = !self.add.is_empty() || !self.remove.is_empty();
        if !self.set.is_empty() && adds_or_removes {
            super::usage!("--set and --add/--remove cannot be given at the same time");
        }
        let c = TagChange {
            set: (!self.set.is_empty()).then(|| arca_repo::split_tags(&self.set)),
            add: arca_repo::split_tags(&self.add),
            remove: arca_repo::split_tags(&self.remove),
        };
        if c.is_empty() {
            // An empty --add or --remove names no tag: said so, not that none was given
            // (hunt 30).
            if adds_or_removes {
                super::usage!("--add and --remove need a tag: an empty one names none");
            }
            super::usage!("nothing to do: give --add, --remove or --set");
        }
        Ok(c)
    }
}

/// The snapshots named by `specs` (each once, in the order given, all resolved before
/// anything changes), or without names every snapshot passing `filter`, oldest first; and
/// how many snapshot files were left out of the latter (each named on stderr).
pub(super) fn select(
    repo: &Repository,
    filter: &SnapshotFilter,
    specs: &[String],
) -> Result<(Vec<(Id, Snapshot)>, usize)> {
    if specs.is_empty() {
        return super::list_all(repo, filter);
    }
    let mut seen = HashSet::new();
    let mut found = vec![];
    for spec in specs {
        let (id, s) = repo.find_snapshot(spec, filter)?;
        if seen.insert(id) {
            found.push((id, s));
        }
    }
    Ok((found, 0))
}

/// Runs `tag`.
pub fn run(g: &Global, a: &TagArgs) -> Result<u8> {
    let change = a.change()?;
    let opened = util::open(g)?;
    let repo = &opened.repo;
    // Snapshot files are deleted: no other command may read or remove them meanwhile. A dry
    // run changes nothing and takes no lock (as forget's).
    // Whatever `--no-lock` says: a command that writes always locks (as backup's).
    let _lock = if a.dry_run {
        None
    } else {
        Some(util::take_lock(g, repo, LockKind::Exclusive, "tag")?)
    };
    let (chosen, left_out) = select(repo, &super::filter(&a.filter), &a.snapshots)?;
    let say = |line: &str| -> Result<()> {
        if a.json || g.quiet {
            Ok(())
        } else {
            super::out(line)
        }
    };
    // Copies a stopped run saved are taken, not saved again.
    let saved = if a.dry_run {
        vec![]
    } else {
        repo.list_snapshots_report(&SnapshotFilter::default())?.0
    };
    let mut changed = 0usize;
    for (id, s) in &chosen {
        let Some(r) = retag(repo, *id, s, &change, &saved, a.dry_run)? else {
            continue;
        };
        changed += 1;
        if a.json {
            super::out(
                &json!({
                    "message_type": "changed",
                    "old_snapshot_id": id.to_hex(),
                    "new_snapshot_id": r.new_id.map(|n| n.to_hex()),
                    "adopted": r.adopted,
                    "old_tags": r.old_tags,
                    "tags": r.snapshot.tags,
                })
                .to_string(),
            )?;
        }
        match r.new_id {
            // The copy an earlier, stopped run saved: only the original was removed now.
            Some(new) if r.adopted => say(&format!(
                "modified snapshot {} → {} (found, saved by an earlier run)",
                id.short(),
                new.short()
            ))?,
            Some(new) => say(&format!(
                "modified snapshot {} → {}",
                id.short(),
                new.short()
            ))?,
            None => say(&format!(
                "would modify snapshot {}: tags [{}] → [{}]",
                id.short(),
                r.old_tags.join(","),
                r.snapshot.tags.join(",")
            ))?,
        }
    }
    if changed > 0 && !a.dry_run {
        // A power cut must not bring the originals back beside their retagged copies.
        repo.backend().sync_removals()?;
    }
    if a.json {
        super::out(
            &json!({
                "message_type": "summary",
                "dry_run": a.dry_run,
                "changed_snapshots": changed,
            })
            .to_string(),
        )?;
    }
    say(&match (changed, a.dry_run) {
        (0, false) => "no snapshots were modified".to_string(),
        (0, true) => "no snapshots would be modified".to_string(),
        (n, false) => format!("modified {}", util::count(n, "snapshot")),
        (n, true) => format!("would modify {}", util::count(n, "snapshot")),
    })?;
    Ok(super::left_out_exit(left_out))
}

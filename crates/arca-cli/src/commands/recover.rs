//! `arca recover`: save a snapshot (`/recover`, tag `recovered`) of the directory listings no
//! snapshot reaches any more, as restic's `recover`: what `forget` dropped comes back until
//! `prune` deletes it.

use anyhow::Result;
use arca_maintenance::recover::{RecoverOptions, recover};
use clap::Args;
use serde_json::json;

use crate::cli::Global;
use crate::util;

/// Options of `recover`.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// Find and report the unreachable listings, write nothing
    #[arg(long, short = 'n')]
    pub dry_run: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

/// Runs `recover`.
pub fn run(g: &Global, a: &RecoverArgs) -> Result<u8> {
    let opened = util::open(g)?;
    // Shared, as a backup's: it only adds, and prune (exclusive) must not delete what it
    // recovers meanwhile.
    // Whatever `--no-lock` says unless it is a dry run: a command that writes always locks.
    let _lock = if a.dry_run {
        util::lock(g, &opened.repo, arca_repo::LockKind::Shared, "recover")?
    } else {
        Some(util::take_lock(
            g,
            &opened.repo,
            arca_repo::LockKind::Shared,
            "recover",
        )?)
    };
    let rep = recover(&opened.repo, &RecoverOptions { dry_run: a.dry_run })?;
    // As the other commands: listings that could not be read (what they held is not
    // recovered) finish with exit 3. It was 0.
    let code = if rep.unreadable.is_empty() && rep.emptied.is_empty() {
        0
    } else {
        3
    };
    if a.json {
        super::out(
            &json!({
                "message_type": "summary",
                "dry_run": a.dry_run,
                "trees": rep.trees,
                "snapshots": rep.snapshots,
                "unreadable": rep.unreadable.iter().map(|(id, why)| json!({"tree": id.to_hex(), "error": why})).collect::<Vec<_>>(),
                "roots": rep.roots.iter().map(|id| id.to_hex()).collect::<Vec<_>>(),
                "emptied": rep.emptied.iter().map(|(path, id)| json!({
                    "path": path.to_string_lossy(), "lost_tree": id.to_hex(),
                })).collect::<Vec<_>>(),
                "snapshot_id": rep.snapshot.map(|id| id.to_hex()),
                "index_file": rep.index_file.map(|id| id.to_hex()),
            })
            .to_string(),
        )?;
        return Ok(code);
    }
    for (id, why) in &rep.unreadable {
        crate::progress::warn(&format!(
            "warning: listing {} cannot be read: {why}",
            id.short()
        ));
    }
    for (path, id) in &rep.emptied {
        crate::progress::warn(&format!(
            "{}: its listing {} is lost: saved as an empty folder",
            arca_format::text::shown(path),
            id.short()
        ));
    }
    if !g.quiet {
        super::out(&format!(
            "{} in the index, {}; {} no snapshot reaches",
            util::count(rep.trees, "listing"),
            util::count(rep.snapshots, "snapshot"),
            util::count(rep.roots.len(), "listing")
        ))?;
        for id in &rep.roots {
            super::out(&format!("  {}", id.to_hex()))?;
        }
    }
    match (rep.roots.is_empty(), rep.snapshot) {
        (true, _) => super::out("nothing to recover")?,
        (false, Some(id)) => super::out(&format!(
            "saved snapshot {} of them (path /recover, tag recovered)",
            id.short()
        ))?,
        (false, None) => super::out("dry run: no snapshot saved")?,
    }
    Ok(code)
}

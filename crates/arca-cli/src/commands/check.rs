//! `arca check`: verify the repository, read all or part of its packs, and say which repair
//! command fixes each kind of problem found.

use anyhow::{Result, anyhow};
use arca_maintenance::check::{DataSubset, Repair, check_with};
use arca_maintenance::{CheckOptions, CheckReport};
use serde_json::json;

use crate::cli::{CheckArgs, Global};
use crate::util::{self, human_bytes};

pub fn run(g: &Global, a: &CheckArgs) -> Result<u8> {
    let subset = a
        .read_data_subset
        .as_deref()
        .map(DataSubset::parse)
        .transpose()
        .map_err(|e| anyhow!(e))?;
    // Check verifies the repository's own copies, never the local cache's.
    let opened = util::open_uncached(g)?;
    let _lock = util::lock(g, &opened.repo, arca_repo::LockKind::Shared, "check")?;
    let rep = check_with(
        &opened.repo,
        CheckOptions {
            read_data: a.read_data,
            workers: 0,
        },
        subset,
    )?;
    if a.json {
        let proposes =
            |r: arca_maintenance::check::Repair| rep.repairs.iter().any(|p| p.repair == r);
        let v = json!({
            "message_type": "summary",
            // restic's fields first: scripts written for it read these.
            "num_errors": rep.errors.len(),
            "broken_packs": rep.damaged_packs.iter().map(|d| d.id.to_hex()).collect::<Vec<_>>(),
            "suggest_repair_index": proposes(arca_maintenance::check::Repair::Index),
            "suggest_prune": proposes(arca_maintenance::check::Repair::Prune),
            "ok": rep.is_ok(),
            "errors": rep.errors,
            "notes": rep.notes,
            "snapshots": rep.snapshots,
            "trees": rep.trees,
            "packs": rep.packs,
            "packs_read": rep.packs_read,
            "blobs_read": rep.blobs_read,
            "bytes_read": rep.bytes_read,
            // Exact in JSON: "N bytes" (the text says "up to" a rounded size).
            "read_data_subset": subset.map(|s| match s {
                DataSubset::Bytes(b) => format!("{b} bytes"),
                s => s.to_string(),
            }),
            "damaged_packs": rep.damaged_packs.iter().map(|d| json!({
                "id": d.id.to_hex(),
                "problems": d.problems,
                "bad_blobs": d.bad_blobs.iter().map(|b| b.to_hex()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "affected": rep.affected.iter().map(|a| json!({
                "snapshot": a.snapshot.to_hex(),
                "paths": a.paths.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "repair": rep.repairs.iter().map(|p| json!({
                "command": p.command_line(),
                "reason": p.reason,
            })).collect::<Vec<_>>(),
            "backend": util::stats_json(&opened.stats),
        });
        super::out(&v.to_string())?;
    } else {
        print_text(g, a, subset, &rep)?;
    }
    Ok(if rep.is_ok() { 0 } else { 1 })
}

fn print_text(
    g: &Global,
    a: &CheckArgs,
    subset: Option<DataSubset>,
    rep: &CheckReport,
) -> Result<()> {
    for e in &rep.errors {
        eprintln!("error: {e}");
    }
    if !g.quiet {
        for n in &rep.notes {
            eprintln!("note: {n}");
        }
    }
    for a in &rep.affected {
        eprintln!(
            "snapshot {} is damaged: {} affected",
            a.snapshot.short(),
            util::count(a.paths.len(), "path")
        );
        for p in a.paths.iter().take(50) {
            eprintln!("  {}", arca_format::text::shown(p));
        }
        if a.paths.len() > 50 {
            eprintln!("  ... and {} more", a.paths.len() - 50);
        }
    }
    // Repairs of damage go to stderr with the errors; without damage (packs an interrupted
    // backup left, data no snapshot uses) they are notes.
    let leaves = "it leaves up to --max-unused, 5% by default, in packs that also hold used \
                  data; `--max-unused 0` removes all";
    for p in &rep.repairs {
        if !rep.is_ok() && p.repair == Repair::Prune {
            // Said as the note is: plain prune may leave them, and the line come back.
            eprintln!(
                "to repair: run `{}` ({}; {leaves})",
                p.command_line(),
                p.reason
            );
        } else if !rep.is_ok() {
            eprintln!("to repair: run `{}` ({})", p.command_line(), p.reason);
        } else if !g.quiet && p.repair == Repair::Prune {
            eprintln!(
                "note: {}: run `{}` to remove them ({leaves})",
                p.reason,
                p.command_line()
            );
        } else if !g.quiet {
            eprintln!("note: {}: `{}` tidies that", p.reason, p.command_line());
        }
    }
    if !g.quiet {
        let read = match subset {
            Some(DataSubset::Group { n, of }) => format!(
                ", read group {n} of {of}: {} of {}, {} ({})",
                rep.packs_read,
                util::count(rep.packs, "pack"),
                util::count(rep.blobs_read, "blob"),
                human_bytes(rep.bytes_read)
            ),
            Some(s) => format!(
                ", read {s} of the packs: {} of {}, {} ({})",
                rep.packs_read,
                util::count(rep.packs, "pack"),
                util::count(rep.blobs_read, "blob"),
                human_bytes(rep.bytes_read)
            ),
            None if a.read_data => format!(
                ", read {} ({})",
                util::count(rep.blobs_read, "blob"),
                human_bytes(rep.bytes_read)
            ),
            None => String::new(),
        };
        super::out(&format!(
            "checked {}, {}, {}{read}",
            util::count(rep.snapshots, "snapshot"),
            util::count(rep.trees, "tree"),
            util::count(rep.packs, "pack"),
        ))?;
    }
    if rep.is_ok() {
        if !g.quiet {
            super::out("no errors were found")?;
        }
    } else {
        eprintln!("arca: check found {}", found(rep));
    }
    Ok(())
}

/// What the summary line counts: the `error:` lines, and the `snapshot … is damaged` lines
/// when there are any (they are listed too, and were left out of the count).
fn found(rep: &CheckReport) -> String {
    let errors = util::count(rep.errors.len(), "error");
    match rep.affected.len() {
        0 => errors,
        d => format!("{errors} and {}", util::count(d, "damaged snapshot")),
    }
}

//! `arca check`: verify the repository.

use anyhow::Result;
use arca_maintenance::{CheckOptions, check};
use serde_json::json;

use crate::cli::{CheckArgs, Global};
use crate::util::{self, human_bytes};

pub fn run(g: &Global, a: &CheckArgs) -> Result<u8> {
    // Check verifies the repository's own copies, never the local cache's.
    let opened = util::open_uncached(g)?;
    let rep = check(
        &opened.repo,
        CheckOptions {
            read_data: a.read_data,
            workers: 0,
        },
    )?;
    if a.json {
        let v = json!({
            "message_type": "summary",
            "ok": rep.is_ok(),
            "errors": rep.errors,
            "notes": rep.notes,
            "snapshots": rep.snapshots,
            "trees": rep.trees,
            "packs": rep.packs,
            "blobs_read": rep.blobs_read,
            "bytes_read": rep.bytes_read,
            "damaged_packs": rep.damaged_packs.iter().map(|d| json!({
                "id": d.id.to_hex(),
                "problems": d.problems,
                "bad_blobs": d.bad_blobs.iter().map(|b| b.to_hex()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "affected": rep.affected.iter().map(|a| json!({
                "snapshot": a.snapshot.to_hex(),
                "paths": a.paths.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "backend": util::stats_json(&opened.stats),
        });
        super::out(&v.to_string())?;
    } else {
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
                "snapshot {} is damaged: {} paths affected",
                a.snapshot.short(),
                a.paths.len()
            );
            for p in a.paths.iter().take(50) {
                eprintln!("  {}", p.display());
            }
            if a.paths.len() > 50 {
                eprintln!("  ... and {} more", a.paths.len() - 50);
            }
        }
        if !g.quiet {
            super::out(&format!(
                "checked {} snapshots, {} trees, {} packs{}",
                rep.snapshots,
                rep.trees,
                rep.packs,
                if a.read_data {
                    format!(
                        ", read {} blobs ({})",
                        rep.blobs_read,
                        human_bytes(rep.bytes_read)
                    )
                } else {
                    String::new()
                }
            ))?;
        }
        if rep.is_ok() {
            if !g.quiet {
                super::out("no errors were found")?;
            }
        } else {
            eprintln!("arca: check found {} errors", rep.errors.len());
        }
    }
    Ok(if rep.is_ok() { 0 } else { 1 })
}

//! `arca diff`: what changed between two snapshots (restic's `diff`), computed from the
//! listings alone, with a summary of entries, blobs and bytes added and removed.

use std::ffi::OsStr;
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use anyhow::{Result, bail};
use arca_browse::diff::{self, Change, DiffError, DiffOptions, DiffSide, DiffStat, find_node};
use clap::Args;
use serde_json::json;

use crate::cli::{FilterArgs, Global};
use crate::util::{self, human_bytes};

use super::subfolder::{self, normalize};

/// Options of `arca diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// First snapshot: id, id prefix or "latest"; ID:SUBFOLDER compares that folder
    #[arg(value_name = "SNAPSHOT_A")]
    pub first: std::ffi::OsString,
    /// Second snapshot (same forms)
    #[arg(value_name = "SNAPSHOT_B")]
    pub second: std::ffi::OsString,
    /// Compare only this path (and what is below it) of both
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,
    /// Also report changes of metadata (U): mode, owner, mtime, ctime, extended attributes
    #[arg(long)]
    pub metadata: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Print JSON lines: one per change, then the statistics
    #[arg(long)]
    pub json: bool,
}

fn stat_json(s: &DiffStat) -> serde_json::Value {
    json!({
        "files": s.files,
        "dirs": s.dirs,
        "others": s.others,
        "data_blobs": s.data_blobs,
        "tree_blobs": s.tree_blobs,
        "bytes": s.bytes,
    })
}

pub fn run(g: &Global, a: &DiffArgs) -> Result<u8> {
    let path = match &a.path {
        Some(p) => normalize(p.as_os_str().as_bytes(), "path")?,
        None => b"/".to_vec(),
    };
    let opened = util::open(g)?;
    let repo = &opened.repo;
    let _lock = util::lock(g, repo, arca_repo::LockKind::Shared, "diff")?;
    let filter = super::filter(&a.filter);
    // Both snapshots are found before the index is read (see subfolder::find).
    let found_a = subfolder::find(repo, a.first.as_ref(), &filter)?;
    let found_b = subfolder::find(repo, a.second.as_ref(), &filter)?;
    let index = repo.load_index()?;
    let side_a = subfolder::resolve(repo, &index, found_a)?;
    let side_b = subfolder::resolve(repo, &index, found_b)?;
    let (id_a, start_a) = (side_a.id, side_a.node());
    let (id_b, start_b) = (side_b.id, side_b.node());
    // A listing that cannot be read is named with its snapshot.
    let named = |e: DiffError, side: Option<DiffSide>| -> anyhow::Error {
        match e {
            DiffError::Listing {
                id,
                path,
                side: s,
                source,
            } if s.or(side).is_some() => {
                let snapshot = match s.or(side) {
                    Some(DiffSide::First) => id_a,
                    _ => id_b,
                };
                // The tree named once: the cause may name it already.
                let cause = source.to_string();
                let tree = if cause.contains(&id.to_hex()) {
                    String::new()
                } else {
                    format!(" (tree {id})")
                };
                anyhow::anyhow!(
                    "cannot read the listing of {path} in snapshot {}{tree}: {cause}",
                    snapshot.short()
                )
            }
            e => e.into(),
        }
    };
    let node_a =
        find_node(repo, &index, &start_a, &path).map_err(|e| named(e, Some(DiffSide::First)))?;
    let node_b =
        find_node(repo, &index, &start_b, &path).map_err(|e| named(e, Some(DiffSide::Second)))?;
    if node_a.is_none() && node_b.is_none() {
        bail!(
            "{} is in neither snapshot {} nor snapshot {}",
            OsStr::from_bytes(&path).to_string_lossy(),
            id_a.short(),
            id_b.short()
        );
    }
    let mut w = BufWriter::new(super::Stdout::lock());
    if !a.json && !g.quiet {
        writeln!(
            w,
            "comparing snapshot {} to {}:\n",
            id_a.short(),
            id_b.short()
        )?;
    }
    let (json, quiet) = (a.json, g.quiet);
    let mut sink = |c: &Change<'_>| -> std::io::Result<()> {
        if quiet {
            return Ok(());
        }
        if json {
            let v = json!({
                "message_type": "change",
                "path": String::from_utf8_lossy(c.path),
                "modifier": c.modifier,
            });
            serde_json::to_writer(&mut w, &v)?;
            return w.write_all(b"\n");
        }
        write!(w, "{:<5}", c.modifier)?;
        w.write_all(c.path)?;
        w.write_all(b"\n")
    };
    let opts = DiffOptions {
        metadata: a.metadata,
    };
    let s = diff::diff(
        repo,
        &index,
        node_a.as_ref(),
        node_b.as_ref(),
        &path,
        opts,
        &mut sink,
    )
    .map_err(|e| named(e, None))?;
    if a.json {
        let v = json!({
            "message_type": "statistics",
            "source_snapshot": a.first.to_string_lossy(),
            "target_snapshot": a.second.to_string_lossy(),
            "changed_files": s.changed_files,
            "added": stat_json(&s.added),
            "removed": stat_json(&s.removed),
        });
        serde_json::to_writer(&mut w, &v)?;
        w.write_all(b"\n")?;
    } else {
        if !g.quiet {
            writeln!(w)?;
        }
        let (ad, rm) = (&s.added, &s.removed);
        writeln!(
            w,
            "Files:       {:>5} new, {:>5} removed, {:>5} changed",
            ad.files, rm.files, s.changed_files
        )?;
        writeln!(w, "Dirs:        {:>5} new, {:>5} removed", ad.dirs, rm.dirs)?;
        writeln!(
            w,
            "Others:      {:>5} new, {:>5} removed",
            ad.others, rm.others
        )?;
        writeln!(
            w,
            "Data Blobs:  {:>5} new, {:>5} removed",
            ad.data_blobs, rm.data_blobs
        )?;
        writeln!(
            w,
            "Tree Blobs:  {:>5} new, {:>5} removed",
            ad.tree_blobs, rm.tree_blobs
        )?;
        writeln!(w, "  Added:   {}", human_bytes(ad.bytes))?;
        writeln!(w, "  Removed: {}", human_bytes(rm.bytes))?;
    }
    w.flush()?;
    Ok(0)
}

//! `arca repair index|packs|snapshots`: rebuild a damaged repository's index from the pack
//! headers, salvage damaged packs, or rewrite the snapshots whose data is lost.

use anyhow::Result;
use arca_format::Id;
use arca_maintenance::repair::{
    Loss, RepairIndexOptions, RepairPacksOptions, RepairSnapshotsOptions, repair_index,
    repair_packs, repair_snapshots,
};
use arca_repo::SnapshotFilter;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::cli::Global;
use crate::util;

/// Options of `repair`.
#[derive(Debug, Args)]
pub struct RepairArgs {
    #[command(subcommand)]
    pub what: RepairCommand,
}

/// What `repair` repairs.
#[derive(Debug, Subcommand)]
pub enum RepairCommand {
    /// Rebuild the index from the pack headers and replace every index file (works when the
    /// index files are damaged or gone)
    Index(RepairIndexArgs),
    /// Salvage damaged packs (as `check --read-data` names them): blobs that verify are
    /// copied into new packs, the others leave the index; the damaged packs are deleted
    Packs(RepairPacksArgs),
    /// Rewrite snapshots that reference lost data: lost directories become empty, a file's
    /// lost blocks become zeros (it keeps its size and every intact block); the copies are
    /// tagged `repaired`
    Snapshots(RepairSnapshotsArgs),
}

/// Options of `repair index`.
#[derive(Debug, Args)]
pub struct RepairIndexArgs {
    /// Read the header of every pack, also of those an intact index file describes
    #[arg(long)]
    pub read_all_packs: bool,
    /// Report what would be done, change nothing
    #[arg(long, short = 'n')]
    pub dry_run: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

/// Options of `repair packs`.
#[derive(Debug, Args)]
pub struct RepairPacksArgs {
    /// Packs to salvage (ids or unique prefixes)
    #[arg(value_name = "PACK", required = true)]
    pub packs: Vec<String>,
    /// Read and verify, report what would be done, change nothing
    #[arg(long, short = 'n')]
    pub dry_run: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

/// Options of `repair snapshots`.
#[derive(Debug, Args)]
pub struct RepairSnapshotsArgs {
    /// Snapshots to repair (ids or unique prefixes; default: all, or those passing
    /// --host/--tag/--path; a snapshot file that cannot be read is only looked at without
    /// them)
    #[arg(value_name = "SNAPSHOT")]
    pub snapshots: Vec<String>,
    #[command(flatten)]
    pub filter: crate::cli::FilterArgs,
    /// Delete the damaged originals once their repaired copies are saved
    #[arg(long)]
    pub forget: bool,
    /// Report what would be done, change nothing
    #[arg(long, short = 'n')]
    pub dry_run: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

/// Runs `repair`.
pub fn run(g: &Global, a: &RepairArgs) -> Result<u8> {
    match &a.what {
        RepairCommand::Index(a) => index(g, a),
        RepairCommand::Packs(a) => packs(g, a),
        RepairCommand::Snapshots(a) => snapshots(g, a),
    }
}

fn ids(v: &[Id]) -> Vec<String> {
    v.iter().map(Id::to_hex).collect()
}

/// The pack each of `specs` (an id or a unique prefix of one) names.
fn resolve_packs(repo: &arca_repo::Repository, specs: &[String]) -> Result<Vec<Id>> {
    let on_disk: Vec<Id> = repo
        .list_ids(arca_backend::FileType::Pack)?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    // Packs the index names but the backend lost can be named in full.
    let mut out = vec![];
    for spec in specs {
        let lower = spec.to_ascii_lowercase();
        if let Ok(id) = lower.parse::<Id>() {
            out.push(id);
            continue;
        }
        let found: Vec<&Id> = on_disk
            .iter()
            .filter(|id| !lower.is_empty() && id.to_hex().starts_with(&lower))
            .collect();
        match found.as_slice() {
            [id] => out.push(**id),
            [] => anyhow::bail!("no pack {spec:?} in the repository"),
            _ => anyhow::bail!("{spec:?} names {} packs: give more digits", found.len()),
        }
    }
    Ok(out)
}

/// The lock a repair holds: exclusive when it changes the repository. A dry run only reads:
/// a shared lock keeps prune out while backups go on, and `--no-lock` takes none (it took
/// an exclusive lock whatever `--no-lock` said, and on a read-only repository failed,
/// saying repair writes to it).
fn repair_lock(
    g: &Global,
    repo: &arca_repo::Repository,
    dry_run: bool,
) -> Result<Option<arca_repo::Lock>> {
    if dry_run {
        util::lock(g, repo, arca_repo::LockKind::Shared, "repair --dry-run")
    } else {
        util::take_lock(g, repo, arca_repo::LockKind::Exclusive, "repair").map(Some)
    }
}

fn packs(g: &Global, a: &RepairPacksArgs) -> Result<u8> {
    // The local cache must not serve index files this command replaces.
    let opened = util::open_uncached(g)?;
    let _lock = repair_lock(g, &opened.repo, a.dry_run)?;
    let packs = resolve_packs(&opened.repo, &a.packs)?;
    let rep = repair_packs(
        &opened.repo,
        &packs,
        RepairPacksOptions { dry_run: a.dry_run },
    )?;
    if a.json {
        let v = json!({
            "message_type": "summary",
            "dry_run": a.dry_run,
            "packs": ids(&rep.packs),
            "salvaged_blobs": rep.salvaged_blobs,
            "salvaged_bytes": rep.salvaged_bytes,
            "lost_blobs": rep.lost.iter().map(|l| json!({
                "kind": l.kind.to_string(), "id": l.id.to_hex(), "pack": l.pack.to_hex(),
                "error": l.why,
            })).collect::<Vec<_>>(),
            "damaged_copies": rep.damaged_copies.iter().map(|l| json!({
                "kind": l.kind.to_string(), "id": l.id.to_hex(), "pack": l.pack.to_hex(),
                "error": l.why, "intact_copy": l.copy.map(|c| c.to_hex()),
            })).collect::<Vec<_>>(),
            "new_packs": ids(&rep.new_packs),
            "index_files_written": ids(&rep.index_files_written),
            "index_files_deleted": ids(&rep.index_files_deleted),
            "packs_deleted": ids(&rep.packs_deleted),
            "newer_packs": rep.newer_packs.iter().map(|(id, why)| json!({
                "id": id.to_hex(), "error": why,
            })).collect::<Vec<_>>(),
            "carved": rep.carved.iter().map(|c| json!({
                "pack": c.pack.to_hex(),
                "kind": c.kind.map(|k| k.to_string()),
                "blobs": c.blobs,
                "referenced_blobs": c.wanted_found,
                "unresolved_bytes": c.unresolved_bytes(),
                "unresolved": c.unresolved.iter().map(|(o, n)| json!({"offset": o, "length": n})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "packs_kept": ids(&rep.packs_kept),
            "backend": util::stats_json(&opened.stats),
        });
        super::out(&v.to_string())?;
        return Ok(0);
    }
    for c in &rep.carved {
        let found = format!(
            "pack {}: no index file lists it and its header is damaged: {} found by decrypting \
             from each blob's start ({} that snapshots use and the index lacked)",
            c.pack.short(),
            util::count(c.blobs, "blob"),
            c.wanted_found
        );
        if c.unresolved.is_empty() {
            eprintln!("{found}; every byte of it is accounted for");
        } else {
            eprintln!(
                "{found}; {} in {} held no blob that verified, so the pack {} on the backend \
                 (out of the index)",
                util::human_bytes(c.unresolved_bytes()),
                util::count(c.unresolved.len(), "range"),
                if a.dry_run { "would stay" } else { "stays" }
            );
        }
    }
    for (id, why) in &rep.newer_packs {
        eprintln!(
            "pack {}: {why}; it is left as it is (not damage)",
            id.short()
        );
    }
    for l in &rep.lost {
        eprintln!(
            "{} blob {} of pack {} is lost: {}",
            l.kind,
            l.id.short(),
            l.pack.short(),
            l.why
        );
    }
    for l in &rep.damaged_copies {
        if let Some(copy) = l.copy {
            eprintln!(
                "{} blob {} of pack {} cannot be used ({}), but pack {} holds an intact copy: \
                 nothing is lost",
                l.kind,
                l.id.short(),
                l.pack.short(),
                l.why,
                copy.short()
            );
        }
    }
    if rep.packs.is_empty() {
        if !g.quiet {
            super::out("no pack to repair: nothing was changed")?;
        }
        return Ok(0);
    }
    if !g.quiet {
        let verb = if a.dry_run {
            "would salvage"
        } else {
            "salvaged"
        };
        let copies = if rep.damaged_copies.is_empty() {
            String::new()
        } else {
            format!(
                "; {} {} an intact copy in another pack",
                util::count(rep.damaged_copies.len(), "damaged blob"),
                if rep.damaged_copies.len() == 1 {
                    "has"
                } else {
                    "have"
                }
            )
        };
        super::out(&format!(
            "{verb} {} ({}) of {} into {}; {} lost{copies}",
            util::count(rep.salvaged_blobs, "blob"),
            util::human_bytes(rep.salvaged_bytes),
            util::count(rep.packs.len(), "pack"),
            if a.dry_run {
                "the new packs".to_string()
            } else {
                util::count(rep.new_packs.len(), "new pack")
            },
            util::count(rep.lost.len(), "blob")
        ))?;
        if a.dry_run {
            super::out("dry run: nothing was changed")?;
        } else {
            super::out(&format!(
                "wrote {}, deleted {} and {}{}",
                util::count(rep.index_files_written.len(), "index file"),
                util::count(rep.index_files_deleted.len(), "old index file"),
                util::count(rep.packs_deleted.len(), "old pack"),
                if rep.packs_kept.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; kept {}",
                        util::count(rep.packs_kept.len(), "carved pack")
                    )
                }
            ))?;
        }
    }
    if !rep.lost.is_empty() {
        eprintln!(
            "the lost blobs are out of the index: the next backup stores them again if their \
             files still exist; run `arca repair snapshots --forget` to put zeros in their \
             place in the snapshots that use them"
        );
    }
    Ok(0)
}

fn index(g: &Global, a: &RepairIndexArgs) -> Result<u8> {
    // The index is not loaded (it may be unreadable), and the local cache must not serve
    // index files this command replaces.
    let opened = util::open_uncached(g)?;
    let _lock = repair_lock(g, &opened.repo, a.dry_run)?;
    let rep = repair_index(
        &opened.repo,
        RepairIndexOptions {
            read_all_packs: a.read_all_packs,
            dry_run: a.dry_run,
        },
    )?;
    if a.json {
        let v = json!({
            "message_type": "summary",
            "dry_run": a.dry_run,
            "old_index_files": rep.old_index_files,
            "damaged_index_files": rep.damaged_index_files.iter().map(|(id, why)| json!({
                "id": id.to_hex(), "error": why,
            })).collect::<Vec<_>>(),
            "newer_index_files": rep.newer_index_files.iter().map(|(id, why)| json!({
                "id": id.to_hex(), "error": why,
            })).collect::<Vec<_>>(),
            "packs_found": rep.packs_found,
            "packs_from_index": rep.packs_from_index,
            "headers_read": rep.headers_read,
            "packs_indexed": rep.packs_indexed,
            "blobs_indexed": rep.blobs_indexed,
            "unreadable_packs": rep.unreadable.iter().map(|u| json!({
                "id": u.id.to_hex(), "size": u.size, "error": u.error,
            })).collect::<Vec<_>>(),
            "missing_packs": ids(&rep.missing_packs),
            "blobs_lost": rep.blobs_lost,
            "index_files_written": ids(&rep.written),
            "index_files_deleted": ids(&rep.deleted),
            "backend": util::stats_json(&opened.stats),
        });
        super::out(&v.to_string())?;
        return Ok(0);
    }
    for (id, why) in &rep.damaged_index_files {
        eprintln!("index file {id} cannot be used: {why}");
    }
    for (_, why) in &rep.newer_index_files {
        eprintln!("{why}; it is left as it is (not damage)");
    }
    for u in &rep.unreadable {
        if rep.kept_unreadable.contains(&u.id) {
            // Its entries come from an intact index file: indexed, and salvaged by repair packs.
            eprintln!(
                "pack {} ({} bytes): its header cannot be read ({}); kept as an intact index \
                 file described it: run `arca repair packs {}` to rewrite it",
                u.id,
                u.size,
                u.error,
                u.id.short()
            );
        } else {
            eprintln!(
                "pack {} ({} bytes) left out: its header cannot be read: {}; `arca repair \
                 packs` salvages the blobs it can find in it without the header",
                u.id, u.size, u.error
            );
        }
    }
    for id in &rep.missing_packs {
        eprintln!("pack {id} was indexed but is missing: left out");
    }
    if !g.quiet {
        super::out(&format!(
            "{} found: {} described by intact index files, {} read",
            util::count(rep.packs_found, "pack"),
            rep.packs_from_index,
            util::count(rep.headers_read, "header")
        ))?;
        let verb = if a.dry_run { "would index" } else { "indexed" };
        super::out(&format!(
            "{verb} {} ({}) in {}; {} {}",
            util::count(rep.packs_indexed, "pack"),
            util::count(rep.blobs_indexed, "blob"),
            util::count(
                if a.dry_run {
                    rep.packs_indexed
                        .div_ceil(arca_maintenance::repair::PACKS_PER_INDEX_FILE)
                } else {
                    rep.written.len()
                },
                "new index file"
            ),
            util::count(
                if a.dry_run {
                    rep.old_index_files - rep.newer_index_files.len()
                } else {
                    rep.deleted.len()
                },
                "old index file"
            ),
            if a.dry_run {
                "would be deleted"
            } else {
                "deleted"
            },
        ))?;
        // Said only when something is lost: a pack renamed is found again by its header,
        // and its blobs with it.
        let headless = rep.unreadable.len() - rep.kept_unreadable.len();
        if headless > 0 {
            super::out(&format!(
                "the blobs of {} left out are not indexed: run `arca repair packs` with {} \
                 (named above) to salvage what verifies",
                util::count(headless, "pack"),
                if headless == 1 { "it" } else { "them" }
            ))?;
        }
        if rep.blobs_lost > 0 {
            super::out(&format!(
                "{} of missing packs are lost: run `arca check`, then `arca repair snapshots \
                 --forget` if snapshots need them",
                util::count(rep.blobs_lost, "blob")
            ))?;
        } else if headless == 0 && !rep.missing_packs.is_empty() {
            super::out("no blob is lost: every blob of the missing packs is in another pack")?;
        }
    }
    Ok(0)
}

fn snapshots(g: &Global, a: &RepairSnapshotsArgs) -> Result<u8> {
    let opened = util::open_uncached(g)?;
    let repo = &opened.repo;
    let _lock = repair_lock(g, repo, a.dry_run)?;
    let f = &a.filter;
    let filtered = !(f.hosts.is_empty() && f.tags.is_empty() && f.paths.is_empty());
    let filter = super::filter(f);
    let mut chosen = vec![];
    for s in &a.snapshots {
        if filtered {
            chosen.push(repo.find_snapshot(s, &filter)?.0);
        } else {
            // Named without reading it: a damaged or newer one is reported by the repair.
            chosen.push(repo.resolve_snapshot(s, &SnapshotFilter::default())?);
        }
    }
    // The filters alone (restic's `repair snapshots --host/--tag/--path`): those passing.
    if a.snapshots.is_empty() && filtered {
        chosen = super::list_all(repo, &filter)?
            .0
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        if chosen.is_empty() {
            anyhow::bail!("no snapshot passes --host, --tag and --path: nothing to repair");
        }
    }
    let rep = repair_snapshots(
        repo,
        &RepairSnapshotsOptions {
            forget: a.forget,
            dry_run: a.dry_run,
            snapshots: chosen,
        },
    )?;
    // Exit 3 when a damaged snapshot stays in the repository as it is (one that cannot be
    // repaired, or a snapshot file that cannot be read, without --forget): it exited 0, and
    // a script took the repository for repaired while `check` still failed.
    // A dry run removes nothing and saves nothing: there, one stays if its root is lost.
    let stays = |d: &arca_maintenance::repair::RepairedSnapshot| {
        d.repaired.is_none() && !d.forgotten && (!a.dry_run || (d.root_lost.is_some() && !a.forget))
    };
    let kept = rep.damaged.iter().any(stays) || (!a.forget && !rep.damaged_files.is_empty());
    let left_damaged = if kept { 3 } else { 0 };
    if a.json {
        let v = json!({
            "message_type": "summary",
            "dry_run": a.dry_run,
            "snapshots": rep.snapshots,
            "adopted_packs": rep.adopted_packs,
            "damaged": rep.damaged.iter().map(|d| json!({
                "original": d.original.to_hex(),
                "repaired": d.repaired.map(|i| i.to_hex()),
                "adopted": d.adopted,
                "root_lost": d.root_lost,
                "forgotten": d.forgotten,
                "changes": d.changes.iter().map(|c| match &c.loss {
                    Loss::DirectoryEmptied { reason } => json!({
                        "path": c.path.to_string_lossy(),
                        "action": "emptied",
                        "reason": reason,
                    }),
                    Loss::FileZeroed { size, zeroed, lost_blobs } => json!({
                        "path": c.path.to_string_lossy(),
                        "action": "zeroed",
                        "size": size,
                        "zeroed": zeroed,
                        "lost_blobs": ids(lost_blobs),
                    }),
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "damaged_files": rep.damaged_files.iter().map(|(id, why)| json!({
                "id": id.to_hex(), "error": why,
            })).collect::<Vec<_>>(),
            "damaged_files_deleted": rep.damaged_files_deleted,
            "newer": rep.newer.iter().map(|(id, why)| json!({
                "id": id.to_hex(), "error": why,
            })).collect::<Vec<_>>(),
            "trees_written": rep.trees_written,
            "zero_blobs_written": rep.zero_blobs_written,
            "packs_written": rep.packs_written,
            "index_file": rep.index_file.map(|i| i.to_hex()),
            "damaged_packs": ids(&rep.damaged_packs),
            "backend": util::stats_json(&opened.stats),
        });
        super::out(&v.to_string())?;
        return Ok(left_damaged);
    }
    for (id, why) in &rep.damaged_files {
        eprintln!("snapshot file {id} is damaged: {why}");
    }
    for (id, why) in &rep.newer {
        eprintln!(
            "snapshot {}: {why}; it is left as it is (not damage)",
            id.short()
        );
    }
    for d in &rep.damaged {
        let short = d.original.short();
        if let Some(why) = &d.root_lost {
            eprintln!(
                "snapshot {short}: its root listing is lost ({why}); the listings below it \
                 may still be there: run `arca recover` before the next prune to save them"
            );
        }
        for c in &d.changes {
            match &c.loss {
                Loss::DirectoryEmptied { reason } => eprintln!(
                    "snapshot {short}: {}: directory replaced by an empty one ({reason})",
                    arca_format::text::shown(&c.path)
                ),
                Loss::FileZeroed {
                    size,
                    zeroed,
                    lost_blobs,
                } => eprintln!(
                    "snapshot {short}: {}: {} of its {size} bytes are zeros now, {} lost (lost \
                     data; the rest of the file is kept)",
                    arca_format::text::shown(&c.path),
                    zeroed,
                    util::count(lost_blobs.len(), "blob")
                ),
            }
        }
    }
    // The damaged blobs stay indexed: the next backup of the same data would refer to them
    // again, and the repaired snapshot's loss would come back in a new one (hunt H16).
    if !rep.damaged_packs.is_empty() {
        let packs = ids(&rep.damaged_packs);
        eprintln!(
            "warning: the damaged blobs stay in the index, and a backup of the same data would \
             refer to them again: run `arca repair packs {}` to take them out",
            packs.join(" ")
        );
    }
    if !g.quiet {
        if rep.damaged.is_empty() && rep.damaged_files.is_empty() {
            super::out(&format!(
                "{} examined, none damaged",
                util::count(rep.snapshots, "snapshot")
            ))?;
        }
        for d in &rep.damaged {
            let line = match (d.repaired, a.dry_run, d.root_lost.is_some()) {
                (_, true, false) => format!(
                    "snapshot {} would be repaired ({})",
                    d.original.short(),
                    util::count(d.changes.len(), "path")
                ),
                (Some(new), _, _) => format!(
                    "snapshot {} repaired as {} ({}{}){}",
                    d.original.short(),
                    new.short(),
                    util::count(d.changes.len(), "path"),
                    if d.adopted {
                        "; found, saved by an earlier run"
                    } else {
                        ""
                    },
                    if d.forgotten {
                        ", original removed"
                    } else {
                        ""
                    }
                ),
                _ => format!(
                    "snapshot {} cannot be repaired{}",
                    d.original.short(),
                    if d.forgotten { ": removed" } else { "" }
                ),
            };
            super::out(&line)?;
        }
        if !a.dry_run && rep.damaged.iter().any(|d| d.root_lost.is_some()) {
            super::out(
                "run `arca recover` before the next prune: it saves, as a snapshot, the \
                 listings still found below a lost root listing",
            )?;
        }
        if rep.damaged_files_deleted > 0 {
            super::out(&format!(
                "{} removed",
                util::count(rep.damaged_files_deleted, "damaged snapshot file")
            ))?;
        }
        if !a.forget && !a.dry_run && !rep.damaged.is_empty() {
            super::out(
                "the damaged originals are kept: run again with --forget (or `arca forget`) \
                 to remove them",
            )?;
        }
        if !a.forget && !a.dry_run && !rep.damaged_files.is_empty() {
            super::out(&format!(
                "{} kept: run again with --forget to remove {}",
                util::count(rep.damaged_files.len(), "damaged snapshot file"),
                if rep.damaged_files.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            ))?;
        }
    }
    Ok(left_damaged)
}

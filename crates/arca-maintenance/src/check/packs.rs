//! `check` on packs themselves: telling what the packs no index names are, and reading packs
//! in full (`read_data`, a subset) to verify their id, header and every blob.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexPack};
use arca_repo::pack::pack_header_from_bytes;
use arca_repo::{RepoError, Repository};

use super::repairs::Findings;
use super::{CheckProgress, CheckReport, unreadable};

/// Packs no intact index names: their headers are read to tell what they are. One that holds
/// blobs the snapshots miss is for `repair index`; one left by an interrupted backup is
/// harmless (the next backup adopts it, prune deletes it); one whose header cannot be read
/// cannot be indexed, so `repair index` is not proposed for it: while the snapshots miss
/// blobs, `repair packs` is (it carves the pack), and prune would delete it.
pub(super) fn unindexed_packs(
    repo: &Repository,
    on_disk: &HashMap<Id, u64>,
    indexed: &HashSet<Id>,
    missing: &HashSet<(BlobKind, Id)>,
    found: &mut Findings,
    rep: &mut CheckReport,
) {
    let mut packs: Vec<(Id, u64)> = on_disk
        .iter()
        .filter(|(id, _)| !indexed.contains(id))
        .map(|(id, size)| (*id, *size))
        .collect();
    if packs.is_empty() {
        return;
    }
    packs.sort();
    let scan = arca_repo::recover::scan_headers(repo, &packs);
    // With trees of the snapshots missing from the index, what data they use is not known.
    let trees_missing = missing.iter().any(|(k, _)| *k == BlobKind::Tree);
    for p in &scan.packs {
        found.unindexed_packs += 1;
        let needed = p.blobs.iter().any(|b| missing.contains(&(p.kind, b.id)));
        rep.notes.push(if needed {
            format!(
                "pack {} is in no index and holds blobs the snapshots use (`arca repair index` \
                 indexes it)",
                p.id
            )
        } else if trees_missing {
            format!(
                "pack {} is in no index and may hold data the snapshots use (their trees are \
                 not indexed either; `arca repair index` indexes it)",
                p.id
            )
        } else if found.damaged_index_files > 0 {
            format!(
                "pack {} is in no intact index file (`arca repair index` reads it)",
                p.id
            )
        } else {
            format!(
                "pack {} is not in any index (left by an interrupted backup, or written by one \
                 still running; harmless)",
                p.id
            )
        });
    }
    for u in &scan.unreadable {
        if u.damaged {
            if !missing.is_empty() {
                found.headless_packs.push(u.id);
            }
            rep.notes.push(format!(
                "pack {} is in no index and its header cannot be read ({}): `arca repair packs` \
                 salvages the blobs it can find in it without the header (`arca prune` would \
                 delete it)",
                u.id, u.error
            ));
        } else {
            found.unindexed_packs += 1;
            rep.notes.push(format!(
                "pack {} is in no index and cannot be read now ({})",
                u.id, u.error
            ));
        }
    }
}

pub(super) struct PackResult {
    pub(super) id: Id,
    pub(super) blobs: u64,
    pub(super) bytes: u64,
    pub(super) problems: Vec<(String, Vec<(BlobKind, Id)>)>,
    /// Its bytes are damaged (not only its index entries wrong).
    pub(super) damaged: bool,
    /// It could not be read for a reason that says nothing of its bytes (the server
    /// unreachable, a network failure that outlasted the retries, access denied): why.
    pub(super) unreadable: Option<String>,
    /// That reason was an outage (a transient failure that outlasted the retries): the other
    /// packs would only wait it out one after another.
    outage: bool,
    /// A blob or its header was made by a newer arca (not damage): why.
    pub(super) newer: Option<String>,
}

pub(super) fn read_all_packs(
    repo: &Repository,
    packs: &[&IndexPack],
    on_disk: &HashMap<Id, u64>,
    already: &HashSet<Id>,
    workers: usize,
    progress: &CheckProgress,
) -> (Vec<PackResult>, usize) {
    let done = &progress.packs_read;
    let packs: Vec<&IndexPack> = packs
        .iter()
        .copied()
        .filter(|p| on_disk.contains_key(&p.id) && !already.contains(&p.id))
        .collect();
    let workers = if workers == 0 {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    } else {
        workers
    }
    .min(packs.len().max(1));
    let next = AtomicUsize::new(0);
    let out = Mutex::new(vec![]);
    // Set at the first outage: reading stops (each further pack would wait out its retries).
    let halt = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                while !halt.load(Ordering::Relaxed) && progress.go_on().is_ok() {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = packs.get(i) else { break };
                    let r = check_pack(repo, p);
                    if r.outage {
                        halt.store(true, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                    out.lock().unwrap_or_else(|e| e.into_inner()).push(r);
                }
            });
        }
    });
    let results = out.into_inner().unwrap_or_else(|e| e.into_inner());
    let skipped = packs.len().saturating_sub(results.len());
    (results, skipped)
}

fn check_pack(repo: &Repository, p: &IndexPack) -> PackResult {
    let mut r = PackResult {
        id: p.id,
        blobs: 0,
        bytes: 0,
        problems: vec![],
        damaged: false,
        unreadable: None,
        outage: false,
        newer: None,
    };
    let all = || p.blobs.iter().map(|b| (p.kind, b.id)).collect::<Vec<_>>();
    let bytes = match repo.backend().read(FileType::Pack, &p.id.to_hex()) {
        Ok(b) => b,
        // A pack that is gone or shorter than the index says is damage; a server that does
        // not answer is not, and must not send anyone to repair a healthy pack.
        Err(e) if unreadable(&e) => {
            r.outage = e.is_transient();
            r.unreadable = Some(e.to_string());
            return r;
        }
        Err(e) => {
            r.problems.push((format!("cannot be read: {e}"), all()));
            r.damaged = true;
            return r;
        }
    };
    r.bytes = bytes.len() as u64;
    // A pack of the wrong size (reported as such from the listing) cannot match its id, and
    // its header (at the end) is not where it should be: saying so too made one cut pack
    // four errors. Its blobs still tell what is lost.
    let wrong_size = r.bytes != p.size;
    if wrong_size {
        r.damaged = true;
    } else if Id(*blake3::hash(&bytes).as_bytes()) != p.id {
        r.problems
            .push(("content does not match its id (corrupted)".into(), vec![]));
        r.damaged = true;
    }
    match header_matches(repo, p, &bytes) {
        _ if wrong_size => {}
        Ok(()) => {}
        Err(HeaderProblem::Damaged(e)) => {
            r.problems.push((format!("header: {e}"), vec![]));
            r.damaged = true;
        }
        // Not damage: `repair packs` leaves such a pack alone, and check proposed it (hunt
        // 30). Its blobs are still read below.
        Err(HeaderProblem::Newer(e)) if !r.damaged => {
            r.newer.get_or_insert(e);
        }
        // A pack that does not hash to its name: its header's claim is not believed.
        Err(HeaderProblem::Newer(e)) => r.problems.push((format!("header: {e}"), vec![])),
        Err(HeaderProblem::Mismatch) => r
            .problems
            .push(("header: does not match the index".into(), vec![])),
    }
    let mut bad = vec![];
    let mut first_err = None;
    for b in &p.blobs {
        let start = b.offset as usize;
        let end = start + b.length as usize;
        let res = match bytes.get(start..end) {
            Some(sealed) => repo
                .open_blob(p.kind, &b.id, &p.id, sealed, b.raw_length)
                .map(|_| ()),
            None => Err(RepoError::BlobCorrupt {
                kind: p.kind,
                id: b.id,
                pack: p.id,
                detail: "beyond the end of the pack".into(),
            }),
        };
        r.blobs += 1;
        if let Err(e) = res {
            if e.is_newer_format() {
                r.newer.get_or_insert(e.cause());
                continue;
            }
            // The pack is named by the caller.
            first_err.get_or_insert(e.cause());
            bad.push((p.kind, b.id));
        }
    }
    if !bad.is_empty() {
        r.damaged = true;
        r.problems.push((
            format!(
                "{} of {} blobs damaged (first: {})",
                bad.len(),
                p.blobs.len(),
                first_err.unwrap_or_default()
            ),
            bad,
        ));
    }
    r
}

/// Why a pack's header is not what the index says.
enum HeaderProblem {
    /// It cannot be read (damaged, cut off).
    Damaged(String),
    /// It was made by a newer arca.
    Newer(String),
    /// It reads, and lists other blobs than the index.
    Mismatch,
}

fn header_matches(repo: &Repository, p: &IndexPack, bytes: &[u8]) -> Result<(), HeaderProblem> {
    // The pack is named by the caller.
    let h = pack_header_from_bytes(repo.sealer(), &p.id, bytes).map_err(|e| {
        match e.is_newer_format() {
            true => HeaderProblem::Newer(e.cause()),
            false => HeaderProblem::Damaged(e.cause()),
        }
    })?;
    if h.kind != p.kind || h.entries != p.blobs {
        return Err(HeaderProblem::Mismatch);
    }
    Ok(())
}

//! Carrying out a plan: new packs, new index, then deletions (see the module documentation
//! of `prune` for the order and why a crash at any point is harmless).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::time::Duration;

use arca_backend::{Backend, FileType};
use arca_format::pack::PackHeader;
use arca_format::{BlobKind, Id, IndexFile, IndexPack};
use arca_repo::blob::{BlobOpener, SealedBlob};
use arca_repo::pack::{PackWriter, read_pack_header};
use arca_repo::trees::TreeLoader;
use arca_repo::trees::ranges::{Span, coalesce, read_with_retry};
use arca_repo::{Index, Repository};

use super::{
    INDEX_BLOBS, KeepBlob, PackAction, Phase, Progress, PruneError, PrunePlan, PruneReport,
};

/// Temporary files older than this are left by crashed writers, not by writes in progress.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// Packs read for repacking at once, at most (each holds up to a pack of blobs in memory).
const MAX_READERS: usize = 8;

/// Carries out `plan`: repacks, writes the new index, deletes the old index files and the
/// packs no longer needed, and removes stale temporary files. The repository must be
/// exclusively locked and unchanged since planning.
pub fn execute(
    repo: &Repository,
    plan: &PrunePlan,
    progress: &Progress,
) -> Result<PruneReport, PruneError> {
    let mut report = PruneReport::default();
    if plan.rewrite_index {
        progress.set_phase(Phase::Repacking);
        let new_packs = repack(repo, plan, progress, &mut report)?;
        progress.set_phase(Phase::WritingIndex);
        report.index_files_written = write_index(repo, plan, new_packs, progress)?;
    }
    progress.set_phase(Phase::Deleting);
    let backend = repo.backend();
    let mut doomed: Vec<(FileType, Id, u64)> = vec![];
    if plan.rewrite_index {
        doomed.extend(
            plan.index_files
                .iter()
                .filter(|id| !report.index_files_written.contains(id))
                .map(|id| (FileType::Index, *id, 0)),
        );
        doomed.extend(
            plan.packs
                .iter()
                .filter(|p| matches!(p.action, PackAction::Delete | PackAction::Repack))
                .map(|p| (FileType::Pack, p.id, p.size)),
        );
    }
    doomed.extend(
        plan.unreferenced
            .iter()
            .map(|(id, size)| (FileType::Pack, *id, *size)),
    );
    Progress::bump(&progress.files_to_delete, doomed.len() as u64);
    // Index files first: once they are gone, no index names the packs deleted next.
    for (t, id, size) in doomed {
        match backend.delete(t, &id.to_hex()) {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        Progress::bump(&progress.files_deleted, 1);
        if t == FileType::Index {
            report.index_files_deleted += 1;
        } else {
            report.packs_deleted += 1;
            report.bytes_deleted += size;
        }
    }
    report.temp_files_removed = backend.remove_stale_temp(STALE_TEMP)?;
    progress.set_phase(Phase::Done);
    Ok(report)
}

/// The used blobs of one pack to repack, verified, still sealed.
type Copied = Result<Vec<SealedBlob>, PruneError>;

/// Copies the used blobs of the packs to repack into new packs and uploads them; returns
/// the new packs' index entries.
fn repack(
    repo: &Repository,
    plan: &PrunePlan,
    progress: &Progress,
    report: &mut PruneReport,
) -> Result<Vec<IndexPack>, PruneError> {
    let todo: Vec<usize> = (0..plan.packs.len())
        .filter(|&i| plan.packs[i].action == PackAction::Repack)
        .collect();
    if todo.is_empty() {
        return Ok(vec![]);
    }
    Progress::bump(&progress.packs_to_read, todo.len() as u64);
    let stop = AtomicBool::new(false);
    let (gap, max_read, threads) = {
        let empty = Index::default();
        let l = TreeLoader::new(repo, &empty, &stop);
        (l.read_gap, l.max_read, l.threads.clamp(1, MAX_READERS))
    };
    let threads = threads.min(todo.len());
    let pack_size = repo.config().pack_size as usize;
    let next = AtomicUsize::new(0);
    let (tx, rx) = sync_channel::<Copied>(1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            let tx = tx.clone();
            let (todo, next, stop) = (&todo, &next, &stop);
            s.spawn(move || {
                let (mut buf, mut opener) = (vec![], BlobOpener::new());
                while !stop.load(Ordering::Relaxed) {
                    let Some(&i) = todo.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        break;
                    };
                    let got = copy_pack(repo, plan, i, gap, max_read, &mut buf, &mut opener, stop);
                    if tx.send(got).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut writers = [
            PackWriter::new(BlobKind::Data, pack_size + pack_size / 8),
            PackWriter::new(BlobKind::Tree, pack_size + pack_size / 8),
        ];
        let mut written = vec![];
        let mut pack_blobs = |blobs: Vec<SealedBlob>, written: &mut Vec<IndexPack>| {
            for b in blobs {
                let w = &mut writers[b.kind.code() as usize];
                w.add(&b)?;
                report.blobs_repacked += 1;
                if w.size() >= pack_size {
                    let full = std::mem::replace(w, PackWriter::new(b.kind, pack_size));
                    written.push(upload(repo, full, progress, report)?);
                }
            }
            Ok::<(), PruneError>(())
        };
        let mut result = Ok(());
        for got in rx.iter() {
            let step = got.and_then(|blobs| {
                Progress::bump(&progress.packs_read, 1);
                pack_blobs(blobs, &mut written)
            });
            if let Err(e) = step {
                result = Err(e);
                stop.store(true, Ordering::Relaxed);
                break;
            }
        }
        // Dropping the receiver ends the readers' sends after an error.
        drop(rx);
        result?;
        for w in writers {
            if !w.is_empty() {
                written.push(upload(repo, w, progress, report)?);
            }
        }
        Ok(written)
    })
}

/// Seals and uploads one new pack; returns its index entry.
fn upload(
    repo: &Repository,
    w: PackWriter,
    progress: &Progress,
    report: &mut PruneReport,
) -> Result<IndexPack, PruneError> {
    let p = w.finish(repo.sealer())?;
    let name = p.id.to_hex();
    if p.index.kind == BlobKind::Tree {
        repo.backend().note_tree_packs(std::slice::from_ref(&name));
    }
    repo.backend().write(FileType::Pack, &name, &p.bytes)?;
    report.packs_written += 1;
    report.bytes_written += p.bytes.len() as u64;
    Progress::bump(&progress.packs_written, 1);
    Ok(p.index)
}

/// Reads the used blobs of pack `i` (its header, then merged ranges), checks each against
/// the plan and verifies it (decrypts, decompresses, hashes); returns them still sealed.
#[allow(clippy::too_many_arguments)]
fn copy_pack(
    repo: &Repository,
    plan: &PrunePlan,
    i: usize,
    gap: u64,
    max_read: u64,
    buf: &mut Vec<u8>,
    opener: &mut BlobOpener,
    stop: &AtomicBool,
) -> Copied {
    let p = &plan.packs[i];
    let bad = |error: String| PruneError::BadPack { id: p.id, error };
    let backend: &dyn Backend = repo.backend().as_ref();
    let header = read_pack_header(backend, repo.sealer(), &p.id, p.size).map_err(|e| {
        if e.is_corruption() {
            bad(e.to_string())
        } else {
            e.into()
        }
    })?;
    if header.kind != p.kind {
        return Err(bad(format!(
            "its header says {} blobs, the index {}",
            header.kind, p.kind
        )));
    }
    let keep = wanted(&plan.keep, i as u32);
    let mut spans = Vec::with_capacity(keep.len());
    for k in keep {
        let e = find_entry(&header, k.offset)
            .filter(|e| e.id.prefix16() == k.key)
            .ok_or_else(|| {
                bad(format!(
                    "its header has no blob at offset {} as the index says",
                    k.offset
                ))
            })?;
        spans.push(Span {
            pack: i as u32,
            offset: u64::from(e.offset),
            len: u64::from(e.length),
            item: (e.id, e.raw_length),
        });
    }
    let mut out = Vec::with_capacity(spans.len());
    for r in coalesce(spans, gap, max_read) {
        let (at, _) = read_with_retry(backend, &p.id, r.offset, r.len, buf, stop)?;
        for s in &r.items {
            let (id, raw_len) = s.item;
            let start = at + (s.offset - r.offset) as usize;
            let Some(sealed) = buf.get_mut(start..start + s.len as usize) else {
                return Err(bad("a read came back short".into()));
            };
            let blob = SealedBlob {
                kind: p.kind,
                id,
                raw_len,
                bytes: sealed.to_vec(),
            };
            // Opening decrypts in place: the copy above is what goes into the new pack.
            opener
                .open(repo.key(), repo.sealer(), p.kind, id, p.id, sealed, raw_len)
                .map_err(|e| bad(e.to_string()))?;
            out.push(blob);
        }
    }
    Ok(out)
}

/// The blobs of pack position `pack` to keep (`keep` is sorted by pack, then offset).
fn wanted(keep: &[KeepBlob], pack: u32) -> &[KeepBlob] {
    let lo = keep.partition_point(|k| k.pack < pack);
    let hi = keep.partition_point(|k| k.pack <= pack);
    &keep[lo..hi]
}

fn find_entry(h: &PackHeader, offset: u32) -> Option<&arca_format::pack::PackEntry> {
    h.entries
        .binary_search_by_key(&offset, |e| e.offset)
        .ok()
        .map(|j| &h.entries[j])
}

/// Writes the new index: every kept pack, as the old index files list it, then the new
/// packs; [`INDEX_BLOBS`] blobs per file, the last file naming the old ones as superseded.
/// Fails, before anything is deleted, if an old index file cannot be read or names a pack
/// the plan does not know, or a kept pack is not found.
fn write_index(
    repo: &Repository,
    plan: &PrunePlan,
    new_packs: Vec<IndexPack>,
    progress: &Progress,
) -> Result<Vec<Id>, PruneError> {
    let pos: HashMap<Id, usize> = plan
        .packs
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id, i))
        .collect();
    let mut emitted = vec![false; plan.packs.len()];
    let mut kept: Vec<IndexPack> = vec![];
    let mut written = vec![];
    let mut blobs = 0usize;
    let mut flush = |packs: &mut Vec<IndexPack>, supersedes: Vec<Id>| -> Result<(), PruneError> {
        let f = IndexFile {
            supersedes,
            packs: std::mem::take(packs),
        };
        written.push(repo.save_index(&f)?);
        Progress::bump(&progress.index_files_written, 1);
        Ok(())
    };
    for id in &plan.index_files {
        let file = repo.load_index_file(id)?;
        for p in file.packs {
            let Some(&i) = pos.get(&p.id) else {
                return Err(PruneError::Changed(format!(
                    "index file {id} names pack {} that was not planned for",
                    p.id
                )));
            };
            if plan.packs[i].action != PackAction::Keep || std::mem::replace(&mut emitted[i], true)
            {
                continue;
            }
            blobs += p.blobs.len();
            kept.push(p);
            if blobs >= INDEX_BLOBS {
                flush(&mut kept, vec![])?;
                blobs = 0;
            }
        }
    }
    if let Some(p) = plan
        .packs
        .iter()
        .zip(&emitted)
        .find(|(p, e)| p.action == PackAction::Keep && !**e)
    {
        return Err(PruneError::Changed(format!(
            "pack {} is no longer in the index",
            p.0.id
        )));
    }
    for p in new_packs {
        blobs += p.blobs.len();
        kept.push(p);
        if blobs >= INDEX_BLOBS {
            flush(&mut kept, vec![])?;
            blobs = 0;
        }
    }
    // The last file replaces the old ones: with it written, the new files cover every pack
    // that stays.
    flush(&mut kept, plan.index_files.clone())?;
    Ok(written)
}

//! Carrying out a plan: new packs, new index, then deletions (see the module documentation
//! of `prune` for the order and why a crash at any point is harmless).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use arca_backend::{Backend, FileType};
use arca_format::pack::PackHeader;
use arca_format::{BlobKind, Id, IndexFile, IndexPack};
use arca_repo::blob::{authenticate_blob, authenticate_blob_in_place};
use arca_repo::pack::{PackWriter, read_pack_header};
use arca_repo::trees::TreeLoader;
use arca_repo::trees::ranges::{Span, coalesce, read_with_retry};
use arca_repo::{Index, Repository};

use super::packer::Packer;
use super::{
    INDEX_BLOBS, KeepBlob, PackAction, Phase, Progress, PruneError, PrunePlan, PruneReport,
};

/// Temporary files older than this are left by crashed writers, not by writes in progress.
pub(crate) const STALE_TEMP: Duration = Duration::from_secs(3600);

/// How many stale temporary files (`.tmp-*` left by crashed writers) [`execute`] would
/// remove: what a dry run reports.
pub fn stale_temp_files(repo: &Repository) -> Result<u64, PruneError> {
    Ok(repo.backend().remove_stale_temp(STALE_TEMP, false)?)
}

/// Files deleted between two checks of the lock.
const DELETE_BATCH: usize = 256;

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
    if plan.preview {
        // Snapshots it counted as gone still exist: it would delete data they use.
        return Err(PruneError::Changed(
            "the plan counted snapshots as removed that still exist (a preview)".into(),
        ));
    }
    let mut report = PruneReport::default();
    progress.go_on()?;
    if plan.rewrite_index {
        verify_sole_copies(repo, plan, &plan.sole_copies, false, progress)?;
    }
    verify_sole_copies(repo, plan, &plan.orphan_copies, true, progress)?;
    Progress::bump(&progress.files_to_delete, plan.unreferenced.len() as u64);
    // A pack that cannot be deleted (immutable, a retention hold) does not stop the rest:
    // the failure is returned at the end, as before this step came first.
    let mut orphans_failed = None;
    if !plan.unreferenced.is_empty() {
        // The packs no index names go first, as restic's do: no snapshot can need them (the
        // plan found every used blob indexed, and the exclusive lock keeps backups away),
        // and their space may be what repacking needs. A prune that failed for a full disk
        // after uploading its new packs left them unreferenced, and every later prune failed
        // again repacking before it came to delete them (hunt 28). Such packs that hold what
        // this repack needs are adopted instead (`plan.adopted`), and are not among these.
        progress.set_phase(Phase::Deleting);
        let unreferenced: Vec<(FileType, Id, u64)> = plan
            .unreferenced
            .iter()
            .map(|(id, size)| (FileType::Pack, *id, *size))
            .collect();
        match delete(repo, &unreferenced, progress, &mut report) {
            Err(PruneError::Repo(e)) if matches!(*e, arca_repo::RepoError::Backend(_)) => {
                orphans_failed = Some(e);
            }
            r => r?,
        }
    }
    // The index files naming what is live, and the packs already deleted.
    let mut old_files = plan.index_files.clone();
    // Index files written before the repack (naming the adopted packs) and replaced after it.
    let mut replaced: Vec<Id> = vec![];
    let mut gone = vec![false; plan.packs.len()];
    // A pack to repack whose used blobs the adopted packs all hold: nothing to copy.
    let covered = |i: usize| {
        plan.packs[i].action == PackAction::Repack && wanted(&plan.keep, i as u32).is_empty()
    };
    if plan.rewrite_index && !plan.adopted.is_empty() {
        // The adopted packs are indexed first, and what they make redundant deleted, before
        // anything is written: their space is what the rest of the repack may need.
        progress.set_phase(Phase::WritingIndex);
        let stays = |i: usize| match plan.packs[i].action {
            PackAction::Keep => true,
            PackAction::Repack => !covered(i),
            PackAction::Delete | PackAction::Forget => false,
        };
        let (written, deleted) = write_index(
            repo,
            plan,
            &old_files,
            &stays,
            plan.adopted.clone(),
            progress,
            &mut report,
        )?;
        report.packs_adopted = plan.adopted.len() as u64;
        report.bytes_adopted = plan.adopted.iter().map(|p| p.size).sum();
        // Cancelled: old and new index files both list what they list.
        progress.go_on()?;
        progress.set_phase(Phase::Deleting);
        arca_repo::lock::check_held()?;
        let mut doomed: Vec<(FileType, Id, u64)> = old_files
            .iter()
            .filter(|id| !written.contains(id) && !deleted.contains(id))
            .map(|id| (FileType::Index, *id, 0))
            .collect();
        for (i, p) in plan.packs.iter().enumerate() {
            if !stays(i) && matches!(p.action, PackAction::Delete | PackAction::Repack) {
                doomed.push((FileType::Pack, p.id, p.size));
                gone[i] = true;
            }
        }
        Progress::bump(&progress.files_to_delete, doomed.len() as u64);
        delete(repo, &doomed, progress, &mut report)?;
        report.index_files_written.clone_from(&written);
        replaced.clone_from(&written);
        old_files = written;
    }
    let rest =
        (0..plan.packs.len()).any(|i| plan.packs[i].action == PackAction::Repack && !covered(i));
    if plan.rewrite_index && (plan.adopted.is_empty() || rest) {
        progress.set_phase(Phase::Repacking);
        let mut new_packs = repack(repo, plan, progress, &mut report)?;
        // Cancelled: the new packs are in no index, and the next prune adopts them.
        progress.go_on()?;
        progress.set_phase(Phase::WritingIndex);
        new_packs.extend(plan.adopted.iter().cloned());
        let keep = |i: usize| plan.packs[i].action == PackAction::Keep;
        let (written, deleted) = write_index(
            repo,
            plan,
            &old_files,
            &keep,
            new_packs,
            progress,
            &mut report,
        )?;
        report.index_files_written = written;
        old_files.retain(|id| !deleted.contains(id));
    }
    // Cancelled: old and new index files both list what they list; the next prune tidies.
    progress.go_on()?;
    progress.set_phase(Phase::Deleting);
    // Nothing is deleted under a lock others may take for stale (its refreshes failed).
    arca_repo::lock::check_held()?;
    let backend = repo.backend();
    let mut doomed: Vec<(FileType, Id, u64)> = vec![];
    if plan.rewrite_index {
        doomed.extend(
            old_files
                .iter()
                .filter(|id| !report.index_files_written.contains(id))
                .map(|id| (FileType::Index, *id, 0)),
        );
        doomed.extend(
            plan.packs
                .iter()
                .zip(&gone)
                .filter(|(p, gone)| {
                    !**gone && matches!(p.action, PackAction::Delete | PackAction::Repack)
                })
                .map(|(p, _)| (FileType::Pack, p.id, p.size)),
        );
    }
    Progress::bump(&progress.files_to_delete, doomed.len() as u64);
    delete(repo, &doomed, progress, &mut report)?;
    // Counted as written, as they are counted as deleted.
    replaced.retain(|id| !report.index_files_written.contains(id));
    report.index_files_written.splice(0..0, replaced);
    report.temp_files_removed = backend.remove_stale_temp(STALE_TEMP, true)?;
    if let Some(e) = orphans_failed {
        return Err(PruneError::Repo(e));
    }
    progress.set_phase(Phase::Done);
    Ok(report)
}

/// Deletes `doomed`: index files first, all of them (once they are gone, no index names the
/// packs deleted next), then packs; within each kind, several deletions are in flight.
fn delete(
    repo: &Repository,
    doomed: &[(FileType, Id, u64)],
    progress: &Progress,
    report: &mut PruneReport,
) -> Result<(), PruneError> {
    let done = || Progress::bump(&progress.files_deleted, 1);
    for kind in [FileType::Index, FileType::Pack] {
        let (ids, sizes): (Vec<Id>, Vec<u64>) = doomed
            .iter()
            .filter(|(t, _, _)| *t == kind)
            .map(|(_, id, size)| (*id, *size))
            .unzip();
        // The lock is checked again before each batch: a prune paused (a suspended laptop)
        // after one check deleted every file after it, its lock long taken for stale and a
        // backup meanwhile referencing those packs (hunt 29).
        let mut results = Vec::with_capacity(ids.len());
        for batch in ids.chunks(DELETE_BATCH) {
            arca_repo::lock::check_held()?;
            results.extend(repo.remove_files(kind, batch, &done));
        }
        let mut first_error = None;
        for (r, size) in results.into_iter().zip(sizes) {
            match r {
                Ok(()) if kind == FileType::Index => report.index_files_deleted += 1,
                Ok(()) => {
                    report.packs_deleted += 1;
                    report.bytes_deleted += size;
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e.into());
        }
    }
    Ok(())
}

/// Copies the used blobs of the packs to repack into new packs and uploads them; returns
/// the new packs' index entries. Each thread reads packs and appends their used blobs
/// (still sealed) to the packs all threads fill ([`Packer`]), checking each after; a pack is
/// uploaded once full and every blob in it checked.
fn repack(
    repo: &Repository,
    plan: &PrunePlan,
    progress: &Progress,
    report: &mut PruneReport,
) -> Result<Vec<IndexPack>, PruneError> {
    // A pack whose used blobs adopted packs all hold has nothing to copy.
    let todo: Vec<usize> = (0..plan.packs.len())
        .filter(|&i| {
            plan.packs[i].action == PackAction::Repack && !wanted(&plan.keep, i as u32).is_empty()
        })
        .collect();
    if todo.is_empty() {
        return Ok(vec![]);
    }
    Progress::bump(&progress.packs_to_read, todo.len() as u64);
    let stop = AtomicBool::new(false);
    let (gap, max_read, threads) = read_shape(repo, &stop);
    let threads = threads.clamp(1, MAX_READERS);
    // Each thread waits for the backend while it reads, and while it uploads a pack it
    // completed (a local pack is synced to disk): one thread more than the cores keeps them
    // busy; a remote backend's latency wants the loader's count.
    let threads = if repo.backend().hints().local {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        threads.min(cores + 1)
    } else {
        threads
    }
    .min(todo.len());
    let packer = Packer::new(repo, progress);
    let next = AtomicUsize::new(0);
    let done: Vec<Result<(), PruneError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (todo, next, stop, packer) = (&todo, &next, &stop, &packer);
                s.spawn(move || {
                    let r = repack_some(plan, todo, next, gap, max_read, stop, packer);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    for r in done {
        r?;
    }
    let packed = packer.finish()?;
    report.packs_written += packed.packs.len() as u64;
    report.bytes_written += packed.bytes_written;
    report.blobs_repacked += packed.blobs;
    Ok(packed.packs)
}

/// One repacking thread: takes packs from `todo` until none is left or `stop` is raised.
fn repack_some(
    plan: &PrunePlan,
    todo: &[usize],
    next: &AtomicUsize,
    gap: u64,
    max_read: u64,
    stop: &AtomicBool,
    packer: &Packer<'_>,
) -> Result<(), PruneError> {
    let mut buf = vec![];
    while !stop.load(Ordering::Relaxed) {
        packer.progress().go_on()?;
        let Some(&i) = todo.get(next.fetch_add(1, Ordering::Relaxed)) else {
            break;
        };
        copy_pack(plan, i, gap, max_read, &mut buf, stop, packer)?;
        Progress::bump(&packer.progress().packs_read, 1);
    }
    Ok(())
}

/// A pack uploaded: its index entry, its size and its buffer (for the next).
pub(super) type Uploaded = (IndexPack, u64, Vec<u8>);

/// Seals and uploads one new pack.
pub(super) fn upload(
    repo: &Repository,
    w: PackWriter,
    progress: &Progress,
) -> Result<Uploaded, PruneError> {
    let p = w.finish(repo.sealer())?;
    let name = p.id.to_hex();
    if p.index.kind == BlobKind::Tree {
        repo.backend().note_tree_packs(std::slice::from_ref(&name));
    }
    repo.backend().write(FileType::Pack, &name, &p.bytes)?;
    Progress::bump(&progress.packs_written, 1);
    Ok((p.index, p.bytes.len() as u64, p.bytes))
}

/// Reads the used blobs of pack `i` (its header, then merged ranges), checks each against
/// the plan, appends it, still sealed, to `packer`'s pack and authenticates it (its tag,
/// which covers every sealed byte and the blob's id) before that pack can be uploaded: a
/// damaged blob fails the prune before its pack is uploaded, and before anything is
/// deleted. The bytes are copied unchanged, so hashing their plaintext would find nothing
/// the tag does not.
fn copy_pack(
    plan: &PrunePlan,
    i: usize,
    gap: u64,
    max_read: u64,
    buf: &mut Vec<u8>,
    stop: &AtomicBool,
    packer: &Packer<'_>,
) -> Result<(), PruneError> {
    let repo = packer.repo();
    let p = &plan.packs[i];
    let bad = |error: String| PruneError::BadPack {
        id: p.id,
        error,
        damaged: true,
    };
    let mismatch = |error: String| PruneError::BadPack {
        id: p.id,
        error,
        damaged: false,
    };
    let backend: &dyn Backend = repo.backend().as_ref();
    let header = read_pack_header(backend, repo.sealer(), &p.id, p.size).map_err(|e| {
        if e.is_corruption() {
            bad(format!("its header cannot be read: {}", e.cause()))
        } else {
            e.into()
        }
    })?;
    if header.kind != p.kind {
        return Err(mismatch(format!(
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
                mismatch(format!(
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
    for r in coalesce(spans, gap, max_read) {
        let (at, _) = read_with_retry(backend, &p.id, r.offset, r.len, buf, stop)?;
        for s in &r.items {
            let (id, raw_len) = s.item;
            let start = at + (s.offset - r.offset) as usize;
            let Some(sealed) = buf.get_mut(start..start + s.len as usize) else {
                return Err(bad("a read came back short".into()));
            };
            // Copied first, then checked where it was read (which decrypts it there): its
            // pack is uploaded only once this and every other blob in it passed.
            let ticket = packer.append(p.kind, id, raw_len, sealed)?;
            authenticate_blob_in_place(repo.sealer(), p.kind, id, p.id, sealed)
                .map_err(|e| bad(e.cause()))?;
            packer.checked(ticket)?;
        }
    }
    Ok(())
}

/// The gap below which two ranges of a pack are read as one, the largest read, and the reads
/// in flight, as the restore's loader chooses them for this backend.
fn read_shape(repo: &Repository, stop: &AtomicBool) -> (u64, u64, usize) {
    let empty = Index::default();
    let l = TreeLoader::new(repo, &empty, stop);
    (l.read_gap, l.max_read, l.threads)
}

/// Reads and authenticates the kept copies of blobs whose other copy goes away
/// ([`PrunePlan::sole_copies`], or with `orphans` [`PrunePlan::orphan_copies`]), a pack at a
/// time: the index alone chose them, and a damaged one would leave the blob with no intact
/// copy. Fails, before anything is written or deleted, naming the damaged copy and the one
/// that would have gone.
fn verify_sole_copies(
    repo: &Repository,
    plan: &PrunePlan,
    copies: &[super::SoleCopy],
    orphans: bool,
    progress: &Progress,
) -> Result<(), PruneError> {
    if copies.is_empty() {
        return Ok(());
    }
    // The other copy: in an indexed pack, or (`orphans`) in one no index names.
    let other_id = |c: &super::SoleCopy| match orphans {
        true => plan.unreferenced[c.other as usize].0,
        false => plan.packs[c.other as usize].id,
    };
    let backend: &dyn Backend = repo.backend().as_ref();
    let stop = AtomicBool::new(false);
    let (gap, max_read, _) = read_shape(repo, &stop);
    let mut buf = vec![];
    for group in copies.chunk_by(|a, b| a.pack == b.pack) {
        progress.go_on()?;
        let p = &plan.packs[group[0].pack as usize];
        let damaged = |c: &super::SoleCopy, blob: Option<Id>, error: String| {
            let mut prefix = [0; 32];
            prefix[..16].copy_from_slice(&c.key);
            PruneError::DamagedCopy {
                pack: p.id,
                blob: blob.unwrap_or(Id(prefix)),
                other: other_id(c),
                error,
                other_indexed: !orphans,
            }
        };
        let header = match read_pack_header(backend, repo.sealer(), &p.id, p.size) {
            Ok(h) => h,
            Err(e) if e.is_corruption() => {
                let why = format!("unreadable: its pack's header is damaged: {}", e.cause());
                return Err(damaged(&group[0], None, why));
            }
            Err(e) => return Err(e.into()),
        };
        let mut spans = Vec::with_capacity(group.len());
        for c in group {
            let Some(e) = find_entry(&header, c.offset).filter(|e| e.id.prefix16() == c.key) else {
                let why = format!(
                    "missing: its pack's header has no blob at offset {}",
                    c.offset
                );
                return Err(damaged(c, None, why));
            };
            spans.push(Span {
                pack: c.pack,
                offset: u64::from(e.offset),
                len: u64::from(e.length),
                item: (c, e.id),
            });
        }
        for r in coalesce(spans, gap, max_read) {
            let (at, _) = read_with_retry(backend, &p.id, r.offset, r.len, &mut buf, &stop)?;
            for s in &r.items {
                let (c, id) = s.item;
                let start = at + (s.offset - r.offset) as usize;
                let sealed = buf.get(start..start + s.len as usize).unwrap_or_default();
                authenticate_blob(repo.sealer(), p.kind, id, p.id, sealed)
                    .map_err(|e| damaged(c, Some(id), e.blob_cause()))?;
            }
        }
    }
    Ok(())
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

/// Writes a new index: the packs of `extra` (new and adopted ones; the old files' entries for
/// adopted packs are left for these), then every pack that `stays` (by plan position) as the
/// index files `old_files` list it; [`INDEX_BLOBS`] blobs per file. Each old file is deleted
/// as soon as the files written name every pack of it that stays (and the packs of `extra`,
/// written first), and the file that completes it names it as superseded: the rewrite needs
/// room for one new file, not for the whole index, so a prune on a nearly full disk frees
/// space instead of failing. A file that does not fit (no space) is written again in
/// smaller files, down to [`MIN_INDEX_BLOBS`]. Whenever it stops, the index files there name
/// every pack that stays. Fails if an old index file cannot be read or names a pack the plan
/// does not know (nothing of it deleted), or a pack that stays is not found. Returns the
/// files written and the old ones deleted.
fn write_index(
    repo: &Repository,
    plan: &PrunePlan,
    old_files: &[Id],
    stays: &dyn Fn(usize) -> bool,
    extra: Vec<IndexPack>,
    progress: &Progress,
    report: &mut PruneReport,
) -> Result<(Vec<Id>, Vec<Id>), PruneError> {
    let pos: HashMap<Id, usize> = plan
        .packs
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id, i))
        .collect();
    let adopted: HashSet<Id> = plan.adopted.iter().map(|p| p.id).collect();
    let mut emitted = vec![false; plan.packs.len()];
    let mut w = IndexWriter {
        repo,
        progress,
        kept: extra,
        pending: vec![],
        limit: INDEX_BLOBS,
        written: vec![],
        deleted: vec![],
    };
    // The old files that name no pack that stays go first: deleted before anything is
    // written (or right after the new packs' entries), their room is what the rest needs. A
    // first reading tells them apart (each file is read twice, one at a time).
    let mut order: Vec<(bool, Id)> = Vec::with_capacity(old_files.len());
    for id in old_files {
        let file = repo.load_index_file(id)?;
        let any = file
            .packs
            .iter()
            .any(|p| pos.get(&p.id).is_some_and(|&i| stays(i)));
        order.push((any, *id));
    }
    order.sort_by_key(|(any, _)| *any);
    let mut first_staying = true;
    for (any, id) in &order {
        if *any && std::mem::replace(&mut first_staying, false) {
            while !w.kept.is_empty() && w.pending.iter().any(|(_, end)| *end > 0) {
                w.flush(report)?;
            }
        }
        let file = repo.load_index_file(id)?;
        for p in file.packs {
            let Some(&i) = pos.get(&p.id) else {
                if adopted.contains(&p.id) {
                    continue;
                }
                return Err(PruneError::Changed(format!(
                    "index file {id} names pack {} that was not planned for",
                    p.id
                )));
            };
            if !stays(i) || std::mem::replace(&mut emitted[i], true) {
                continue;
            }
            w.kept.push(p);
        }
        w.pending.push((*id, w.kept.len()));
        w.settle(report)?;
        while w.blobs() >= w.limit {
            w.flush(report)?;
        }
    }
    if let Some(p) = (0..plan.packs.len()).find(|&i| stays(i) && !emitted[i]) {
        return Err(PruneError::Changed(format!(
            "pack {} is no longer in the index",
            plan.packs[p].id
        )));
    }
    while !w.kept.is_empty() {
        w.flush(report)?;
    }
    // Nothing stays: one empty file replaces the old ones left.
    if w.written.is_empty() {
        w.flush(report)?;
    }
    w.settle(report)?;
    Ok((w.written, w.deleted))
}

/// The smallest index file [`write_index`] splits a file that does not fit into.
const MIN_INDEX_BLOBS: usize = 1_000;

/// The new index as [`write_index`] writes it.
struct IndexWriter<'a> {
    repo: &'a Repository,
    progress: &'a Progress,
    /// Index entries not written yet, in order.
    kept: Vec<IndexPack>,
    /// Old index files not deleted yet, each with how many of `kept` must be written before
    /// the files written name every pack of it that stays.
    pending: Vec<(Id, usize)>,
    /// Blobs per file: [`INDEX_BLOBS`], less after a file did not fit.
    limit: usize,
    written: Vec<Id>,
    deleted: Vec<Id>,
}

impl IndexWriter<'_> {
    fn blobs(&self) -> usize {
        self.kept.iter().map(|p| p.blobs.len()).sum()
    }

    /// Writes the first packs of `kept`, up to `limit` blobs (at least one pack), as one
    /// file naming the old files it completes, then deletes those. A file that does not fit
    /// is tried again smaller.
    fn flush(&mut self, report: &mut PruneReport) -> Result<(), PruneError> {
        loop {
            let mut n = 0;
            let mut blobs = 0;
            while n < self.kept.len() && (n == 0 || blobs + self.kept[n].blobs.len() <= self.limit)
            {
                blobs += self.kept[n].blobs.len();
                n += 1;
            }
            let f = IndexFile {
                supersedes: self
                    .pending
                    .iter()
                    .filter(|(_, end)| *end <= n)
                    .map(|(id, _)| *id)
                    .collect(),
                packs: self.kept[..n].to_vec(),
            };
            match self.repo.save_index(&f) {
                Ok(id) => {
                    self.written.push(id);
                    Progress::bump(&self.progress.index_files_written, 1);
                    self.kept.drain(..n);
                    for (_, end) in &mut self.pending {
                        *end = end.saturating_sub(n);
                    }
                    return self.settle(report);
                }
                Err(e) if is_no_space(&e) && n > 1 && self.limit > MIN_INDEX_BLOBS => {
                    self.limit = (self.limit / 4).max(MIN_INDEX_BLOBS);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Deletes the old files whose packs that stay the files written all name.
    fn settle(&mut self, report: &mut PruneReport) -> Result<(), PruneError> {
        let done: Vec<Id> = self
            .pending
            .iter()
            .filter(|(_, end)| *end == 0)
            .map(|(id, _)| *id)
            .collect();
        if done.is_empty() {
            return Ok(());
        }
        self.pending.retain(|(_, end)| *end > 0);
        let doomed: Vec<(FileType, Id, u64)> =
            done.iter().map(|id| (FileType::Index, *id, 0)).collect();
        Progress::bump(&self.progress.files_to_delete, doomed.len() as u64);
        delete(self.repo, &doomed, self.progress, report)?;
        self.deleted.extend(done);
        Ok(())
    }
}

/// Whether `e` says the repository's storage is full.
fn is_no_space(e: &arca_repo::RepoError) -> bool {
    matches!(e, arca_repo::RepoError::Backend(b) if b.kind == arca_backend::ErrorKind::NoSpace)
}

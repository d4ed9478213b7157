//! `check`: structural verification and, optionally, reading every pack or a part of them
//! (restic's `--read-data-subset`: a group `n/m` of the packs by the first byte of their id, a
//! random share `x%`, or random packs adding up to a size). Each kind of problem found comes
//! with the command that repairs it ([`Proposal`]).

mod damage;
mod packs;
mod repairs;
mod report;
mod subset;
#[cfg(test)]
mod tests;

pub use report::{Affected, CheckOptions, CheckReport, DamagedPack, Proposal, Repair};
pub use subset::{DataSubset, MAX_GROUPS};

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use arca_backend::{ErrorKind, FileType};
use arca_format::{BlobKind, Id, IndexFile, IndexPack, Snapshot, Tree};
use arca_repo::{Index, IndexBuilder, RepoError, Repository};

use damage::{Damage, affected_paths};
use packs::{read_all_packs, unindexed_packs};
use repairs::{Findings, count, proposals};

/// Checks the repository; with `opts.read_data`, reads every pack.
pub fn check(repo: &Repository, opts: CheckOptions) -> Result<CheckReport, RepoError> {
    check_with(repo, opts, None)
}

/// What check is doing, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckPhase {
    /// Loading the index files.
    Index,
    /// Comparing the indexed packs with the listing.
    Packs,
    /// Walking every snapshot's trees.
    Trees,
    /// Reading packs (`read_data` or a subset).
    ReadingData,
    /// Tracing damage to snapshots and paths.
    Tracing,
    /// Finished.
    Done,
}

/// Counters a progress display reads while check runs.
#[derive(Debug, Default)]
pub struct CheckProgress {
    phase: AtomicU8,
    /// Snapshots whose trees are to be walked.
    pub snapshots: AtomicU64,
    /// Snapshots whose trees were walked.
    pub snapshots_done: AtomicU64,
    /// Distinct trees checked.
    pub trees: AtomicU64,
    /// Packs to read.
    pub packs_to_read: AtomicU64,
    /// Packs read.
    pub packs_read: AtomicU64,
    /// Set to stop (see [`Self::with_cancel`]).
    cancelled: Arc<AtomicBool>,
}

impl CheckProgress {
    /// A progress whose check stops, with [`RepoError::Cancelled`], once `flag` is set
    /// (between trees and between packs read).
    pub fn with_cancel(flag: Arc<AtomicBool>) -> Self {
        Self {
            cancelled: flag,
            ..Self::default()
        }
    }

    fn go_on(&self) -> Result<(), RepoError> {
        if self.cancelled.load(Ordering::Relaxed) {
            Err(RepoError::Cancelled("check"))
        } else {
            Ok(())
        }
    }

    /// The current phase.
    pub fn phase(&self) -> CheckPhase {
        match self.phase.load(Ordering::Relaxed) {
            0 => CheckPhase::Index,
            1 => CheckPhase::Packs,
            2 => CheckPhase::Trees,
            3 => CheckPhase::ReadingData,
            4 => CheckPhase::Tracing,
            _ => CheckPhase::Done,
        }
    }

    fn set_phase(&self, p: CheckPhase) {
        self.phase.store(p as u8, Ordering::Relaxed);
    }
}

/// Checks the repository and reads the packs `subset` selects (all of them with
/// `opts.read_data` and no subset; none without either).
pub fn check_with(
    repo: &Repository,
    opts: CheckOptions,
    subset: Option<DataSubset>,
) -> Result<CheckReport, RepoError> {
    check_with_progress(repo, opts, subset, &CheckProgress::default())
}

/// [`check_with`], counting what is done in `progress`.
pub fn check_with_progress(
    repo: &Repository,
    opts: CheckOptions,
    subset: Option<DataSubset>,
    progress: &CheckProgress,
) -> Result<CheckReport, RepoError> {
    progress.set_phase(CheckPhase::Index);
    let mut rep = CheckReport::default();
    let mut found = Findings::default();
    check_key_files(repo, &mut rep)?;
    // Snapshots, read before the index: a backup running meanwhile writes its index files
    // before its snapshot, so every snapshot seen here has its blobs in the index loaded next
    // (read after the index, a snapshot just written named trees that index lacked).
    let mut snapshots: Vec<(Id, Snapshot)> = vec![];
    for (id, _) in repo.list_ids(FileType::Snapshot)? {
        match repo.load_snapshot(&id) {
            Ok(s) => snapshots.push((id, s)),
            // Not damage: nothing is known of it (repair snapshots would refuse anyway).
            Err(RepoError::Backend(b)) if unreadable(&b) => rep.errors.push(format!(
                "snapshot {}: not verified, it could not be read ({b}); run check again once \
                 the repository can be read",
                id.short()
            )),
            // The error names the snapshot file, and says to upgrade arca.
            Err(e) if e.is_newer_format() => {
                found.newer += 1;
                rep.errors.push(e.to_string());
            }
            Err(e) => {
                found.damaged_snapshot_files += 1;
                // The error names the snapshot file.
                rep.errors.push(e.to_string());
            }
        }
    }
    // Index files.
    let mut builder = IndexBuilder::new();
    let mut index_files: Vec<(Id, IndexFile)> = vec![];
    for (id, f) in repo.load_index_files()? {
        match f {
            Ok(f) => {
                builder.add(&f);
                index_files.push((id, f));
            }
            Err(RepoError::Backend(b)) if unreadable(&b) => {
                found.unreadable_index_files += 1;
                rep.errors.push(format!(
                    "index {id}: not verified, it could not be read ({b}); the blobs it lists \
                     look missing below"
                ));
            }
            Err(e) => {
                if e.is_newer_format() {
                    found.newer += 1;
                } else {
                    found.damaged_index_files += 1;
                }
                // Errors reading the file name it already.
                let e = e.to_string();
                rep.errors.push(if e.contains(&id.to_hex()) {
                    e
                } else {
                    format!("index {id}: {e}")
                });
            }
        }
    }
    let index = builder.finish();
    // Packs: existence and size.
    progress.set_phase(CheckPhase::Packs);
    let on_disk: HashMap<Id, u64> = repo.list_ids(FileType::Pack)?.into_iter().collect();
    let mut dmg = Damage::default();
    // Each pack once, even when several index files list it.
    let mut indexed: HashSet<Id> = HashSet::new();
    let packs: Vec<&IndexPack> = index_files
        .iter()
        .flat_map(|(_, f)| &f.packs)
        .filter(|p| indexed.insert(p.id))
        .collect();
    // The packs whose data is read.
    let to_read: Option<HashSet<Id>> = match subset {
        Some(sub) => {
            let all: Vec<(Id, u64)> = packs.iter().map(|p| (p.id, p.size)).collect();
            Some(sub.select(&all))
        }
        None if opts.read_data => Some(packs.iter().map(|p| p.id).collect()),
        None => None,
    };
    // Packs of the wrong size that are read all the same: which of their blobs are damaged
    // is known only from their bytes (a few bytes appended damage none).
    let mut sized_but_read: HashSet<Id> = HashSet::new();
    for p in &packs {
        let blobs = || p.blobs.iter().map(|b| (p.kind, b.id));
        match on_disk.get(&p.id) {
            None => found.missing_packs += 1,
            Some(&size) if size != p.size => found.damaged_packs.push(p.id),
            Some(_) => {}
        }
        let read = to_read.as_ref().is_some_and(|r| r.contains(&p.id));
        match on_disk.get(&p.id) {
            None => dmg.mark(
                &mut rep,
                &p.id,
                "missing (listed in an index)".into(),
                &mut blobs(),
            ),
            Some(&size) if size != p.size => {
                if read {
                    sized_but_read.insert(p.id);
                }
                dmg.mark(
                    &mut rep,
                    &p.id,
                    format!(
                        "size is {size} bytes, index says {} ({})",
                        p.size,
                        if size < p.size {
                            "truncated or damaged"
                        } else {
                            "grown or damaged"
                        }
                    ),
                    &mut blobs().filter(|_| !read),
                );
            }
            Some(_) => {}
        }
    }
    rep.packs = packs.len();
    // Snapshots and trees.
    rep.snapshots = snapshots.len();
    progress.set_phase(CheckPhase::Trees);
    progress
        .snapshots
        .store(snapshots.len() as u64, Ordering::Relaxed);
    let mut seen_trees: HashSet<Id> = HashSet::new();
    let mut used_data: HashSet<[u8; 16]> = HashSet::new();
    let mut missing_blobs: HashSet<(BlobKind, Id)> = HashSet::new();
    // Some listing gives a data blob a length it does not have.
    let mut wrong_lengths = false;
    for (sid, s) in &snapshots {
        let mut stack = vec![s.tree];
        while let Some(tid) = stack.pop() {
            progress.go_on()?;
            if !seen_trees.insert(tid) {
                continue;
            }
            progress.trees.fetch_add(1, Ordering::Relaxed);
            let tree = match load_tree_checked(repo, &index, &tid) {
                Ok(t) => t,
                // The server did not answer, or access was denied: nothing is known of the
                // tree, and nothing may be called lost (no repair is proposed for it).
                Err(RepoError::Backend(b)) if unreadable(&b) => {
                    rep.errors.push(format!(
                        "snapshot {}: tree {tid}: not verified, it could not be read ({b}); \
                         run check again once the repository can be read",
                        sid.short()
                    ));
                    continue;
                }
                // A newer arca's tree: nothing is lost, and its subtrees and data are unknown.
                Err(e) if e.is_newer_format() => {
                    found.newer += 1;
                    rep.errors.push(format!(
                        "snapshot {}: tree {tid}: {}",
                        sid.short(),
                        e.blob_cause()
                    ));
                    continue;
                }
                Err(e) => {
                    rep.errors.push(format!(
                        "snapshot {}: tree {tid}: {}",
                        sid.short(),
                        e.blob_cause()
                    ));
                    // Its stored bytes are damaged: its pack needs `repair packs`, or the
                    // damaged blob stays indexed and the next backup refers to it again
                    // (only `repair snapshots` was proposed: hunt H16).
                    if e.is_corruption() && !matches!(e, RepoError::Format { .. }) {
                        for loc in index.locations(BlobKind::Tree, &tid) {
                            let pack = loc.pack.id;
                            if !found.damaged_packs.contains(&pack) {
                                found.damaged_packs.push(pack);
                            }
                            dmg.mark(
                                &mut rep,
                                &pack,
                                format!("tree {tid} is damaged"),
                                &mut std::iter::once((BlobKind::Tree, tid)),
                            );
                        }
                    }
                    missing_blobs.insert((BlobKind::Tree, tid));
                    continue;
                }
            };
            for n in &tree.nodes {
                if let Some(sub) = n.subtree {
                    stack.push(sub);
                }
                for c in &n.content {
                    used_data.insert(c.id.prefix16());
                    match index.get(BlobKind::Data, &c.id) {
                        None if missing_blobs.insert((BlobKind::Data, c.id)) => {
                            rep.errors
                                .push(format!("data blob {} is not in the index", c.id));
                        }
                        None => {}
                        // A restore would place the blob's bytes shifted, cut or padded.
                        Some(loc) if loc.raw_length != c.len => {
                            wrong_lengths = true;
                            rep.errors.push(format!(
                                "snapshot {}: tree {tid}: file {:?}: the listing gives data \
                                 blob {} {} bytes, but it holds {} (damaged listing)",
                                sid.short(),
                                String::from_utf8_lossy(&n.name),
                                c.id,
                                c.len,
                                loc.raw_length
                            ));
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        progress.snapshots_done.fetch_add(1, Ordering::Relaxed);
    }
    rep.trees = seen_trees.len();
    unindexed_packs(
        repo,
        &on_disk,
        &indexed,
        &missing_blobs,
        &mut found,
        &mut rep,
    );
    // Data no snapshot uses (counted only when every snapshot and tree could be read: else
    // "unused" would include what the unreadable parts use).
    if rep.errors.is_empty() {
        for p in &packs {
            for b in &p.blobs {
                let used = match p.kind {
                    BlobKind::Data => used_data.contains(&b.id.prefix16()),
                    BlobKind::Tree => seen_trees.contains(&b.id),
                };
                if !used {
                    found.unused_blobs += 1;
                    found.unused_bytes += u64::from(b.length);
                }
            }
        }
    }
    drop(used_data);
    // Data.
    if let Some(to_read) = to_read {
        let chosen: Vec<&IndexPack> = packs
            .iter()
            .copied()
            .filter(|p| to_read.contains(&p.id))
            .collect();
        progress.set_phase(CheckPhase::ReadingData);
        progress
            .packs_to_read
            .store(chosen.len() as u64, Ordering::Relaxed);
        let skip: HashSet<Id> = dmg
            .packs
            .keys()
            .filter(|id| !sized_but_read.contains(id))
            .copied()
            .collect();
        let (results, skipped) =
            read_all_packs(repo, &chosen, &on_disk, &skip, opts.workers, progress);
        progress.go_on()?;
        rep.packs_read = results.len();
        if skipped > 0 {
            rep.errors.push(format!(
                "{skipped} more packs not verified: reading stopped once the repository could \
                 not be read; run check again when it can"
            ));
        }
        for r in results {
            if let Some(why) = &r.unreadable {
                rep.errors.push(format!(
                    "pack {}: not verified, it could not be read ({why}); run check again \
                     once the repository can be read (this says nothing of its data)",
                    r.id
                ));
                continue;
            }
            rep.blobs_read += r.blobs;
            rep.bytes_read += r.bytes;
            if let Some(why) = &r.newer {
                found.newer += 1;
                rep.errors.push(format!("pack {}: {why}", r.id));
            }
            if r.damaged {
                if !found.damaged_packs.contains(&r.id) {
                    found.damaged_packs.push(r.id);
                }
            } else if !r.problems.is_empty() {
                // The pack is intact but its header is not what the index says: a new index
                // from the pack headers fixes that.
                found.mismatched_packs += 1;
            }
            for (problem, blobs) in r.problems {
                dmg.mark(&mut rep, &r.id, problem, &mut blobs.into_iter());
            }
        }
    }
    // Which snapshots and files are hit.
    progress.set_phase(CheckPhase::Tracing);
    // A blob is lost when none of its copies can be had: one stored twice (`backup --cap`,
    // two backups of the same new data at once) and damaged in one pack only is not, and
    // readers take the intact copy.
    let bad: HashSet<(BlobKind, Id)> = dmg
        .blobs
        .iter()
        .filter(|(kind, id)| {
            index
                .locations(*kind, id)
                .all(|l| dmg.in_pack.contains(&(l.pack.id, *kind, *id)))
        })
        .chain(&missing_blobs)
        .copied()
        .collect();
    if !bad.is_empty() || wrong_lengths {
        for (sid, s) in &snapshots {
            let mut paths = vec![];
            affected_paths(repo, &index, &s.tree, Path::new("/"), &bad, &mut paths);
            if !paths.is_empty() {
                rep.affected.push(Affected {
                    snapshot: *sid,
                    paths,
                });
            }
        }
    }
    rep.damaged_packs = dmg.packs.into_values().collect();
    rep.damaged_packs.sort_by_key(|d| d.id);
    if found.unreadable_index_files > 0 {
        // What looks lost may be listed by the files that could not be read.
        rep.affected.clear();
        rep.errors.push(format!(
            "{} could not be read: run check again once the repository can be read (no \
             repair is proposed on what it found)",
            count(found.unreadable_index_files as u64, "index file")
        ));
        rep.repairs = vec![];
    } else if found.newer > 0 {
        // What looks lost or damaged may be what the newer files use or hold.
        rep.affected.clear();
        rep.errors.push(format!(
            "{} made by a newer arca: upgrade arca to check this repository (no repair is \
             proposed: one would delete or rewrite them)",
            count(found.newer as u64, "file or blob")
        ));
        rep.repairs = vec![];
    } else {
        rep.repairs = proposals(&found, &rep);
    }
    progress.set_phase(CheckPhase::Done);
    Ok(rep)
}

/// Key files whose content does not hash to their name: a damaged key reads as a wrong
/// password, so it is found here while another key still opens the repository.
fn check_key_files(repo: &Repository, rep: &mut CheckReport) -> Result<(), RepoError> {
    for (id, _) in repo.list_ids(FileType::Key)? {
        let hex = id.to_hex();
        match repo.backend().read(FileType::Key, &hex) {
            Ok(b) if Id(*blake3::hash(&b).as_bytes()) == id => {}
            // It opened the repository: intact, under another name (a renamed file).
            Ok(_) if id == repo.key_id() && repo.key_misnamed() => rep.errors.push(format!(
                "key file {hex}: content does not match its id (renamed?): it is the key in \
                 use and opens the repository; add a key with `arca key add`, then remove this \
                 one with `arca key remove {}` using the new key's password",
                id.short()
            )),
            Ok(_) => rep.errors.push(format!(
                "key file {hex}: content does not match its id (damaged, or renamed): if its \
                 password still opens the repository, add a key with `arca key add` using it, \
                 then remove this one with `arca key remove {}`; if not, put back a copy of \
                 the file, or remove it",
                id.short()
            )),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Whether a backend error says nothing of the file's content: it could not be read (denied,
/// an I/O error, no answer), rather than missing or cut short.
fn unreadable(b: &arca_backend::BackendError) -> bool {
    !matches!(b.kind, ErrorKind::NotFound | ErrorKind::ShortRead)
}

fn load_tree_checked(repo: &Repository, index: &Index, id: &Id) -> Result<Tree, RepoError> {
    if !index.contains(BlobKind::Tree, id) {
        return Err(RepoError::BlobNotFound {
            kind: BlobKind::Tree,
            id: *id,
        });
    }
    repo.load_tree(index, id)
}

//! `check`: structural verification and, optionally, reading every pack or a part of them
//! (restic's `--read-data-subset`: a group `n/m` of the packs by the first byte of their id, a
//! random share `x%`, or random packs adding up to a size). Each kind of problem found comes
//! with the command that repairs it ([`Proposal`]).

mod subset;
#[cfg(test)]
mod tests;

pub use subset::{DataSubset, MAX_GROUPS};

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arca_backend::{ErrorKind, FileType};
use arca_format::{BlobKind, Id, IndexFile, IndexPack, Snapshot, Tree};
use arca_repo::pack::pack_header_from_bytes;
use arca_repo::{Index, IndexBuilder, RepoError, Repository};

/// What to check.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    /// Read, decrypt and verify every blob of every pack.
    pub read_data: bool,
    /// Threads reading packs (0 = one per core).
    pub workers: usize,
}

/// A command that repairs a kind of problem `check` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Repair {
    /// `arca repair index`: damaged index files, indexed packs that are missing, packs no
    /// index names, intact packs whose header does not match their index entries (with
    /// `--read-all-packs`).
    Index,
    /// `arca repair packs ID...`: packs whose bytes are damaged (a damaged header or blob,
    /// cut short): the blobs that verify are copied into new packs, the rest leave the index.
    Packs,
    /// `arca repair snapshots --forget`: snapshots that reference lost trees or blobs, and
    /// snapshot files that are damaged.
    Snapshots,
    /// `arca prune`: data no snapshot uses.
    Prune,
}

impl Repair {
    /// The command to run (without the arguments a [`Proposal`] adds).
    pub fn command(self) -> &'static str {
        match self {
            Repair::Index => "arca repair index",
            Repair::Packs => "arca repair packs",
            Repair::Snapshots => "arca repair snapshots --forget",
            Repair::Prune => "arca prune",
        }
    }
}

/// A repair `check` proposes, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// What to run.
    pub repair: Repair,
    /// Its arguments (the packs for [`Repair::Packs`]).
    pub args: Vec<String>,
    /// What it repairs.
    pub reason: String,
}

impl Proposal {
    /// The whole command line to run.
    pub fn command_line(&self) -> String {
        std::iter::once(self.repair.command())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A pack with problems.
#[derive(Debug, Clone)]
pub struct DamagedPack {
    /// Pack id.
    pub id: Id,
    /// What is wrong with it.
    pub problems: Vec<String>,
    /// Blobs that cannot be read from it.
    pub bad_blobs: Vec<Id>,
}

/// A snapshot whose content is damaged.
#[derive(Debug, Clone)]
pub struct Affected {
    /// Snapshot id.
    pub snapshot: Id,
    /// Paths in the snapshot that cannot be restored intact.
    pub paths: Vec<PathBuf>,
}

/// The result of a check.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// Errors: damage or inconsistencies.
    pub errors: Vec<String>,
    /// Notes that are not damage (e.g. packs no index names yet).
    pub notes: Vec<String>,
    /// Snapshots checked.
    pub snapshots: usize,
    /// Distinct trees checked.
    pub trees: usize,
    /// Packs checked.
    pub packs: usize,
    /// Blobs verified by reading (with `read_data`).
    pub blobs_read: u64,
    /// Bytes read from packs (with `read_data`).
    pub bytes_read: u64,
    /// Damaged or missing packs.
    pub damaged_packs: Vec<DamagedPack>,
    /// Snapshots and paths hit by damage.
    pub affected: Vec<Affected>,
    /// Packs read in full (with `read_data` or a [`DataSubset`]).
    pub packs_read: usize,
    /// The repairs to run, in order (at most one of each kind).
    pub repairs: Vec<Proposal>,
}

impl CheckReport {
    /// Whether no damage was found.
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// What was found, by kind of repair, to word the proposals.
#[derive(Default)]
struct Findings {
    damaged_index_files: usize,
    missing_packs: usize,
    /// Intact packs whose header does not match their index entries.
    mismatched_packs: usize,
    unindexed_packs: usize,
    damaged_packs: Vec<Id>,
    damaged_snapshot_files: usize,
    /// Index files that could not be read (permissions, an I/O error): the blobs they list
    /// look missing, and no repair may be proposed on that.
    unreadable_index_files: usize,
    unused_blobs: u64,
    unused_bytes: u64,
    /// Files and blobs made by a newer arca: refused, but not damage; no repair is
    /// proposed while there are any (one would delete or rewrite them).
    newer: usize,
}

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
                        "size is {size} bytes, index says {} (truncated or damaged)",
                        p.size
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
                "key file {hex}: content does not match its id (damaged): its password no \
                 longer opens the repository; put back a copy of the file, or remove it with \
                 `arca key remove {}`",
                id.short()
            )),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Packs no intact index names: their headers are read to tell what they are. One that holds
/// blobs the snapshots miss is for `repair index`; one left by an interrupted backup is
/// harmless (the next backup adopts it, prune deletes it); one whose header cannot be read
/// cannot be indexed, so `repair index` is not proposed for it: prune deletes it, and what
/// the snapshots needed from it is reported as missing.
fn unindexed_packs(
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
            rep.notes.push(format!(
                "pack {} is in no index and its header cannot be read ({}): nothing in it can \
                 be used, and `arca prune` deletes it",
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

/// `1 pack`, `2 packs`.
fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Whether a backend error says nothing of the file's content: it could not be read (denied,
/// an I/O error, no answer), rather than missing or cut short.
fn unreadable(b: &arca_backend::BackendError) -> bool {
    !matches!(b.kind, ErrorKind::NotFound | ErrorKind::ShortRead)
}

/// The repairs for what was found, in the order to run them.
fn proposals(f: &Findings, rep: &CheckReport) -> Vec<Proposal> {
    let mut out = vec![];
    let mut why = vec![];
    if f.damaged_index_files > 0 {
        why.push(format!(
            "{} damaged",
            count(f.damaged_index_files as u64, "index file")
        ));
    }
    if f.missing_packs > 0 {
        why.push(format!(
            "{} named by the index missing",
            count(f.missing_packs as u64, "pack")
        ));
    }
    if f.mismatched_packs > 0 {
        why.push(format!(
            "{} not matching the index",
            count(f.mismatched_packs as u64, "intact pack")
        ));
    }
    if f.unindexed_packs > 0 {
        why.push(format!(
            "{} in no index (the next backup adopts those too)",
            count(f.unindexed_packs as u64, "pack")
        ));
    }
    let index = !why.is_empty();
    if index {
        out.push(Proposal {
            repair: Repair::Index,
            args: if f.mismatched_packs > 0 {
                vec!["--read-all-packs".into()]
            } else {
                vec![]
            },
            reason: why.join("; "),
        });
    }
    if !f.damaged_packs.is_empty() {
        let mut ids: Vec<String> = f.damaged_packs.iter().map(Id::to_hex).collect();
        ids.sort();
        out.push(Proposal {
            repair: Repair::Packs,
            reason: format!(
                "{} with damaged bytes: the blobs that verify are kept",
                count(ids.len() as u64, "pack")
            ),
            args: ids,
        });
    }
    let mut why = vec![];
    if !rep.affected.is_empty() {
        why.push(format!(
            "{} referencing lost or damaged data",
            count(rep.affected.len() as u64, "snapshot")
        ));
    }
    if f.damaged_snapshot_files > 0 {
        why.push(format!(
            "{} damaged",
            count(f.damaged_snapshot_files as u64, "snapshot file")
        ));
    }
    if !why.is_empty() {
        let mut reason = why.join("; ");
        if !f.damaged_packs.is_empty() {
            reason.push_str(
                "; run the `repair packs` above first and check again: it keeps every blob \
                 of the damaged packs that still verifies",
            );
        } else if index {
            reason.push_str(
                "; repair the index first and check again: data the index lacked may be \
                 found again",
            );
        }
        if f.damaged_snapshot_files > 0 {
            // Their listings are still there until a prune: `recover` keeps them.
            reason.push_str(
                "; then run `arca recover` before the next prune: it saves, as a snapshot, \
                 the listings the removed snapshot files led to",
            );
        }
        out.push(Proposal {
            repair: Repair::Snapshots,
            args: vec![],
            reason,
        });
    }
    if f.unused_blobs > 0 {
        out.push(Proposal {
            repair: Repair::Prune,
            args: vec![],
            reason: format!(
                "{} ({} bytes in packs) used by no snapshot",
                count(f.unused_blobs, "blob"),
                f.unused_bytes
            ),
        });
    }
    out
}

#[derive(Default)]
struct Damage {
    packs: HashMap<Id, DamagedPack>,
    blobs: HashSet<(BlobKind, Id)>,
    /// Each damaged blob with the pack it is damaged in (a blob stored twice may be damaged
    /// in one pack only).
    in_pack: HashSet<(Id, BlobKind, Id)>,
}

impl Damage {
    fn mark(
        &mut self,
        rep: &mut CheckReport,
        pack: &Id,
        problem: String,
        blobs: &mut dyn Iterator<Item = (BlobKind, Id)>,
    ) {
        rep.errors.push(format!("pack {pack}: {problem}"));
        let d = self.packs.entry(*pack).or_insert_with(|| DamagedPack {
            id: *pack,
            problems: vec![],
            bad_blobs: vec![],
        });
        d.problems.push(problem);
        for b in blobs {
            self.blobs.insert(b);
            if self.in_pack.insert((*pack, b.0, b.1)) {
                d.bad_blobs.push(b.1);
            }
        }
    }
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

fn affected_paths(
    repo: &Repository,
    index: &Index,
    tree: &Id,
    dir: &Path,
    bad: &HashSet<(BlobKind, Id)>,
    out: &mut Vec<PathBuf>,
) {
    if bad.contains(&(BlobKind::Tree, *tree)) {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(t) = repo.load_tree(index, tree) else {
        out.push(dir.to_path_buf());
        return;
    };
    for n in &t.nodes {
        let p = dir.join(OsStr::from_bytes(&n.name));
        if let Some(sub) = n.subtree {
            affected_paths(repo, index, &sub, &p, bad, out);
        } else if n.content.iter().any(|c| {
            bad.contains(&(BlobKind::Data, c.id))
                || index
                    .get(BlobKind::Data, &c.id)
                    .is_some_and(|l| l.raw_length != c.len)
        }) {
            out.push(p);
        }
    }
}

struct PackResult {
    id: Id,
    blobs: u64,
    bytes: u64,
    problems: Vec<(String, Vec<(BlobKind, Id)>)>,
    /// Its bytes are damaged (not only its index entries wrong).
    damaged: bool,
    /// It could not be read for a reason that says nothing of its bytes (the server
    /// unreachable, a network failure that outlasted the retries, access denied): why.
    unreadable: Option<String>,
    /// That reason was an outage (a transient failure that outlasted the retries): the other
    /// packs would only wait it out one after another.
    outage: bool,
    /// A blob or its header was made by a newer arca (not damage): why.
    newer: Option<String>,
}

fn read_all_packs(
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
    /// It reads, and lists other blobs than the index.
    Mismatch,
}

fn header_matches(repo: &Repository, p: &IndexPack, bytes: &[u8]) -> Result<(), HeaderProblem> {
    // The pack is named by the caller.
    let h = pack_header_from_bytes(repo.sealer(), &p.id, bytes)
        .map_err(|e| HeaderProblem::Damaged(e.cause()))?;
    if h.kind != p.kind || h.entries != p.blobs {
        return Err(HeaderProblem::Mismatch);
    }
    Ok(())
}

//! Repairs, as restic's `repair index` and `repair snapshots`.
//!
//! * [`repair_index`] rebuilds the index from the packs themselves: every pack carries a
//!   sealed header listing its blobs, so the index can always be recomputed. Packs that an
//!   intact index file already describes (same size on the backend) keep their entries unless
//!   `read_all_packs` is set; every other pack's header is read. New index files are written
//!   first, then every old one (damaged or not) is deleted, so a crash in between leaves a
//!   repository whose index names each pack at least once. A pack whose header cannot be read
//!   is reported and left alone; a pack the backend cannot read for another reason (a failing
//!   connection) stops the repair before anything is written.
//! * [`repair_snapshots`] rewrites snapshots that reference lost data: a directory whose
//!   listing is lost becomes an empty directory, a file whose content lost a blob is truncated
//!   before the first lost blob. The new trees are written (packs, then an index file), then a
//!   new snapshot per damaged one, with the same metadata and the tag [`REPAIRED_TAG`]; with
//!   `forget`, the originals are deleted last. A blob counts as lost when no index entry names
//!   it in a pack the backend holds at the indexed size, or (for trees) when it cannot be read
//!   and decoded. It refuses to run while an index file is damaged (`repair index` first:
//!   otherwise intact data would be cut away), and first indexes packs no index names (as a
//!   backup does), so their blobs are not taken for lost.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexFile, IndexPack, NodeKind, Snapshot, Tree};
use arca_repo::blob::seal_blob;
use arca_repo::pack::PackWriter;
use arca_repo::recover::{UnreadablePack, scan_headers};
use arca_repo::{Index, IndexBuilder, RepoError, Repository};

/// Most packs one new index file names (a few MB of index per file at most).
pub const PACKS_PER_INDEX_FILE: usize = 2000;

/// The tag every snapshot written by [`repair_snapshots`] carries.
pub const REPAIRED_TAG: &str = "repaired";

/// Options of [`repair_index`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RepairIndexOptions {
    /// Read the header of every pack, even of those an intact index file describes.
    pub read_all_packs: bool,
    /// Compute and report, write and delete nothing.
    pub dry_run: bool,
}

/// What [`repair_index`] did (or would do, in a dry run).
#[derive(Debug, Default)]
pub struct RepairIndexReport {
    /// Index files found.
    pub old_index_files: usize,
    /// Index files that could not be used (damaged or unreadable), and why.
    pub damaged_index_files: Vec<(Id, String)>,
    /// Packs on the backend.
    pub packs_found: usize,
    /// Packs whose entries were taken from an intact index file.
    pub packs_from_index: usize,
    /// Packs whose header was read.
    pub headers_read: usize,
    /// Packs named by the new index.
    pub packs_indexed: usize,
    /// Blobs named by the new index.
    pub blobs_indexed: u64,
    /// Packs left out because their header cannot be read (left on the backend).
    pub unreadable: Vec<UnreadablePack>,
    /// Packs an old index file named that the backend no longer holds.
    pub missing_packs: Vec<Id>,
    /// Index files written.
    pub written: Vec<Id>,
    /// Old index files deleted.
    pub deleted: Vec<Id>,
}

/// Rebuilds the index from the pack headers (see the module documentation). Call it with the
/// repository locked exclusively.
pub fn repair_index(
    repo: &Repository,
    opts: RepairIndexOptions,
) -> Result<RepairIndexReport, RepoError> {
    let mut rep = RepairIndexReport::default();
    let old = repo.load_index_files()?;
    rep.old_index_files = old.len();
    let on_disk = repo.list_ids(FileType::Pack)?;
    rep.packs_found = on_disk.len();
    let sizes: HashMap<Id, u64> = on_disk.iter().copied().collect();

    // Entries of intact index files whose pack is on the backend at the indexed size.
    let mut known: HashMap<Id, IndexPack> = HashMap::new();
    let mut missing: HashSet<Id> = HashSet::new();
    for (id, f) in &old {
        let f = match f {
            Ok(f) => f,
            Err(e) => {
                rep.damaged_index_files.push((*id, e.to_string()));
                continue;
            }
        };
        for p in &f.packs {
            match sizes.get(&p.id) {
                None => {
                    missing.insert(p.id);
                }
                Some(&size) if size == p.size && !opts.read_all_packs => {
                    known.entry(p.id).or_insert_with(|| p.clone());
                }
                Some(_) => {}
            }
        }
    }
    rep.missing_packs = missing.into_iter().collect();
    rep.missing_packs.sort();
    rep.packs_from_index = known.len();

    let to_read: Vec<(Id, u64)> = on_disk
        .iter()
        .filter(|(id, _)| !known.contains_key(id))
        .copied()
        .collect();
    rep.headers_read = to_read.len();
    let scan = scan_headers(repo, &to_read);
    if let Some(u) = scan.unreadable.iter().find(|u| !u.damaged) {
        return Err(RepoError::Invalid {
            what: "repair",
            detail: format!(
                "cannot read pack {} ({}); nothing was changed, try again",
                u.id, u.error
            ),
        });
    }
    rep.unreadable = scan.unreadable;

    let mut packs: Vec<IndexPack> = known.into_values().chain(scan.packs).collect();
    packs.sort_by_key(|p| p.id);
    rep.packs_indexed = packs.len();
    rep.blobs_indexed = packs.iter().map(|p| p.blobs.len() as u64).sum();
    if opts.dry_run {
        return Ok(rep);
    }

    // New files first, then the old ones go: at no moment is a readable pack unindexed.
    let old_ids: Vec<Id> = old.iter().map(|(id, _)| *id).collect();
    let mut first = true;
    for chunk in packs.chunks(PACKS_PER_INDEX_FILE) {
        let file = IndexFile {
            supersedes: if first { old_ids.clone() } else { vec![] },
            packs: chunk.to_vec(),
        };
        first = false;
        rep.written.push(repo.save_index(&file)?);
    }
    let written: HashSet<Id> = rep.written.iter().copied().collect();
    for id in old_ids.iter().filter(|id| !written.contains(id)) {
        match repo.backend().delete(FileType::Index, &id.to_hex()) {
            Ok(()) => rep.deleted.push(*id),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(rep)
}

/// Options of [`repair_snapshots`].
#[derive(Debug, Clone, Default)]
pub struct RepairSnapshotsOptions {
    /// Delete the damaged originals once their repaired copies are saved (and snapshot files
    /// that are themselves damaged, and snapshots whose root listing is lost).
    pub forget: bool,
    /// Compute and report, write and delete nothing.
    pub dry_run: bool,
    /// Only these snapshots (empty: all).
    pub snapshots: Vec<Id>,
}

/// How a path of a snapshot was repaired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loss {
    /// A directory whose listing is lost: replaced by an empty directory.
    DirectoryEmptied {
        /// Why the listing could not be used.
        reason: String,
    },
    /// A file that lost a content blob: cut before it.
    FileTruncated {
        /// Size before.
        size: u64,
        /// Size kept.
        kept: u64,
        /// The first lost blob.
        lost_blob: Id,
    },
}

/// One repaired path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Path in the snapshot (absolute, `/` being the snapshot's root).
    pub path: PathBuf,
    /// What was done.
    pub loss: Loss,
}

/// A damaged snapshot and what became of it.
#[derive(Debug, Clone, Default)]
pub struct RepairedSnapshot {
    /// The original snapshot.
    pub original: Id,
    /// The repaired copy saved (`None` in a dry run, or when nothing could be salvaged).
    pub repaired: Option<Id>,
    /// What was cut, by path.
    pub changes: Vec<Change>,
    /// Set when the snapshot's root listing is lost: nothing can be salvaged.
    pub root_lost: Option<String>,
    /// Whether the original was deleted.
    pub forgotten: bool,
}

/// What [`repair_snapshots`] did (or would do, in a dry run).
#[derive(Debug, Default)]
pub struct RepairSnapshotsReport {
    /// Snapshots examined.
    pub snapshots: usize,
    /// The damaged ones, oldest first.
    pub damaged: Vec<RepairedSnapshot>,
    /// Snapshot files that are themselves damaged, and why.
    pub damaged_files: Vec<(Id, String)>,
    /// Damaged snapshot files deleted (with `forget`).
    pub damaged_files_deleted: usize,
    /// Packs no index named whose headers were read and indexed first.
    pub adopted_packs: usize,
    /// New tree blobs written.
    pub trees_written: usize,
    /// New packs written.
    pub packs_written: usize,
    /// The index file naming them.
    pub index_file: Option<Id>,
}

/// Rewrites the snapshots that reference lost data (see the module documentation). Call it
/// with the repository locked exclusively.
pub fn repair_snapshots(
    repo: &Repository,
    opts: &RepairSnapshotsOptions,
) -> Result<RepairSnapshotsReport, RepoError> {
    let mut rep = RepairSnapshotsReport::default();
    let (index, bad_packs) = usable_index(repo, opts.dry_run, &mut rep)?;

    // Snapshots to examine, oldest first.
    let ids: Vec<Id> = if opts.snapshots.is_empty() {
        repo.list_ids(FileType::Snapshot)?
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    } else {
        opts.snapshots.clone()
    };
    let mut snapshots = vec![];
    for id in ids {
        match repo.load_snapshot(&id) {
            Ok(s) => snapshots.push((id, s)),
            Err(e) if e.is_corruption() => rep.damaged_files.push((id, e.to_string())),
            Err(e) => return Err(e),
        }
    }
    snapshots.sort_by(|a, b| a.1.time.cmp(&b.1.time).then(a.0.cmp(&b.0)));
    rep.snapshots = snapshots.len();

    // Walk every snapshot; new trees go to packs as they fill, the index file and the
    // snapshots only once every snapshot is walked.
    let mut w = Rewriter {
        repo,
        index: &index,
        bad_packs: &bad_packs,
        memo: HashMap::new(),
        stored: HashSet::new(),
        pack: None,
        packs: vec![],
        dry_run: opts.dry_run,
        trees_written: 0,
    };
    let mut planned: Vec<(usize, Snapshot)> = vec![];
    for (id, s) in &snapshots {
        match w.rewrite(s.tree)? {
            Ok(r) if r.id == s.tree => {}
            Ok(r) => {
                let mut changes: Vec<Change> = r
                    .changes
                    .iter()
                    .map(|(p, loss)| Change {
                        path: PathBuf::from("/").join(p),
                        loss: loss.clone(),
                    })
                    .collect();
                changes.sort_by(|a, b| a.path.cmp(&b.path));
                let mut new = s.clone();
                new.tree = r.id;
                if !new.tags.iter().any(|t| t == REPAIRED_TAG) {
                    new.tags.push(REPAIRED_TAG.to_string());
                }
                planned.push((rep.damaged.len(), new));
                rep.damaged.push(RepairedSnapshot {
                    original: *id,
                    changes,
                    ..RepairedSnapshot::default()
                });
            }
            Err(why) => rep.damaged.push(RepairedSnapshot {
                original: *id,
                root_lost: Some(why),
                ..RepairedSnapshot::default()
            }),
        }
    }
    w.flush()?;
    rep.trees_written = w.trees_written;
    rep.packs_written = w.packs.len();
    if opts.dry_run {
        return Ok(rep);
    }

    // Write order: packs (done), the index naming them, the snapshots, then deletions.
    if !w.packs.is_empty() {
        rep.index_file = Some(repo.save_index(&IndexFile {
            supersedes: vec![],
            packs: std::mem::take(&mut w.packs),
        })?);
    }
    for (i, new) in planned {
        rep.damaged[i].repaired = Some(repo.save_snapshot(&new)?);
    }
    if opts.forget {
        for d in &mut rep.damaged {
            if d.repaired.is_some() || d.root_lost.is_some() {
                delete_snapshot(repo, &d.original)?;
                d.forgotten = true;
            }
        }
        for (id, _) in &rep.damaged_files {
            delete_snapshot(repo, id)?;
            rep.damaged_files_deleted += 1;
        }
    }
    Ok(rep)
}

fn delete_snapshot(repo: &Repository, id: &Id) -> Result<(), RepoError> {
    match repo.backend().delete(FileType::Snapshot, &id.to_hex()) {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The index to repair with, and the indexed packs the backend lacks or holds at another
/// size. Refuses damaged index files; indexes (in memory for a dry run) the packs no index
/// names whose header opens.
fn usable_index(
    repo: &Repository,
    dry_run: bool,
    rep: &mut RepairSnapshotsReport,
) -> Result<(Index, HashSet<Id>), RepoError> {
    let mut files = vec![];
    for (id, f) in repo.load_index_files()? {
        match f {
            Ok(f) => files.push(f),
            Err(e) if e.is_corruption() => {
                return Err(RepoError::Invalid {
                    what: "index",
                    detail: format!(
                        "index file {id} is damaged ({e}): run `arca repair index` first"
                    ),
                });
            }
            Err(e) => return Err(e),
        }
    }
    let indexed: HashSet<Id> = files
        .iter()
        .flat_map(|f| f.packs.iter().map(|p| p.id))
        .collect();
    let on_disk = repo.list_ids(FileType::Pack)?;
    let orphans: Vec<(Id, u64)> = on_disk
        .iter()
        .filter(|(id, _)| !indexed.contains(id))
        .copied()
        .collect();
    if !orphans.is_empty() {
        let scan = scan_headers(repo, &orphans);
        if let Some(u) = scan.unreadable.iter().find(|u| !u.damaged) {
            return Err(RepoError::Invalid {
                what: "repair",
                detail: format!(
                    "cannot read pack {} ({}); nothing was changed, try again",
                    u.id, u.error
                ),
            });
        }
        if !scan.packs.is_empty() {
            rep.adopted_packs = scan.packs.len();
            let f = IndexFile {
                supersedes: vec![],
                packs: scan.packs,
            };
            if !dry_run {
                repo.save_index(&f)?;
            }
            files.push(f);
        }
    }
    let sizes: HashMap<Id, u64> = on_disk.into_iter().collect();
    let mut b = IndexBuilder::new();
    let mut bad = HashSet::new();
    for f in &files {
        b.add(f);
        for p in &f.packs {
            if sizes.get(&p.id) != Some(&p.size) {
                bad.insert(p.id);
            }
        }
    }
    Ok((b.finish(), bad))
}

/// A tree after repair: its (possibly new) id and what was cut below it, by path relative to
/// the tree.
#[derive(Debug, Clone)]
struct Rewritten {
    id: Id,
    changes: Vec<(PathBuf, Loss)>,
}

/// Rewrites trees bottom-up, each distinct tree once, and stores the new ones.
struct Rewriter<'a> {
    repo: &'a Repository,
    index: &'a Index,
    bad_packs: &'a HashSet<Id>,
    /// Trees already rewritten (`Err`: lost, and why).
    memo: HashMap<Id, Result<Rewritten, String>>,
    /// New trees stored in this run.
    stored: HashSet<Id>,
    pack: Option<PackWriter>,
    packs: Vec<IndexPack>,
    dry_run: bool,
    trees_written: usize,
}

impl Rewriter<'_> {
    /// Whether a blob has an index entry in a pack the backend holds.
    fn available(&self, kind: BlobKind, id: &Id) -> bool {
        self.index
            .locations(kind, id)
            .any(|l| !self.bad_packs.contains(&l.pack.id))
    }

    /// Reads a tree from any of its intact locations. `Ok(Err(why))`: the tree is lost;
    /// `Err`: the backend failed in a way that may pass, so nothing may be concluded.
    fn read_tree(&self, id: &Id) -> Result<Result<Tree, String>, RepoError> {
        let mut why = "not in the index".to_string();
        for loc in self.index.locations(BlobKind::Tree, id) {
            if self.bad_packs.contains(&loc.pack.id) {
                why = format!("its pack {} is missing or truncated", loc.pack.id);
                continue;
            }
            let sealed = match self.repo.backend().read_range(
                FileType::Pack,
                &loc.pack.id.to_hex(),
                u64::from(loc.offset),
                u64::from(loc.length),
            ) {
                Ok(b) => b,
                Err(e) => {
                    let e = RepoError::from(e);
                    if e.is_corruption() || matches!(&e, RepoError::Backend(b) if b.is_not_found())
                    {
                        why = e.to_string();
                        continue;
                    }
                    return Err(e);
                }
            };
            let plain =
                match self
                    .repo
                    .open_blob(BlobKind::Tree, id, &loc.pack.id, &sealed, loc.raw_length)
                {
                    Ok(p) => p,
                    Err(e) => {
                        why = e.to_string();
                        continue;
                    }
                };
            match Tree::decode(&plain) {
                Ok(t) => return Ok(Ok(t)),
                Err(e) => why = format!("tree {id}: {e}"),
            }
        }
        Ok(Err(why))
    }

    /// The repaired form of tree `id`.
    fn rewrite(&mut self, id: Id) -> Result<Result<Rewritten, String>, RepoError> {
        if let Some(r) = self.memo.get(&id) {
            return Ok(r.clone());
        }
        let mut tree = match self.read_tree(&id)? {
            Ok(t) => t,
            Err(why) => {
                self.memo.insert(id, Err(why.clone()));
                return Ok(Err(why));
            }
        };
        let mut changes = vec![];
        let mut changed = false;
        for node in &mut tree.nodes {
            let name = PathBuf::from(OsStr::from_bytes(&node.name));
            match node.kind {
                Some(NodeKind::Dir) => {
                    let Some(sub) = node.subtree else { continue };
                    match self.rewrite(sub)? {
                        Ok(r) => {
                            if r.id != sub {
                                changed = true;
                                node.subtree = Some(r.id);
                                changes
                                    .extend(r.changes.into_iter().map(|(p, l)| (name.join(p), l)));
                            }
                        }
                        Err(reason) => {
                            changed = true;
                            node.subtree = Some(self.store(&Tree::default())?);
                            changes.push((name, Loss::DirectoryEmptied { reason }));
                        }
                    }
                }
                Some(NodeKind::File) => {
                    let lost = node
                        .content
                        .iter()
                        .position(|c| !self.available(BlobKind::Data, &c.id));
                    if let Some(i) = lost {
                        changed = true;
                        let lost_blob = node.content[i].id;
                        node.content.truncate(i);
                        let kept = node.content.iter().map(|c| u64::from(c.len)).sum();
                        changes.push((
                            name,
                            Loss::FileTruncated {
                                size: node.size,
                                kept,
                                lost_blob,
                            },
                        ));
                        node.size = kept;
                    }
                }
                _ => {}
            }
        }
        let r = if changed {
            Rewritten {
                id: self.store(&tree)?,
                changes,
            }
        } else {
            Rewritten { id, changes }
        };
        self.memo.insert(id, Ok(r.clone()));
        Ok(Ok(r))
    }

    /// Stores a tree blob unless the repository already has it; returns its id.
    fn store(&mut self, tree: &Tree) -> Result<Id, RepoError> {
        let bytes = tree
            .encode()
            .map_err(|e| RepoError::format("repaired tree", e))?;
        let id = self.repo.key().blob_id(&bytes);
        if self.available(BlobKind::Tree, &id) || !self.stored.insert(id) {
            return Ok(id);
        }
        self.trees_written += 1;
        if self.dry_run {
            return Ok(id);
        }
        let sealed = seal_blob(
            self.repo.sealer(),
            BlobKind::Tree,
            id,
            &bytes,
            self.repo.config().compression,
        )?;
        let pack = self
            .pack
            .get_or_insert_with(|| PackWriter::new(BlobKind::Tree, 1 << 20));
        pack.add(&sealed)?;
        if pack.size() as u64 >= u64::from(self.repo.config().pack_size) {
            self.flush()?;
        }
        Ok(id)
    }

    /// Uploads the open pack, if any.
    fn flush(&mut self) -> Result<(), RepoError> {
        let Some(pack) = self.pack.take() else {
            return Ok(());
        };
        if pack.is_empty() {
            return Ok(());
        }
        let p = pack.finish(self.repo.sealer())?;
        self.repo
            .backend()
            .write(FileType::Pack, &p.id.to_hex(), &p.bytes)?;
        self.packs.push(p.index);
        Ok(())
    }
}

/// A small repository built by hand for the tests of this crate: one snapshot of
/// `/a` (three blobs, the last in another pack), `/b` (one blob) and `/sub/c` (one blob in
/// the second data pack), with the listing of `/sub` and the root in packs of their own.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod fixture {
    use std::sync::Arc;

    use arca_backend::{Backend, FileType, MemoryBackend};
    use arca_format::{
        BlobKind, ContentRef, Id, IndexFile, IndexPack, KdfParams, Node, NodeKind, Snapshot, Tree,
    };
    use arca_repo::blob::seal_blob;
    use arca_repo::pack::PackWriter;
    use arca_repo::{InitOptions, Repository};

    /// The fixture's repository and what is where.
    pub(crate) struct Fx {
        pub repo: Repository,
        pub backend: Arc<dyn Backend>,
        pub snapshot: Id,
        /// `/a`'s first two blobs and `/b`.
        pub data1: IndexPack,
        /// `/a`'s last blob and `/sub/c`.
        pub data2: IndexPack,
        /// The listing of `/sub`.
        pub sub_pack: IndexPack,
        /// The root listing.
        pub root_pack: IndexPack,
        /// The root tree's id.
        pub root: Id,
        /// The only index file.
        pub index_file: Id,
    }

    /// A new repository with a cheap key.
    pub(crate) fn repo() -> (Repository, Arc<dyn Backend>) {
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        let opts = InitOptions {
            kdf: KdfParams {
                memory_kib: 64,
                iterations: 1,
                parallelism: 1,
            },
            ..InitOptions::default()
        };
        (
            Repository::init(backend.clone(), b"pw", &opts).unwrap(),
            backend,
        )
    }

    /// Bytes of chunk `name`.
    pub(crate) fn chunk(name: &str) -> Vec<u8> {
        format!("chunk {name} ").repeat(100).into_bytes()
    }

    fn pack(repo: &Repository, kind: BlobKind, blobs: &[Vec<u8>]) -> IndexPack {
        let mut w = PackWriter::new(kind, 1 << 16);
        for b in blobs {
            let id = repo.key().blob_id(b);
            w.add(&seal_blob(repo.sealer(), kind, id, b, 3).unwrap())
                .unwrap();
        }
        let p = w.finish(repo.sealer()).unwrap();
        repo.backend()
            .write(FileType::Pack, &p.id.to_hex(), &p.bytes)
            .unwrap();
        p.index
    }

    /// A file node listing `chunks`.
    pub(crate) fn file(repo: &Repository, name: &str, chunks: &[&str]) -> Node {
        let content: Vec<ContentRef> = chunks
            .iter()
            .map(|c| {
                let b = chunk(c);
                ContentRef {
                    id: repo.key().blob_id(&b),
                    len: b.len() as u32,
                }
            })
            .collect();
        Node {
            name: name.as_bytes().to_vec(),
            kind: Some(NodeKind::File),
            mode: 0o644,
            size: content.iter().map(|c| u64::from(c.len)).sum(),
            content,
            ..Node::default()
        }
    }

    /// A snapshot of `tree` with tags.
    pub(crate) fn snapshot(tree: Id, tags: &[&str]) -> Snapshot {
        let json = format!(
            r#"{{"time":"2026-01-02T03:04:05+00:00","tree":"{tree}","paths":["/"],
            "hostname":"h","username":"u","uid":1,"gid":2,"tags":{tags:?},"parent":null,
            "program_version":"arca test","complete":true}}"#
        );
        let mut body = b"ASNP\x01\x00".to_vec();
        body.extend_from_slice(json.as_bytes());
        Snapshot::decode(&body).unwrap()
    }

    /// Builds the fixture.
    pub(crate) fn build() -> Fx {
        let (repo, backend) = repo();
        let data1 = pack(
            &repo,
            BlobKind::Data,
            &[chunk("a0"), chunk("a1"), chunk("b0")],
        );
        let data2 = pack(&repo, BlobKind::Data, &[chunk("a2"), chunk("c0")]);
        let sub = Tree {
            nodes: vec![file(&repo, "c", &["c0"])],
        };
        let sub_bytes = sub.encode().unwrap();
        let sub_id = repo.key().blob_id(&sub_bytes);
        let sub_pack = pack(&repo, BlobKind::Tree, &[sub_bytes]);
        let root = Tree {
            nodes: vec![
                file(&repo, "a", &["a0", "a1", "a2"]),
                file(&repo, "b", &["b0"]),
                Node {
                    name: b"sub".to_vec(),
                    kind: Some(NodeKind::Dir),
                    mode: 0o755,
                    subtree: Some(sub_id),
                    ..Node::default()
                },
            ],
        };
        let root_bytes = root.encode().unwrap();
        let root_id = repo.key().blob_id(&root_bytes);
        let root_pack = pack(&repo, BlobKind::Tree, &[root_bytes]);
        let index_file = repo
            .save_index(&IndexFile {
                supersedes: vec![],
                packs: vec![
                    data1.clone(),
                    data2.clone(),
                    sub_pack.clone(),
                    root_pack.clone(),
                ],
            })
            .unwrap();
        let snapshot = repo.save_snapshot(&snapshot(root_id, &["daily"])).unwrap();
        Fx {
            repo,
            backend,
            snapshot,
            data1,
            data2,
            sub_pack,
            root_pack,
            root: root_id,
            index_file,
        }
    }

    impl Fx {
        /// Deletes a pack file.
        pub(crate) fn delete_pack(&self, p: &IndexPack) {
            self.backend.delete(FileType::Pack, &p.id.to_hex()).unwrap();
        }

        /// Flips a byte of a repository file.
        pub(crate) fn flip(&self, t: FileType, id: &Id, at: usize) {
            let mut b = self.backend.read(t, &id.to_hex()).unwrap();
            b[at] ^= 0x20;
            self.backend.write(t, &id.to_hex(), &b).unwrap();
        }

        /// The ids of the files of a type.
        pub(crate) fn ids(&self, t: FileType) -> Vec<Id> {
            self.repo
                .list_ids(t)
                .unwrap()
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::fixture::{Fx, build, chunk};
    use super::*;
    use crate::check::check;
    use crate::{CheckOptions, CheckReport};

    fn read_data() -> CheckOptions {
        CheckOptions {
            read_data: true,
            workers: 2,
        }
    }

    fn clean(rep: &CheckReport) {
        assert!(rep.is_ok(), "{:?}", rep.errors);
        assert!(
            rep.repairs
                .iter()
                .all(|p| p.repair == crate::check::Repair::Prune),
            "{:?}",
            rep.repairs
        );
    }

    /// Every blob of the fixture reads back through a fresh index.
    fn all_blobs_read(fx: &Fx) {
        let index = fx.repo.load_index().unwrap();
        for p in [&fx.data1, &fx.data2, &fx.sub_pack, &fx.root_pack] {
            for b in &p.blobs {
                fx.repo.read_blob(&index, p.kind, &b.id).unwrap();
            }
        }
    }

    #[test]
    fn index_is_rebuilt_from_pack_headers_when_every_index_file_is_gone() {
        let fx = build();
        fx.backend
            .delete(FileType::Index, &fx.index_file.to_hex())
            .unwrap();
        let rep = check(&fx.repo, CheckOptions::default()).unwrap();
        assert!(!rep.is_ok());
        assert_eq!(rep.repairs[0].repair, crate::check::Repair::Index);

        // A dry run reports and changes nothing.
        let dry = repair_index(
            &fx.repo,
            RepairIndexOptions {
                dry_run: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!((dry.packs_indexed, dry.blobs_indexed), (4, 7));
        assert!(fx.ids(FileType::Index).is_empty());

        let r = repair_index(&fx.repo, RepairIndexOptions::default()).unwrap();
        assert_eq!(r.packs_found, 4);
        assert_eq!(r.headers_read, 4);
        assert_eq!(r.packs_from_index, 0);
        assert_eq!((r.packs_indexed, r.blobs_indexed), (4, 7));
        assert_eq!(r.written.len(), 1);
        assert!(r.unreadable.is_empty() && r.missing_packs.is_empty());
        // The new index file names each pack exactly as its writer did.
        let f = fx.repo.load_index_file(&r.written[0]).unwrap();
        let mut want = vec![
            fx.data1.clone(),
            fx.data2.clone(),
            fx.sub_pack.clone(),
            fx.root_pack.clone(),
        ];
        want.sort_by_key(|p| p.id);
        assert_eq!(f.packs, want);
        all_blobs_read(&fx);
        clean(&check(&fx.repo, read_data()).unwrap());
    }

    #[test]
    fn a_damaged_index_file_is_left_out_then_replaced() {
        let fx = build();
        // A second, intact index file naming the data packs again.
        let second = fx
            .repo
            .save_index(&IndexFile {
                supersedes: vec![],
                packs: vec![fx.data1.clone()],
            })
            .unwrap();
        fx.flip(FileType::Index, &fx.index_file, 30);
        // Loading goes on without the damaged file, which is named.
        let (index, damaged) = fx.repo.load_index_report().unwrap();
        assert_eq!(damaged.len(), 1);
        assert_eq!(damaged[0].0, fx.index_file);
        assert!(index.contains(BlobKind::Data, &fx.data1.blobs[0].id));
        assert!(!index.contains(BlobKind::Tree, &fx.root));
        assert_eq!(fx.repo.load_index().unwrap().len(), index.len());
        // Check reports it and proposes `repair index`; repair snapshots refuses to run.
        let rep = check(&fx.repo, CheckOptions::default()).unwrap();
        assert!(
            rep.errors
                .iter()
                .any(|e| e.contains(&fx.index_file.to_hex()))
        );
        assert_eq!(rep.repairs[0].repair, crate::check::Repair::Index);
        let e = repair_snapshots(&fx.repo, &RepairSnapshotsOptions::default()).unwrap_err();
        assert!(e.to_string().contains("arca repair index"), "{e}");

        // Packs the intact file describes keep their entries; the others' headers are read.
        let r = repair_index(&fx.repo, RepairIndexOptions::default()).unwrap();
        assert_eq!(r.damaged_index_files.len(), 1);
        assert_eq!(r.packs_from_index, 1);
        assert_eq!(r.headers_read, 3);
        assert_eq!(r.packs_indexed, 4);
        let mut deleted = r.deleted.clone();
        deleted.sort();
        let mut old = vec![fx.index_file, second];
        old.sort();
        assert_eq!(deleted, old);
        assert_eq!(fx.ids(FileType::Index), r.written);
        let f = fx.repo.load_index_file(&r.written[0]).unwrap();
        assert_eq!(f.supersedes.len(), 2);
        all_blobs_read(&fx);
        clean(&check(&fx.repo, read_data()).unwrap());

        // With read_all_packs every header is read again; the result is the same.
        let r2 = repair_index(
            &fx.repo,
            RepairIndexOptions {
                read_all_packs: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!((r2.headers_read, r2.packs_indexed), (4, 4));
        assert_eq!(
            fx.repo.load_index_file(&r2.written[0]).unwrap().packs,
            f.packs
        );
    }

    #[test]
    fn unreadable_and_missing_packs_are_left_out_and_reported() {
        let fx = build();
        // A pack whose header is damaged, one that is garbage, and an indexed one deleted.
        let n = fx
            .backend
            .read(FileType::Pack, &fx.data2.id.to_hex())
            .unwrap()
            .len();
        fx.flip(FileType::Pack, &fx.data2.id, n - 20);
        let junk = Id([7; 32]);
        fx.backend
            .write(FileType::Pack, &junk.to_hex(), &[1u8; 3000])
            .unwrap();
        fx.delete_pack(&fx.sub_pack);
        let r = repair_index(
            &fx.repo,
            RepairIndexOptions {
                read_all_packs: true,
                ..Default::default()
            },
        )
        .unwrap();
        let mut bad: Vec<Id> = r.unreadable.iter().map(|u| u.id).collect();
        bad.sort();
        let mut want = vec![fx.data2.id, junk];
        want.sort();
        assert_eq!(bad, want, "{r:?}");
        assert!(r.unreadable.iter().all(|u| u.damaged));
        assert_eq!(r.missing_packs, vec![fx.sub_pack.id]);
        assert_eq!(r.packs_indexed, 2);
        // Nothing was deleted but the old index file.
        assert_eq!(fx.ids(FileType::Pack).len(), 4);
        let index = fx.repo.load_index().unwrap();
        assert_eq!(index.packs().len(), 2);
    }

    #[test]
    fn lost_data_blobs_truncate_files_and_the_copy_is_tagged() {
        let fx = build();
        fx.delete_pack(&fx.data2);
        let rep = check(&fx.repo, CheckOptions::default()).unwrap();
        let kinds: Vec<_> = rep.repairs.iter().map(|p| p.repair).collect();
        assert_eq!(
            kinds,
            vec![crate::check::Repair::Index, crate::check::Repair::Snapshots]
        );

        // Dry run: the same report, nothing written.
        let packs_before = fx.ids(FileType::Pack).len();
        let dry = repair_snapshots(
            &fx.repo,
            &RepairSnapshotsOptions {
                dry_run: true,
                forget: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(dry.damaged.len(), 1);
        assert_eq!(dry.damaged[0].repaired, None);
        assert_eq!(dry.trees_written, 2);
        assert_eq!(fx.ids(FileType::Pack).len(), packs_before);
        assert_eq!(fx.ids(FileType::Snapshot), vec![fx.snapshot]);

        let r = repair_snapshots(&fx.repo, &RepairSnapshotsOptions::default()).unwrap();
        assert_eq!(r.snapshots, 1);
        let d = &r.damaged[0];
        assert_eq!(d.original, fx.snapshot);
        assert!(!d.forgotten);
        let a_len = chunk("a0").len() as u64;
        assert_eq!(
            d.changes,
            vec![
                Change {
                    path: "/a".into(),
                    loss: Loss::FileTruncated {
                        size: 3 * a_len,
                        kept: 2 * a_len,
                        lost_blob: fx.data2.blobs[0].id,
                    },
                },
                Change {
                    path: "/sub/c".into(),
                    loss: Loss::FileTruncated {
                        size: chunk("c0").len() as u64,
                        kept: 0,
                        lost_blob: fx.data2.blobs[1].id,
                    },
                },
            ]
        );
        // Two new trees (root and /sub) in one pack, named by one index file.
        assert_eq!((r.trees_written, r.packs_written), (2, 1));
        assert!(r.index_file.is_some());
        let new = d.repaired.unwrap();
        let s = fx.repo.load_snapshot(&new).unwrap();
        assert_eq!(s.tags, vec!["daily".to_string(), REPAIRED_TAG.to_string()]);
        let orig = fx.repo.load_snapshot(&fx.snapshot).unwrap();
        assert_eq!(
            (s.time, &s.paths, &s.hostname),
            (orig.time, &orig.paths, &orig.hostname)
        );
        let index = fx.repo.load_index().unwrap();
        let root = fx.repo.load_tree(&index, &s.tree).unwrap();
        let a = root.find(b"a").unwrap();
        assert_eq!((a.size, a.content.len()), (2 * a_len, 2));
        assert_eq!(root.find(b"b"), orig_tree(&fx).find(b"b"));
        // The original is kept without `forget`; once the index is repaired too, check is
        // clean but for the original's lost data.
        assert_eq!(fx.ids(FileType::Snapshot).len(), 2);
        repair_index(&fx.repo, RepairIndexOptions::default()).unwrap();
        let rep = check(&fx.repo, read_data()).unwrap();
        assert_eq!(rep.affected.len(), 1);
        assert_eq!(rep.affected[0].snapshot, fx.snapshot);

        // Again with forget: the original goes; the repaired copy is not repaired twice.
        let r = repair_snapshots(
            &fx.repo,
            &RepairSnapshotsOptions {
                forget: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(r.snapshots, 2);
        assert_eq!(r.damaged.len(), 1);
        assert!(r.damaged[0].forgotten);
        // The same trees: nothing new is written.
        assert_eq!(r.trees_written, 0);
        assert_eq!(
            r.damaged[0]
                .repaired
                .map(|i| fx.repo.load_snapshot(&i).unwrap().tree),
            Some(s.tree)
        );
        assert_eq!(fx.ids(FileType::Snapshot).len(), 2);
        assert!(!fx.ids(FileType::Snapshot).contains(&fx.snapshot));
        clean(&check(&fx.repo, read_data()).unwrap());
    }

    fn orig_tree(fx: &Fx) -> Tree {
        let index = fx.repo.load_index().unwrap();
        fx.repo.load_tree(&index, &fx.root).unwrap()
    }

    #[test]
    fn a_lost_listing_becomes_an_empty_directory_and_a_lost_root_cannot_be_saved() {
        let fx = build();
        let orig = orig_tree(&fx);
        // A second snapshot sharing the root: each distinct tree is rewritten once.
        let other = fx
            .repo
            .save_snapshot(&super::fixture::snapshot(fx.root, &[]))
            .unwrap();
        fx.delete_pack(&fx.sub_pack);
        let r = repair_snapshots(
            &fx.repo,
            &RepairSnapshotsOptions {
                forget: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(r.damaged.len(), 2);
        let trees: Vec<Id> = r
            .damaged
            .iter()
            .map(|d| fx.repo.load_snapshot(&d.repaired.unwrap()).unwrap().tree)
            .collect();
        assert_eq!(trees[0], trees[1]);
        for d in &r.damaged {
            assert_eq!(d.changes.len(), 1);
            assert_eq!(d.changes[0].path, PathBuf::from("/sub"));
            assert!(matches!(d.changes[0].loss, Loss::DirectoryEmptied { .. }));
        }
        // Root and empty directory.
        assert_eq!(r.trees_written, 2);
        let index = fx.repo.load_index().unwrap();
        let root = fx.repo.load_tree(&index, &trees[0]).unwrap();
        let sub = root.find(b"sub").unwrap();
        assert!(
            fx.repo
                .load_tree(&index, &sub.subtree.unwrap())
                .unwrap()
                .nodes
                .is_empty()
        );
        assert_eq!(root.find(b"a"), orig.find(b"a"));
        let mut snaps = fx.ids(FileType::Snapshot);
        snaps.sort();
        assert!(!snaps.contains(&fx.snapshot) && !snaps.contains(&other));

        // Now the root listing is lost too: nothing to salvage; forget removes the snapshot.
        let fx = build();
        fx.delete_pack(&fx.root_pack);
        let r = repair_snapshots(
            &fx.repo,
            &RepairSnapshotsOptions {
                forget: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(r.damaged.len(), 1);
        assert!(r.damaged[0].root_lost.is_some());
        assert!(r.damaged[0].forgotten);
        assert_eq!(r.damaged[0].repaired, None);
        assert!(fx.ids(FileType::Snapshot).is_empty());
    }

    #[test]
    fn unindexed_packs_are_not_taken_for_lost_data() {
        let fx = build();
        fx.backend
            .delete(FileType::Index, &fx.index_file.to_hex())
            .unwrap();
        let r = repair_snapshots(&fx.repo, &RepairSnapshotsOptions::default()).unwrap();
        assert_eq!(r.adopted_packs, 4);
        assert!(r.damaged.is_empty(), "{r:?}");
        assert_eq!(fx.ids(FileType::Index).len(), 1);
        all_blobs_read(&fx);
    }

    #[test]
    fn damaged_snapshot_files_are_removed_with_forget() {
        let fx = build();
        fx.flip(FileType::Snapshot, &fx.snapshot, 40);
        let rep = check(&fx.repo, CheckOptions::default()).unwrap();
        assert!(
            rep.repairs
                .iter()
                .any(|p| p.repair == crate::check::Repair::Snapshots)
        );
        let r = repair_snapshots(&fx.repo, &RepairSnapshotsOptions::default()).unwrap();
        assert_eq!(r.damaged_files.len(), 1);
        assert_eq!(r.damaged_files_deleted, 0);
        assert_eq!(fx.ids(FileType::Snapshot).len(), 1);
        let r = repair_snapshots(
            &fx.repo,
            &RepairSnapshotsOptions {
                forget: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(r.damaged_files_deleted, 1);
        assert!(fx.ids(FileType::Snapshot).is_empty());
    }
}

//! `recover`, as restic's: a new snapshot holding every directory listing that neither another
//! listing nor any snapshot reaches (the roots of snapshots forgotten before `prune` ran), so
//! that what they hold can be browsed and restored again.
//!
//! It only adds: the new listings go into a new tree pack, then an index file naming it, then
//! the snapshot (`/recover`, one folder per recovered listing, named by its short id). A
//! listing that cannot be read is counted and left out; what it holds is then not known to be
//! reachable, so its subdirectories may be recovered on their own.

use std::collections::{HashMap, HashSet};

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexFile, Node, NodeKind, Snapshot, Timespec, Tree};
use arca_repo::{Index, RepoError, Repository};

use crate::rewrite::store::TreeWriter;

/// The tag of the snapshots `recover` writes.
pub const RECOVERED_TAG: &str = "recovered";

/// Options of [`recover`].
#[derive(Debug, Clone, Default)]
pub struct RecoverOptions {
    /// Find and report, write nothing.
    pub dry_run: bool,
}

/// What [`recover`] found and wrote.
#[derive(Debug, Clone, Default)]
pub struct RecoverReport {
    /// Tree blobs the index knows.
    pub trees: usize,
    /// Snapshots whose trees were walked.
    pub snapshots: usize,
    /// Listings that could not be read (their ids and why).
    pub unreadable: Vec<(Id, String)>,
    /// The listings no other listing and no snapshot reaches, in id order.
    pub roots: Vec<Id>,
    /// The new snapshot (none in a dry run or when nothing was found).
    pub snapshot: Option<Id>,
    /// The index file naming the new listings' pack.
    pub index_file: Option<Id>,
}

/// Finds the unreachable directory listings of `repo` and, unless `opts.dry_run`, saves a
/// snapshot holding them. Takes no lock: the caller holds one that keeps prune away.
pub fn recover(repo: &Repository, opts: &RecoverOptions) -> Result<RecoverReport, RepoError> {
    let mut rep = RecoverReport::default();
    let mut files = vec![];
    for (id, file) in repo.load_index_files()? {
        files.push((id, file?));
    }
    let superseded: HashSet<Id> = files
        .iter()
        .flat_map(|(_, f)| f.supersedes.iter().copied())
        .collect();
    let live: Vec<&IndexFile> = files
        .iter()
        .filter(|(id, _)| !superseded.contains(id))
        .map(|(_, f)| f)
        .collect();
    let index = Index::from_files(live.iter().copied());
    let mut trees: Vec<Id> = live
        .iter()
        .flat_map(|f| f.packs.iter().filter(|p| p.kind == BlobKind::Tree))
        .flat_map(|p| p.blobs.iter().map(|b| b.id))
        .collect();
    trees.sort_unstable();
    trees.dedup();
    rep.trees = trees.len();

    // Each listing's subdirectories.
    let mut children: HashMap<Id, Vec<Id>> = HashMap::with_capacity(trees.len());
    for id in &trees {
        match repo.load_tree(&index, id) {
            Ok(t) => {
                children.insert(*id, t.nodes.iter().filter_map(|n| n.subtree).collect());
            }
            Err(e) if e.is_corruption() => rep.unreadable.push((*id, e.cause())),
            Err(e) => return Err(e),
        }
    }
    // A listing no other one names is a root: a snapshot's, or one to recover.
    let mut reached: HashSet<Id> = children.values().flatten().copied().collect();
    for (id, _) in repo.list_ids(FileType::Snapshot)? {
        match repo.load_snapshot(&id) {
            Ok(s) => {
                rep.snapshots += 1;
                reached.insert(s.tree);
            }
            // A damaged snapshot file names no tree: what it held is recovered.
            Err(e) if e.is_corruption() => {}
            Err(e) => return Err(e),
        }
    }
    rep.roots = trees
        .iter()
        .filter(|id| !reached.contains(id) && children.contains_key(id))
        .copied()
        .collect();
    if rep.roots.is_empty() {
        return Ok(rep);
    }

    let now = arca_repo::host::now_ns();
    let mtime = Timespec {
        sec: now.div_euclid(1_000_000_000),
        nsec: now.rem_euclid(1_000_000_000) as u32,
    };
    let (uid, gid) = arca_repo::host::ids();
    let dir = |name: Vec<u8>, subtree: Id| Node {
        name,
        kind: Some(NodeKind::Dir),
        mode: 0o755,
        uid,
        gid,
        mtime,
        atime: mtime,
        ctime: mtime,
        nlink: 1,
        subtree: Some(subtree),
        ..Node::default()
    };
    // One folder per listing, named by its short id (its full id where two share one).
    let mut short: HashMap<String, usize> = HashMap::new();
    for id in &rep.roots {
        *short.entry(id.short()).or_default() += 1;
    }
    let mut nodes: Vec<Node> = rep
        .roots
        .iter()
        .map(|id| {
            let name = if short[&id.short()] > 1 {
                id.to_hex()
            } else {
                id.short()
            };
            dir(name.into_bytes(), *id)
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = TreeWriter::new(repo, opts.dry_run);
    let have = |id: &Id| index.contains(BlobKind::Tree, id);
    let recover_dir = out.store(&Tree { nodes }, "the recovered listings", have)?;
    let root = out.store(
        &Tree {
            nodes: vec![dir(b"recover".to_vec(), recover_dir)],
        },
        "the recovered snapshot's root",
        have,
    )?;
    out.flush()?;
    if opts.dry_run {
        return Ok(rep);
    }
    // Write order: the pack (done), the index naming it, then the snapshot.
    if !out.packs.is_empty() {
        rep.index_file = Some(repo.save_index(&IndexFile {
            supersedes: vec![],
            packs: std::mem::take(&mut out.packs),
        })?);
    }
    let time = chrono::DateTime::from_timestamp_nanos(now).fixed_offset();
    rep.snapshot = Some(repo.save_snapshot(&Snapshot {
        time,
        tree: root,
        paths: vec!["/recover".to_string()],
        hostname: arca_repo::host::hostname(),
        username: arca_repo::host::username(),
        uid,
        gid,
        tags: vec![RECOVERED_TAG.to_string()],
        parent: None,
        original: None,
        program_version: format!("arca {}", env!("CARGO_PKG_VERSION")),
        complete: true,
        summary: Default::default(),
    })?);
    Ok(rep)
}

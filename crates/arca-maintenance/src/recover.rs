//! `recover`, as restic's: a new snapshot holding every directory listing that neither another
//! listing nor any snapshot reaches (the roots of snapshots forgotten before `prune` ran), so
//! that what they hold can be browsed and restored again.
//!
//! It only adds: the new listings go into a new tree pack, then an index file naming it, then
//! the snapshot (`/recover`, one folder per recovered listing, named by its short id). A
//! listing that cannot be read is counted and left out; what it holds is then not known to be
//! reachable, so its subdirectories may be recovered on their own.
//!
//! Every listing saved resolves: a recovered listing naming a sub-listing that is lost (not in
//! the index, or unreadable) is saved rewritten, that folder replaced by an empty one (as
//! `repair snapshots` does), and each such folder is reported.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

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
    /// Folders of the recovered snapshot whose listing is lost, replaced by empty ones: the
    /// path in the snapshot and the lost listing.
    pub emptied: Vec<(PathBuf, Id)>,
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
            Err(e) if e.is_unusable() => rep.unreadable.push((*id, e.cause())),
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
    let mut out = TreeWriter::new(repo, opts.dry_run);
    let have = |id: &Id| index.contains(BlobKind::Tree, id);
    let mut fixer = Fixer {
        repo,
        index: &index,
        children: &children,
        broken: HashMap::new(),
        memo: HashMap::new(),
    };
    let mut nodes = vec![];
    let mut kept = vec![];
    for id in &rep.roots {
        let name = if short[&id.short()] > 1 {
            id.to_hex()
        } else {
            id.short()
        };
        let path = Path::new("/recover").join(&name);
        let mut emptied = vec![];
        let subtree = fixer.fix(*id, &path, &mut out, &mut emptied)?;
        // Its rewritten copy is there already: an earlier recover saved it (and left this
        // original unreached); saving it again made one more snapshot on every run.
        if subtree != *id && index.contains(BlobKind::Tree, &subtree) {
            continue;
        }
        kept.push(*id);
        rep.emptied.extend(emptied);
        nodes.push(dir(name.into_bytes(), subtree));
    }
    rep.roots = kept;
    if rep.roots.is_empty() {
        return Ok(rep);
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
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
        copied_tree: None,
        program_version: format!("arca {}", env!("CARGO_PKG_VERSION")),
        complete: true,
        summary: Default::default(),
    })?);
    Ok(rep)
}

/// Rewrites recovered listings so that every sub-listing they name resolves.
struct Fixer<'a> {
    repo: &'a Repository,
    index: &'a Index,
    /// Each readable listing's subdirectories; a listing not here is lost.
    children: &'a HashMap<Id, Vec<Id>>,
    /// Whether a listing reaches, at any depth, a lost one.
    broken: HashMap<Id, bool>,
    /// Listings already rewritten, by their old id.
    memo: HashMap<Id, Id>,
}

impl Fixer<'_> {
    /// Whether listing `id` (readable) reaches a lost listing.
    fn broken(&mut self, id: Id) -> bool {
        if let Some(&b) = self.broken.get(&id) {
            return b;
        }
        // Set first: a listing naming itself (a damaged repository) ends the walk.
        self.broken.insert(id, false);
        let subs = self.children.get(&id).cloned().unwrap_or_default();
        let b = subs
            .iter()
            .any(|s| !self.children.contains_key(s) || self.broken(*s));
        self.broken.insert(id, b);
        b
    }

    /// The id to save for readable listing `id` at `path`: itself when everything below it
    /// resolves, else a rewritten copy whose lost sub-listings are empty folders (each one
    /// pushed on `emptied`).
    fn fix(
        &mut self,
        id: Id,
        path: &Path,
        out: &mut TreeWriter<'_>,
        emptied: &mut Vec<(PathBuf, Id)>,
    ) -> Result<Id, RepoError> {
        if !self.broken(id) {
            return Ok(id);
        }
        let mut tree = self.repo.load_tree(self.index, &id)?;
        for node in &mut tree.nodes {
            let Some(sub) = node.subtree else { continue };
            let at = path.join(OsStr::from_bytes(&node.name));
            node.subtree = Some(if !self.children.contains_key(&sub) {
                emptied.push((at, sub));
                self.store(out, &Tree::default())?
            } else if let Some(&new) = self.memo.get(&sub) {
                // The same listing elsewhere: what was emptied in it is reported once.
                new
            } else {
                self.fix(sub, &at, out, emptied)?
            });
        }
        let new = self.store(out, &tree)?;
        self.memo.insert(id, new);
        Ok(new)
    }

    fn store(&self, out: &mut TreeWriter<'_>, tree: &Tree) -> Result<Id, RepoError> {
        let index = self.index;
        out.store(tree, "a recovered listing", |id| {
            index.contains(BlobKind::Tree, id)
        })
    }
}

//! The restore plan, made from the snapshot's trees and the index alone before any data is
//! read: every directory and entry with its target path, every file's blocks with their
//! offsets, and every distinct blob with its pack and byte range (the FAST'13 "recipe").

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use arca_format::{BlobKind, ContentRef, Id, Node, NodeKind, NodeRef, Timespec, Tree, Xattrs};
use arca_repo::Index;

use crate::RestoreIssue;
use crate::trees::{Selection, Trees, uses};

/// No parent (the target directory itself).
pub(crate) const NO_PARENT: u32 = u32::MAX;

/// What a restore applies to an entry: a tree node without what restores do not use (names
/// of owners, change-detection fields, content), in a fraction of a node's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    pub kind: NodeKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: Timespec,
    pub atime: Timespec,
    pub rdev: u64,
    /// Symlink target and extended attributes, when there are any.
    pub extra: Option<Box<(Vec<u8>, Xattrs)>>,
}

impl Meta {
    fn from_node(n: &NodeRef<'_>) -> Self {
        let xattrs: Xattrs = n.xattrs().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        let extra = (!n.link_target.is_empty() || !xattrs.is_empty())
            .then(|| Box::new((n.link_target.to_vec(), xattrs)));
        Self {
            kind: n.kind,
            mode: n.mode,
            uid: n.uid,
            gid: n.gid,
            mtime: n.mtime,
            atime: n.atime,
            rdev: n.rdev,
            extra,
        }
    }

    /// A node carrying this metadata, for the file-system calls (allocates only for symlink
    /// targets and xattrs).
    pub fn node(&self) -> Node {
        let (link_target, xattrs) = self.extra.as_deref().cloned().unwrap_or_default();
        Node {
            kind: Some(self.kind),
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
            mtime: self.mtime,
            atime: self.atime,
            rdev: self.rdev,
            link_target,
            xattrs,
            ..Node::default()
        }
    }

    /// The symlink target.
    pub fn link_target(&self) -> &[u8] {
        self.extra.as_deref().map_or(&[], |e| e.0.as_slice())
    }
}

/// A directory of the restore; `dirs[0]` is the target directory itself.
#[derive(Debug)]
pub(crate) struct DirPlan {
    /// Path in the target.
    pub path: PathBuf,
    /// Path in the snapshot (for patterns).
    pub snap_path: PathBuf,
    /// Its metadata (none for the target directory).
    pub meta: Option<Meta>,
    /// Parent directory, [`NO_PARENT`] for the target.
    pub parent: u32,
    /// Whether the directory is restored as a whole (not only to reach included entries).
    pub selected: bool,
    /// Entries and subdirectories of the plan directly inside.
    pub children: u32,
    /// Names the snapshot has in this directory (kept only for `--delete`).
    pub names: Vec<Vec<u8>>,
    /// Whether its listing was read.
    pub listed: bool,
}

/// How a non-directory entry is restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    /// A regular file: index into [`Plan::files`].
    File(u32),
    /// A symlink.
    Symlink,
    /// A FIFO, socket or device.
    Special,
    /// A hard link to an earlier entry (index into [`Plan::entries`]).
    Link(u32),
}

/// A non-directory entry (its path is its directory's path and its name, see
/// [`Plan::entry_path`]: a full path per entry would double the plan's size).
#[derive(Debug)]
pub(crate) struct EntryPlan {
    /// File name.
    pub name: Box<[u8]>,
    /// Metadata to apply.
    pub meta: Meta,
    /// Directory holding it.
    pub parent: u32,
    /// How it is restored.
    pub kind: EntryKind,
}

/// A regular file's content.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FilePlan {
    /// Its entry.
    pub entry: u32,
    /// Size in bytes.
    pub size: u64,
    /// Its blocks: `uses[first..end]`.
    pub first: u32,
    /// End of its blocks.
    pub end: u32,
}

/// One block of a file: which blob lands at which offset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockUse {
    /// The blob.
    pub blob: u32,
    /// The file (index into [`Plan::files`]).
    pub file: u32,
    /// Offset in the file.
    pub offset: u64,
}

/// A distinct data blob the restore needs.
#[derive(Debug, Clone)]
pub(crate) struct BlobPlan {
    /// Blob id.
    pub id: Id,
    /// Pack position in the index.
    pub pack: u32,
    /// Offset of the sealed blob in its pack.
    pub offset: u32,
    /// Sealed length.
    pub length: u32,
    /// Plain length.
    pub raw_len: u32,
    /// All zeros (a hole): never fetched.
    pub zero: bool,
    /// Not in the index, or not the length the file's listing gives it: it cannot be had
    /// for this use.
    pub missing: bool,
    /// The length the index gives the blob when the listing gives another (a damaged or
    /// forged listing: its bytes would land shifted, cut or padded).
    pub indexed_len: Option<u32>,
}

impl BlobPlan {
    /// Whether it is read from its pack: neither a hole nor missing from the index.
    pub fn in_pack(&self) -> bool {
        !self.zero && !self.missing
    }

    /// Why a missing blob cannot be had.
    pub fn missing_reason(&self) -> String {
        match self.indexed_len {
            Some(n) => format!(
                "the listing gives data blob {} {} bytes, but it holds {n}",
                self.id, self.raw_len
            ),
            None => format!("data blob {} is not in the index", self.id),
        }
    }
}

/// Everything the restore will do, before it does anything.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub dirs: Vec<DirPlan>,
    pub entries: Vec<EntryPlan>,
    pub files: Vec<FilePlan>,
    pub uses: Vec<BlockUse>,
    pub blobs: Vec<BlobPlan>,
    /// For each entry that others hard-link to, the linking entries.
    pub links: HashMap<u32, Vec<u32>>,
    /// For each entry (not a link) whose file had several names in the source, how many it
    /// had there: names the restore leaves out (not selected, outside the backup) may still
    /// share its inode in the target.
    pub source_nlink: HashMap<u32, u64>,
    /// Problems found while planning (unreadable listings).
    pub issues: Vec<RestoreIssue>,
    /// Bytes of all files.
    pub total_bytes: u64,
}

impl Plan {
    /// The blocks of file `f`.
    pub fn file_uses(&self, f: u32) -> &[BlockUse] {
        let fp = &self.files[f as usize];
        &self.uses[fp.first as usize..fp.end as usize]
    }

    /// Path of entry `e` in the target.
    pub fn entry_path(&self, e: u32) -> PathBuf {
        let ep = &self.entries[e as usize];
        self.dirs[ep.parent as usize]
            .path
            .join(OsStr::from_bytes(&ep.name))
    }

    /// Path of file `f` in the target.
    pub fn file_path(&self, f: u32) -> PathBuf {
        self.entry_path(self.files[f as usize].entry)
    }
}

/// Builds the plan from loaded trees, taking their nodes (a listing used only once is
/// moved into the plan, not copied).
pub(crate) struct Planner<'a> {
    pub index: &'a Index,
    pub sel: &'a Selection,
    pub target: &'a Path,
    /// Keep every directory's names (for `--delete`).
    pub keep_names: bool,
    /// Id of an all-zero blob of the largest chunk size.
    pub zero_id: Id,
}

struct Walk {
    plan: Plan,
    trees: Trees,
    /// How many more times each listing will be entered.
    /// How many more times each listing is entered (see [`uses`]).
    refs: HashMap<Id, u64>,
    /// Listings dropped after their last use: met again, they were counted wrong.
    dropped: HashSet<Id>,
    blob_ids: HashMap<Id, u32>,
    /// Per (device, inode) of a hard-linked entry: the first entry, and its size and content
    /// (only entries alike are linked to it).
    link_first: HashMap<(u64, u64), (u32, u64, Vec<ContentRef>)>,
    /// Directories kept only to reach included entries, to drop when nothing lands in them.
    needed: Vec<bool>,
}

/// A node of a listing being walked, with what the plan takes of it.
struct Pending {
    name: Box<[u8]>,
    meta: Meta,
    size: u64,
    nlink: u64,
    dev: u64,
    inode: u64,
    subtree: Option<Id>,
    /// Its content: `content[first..end]` of its listing's frame.
    first: u32,
    end: u32,
}

/// A directory being walked: its index, the nodes of its listing still to visit, and their
/// content (one vector per listing, not one per file).
type Frame = (u32, std::vec::IntoIter<Pending>, Vec<ContentRef>);

impl Planner<'_> {
    /// Walks the trees depth first, in name order (the order backups write data in, so the
    /// plan's file order follows the packs).
    pub fn build(&self, trees: Trees, root: Id) -> Plan {
        // Sizes of the plan, to allocate it once (an estimate: shared listings count once,
        // left-out entries count too).
        let (mut dirs, mut entries, mut blocks) = (1usize, 0usize, 0usize);
        for plain in trees.values().flatten() {
            let _ = Tree::visit(plain, |n| match n.subtree {
                Some(_) => dirs += 1,
                None => {
                    entries += 1;
                    blocks += n.blocks();
                }
            });
        }
        let refs = uses(&trees, root);
        let mut w = Walk {
            plan: Plan {
                dirs: Vec::with_capacity(dirs),
                entries: Vec::with_capacity(entries),
                files: Vec::with_capacity(entries),
                uses: Vec::with_capacity(blocks),
                blobs: Vec::with_capacity(blocks),
                ..Plan::default()
            },
            trees,
            refs,
            dropped: HashSet::new(),
            blob_ids: HashMap::new(),
            link_first: HashMap::new(),
            needed: vec![true],
        };
        w.plan.dirs.push(DirPlan {
            path: self.target.to_path_buf(),
            snap_path: PathBuf::from("/"),
            meta: None,
            parent: NO_PARENT,
            selected: self.sel.root_selected(),
            children: 0,
            names: vec![],
            listed: false,
        });
        // Explicit stack: deep trees must not exhaust the thread's stack. A subdirectory is
        // walked as soon as it is met, as the backup walked it.
        let mut stack: Vec<Frame> = vec![];
        self.enter(&mut w, &mut stack, 0, root);
        while let Some(top) = stack.last_mut() {
            let d = top.0;
            let Some(node) = top.1.next() else {
                stack.pop();
                continue;
            };
            let is_dir = node.meta.kind == NodeKind::Dir;
            // Without patterns only directories need their snapshot path.
            let snap_path = (is_dir || self.sel.has_patterns()).then(|| {
                w.plan.dirs[d as usize]
                    .snap_path
                    .join(OsStr::from_bytes(&node.name))
            });
            let Some(selected) = self.sel.decide(
                is_dir,
                snap_path.as_deref().unwrap_or(Path::new("")),
                w.plan.dirs[d as usize].selected,
            ) else {
                continue;
            };
            if !is_dir {
                let content = &top.2[node.first as usize..node.end as usize];
                self.add_entry(&mut w, d, node, content);
                continue;
            }
            let idx = w.plan.dirs.len() as u32;
            let sub = node.subtree;
            let path = w.plan.dirs[d as usize]
                .path
                .join(OsStr::from_bytes(&node.name));
            w.plan.dirs.push(DirPlan {
                path,
                snap_path: snap_path.unwrap_or_default(),
                meta: Some(node.meta),
                parent: d,
                selected,
                children: 0,
                names: vec![],
                listed: false,
            });
            w.needed.push(false);
            if selected {
                mark_needed(&mut w, idx);
            }
            if let Some(sub) = sub {
                self.enter(&mut w, &mut stack, idx, sub);
            }
        }
        self.choose_copies(&mut w.plan.blobs);
        finish(w)
    }

    /// For blobs stored in several packs (`backup --cap` stores a block again rather than
    /// reference a pack it barely uses), picks the copy in the pack the restore reads anyway:
    /// the one holding the most blobs that have no other copy, then the most chosen so far.
    fn choose_copies(&self, blobs: &mut [BlobPlan]) {
        if !self.index.has_copies() {
            return;
        }
        let mut weight: HashMap<u32, u64> = HashMap::new();
        let mut several = vec![];
        for (i, b) in blobs.iter().enumerate() {
            if b.missing || b.pack == u32::MAX {
                continue;
            }
            match self.index.locations(BlobKind::Data, &b.id).nth(1) {
                Some(_) => several.push(i),
                None => *weight.entry(b.pack).or_default() += 1,
            }
        }
        for i in several {
            let b = &mut blobs[i];
            let best = self.index.locations(BlobKind::Data, &b.id).max_by_key(|l| {
                (
                    weight.get(&l.pack_index).copied().unwrap_or(0),
                    std::cmp::Reverse(l.pack_index),
                )
            });
            if let Some(l) = best {
                b.pack = l.pack_index;
                b.offset = l.offset;
                b.length = l.length;
                b.raw_len = l.raw_length;
                *weight.entry(l.pack_index).or_default() += 1;
            }
        }
    }

    /// Starts walking the listing `tree_id` of directory `d` (dropping its plaintext when this
    /// is its last use).
    fn enter(&self, w: &mut Walk, stack: &mut Vec<Frame>, d: u32, tree_id: Id) {
        let last = match w.refs.get_mut(&tree_id) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => true,
        };
        let tree = match w.trees.get(&tree_id) {
            Some(Ok(plain)) => {
                Some(pending_nodes(plain).map_err(|e| format!("tree {tree_id}: {e}")))
            }
            Some(Err(e)) => Some(Err(e.clone())),
            None => None,
        };
        if last && w.trees.remove(&tree_id).is_some() {
            w.dropped.insert(tree_id);
        }
        match tree {
            Some(Ok((nodes, content))) => {
                w.plan.dirs[d as usize].listed = true;
                if self.keep_names {
                    w.plan.dirs[d as usize].names = nodes.iter().map(|n| n.name.to_vec()).collect();
                }
                stack.push((d, nodes.into_iter(), content));
            }
            Some(Err(e)) => self.lost_listing(w, d, &e),
            // Never silently: a directory left empty would pass for restored.
            None if w.dropped.contains(&tree_id) => self.lost_listing(
                w,
                d,
                "dropped before its last use (a bug: please report it)",
            ),
            None => {} // not loaded: the load was stopped
        }
    }

    fn lost_listing(&self, w: &mut Walk, d: u32, e: &str) {
        let path = w.plan.dirs[d as usize].path.clone();
        // The directory itself is still restored (empty) when it was selected.
        w.plan.issues.push(RestoreIssue {
            message: format!("{}: cannot read directory listing: {e}", path.display()),
            path,
        });
    }

    fn add_entry(&self, w: &mut Walk, d: u32, node: Pending, content: &[ContentRef]) {
        let e = w.plan.entries.len() as u32;
        let name = node.name;
        if node.nlink > 1 {
            // A link group whose members differ (a damaged or forged listing, or a file
            // changed between the reads of its names) is restored as the listing describes
            // each member: separate entries.
            let alike = |(first, size, c): &(u32, u64, Vec<ContentRef>)| {
                w.plan.entries[*first as usize].meta.kind == node.meta.kind
                    && *size == node.size
                    && c[..] == content[..]
            };
            match w.link_first.get(&(node.dev, node.inode)) {
                Some(f) if alike(f) => {
                    let first = f.0;
                    w.plan.links.entry(first).or_default().push(e);
                    w.plan.entries.push(EntryPlan {
                        name,
                        meta: node.meta,
                        parent: d,
                        kind: EntryKind::Link(first),
                    });
                    mark_needed(w, d);
                    return;
                }
                Some(_) => {}
                None => {
                    let first = (e, node.size, content.to_vec());
                    w.link_first.insert((node.dev, node.inode), first);
                }
            }
            w.plan.source_nlink.insert(e, node.nlink);
        }
        let kind = match node.meta.kind {
            NodeKind::File => {
                let f = w.plan.files.len() as u32;
                let first = w.plan.uses.len() as u32;
                let mut offset = 0u64;
                for c in content {
                    let blob = self.intern(w, &c.id, c.len);
                    w.plan.uses.push(BlockUse {
                        blob,
                        file: f,
                        offset,
                    });
                    offset += u64::from(c.len);
                }
                w.plan.files.push(FilePlan {
                    entry: e,
                    size: node.size,
                    first,
                    end: w.plan.uses.len() as u32,
                });
                w.plan.total_bytes += node.size;
                EntryKind::File(f)
            }
            NodeKind::Symlink => EntryKind::Symlink,
            _ => EntryKind::Special,
        };
        w.plan.entries.push(EntryPlan {
            name,
            meta: node.meta,
            parent: d,
            kind,
        });
        mark_needed(w, d);
    }

    fn intern(&self, w: &mut Walk, id: &Id, len: u32) -> u32 {
        if let Some(&b) = w.blob_ids.get(id)
            && w.plan.blobs[b as usize].raw_len == len
        {
            return b;
        }
        let b = w.plan.blobs.len() as u32;
        let blob = match self.index.get(BlobKind::Data, id) {
            // A length the blob does not have: this use fails (kept apart from the blob's
            // other uses, which may be right).
            Some(loc) if loc.raw_length != len => {
                w.plan.blobs.push(BlobPlan {
                    id: *id,
                    pack: u32::MAX,
                    offset: 0,
                    length: 0,
                    raw_len: len,
                    zero: false,
                    missing: true,
                    indexed_len: Some(loc.raw_length),
                });
                return b;
            }
            Some(loc) => BlobPlan {
                id: *id,
                pack: loc.pack_index,
                offset: loc.offset,
                length: loc.length,
                raw_len: loc.raw_length,
                zero: *id == self.zero_id,
                missing: false,
                indexed_len: None,
            },
            None => BlobPlan {
                id: *id,
                pack: u32::MAX,
                offset: 0,
                length: 0,
                raw_len: len,
                zero: *id == self.zero_id,
                missing: *id != self.zero_id,
                indexed_len: None,
            },
        };
        w.plan.blobs.push(blob);
        w.blob_ids.insert(*id, b);
        b
    }
}

/// The nodes of a listing as the plan takes them, and their content in one vector.
fn pending_nodes(
    plain: &[u8],
) -> Result<(Vec<Pending>, Vec<ContentRef>), arca_format::FormatError> {
    let (mut nodes, mut content) = (vec![], vec![]);
    Tree::visit(plain, |n| {
        let first = content.len() as u32;
        content.extend(n.content());
        nodes.push(Pending {
            name: n.name.into(),
            meta: Meta::from_node(&n),
            size: n.size,
            nlink: n.nlink,
            dev: n.dev,
            inode: n.inode,
            subtree: n.subtree,
            first,
            end: content.len() as u32,
        });
    })?;
    Ok((nodes, content))
}

fn mark_needed(w: &mut Walk, mut d: u32) {
    while d != NO_PARENT && !w.needed[d as usize] {
        w.needed[d as usize] = true;
        d = w.plan.dirs[d as usize].parent;
    }
}

/// Drops directories kept only to reach included entries when nothing landed in them, and
/// counts every directory's children.
fn finish(mut w: Walk) -> Plan {
    // A needed directory's ancestors are needed (mark_needed walks up); directories come
    // after their parents, so one forward pass renumbers them.
    let mut map = vec![NO_PARENT; w.plan.dirs.len()];
    let mut kept = Vec::with_capacity(w.plan.dirs.len());
    for (i, mut d) in std::mem::take(&mut w.plan.dirs).into_iter().enumerate() {
        if !w.needed[i] {
            continue;
        }
        if d.parent != NO_PARENT {
            d.parent = map[d.parent as usize];
        }
        map[i] = kept.len() as u32;
        kept.push(d);
    }
    w.plan.dirs = kept;
    for e in &mut w.plan.entries {
        e.parent = map[e.parent as usize];
    }
    for e in &w.plan.entries {
        w.plan.dirs[e.parent as usize].children += 1;
    }
    // The sizes were upper bounds (left-out entries counted too).
    w.plan.entries.shrink_to_fit();
    w.plan.files.shrink_to_fit();
    w.plan.uses.shrink_to_fit();
    w.plan.blobs.shrink_to_fit();
    for i in 1..w.plan.dirs.len() {
        let p = w.plan.dirs[i].parent as usize;
        w.plan.dirs[p].children += 1;
    }
    w.plan
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arca_format::{ContentRef, IndexFile, IndexPack, PackEntry, Tree};

    /// A file node of `blobs` (`(id byte, length)`), as tests build them.
    pub(crate) fn file(name: &str, blobs: &[(u8, u32)], inode: u64, nlink: u64) -> Node {
        Node {
            name: name.as_bytes().to_vec(),
            kind: Some(NodeKind::File),
            size: blobs.iter().map(|b| u64::from(b.1)).sum(),
            inode,
            nlink,
            content: blobs
                .iter()
                .map(|&(i, len)| ContentRef {
                    id: Id([i; 32]),
                    len,
                })
                .collect(),
            ..Node::default()
        }
    }

    pub(crate) fn dir(name: &str, sub: u8) -> Node {
        Node {
            name: name.as_bytes().to_vec(),
            kind: Some(NodeKind::Dir),
            subtree: Some(Id([sub; 32])),
            ..Node::default()
        }
    }

    /// The plan of `trees` from `root` into `target`: an empty index, nothing selected
    /// apart, every directory's names kept.
    pub(crate) fn planned(trees: Trees, root: Id, target: &Path) -> Plan {
        let index = Index::from_files([&IndexFile {
            supersedes: vec![],
            packs: vec![],
        }]);
        let sel = Selection {
            includes: vec![],
            excludes: vec![],
            only: vec![],
        };
        Planner {
            index: &index,
            sel: &sel,
            target,
            keep_names: true,
            zero_id: Id([0; 32]),
        }
        .build(trees, root)
    }

    /// One listing at two paths (a bind mount backed up beside its source), with a folder
    /// inside: that folder's listing is entered twice, and its files are planned under both
    /// paths. It was dropped after the first, and the second path's folder came back empty.
    #[test]
    fn a_listing_nested_in_one_met_twice_is_walked_twice() {
        let enc = |nodes| Ok(Tree { nodes }.encode().unwrap());
        let mut trees = Trees::new();
        // root: alias/ and real/ share listing 101, which holds sub/ (102), deep/ (103).
        trees.insert(
            Id([100; 32]),
            enc(vec![dir("alias", 101), dir("real", 101)]),
        );
        trees.insert(Id([101; 32]), enc(vec![dir("sub", 102)]));
        trees.insert(
            Id([102; 32]),
            enc(vec![dir("deep", 103), file("f", &[], 1, 1)]),
        );
        trees.insert(Id([103; 32]), enc(vec![file("g", &[], 2, 1)]));
        let uses = uses(&trees, Id([100; 32]));
        assert_eq!(
            [100, 101, 102, 103].map(|i| uses[&Id([i; 32])]),
            [1, 2, 2, 2]
        );
        let p = planned(trees, Id([100; 32]), Path::new("/t"));
        assert!(p.issues.is_empty(), "{:?}", p.issues);
        let mut files: Vec<PathBuf> = p.files.iter().map(|f| p.entry_path(f.entry)).collect();
        files.sort();
        assert_eq!(
            files,
            [
                "/t/alias/sub/deep/g",
                "/t/alias/sub/f",
                "/t/real/sub/deep/g",
                "/t/real/sub/f"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn recipe_has_offsets_shared_blobs_links_and_pruned_dirs() {
        let mut trees = Trees::new();
        let enc = |nodes| Ok(Tree { nodes }.encode().unwrap());
        trees.insert(
            Id([100; 32]),
            enc(vec![
                dir("a", 101),
                dir("b", 102),
                file("f", &[(1, 10), (2, 20), (1, 10)], 7, 2),
            ]),
        );
        trees.insert(
            Id([101; 32]),
            enc(vec![
                file("g", &[(2, 20)], 8, 1),
                file("h", &[(1, 10), (2, 20), (1, 10)], 7, 2),
            ]),
        );
        trees.insert(Id([102; 32]), Err("lost".into()));
        let index = Index::from_files([&IndexFile {
            supersedes: vec![],
            packs: vec![IndexPack {
                id: Id([50; 32]),
                kind: BlobKind::Data,
                size: 1000,
                blobs: vec![
                    PackEntry {
                        id: Id([1; 32]),
                        offset: 8,
                        length: 40,
                        raw_length: 10,
                    },
                    PackEntry {
                        id: Id([2; 32]),
                        offset: 48,
                        length: 50,
                        raw_length: 20,
                    },
                ],
            }],
        }]);
        let sel = Selection {
            includes: vec![],
            excludes: vec![],
            only: vec![],
        };
        let p = Planner {
            index: &index,
            sel: &sel,
            target: Path::new("/t"),
            keep_names: true,
            zero_id: Id([0; 32]),
        }
        .build(trees.clone(), Id([100; 32]));
        assert_eq!(p.dirs.len(), 3);
        assert_eq!(p.dirs[1].path, Path::new("/t/a"));
        assert_eq!(p.issues.len(), 1, "{:?}", p.issues);
        assert_eq!(p.blobs.len(), 2);
        let f = p
            .files
            .iter()
            .find(|f| p.entry_path(f.entry) == Path::new("/t/a/h"))
            .unwrap();
        let offsets: Vec<u64> = p.uses[f.first as usize..f.end as usize]
            .iter()
            .map(|u| u.offset)
            .collect();
        assert_eq!(offsets, vec![0, 10, 30]);
        assert_eq!(
            p.uses[f.first as usize].blob,
            p.uses[f.first as usize + 2].blob
        );
        // h (same inode as f) comes first in the walk (a/ before f): f links to a/h.
        let h = (0..p.entries.len() as u32)
            .find(|&e| p.entry_path(e) == Path::new("/t/a/h"))
            .unwrap();
        assert!(
            p.links[&h]
                .iter()
                .any(|&l| p.entry_path(l) == Path::new("/t/f"))
        );
        assert_eq!(p.dirs[0].children, 3);
        assert_eq!(p.dirs[0].names.len(), 3);

        // With an include pattern, b/ (lost) and f are left out, a/ kept for a/g only.
        let sel = Selection {
            includes: vec![arca_fs::pattern::PathMatcher::new(&["/a/g".to_string()]).unwrap()],
            excludes: vec![],
            only: vec![],
        };
        let p = Planner {
            index: &index,
            sel: &sel,
            target: Path::new("/t"),
            keep_names: false,
            zero_id: Id([0; 32]),
        }
        .build(trees, Id([100; 32]));
        assert_eq!(p.entries.len(), 1);
        assert_eq!(p.dirs.len(), 2);
        assert!(!p.dirs[1].selected);
    }

    #[test]
    fn damaged_listings_fail_their_files_instead_of_misplacing_bytes() {
        let mut trees = Trees::new();
        let enc = |nodes| Ok(Tree { nodes }.encode().unwrap());
        trees.insert(
            Id([100; 32]),
            enc(vec![
                // Blob 1 holds 10 bytes: a listing giving it 15 would place its bytes and
                // 5 zeros, and shift whatever follows.
                file("long", &[(1, 15), (2, 20)], 1, 1),
                file("right", &[(1, 10)], 2, 1),
                // One inode, two contents: not one file linked twice.
                file("x", &[(1, 10)], 9, 2),
                file("y", &[(2, 20)], 9, 2),
                file("z", &[(1, 10)], 9, 2),
            ]),
        );
        let entry = |id: u8, offset: u32, raw_length: u32| PackEntry {
            id: Id([id; 32]),
            offset,
            length: raw_length + 30,
            raw_length,
        };
        let index = Index::from_files([&IndexFile {
            supersedes: vec![],
            packs: vec![IndexPack {
                id: Id([50; 32]),
                kind: BlobKind::Data,
                size: 1000,
                blobs: vec![entry(1, 8, 10), entry(2, 48, 20)],
            }],
        }]);
        let sel = Selection {
            includes: vec![],
            excludes: vec![],
            only: vec![],
        };
        let p = Planner {
            index: &index,
            sel: &sel,
            target: Path::new("/t"),
            keep_names: true,
            zero_id: Id([0; 32]),
        }
        .build(trees, Id([100; 32]));
        let blob_of = |name: &str, i: usize| {
            let f = p
                .files
                .iter()
                .find(|f| p.entry_path(f.entry) == Path::new("/t").join(name))
                .unwrap();
            &p.blobs[p.uses[f.first as usize + i].blob as usize]
        };
        let bad = blob_of("long", 0);
        assert!(bad.missing && !bad.in_pack());
        assert_eq!(bad.indexed_len, Some(10));
        assert!(
            bad.missing_reason().contains("gives data blob"),
            "{}",
            bad.missing_reason()
        );
        // The blob's right uses are not hit.
        assert!(blob_of("right", 0).in_pack());
        assert!(blob_of("long", 1).in_pack());
        // y is a file of its own; z, alike x, is linked to it.
        let e = |name: &str| {
            (0..p.entries.len() as u32)
                .find(|&e| p.entry_path(e) == Path::new("/t").join(name))
                .unwrap()
        };
        assert!(matches!(
            p.entries[e("y") as usize].kind,
            EntryKind::File(_)
        ));
        assert_eq!(p.links[&e("x")], vec![e("z")]);
    }
}

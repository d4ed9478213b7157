//! Building the restore plan: the loaded listings are walked depth first in name order,
//! selecting entries, linking hard links, and giving each distinct blob its pack and range.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use arca_format::{BlobKind, ContentRef, Id, NodeKind, Tree};
use arca_repo::Index;

use super::{BlobPlan, BlockUse, DirPlan, EntryKind, EntryPlan, FilePlan, Meta, NO_PARENT, Plan};
use crate::RestoreIssue;
use crate::trees::{Selection, Trees, uses};

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
            bare: vec![],
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
                bare: vec![],
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
        finish(w, self.keep_names)
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
            message: format!(
                "{}: cannot read directory listing: {e}",
                arca_format::text::shown(&path)
            ),
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

/// Names, in the parent each keeps, the folders about to be dropped whose own listing and
/// every dropped listing below were read: nothing below them is selected, so whatever the
/// selection covers in the target's copy of one is extra. One whose listing was lost may
/// have held selected entries, and neither it nor the folders above it are named.
fn note_bare(w: &mut Walk) {
    let dirs = &w.plan.dirs;
    let mut whole: Vec<bool> = dirs.iter().map(|d| d.listed).collect();
    for i in (1..dirs.len()).rev() {
        if !w.needed[i] && !whole[i] {
            whole[dirs[i].parent as usize] = false;
        }
    }
    let mut bare = vec![];
    for (i, d) in dirs.iter().enumerate().skip(1) {
        if !w.needed[i] && whole[i] && w.needed[d.parent as usize] {
            let name = d.path.file_name().map(|n| n.as_bytes().to_vec());
            bare.extend(name.map(|n| (d.parent as usize, n)));
        }
    }
    for (p, name) in bare {
        w.plan.dirs[p].bare.push(name);
    }
}

/// Drops directories kept only to reach included entries when nothing landed in them, and
/// counts every directory's children.
fn finish(mut w: Walk, keep_names: bool) -> Plan {
    // A needed directory's ancestors are needed (mark_needed walks up); directories come
    // after their parents, so one forward pass renumbers them.
    if keep_names {
        note_bare(&mut w);
    }
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

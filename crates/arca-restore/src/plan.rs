//! The restore plan, made from the snapshot's trees and the index alone before any data is
//! read: every directory and entry with its target path, every file's blocks with their
//! offsets, and every distinct blob with its pack and byte range (the FAST'13 "recipe").

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use arca_format::{BlobKind, Id, Node, NodeKind};
use arca_repo::Index;

use crate::RestoreIssue;
use crate::trees::{Selection, Trees};

/// No parent (the target directory itself).
pub(crate) const NO_PARENT: u32 = u32::MAX;

/// A directory of the restore; `dirs[0]` is the target directory itself.
#[derive(Debug)]
pub(crate) struct DirPlan {
    /// Path in the target.
    pub path: PathBuf,
    /// Path in the snapshot (for patterns).
    pub snap_path: PathBuf,
    /// The snapshot's node (none for the target directory).
    pub node: Option<Node>,
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

/// A non-directory entry.
#[derive(Debug)]
pub(crate) struct EntryPlan {
    /// Path in the target.
    pub path: PathBuf,
    /// The snapshot's node, without its content list (moved into [`Plan::uses`]).
    pub node: Node,
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
    /// Why it cannot be had at all (not in the index).
    pub missing: Option<String>,
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

    /// The entry of file `f`.
    pub fn file_entry(&self, f: u32) -> &EntryPlan {
        &self.entries[self.files[f as usize].entry as usize]
    }
}

/// Builds the plan from loaded trees.
pub(crate) struct Planner<'a> {
    pub index: &'a Index,
    pub trees: &'a Trees,
    pub sel: &'a Selection,
    pub target: &'a Path,
    /// Keep every directory's names (for `--delete`).
    pub keep_names: bool,
    /// Id of an all-zero blob of the largest chunk size.
    pub zero_id: Id,
}

struct Walk {
    plan: Plan,
    blob_ids: HashMap<Id, u32>,
    link_first: HashMap<(u64, u64), u32>,
    /// Directories kept only to reach included entries, to drop when nothing lands in them.
    needed: Vec<bool>,
}

impl Planner<'_> {
    /// Walks the trees depth first, in name order (the order backups write data in, so the
    /// plan's file order follows the packs).
    pub fn build(&self, root: Id) -> Plan {
        let mut w = Walk {
            plan: Plan::default(),
            blob_ids: HashMap::new(),
            link_first: HashMap::new(),
            needed: vec![true],
        };
        w.plan.dirs.push(DirPlan {
            path: self.target.to_path_buf(),
            snap_path: PathBuf::from("/"),
            node: None,
            parent: NO_PARENT,
            selected: self.sel.includes.is_none(),
            children: 0,
            names: vec![],
            listed: false,
        });
        // Explicit stack of (directory index, listing, next node): deep trees must not
        // exhaust the thread's stack. A subdirectory is walked as soon as it is met, as the
        // backup walked it.
        let mut stack: Vec<(u32, &arca_format::Tree, usize)> = vec![];
        self.enter(&mut w, &mut stack, 0, root);
        while let Some(top) = stack.last_mut() {
            let (d, tree, pos) = (top.0, top.1, top.2);
            let Some(node) = tree.nodes.get(pos) else {
                stack.pop();
                continue;
            };
            top.2 += 1;
            let (snap_path, dest) = {
                let dp = &w.plan.dirs[d as usize];
                let name = OsStr::from_bytes(&node.name);
                (dp.snap_path.join(name), dp.path.join(name))
            };
            let Some(selected) =
                self.sel
                    .decide(node, &snap_path, w.plan.dirs[d as usize].selected)
            else {
                continue;
            };
            if !node.is_dir() {
                self.add_entry(&mut w, d, node, dest);
                continue;
            }
            let idx = w.plan.dirs.len() as u32;
            let mut n = node.clone();
            let sub = n.subtree.take();
            n.user = vec![];
            n.group = vec![];
            w.plan.dirs.push(DirPlan {
                path: dest,
                snap_path,
                node: Some(n),
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
        finish(w)
    }

    /// Starts walking the listing `tree_id` of directory `d`.
    fn enter<'t>(
        &'t self,
        w: &mut Walk,
        stack: &mut Vec<(u32, &'t arca_format::Tree, usize)>,
        d: u32,
        tree_id: Id,
    ) {
        match self.trees.get(&tree_id) {
            Some(Ok(t)) => {
                w.plan.dirs[d as usize].listed = true;
                if self.keep_names {
                    w.plan.dirs[d as usize].names =
                        t.nodes.iter().map(|n| n.name.clone()).collect();
                }
                stack.push((d, t, 0));
            }
            Some(Err(e)) => self.lost_listing(w, d, e),
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

    fn add_entry(&self, w: &mut Walk, d: u32, node: &Node, dest: PathBuf) {
        let e = w.plan.entries.len() as u32;
        if node.nlink > 1 {
            match w.link_first.get(&(node.dev, node.inode)) {
                Some(&first) if w.plan.entries[first as usize].node.kind() == node.kind() => {
                    w.plan.links.entry(first).or_default().push(e);
                    let mut n = node.clone();
                    n.content = vec![];
                    w.plan.entries.push(EntryPlan {
                        path: dest,
                        node: n,
                        parent: d,
                        kind: EntryKind::Link(first),
                    });
                    mark_needed(w, d);
                    return;
                }
                Some(_) => {}
                None => {
                    w.link_first.insert((node.dev, node.inode), e);
                }
            }
        }
        let mut n = node.clone();
        let content = std::mem::take(&mut n.content);
        // Owner names are not restored (numeric ids are); drop them early.
        n.user = vec![];
        n.group = vec![];
        let kind = match node.kind() {
            NodeKind::File => {
                let f = w.plan.files.len() as u32;
                let first = w.plan.uses.len() as u32;
                let mut offset = 0u64;
                for c in &content {
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
            path: dest,
            node: n,
            parent: d,
            kind,
        });
        mark_needed(w, d);
    }

    fn intern(&self, w: &mut Walk, id: &Id, len: u32) -> u32 {
        if let Some(&b) = w.blob_ids.get(id) {
            return b;
        }
        let b = w.plan.blobs.len() as u32;
        let blob = match self.index.get(BlobKind::Data, id) {
            Some(loc) => BlobPlan {
                id: *id,
                pack: loc.pack_index,
                offset: loc.offset,
                length: loc.length,
                raw_len: loc.raw_length,
                zero: *id == self.zero_id,
                missing: None,
            },
            None => BlobPlan {
                id: *id,
                pack: u32::MAX,
                offset: 0,
                length: 0,
                raw_len: len,
                zero: *id == self.zero_id,
                missing: (*id != self.zero_id)
                    .then(|| format!("data blob {id} is not in the index")),
            },
        };
        w.plan.blobs.push(blob);
        w.blob_ids.insert(*id, b);
        b
    }
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
    for i in 1..w.plan.dirs.len() {
        let p = w.plan.dirs[i].parent as usize;
        w.plan.dirs[p].children += 1;
    }
    w.plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use arca_format::{ContentRef, IndexFile, IndexPack, PackEntry, Tree};

    fn file(name: &str, blobs: &[(u8, u32)], inode: u64, nlink: u64) -> Node {
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

    fn dir(name: &str, sub: u8) -> Node {
        Node {
            name: name.as_bytes().to_vec(),
            kind: Some(NodeKind::Dir),
            subtree: Some(Id([sub; 32])),
            ..Node::default()
        }
    }

    #[test]
    fn recipe_has_offsets_shared_blobs_links_and_pruned_dirs() {
        let mut trees = Trees::new();
        trees.insert(
            Id([100; 32]),
            Ok(Tree {
                nodes: vec![
                    dir("a", 101),
                    dir("b", 102),
                    file("f", &[(1, 10), (2, 20), (1, 10)], 7, 2),
                ],
            }),
        );
        trees.insert(
            Id([101; 32]),
            Ok(Tree {
                nodes: vec![
                    file("g", &[(2, 20)], 8, 1),
                    file("h", &[(1, 10), (2, 20), (1, 10)], 7, 2),
                ],
            }),
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
            includes: None,
            excludes: None,
        };
        let p = Planner {
            index: &index,
            trees: &trees,
            sel: &sel,
            target: Path::new("/t"),
            keep_names: true,
            zero_id: Id([0; 32]),
        }
        .build(Id([100; 32]));
        assert_eq!(p.dirs.len(), 3);
        assert_eq!(p.dirs[1].path, Path::new("/t/a"));
        assert_eq!(p.issues.len(), 1, "{:?}", p.issues);
        assert_eq!(p.blobs.len(), 2);
        let f = p
            .files
            .iter()
            .find(|f| p.entries[f.entry as usize].path == Path::new("/t/a/h"))
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
        let h = p
            .entries
            .iter()
            .position(|e| e.path == Path::new("/t/a/h"))
            .unwrap() as u32;
        assert!(
            p.links[&h]
                .iter()
                .any(|&l| p.entries[l as usize].path == Path::new("/t/f"))
        );
        assert_eq!(p.dirs[0].children, 3);
        assert_eq!(p.dirs[0].names.len(), 3);

        // With an include pattern, b/ (lost) and f are left out, a/ kept for a/g only.
        let sel = Selection {
            includes: Some(arca_fs::pattern::PathMatcher::new(&["/a/g".to_string()]).unwrap()),
            excludes: None,
        };
        let p = Planner {
            index: &index,
            trees: &trees,
            sel: &sel,
            target: Path::new("/t"),
            keep_names: false,
            zero_id: Id([0; 32]),
        }
        .build(Id([100; 32]));
        assert_eq!(p.entries.len(), 1);
        assert_eq!(p.dirs.len(), 2);
        assert!(!p.dirs[1].selected);
    }
}

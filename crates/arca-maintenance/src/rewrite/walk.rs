//! The tree walk of `rewrite`: directory listings rewritten bottom-up without the entries the
//! exclusion predicate selects; a subtree with nothing to drop keeps its id and is not stored.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::AtomicBool;

use arca_format::{BlobKind, Id, Node, NodeKind, NodeRef, Tree};
use arca_repo::trees::{Listings, TreeLoader};
use arca_repo::{Index, Repository};

use super::store::TreeWriter;
use super::{Excluded, Removed, RewriteError};

/// One entry dropped from a listing.
#[derive(Debug)]
struct Dropped {
    name: Vec<u8>,
    kind: NodeKind,
    files: u64,
    bytes: u64,
}

/// A tree after rewriting at one path: its (possibly new) id and what was dropped below it.
#[derive(Debug)]
pub(super) struct Outcome {
    /// The tree's id after rewriting (the old one when nothing was dropped below it).
    pub(super) id: Id,
    /// Entries dropped from this listing, in name order.
    dropped: Vec<Dropped>,
    /// Subdirectories that changed, in name order.
    children: Vec<(Vec<u8>, Rc<Outcome>)>,
    /// Regular files dropped below this tree (each name of a hard-linked file counts).
    pub(super) files: u64,
    /// Their bytes.
    pub(super) bytes: u64,
}

impl Outcome {
    /// Whether anything was dropped below this tree.
    pub(super) fn changed(&self) -> bool {
        !self.dropped.is_empty() || !self.children.is_empty()
    }

    /// The dropped entries by absolute path (`path` is this tree's), in tree order.
    pub(super) fn removed(&self, path: &Path) -> Vec<Removed> {
        let mut out = vec![];
        self.collect(path, &mut out);
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    fn collect(&self, path: &Path, out: &mut Vec<Removed>) {
        for d in &self.dropped {
            out.push(Removed {
                path: path.join(OsStr::from_bytes(&d.name)),
                kind: d.kind,
                files: d.files,
                bytes: d.bytes,
            });
        }
        for (name, c) in &self.children {
            c.collect(&path.join(OsStr::from_bytes(name)), out);
        }
    }
}

/// Rewrites the trees of snapshots, each distinct (tree, path) pair once over the whole run.
pub(super) struct Walker<'a> {
    repo: &'a Repository,
    index: &'a Index,
    excluded: &'a Excluded<'a>,
    /// Outcomes by tree id and absolute path (patterns depend on the path).
    memo: HashMap<(Id, PathBuf), Rc<Outcome>>,
    /// Regular files and their bytes in a whole tree (does not depend on the path).
    sizes: HashMap<Id, (u64, u64)>,
    /// Where new trees go.
    pub(super) out: TreeWriter<'a>,
}

/// The listings of one snapshot and which snapshot they belong to (for errors).
struct Pass<'l> {
    snapshot: Id,
    listings: &'l Listings,
}

impl Pass<'_> {
    /// The decoded listing of `tree` at `path`.
    fn tree(&self, tree: Id, path: &Path) -> Result<Tree, RewriteError> {
        let fail = |detail: String| RewriteError::Listing {
            snapshot: self.snapshot,
            path: path.to_path_buf(),
            tree,
            detail,
        };
        match self.listings.get(&tree) {
            Some(Ok(plain)) => Tree::decode(plain).map_err(|e| fail(e.to_string())),
            Some(Err(why)) => Err(fail(why.clone())),
            None => Err(fail("not loaded".into())),
        }
    }
}

impl<'a> Walker<'a> {
    /// A walker over `repo`'s trees; new trees go to packs (not in a dry run).
    pub(super) fn new(
        repo: &'a Repository,
        index: &'a Index,
        excluded: &'a Excluded<'a>,
        dry_run: bool,
    ) -> Self {
        Self {
            repo,
            index,
            excluded,
            memo: HashMap::new(),
            sizes: HashMap::new(),
            out: TreeWriter::new(repo, dry_run),
        }
    }

    /// Rewrites the tree `root` of `snapshot` (a directory standing for `/`). Its listings
    /// are loaded in bulk first, except those whose outcome earlier snapshots already gave.
    pub(super) fn rewrite(&mut self, snapshot: Id, root: Id) -> Result<Rc<Outcome>, RewriteError> {
        let stop = AtomicBool::new(false);
        let listings = {
            let loader = TreeLoader::new(self.repo, self.index, &stop);
            let (memo, sizes, excluded) = (&self.memo, &self.sizes, self.excluded);
            // The flag passed down is whether the directory is kept (not inside a dropped
            // one); a dropped directory's listings are only needed for its counts.
            let keep = |node: &NodeRef<'_>, path: &Path, kept: bool| -> Option<bool> {
                let sub = node.subtree?;
                if !kept || excluded(path, true) {
                    (!sizes.contains_key(&sub)).then_some(false)
                } else {
                    (!memo.contains_key(&(sub, path.to_path_buf()))).then_some(true)
                }
            };
            if self.memo.contains_key(&(root, PathBuf::from("/"))) {
                Listings::new()
            } else {
                loader.load(root, &keep)
            }
        };
        let pass = Pass {
            snapshot,
            listings: &listings,
        };
        self.tree(&pass, root, Path::new("/"))
    }

    /// The rewritten form of tree `id` found at `path`.
    fn tree(&mut self, pass: &Pass<'_>, id: Id, path: &Path) -> Result<Rc<Outcome>, RewriteError> {
        let key = (id, path.to_path_buf());
        if let Some(o) = self.memo.get(&key) {
            return Ok(Rc::clone(o));
        }
        let tree = pass.tree(id, path)?;
        let mut kept = Vec::with_capacity(tree.nodes.len());
        let (mut dropped, mut children) = (vec![], vec![]);
        let (mut files, mut bytes) = (0, 0);
        for mut node in tree.nodes {
            let child = path.join(OsStr::from_bytes(&node.name));
            if (self.excluded)(&child, node.kind == Some(NodeKind::Dir)) {
                let (f, b) = self.counts(pass, &node, &child)?;
                files += f;
                bytes += b;
                let kind = node.kind();
                dropped.push(Dropped {
                    name: node.name,
                    kind,
                    files: f,
                    bytes: b,
                });
                continue;
            }
            if let (Some(NodeKind::Dir), Some(sub)) = (node.kind, node.subtree) {
                let o = self.tree(pass, sub, &child)?;
                if o.changed() {
                    node.subtree = Some(o.id);
                    files += o.files;
                    bytes += o.bytes;
                    children.push((node.name.clone(), o));
                }
            }
            kept.push(node);
        }
        let new_id = if dropped.is_empty() && children.is_empty() {
            id
        } else {
            let index = self.index;
            self.out.store(
                &Tree { nodes: kept },
                &format!("rewritten tree of {}", arca_format::text::shown(path)),
                |t| index.contains(BlobKind::Tree, t),
            )?
        };
        let o = Rc::new(Outcome {
            id: new_id,
            dropped,
            children,
            files,
            bytes,
        });
        self.memo.insert(key, Rc::clone(&o));
        Ok(o)
    }

    /// Regular files and bytes of a dropped entry (a directory: everything below it).
    fn counts(
        &mut self,
        pass: &Pass<'_>,
        node: &Node,
        path: &Path,
    ) -> Result<(u64, u64), RewriteError> {
        match (node.kind(), node.subtree) {
            (NodeKind::File, _) => Ok((1, node.size)),
            (NodeKind::Dir, Some(sub)) => self.tree_size(pass, sub, path),
            _ => Ok((0, 0)),
        }
    }

    /// Regular files and bytes in the whole tree `id` found at `path`. A listing that cannot
    /// be read counts as empty: it is being dropped, so it must not stop the rewrite (dropping
    /// a damaged directory is a way to get rid of it).
    fn tree_size(
        &mut self,
        pass: &Pass<'_>,
        id: Id,
        path: &Path,
    ) -> Result<(u64, u64), RewriteError> {
        if let Some(s) = self.sizes.get(&id) {
            return Ok(*s);
        }
        let Ok(tree) = pass.tree(id, path) else {
            return Ok((0, 0));
        };
        let (mut files, mut bytes) = (0, 0);
        for node in &tree.nodes {
            let (f, b) = self.counts(pass, node, &path.join(OsStr::from_bytes(&node.name)))?;
            files += f;
            bytes += b;
        }
        self.sizes.insert(id, (files, bytes));
        Ok((files, bytes))
    }
}

//! The dump's walker: entries of the target depth first in name order, one listing loaded at a
//! time (memory: the listings on the path from the target down), hard links found by inode.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::mpsc::SyncSender;

use arca_format::{Node, NodeKind};
use arca_repo::{Index, Repository};

use super::{DumpError, Entry, Target, snapshot_path};

/// What the walker hands the fetcher.
#[derive(Debug)]
pub(crate) enum Item {
    /// The next entry.
    Entry(Box<Entry>),
    /// The walk cannot go on.
    Failed(DumpError),
}

/// Sends the entries of a target, in archive order.
pub(crate) struct Walker<'a> {
    pub repo: &'a Repository,
    pub index: &'a Index,
    /// Send the second and later names of a file with several links as links to the first.
    pub hardlinks: bool,
    pub out: SyncSender<Item>,
}

/// The first archive path of an inode with several links, what it holds (its size and content
/// list), and how many names of it are still to come (the entry is dropped once all are met).
struct FirstName {
    path: Vec<u8>,
    size: u64,
    content: Vec<arca_format::ContentRef>,
    left: u64,
}

impl Walker<'_> {
    /// Walks `target`; returns when done, when the receiver is gone, or after sending a failure.
    pub fn run(self, target: &Target) {
        let mut links: HashMap<(u64, u64), FirstName> = HashMap::new();
        // Listings being walked: the folder's archive path and its nodes still to send.
        let mut stack: Vec<(Vec<u8>, std::vec::IntoIter<Node>)> = vec![];
        match target {
            Target::Root(tree) => match self.listing(tree, Path::new("/")) {
                Some(nodes) => stack.push((vec![], nodes)),
                None => return,
            },
            Target::Entry { path, node } => {
                let rel = path.as_os_str().as_bytes();
                let rel = rel.strip_prefix(b"/").unwrap_or(rel).to_vec();
                if !self.visit(rel, (**node).clone(), &mut links, &mut stack) {
                    return;
                }
            }
        }
        while let Some((dir, nodes)) = stack.last_mut() {
            let Some(node) = nodes.next() else {
                stack.pop();
                continue;
            };
            let mut path = dir.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(&node.name);
            if !self.visit(path, node, &mut links, &mut stack) {
                return;
            }
        }
    }

    /// Sends one entry and, for a folder, pushes its listing; false to stop.
    fn visit(
        &self,
        path: Vec<u8>,
        mut node: Node,
        links: &mut HashMap<(u64, u64), FirstName>,
        stack: &mut Vec<(Vec<u8>, std::vec::IntoIter<Node>)>,
    ) -> bool {
        let mut link = None;
        if self.hardlinks && node.kind() == NodeKind::File && node.nlink > 1 && node.inode != 0 {
            let key = (node.dev, node.inode);
            match links.get_mut(&key) {
                // A name whose size or content differs from the first's (the file changed
                // between the reads of its names, or a damaged listing) keeps its own content,
                // as restore keeps it: a link would give it the first name's.
                Some(first) if first.size == node.size && first.content == node.content => {
                    link = Some(first.path.clone());
                    first.left = first.left.saturating_sub(1);
                    if first.left == 0 {
                        links.remove(&key);
                    }
                }
                Some(_) => {}
                None => {
                    links.insert(
                        key,
                        FirstName {
                            path: path.clone(),
                            size: node.size,
                            content: node.content.clone(),
                            left: node.nlink - 1,
                        },
                    );
                }
            }
        }
        let subtree = node.subtree.take().filter(|_| node.is_dir());
        if link.is_some() {
            node.content = vec![];
        }
        let size = node.content.iter().map(|c| u64::from(c.len)).sum();
        let entry = Entry {
            path,
            node,
            size,
            link,
        };
        let here = subtree.map(|s| (s, entry.path.clone()));
        if self.out.send(Item::Entry(Box::new(entry))).is_err() {
            return false;
        }
        if let Some((tree, dir)) = here {
            let shown = snapshot_path(&dir);
            match self.listing(&tree, &shown) {
                Some(nodes) => stack.push((dir, nodes)),
                None => return false,
            }
        }
        true
    }

    /// The nodes of a listing, or `None` after sending the failure.
    fn listing(&self, tree: &arca_format::Id, path: &Path) -> Option<std::vec::IntoIter<Node>> {
        match self.repo.load_tree(self.index, tree) {
            Ok(t) => Some(t.nodes.into_iter()),
            Err(source) => {
                let _ = self.out.send(Item::Failed(DumpError::Repo {
                    path: Path::new(OsStr::new("/")).join(path),
                    source,
                }));
                None
            }
        }
    }
}

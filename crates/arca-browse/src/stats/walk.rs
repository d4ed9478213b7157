//! The stats walk of one snapshot over its loaded listings: every entry counted as restic's
//! walker counts it (depth first, a shared subtree each time it appears), blobs marked in the
//! selection's bitmaps.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use arca_format::{BlobKind, Id, Node, NodeKind, Tree};
use arca_repo::trees::Listings;

use super::{Mode, Stats, StatsError};

/// One snapshot's own counts.
pub(super) struct Walked {
    pub restore_size: u64,
    pub entries: u64,
}

fn listing(
    listings: &Listings,
    tree: &Id,
    snapshot: &Id,
    dir: &[u8],
) -> Result<Vec<Node>, StatsError> {
    let err = |detail: String| StatsError::Listing {
        snapshot: snapshot.short(),
        path: Path::new("/").join(OsStr::from_bytes(dir)),
        detail,
    };
    match listings.get(tree) {
        Some(Ok(plain)) => Tree::decode(plain)
            .map(|t| t.nodes)
            .map_err(|e| err(format!("tree {tree}: {e}"))),
        Some(Err(e)) => Err(err(e.clone())),
        None => Err(err(format!("tree {tree} was not loaded"))),
    }
}

/// Walks the snapshot `id` whose root listing is `root`, adding to `stats`.
pub(super) fn walk(
    stats: &mut Stats<'_>,
    id: &Id,
    root: Id,
    listings: &Listings,
) -> Result<Walked, StatsError> {
    let mut w = Walked {
        restore_size: 0,
        entries: 0,
    };
    // Inodes with several links met in this snapshot (restic counts their size once).
    let mut links: HashSet<(u64, u64)> = HashSet::new();
    stats.use_blob(BlobKind::Tree, &root);
    // One path buffer, cut back to a folder's length when the walk returns to it: a frame
    // per level holding its own full path took memory growing with the square of the depth.
    let mut path: Vec<u8> = vec![];
    let mut stack: Vec<(usize, std::vec::IntoIter<Node>)> =
        vec![(0, listing(listings, &root, id, b"")?.into_iter())];
    while let Some((len, nodes)) = stack.last_mut() {
        let Some(node) = nodes.next() else {
            stack.pop();
            continue;
        };
        path.truncate(*len);
        path.push(b'/');
        path.extend_from_slice(&node.name);
        w.entries += 1;
        let counted = node.nlink == 1
            || node.is_dir()
            || node.inode == 0
            || links.insert((node.inode, node.dev));
        if counted {
            w.restore_size += node.size;
        }
        stats.count(&node, &path, counted);
        if node.kind() == NodeKind::File {
            for c in &node.content {
                stats.use_blob(BlobKind::Data, &c.id);
            }
        }
        if let Some(sub) = node.subtree.filter(|_| node.is_dir()) {
            stats.use_blob(BlobKind::Tree, &sub);
            let nodes = listing(listings, &sub, id, &path)?;
            stack.push((path.len(), nodes.into_iter()));
        }
    }
    Ok(w)
}

impl Stats<'_> {
    /// Counts one entry for the mode (`counted`: its size counts toward the restore size).
    fn count(&mut self, node: &Node, path: &[u8], counted: bool) {
        match self.mode {
            Mode::RestoreSize => {
                self.totals.total_file_count += 1;
                if counted {
                    self.totals.total_size += node.size;
                }
            }
            Mode::FilesByContents | Mode::BlobsPerFile => {
                // A file is its list of blobs (an empty list for folders, links and empty
                // files, as restic counts them).
                let ids: Vec<u8> = node.content.iter().flat_map(|c| *c.id.as_bytes()).collect();
                if !self.contents.insert(self.repo.key().blob_id(&ids)) {
                    return;
                }
                if self.mode == Mode::FilesByContents {
                    self.totals.total_size += node.size;
                    self.totals.total_file_count += 1;
                    return;
                }
                for c in &node.content {
                    let seen = match self.path_blobs.get_mut(path) {
                        Some(s) => s,
                        None => {
                            self.totals.total_file_count += 1;
                            self.path_blobs.entry(path.to_vec()).or_default()
                        }
                    };
                    if seen.insert(c.id) {
                        self.totals.total_size += u64::from(c.len);
                        self.totals.total_blob_count += 1;
                    }
                }
            }
            Mode::RawData => {}
        }
    }
}

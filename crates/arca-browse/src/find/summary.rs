//! What `find` remembers of each listing it searched: the hits below it, relative to it, so
//! that the same listing met again (in a later snapshot, or twice in one) is answered without
//! reading it; the memory this takes is bounded.

use std::collections::HashMap;

use arca_format::{Id, Node};

use super::{BlobHit, FindError, Hit, Sink};

/// A hit as remembered: the entry (without its content list) and what matched in it.
#[derive(Debug)]
pub(crate) struct CachedHit {
    pub(crate) node: Node,
    pub(crate) blobs: Vec<BlobHit>,
    pub(crate) tree: Option<Id>,
}

/// One entry of a listing that is a hit or leads to hits.
#[derive(Debug)]
pub(crate) struct Item {
    pub(crate) name: Vec<u8>,
    pub(crate) hit: Option<Box<CachedHit>>,
    /// The entry's listing, whose own summary is in the cache (and not empty).
    pub(crate) sub: Option<Id>,
}

/// Hits below one listing, in name order; empty when there are none.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    pub(crate) items: Vec<Item>,
}

/// Listing summaries by tree id (and path, when the answer depends on where the listing is).
#[derive(Debug)]
pub(crate) struct Cache {
    map: HashMap<(Id, Vec<u8>), Summary>,
    path_dependent: bool,
    bytes: usize,
    budget: usize,
    /// Some summary was refused since the last [`Cache::end_snapshot`].
    refused: bool,
}

impl Cache {
    pub(crate) fn new(path_dependent: bool, budget: usize) -> Self {
        Self {
            map: HashMap::new(),
            path_dependent,
            bytes: 0,
            budget,
            refused: false,
        }
    }

    fn key(&self, id: Id, path: &[u8]) -> (Id, Vec<u8>) {
        if self.path_dependent {
            (id, path.to_vec())
        } else {
            (id, Vec::new())
        }
    }

    pub(crate) fn get(&self, id: Id, path: &[u8]) -> Option<&Summary> {
        self.map.get(&self.key(id, path))
    }

    pub(crate) fn contains(&self, id: Id, path: &[u8]) -> bool {
        self.get(id, path).is_some()
    }

    /// Remembers `summary` if the budget allows; says whether it did.
    pub(crate) fn insert(&mut self, id: Id, path: &[u8], summary: Summary) -> bool {
        let key = self.key(id, path);
        let cost = cost(&key, &summary);
        if self.bytes + cost > self.budget {
            self.refused = true;
            return false;
        }
        self.bytes += cost;
        self.map.insert(key, summary);
        true
    }

    /// Between snapshots: a cache that filled up is emptied, so that the next snapshots'
    /// new listings can be remembered (never during a snapshot: summaries refer to others).
    pub(crate) fn end_snapshot(&mut self) {
        if self.refused {
            self.map.clear();
            self.map.shrink_to_fit();
            self.bytes = 0;
            self.refused = false;
        }
    }

    /// Estimated bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Approximate heap and table bytes of one entry.
fn cost(key: &(Id, Vec<u8>), s: &Summary) -> usize {
    let node = |n: &Node| {
        std::mem::size_of::<Node>()
            + n.name.len()
            + n.user.len()
            + n.group.len()
            + n.link_target.len()
            + n.xattrs
                .iter()
                .map(|(k, v)| k.len() + v.len() + 48)
                .sum::<usize>()
    };
    64 + key.1.len()
        + std::mem::size_of::<Summary>()
        + s.items
            .iter()
            .map(|i| {
                std::mem::size_of::<Item>()
                    + i.name.len()
                    + i.hit.as_ref().map_or(0, |h| {
                        std::mem::size_of::<CachedHit>()
                            + node(&h.node)
                            + h.blobs
                                .iter()
                                .map(|b| std::mem::size_of::<BlobHit>() + 8 * b.offsets.len())
                                .sum::<usize>()
                    })
            })
            .sum::<usize>()
}

/// Appends `name` to the folder path `path[..base]`.
pub(crate) fn push_name(path: &mut Vec<u8>, base: usize, name: &[u8]) {
    path.truncate(base);
    if !path.ends_with(b"/") {
        path.push(b'/');
    }
    path.extend_from_slice(name);
}

/// Hands `h` at `path` (in listing `tree`) to the sink.
pub(crate) fn emit(
    sink: &mut Sink<'_>,
    path: &[u8],
    tree: Id,
    h: &CachedHit,
) -> Result<(), FindError> {
    sink(&Hit {
        path,
        node: &h.node,
        parent_tree: tree,
        blobs: &h.blobs,
        tree: h.tree,
    })?;
    Ok(())
}

/// Hands every hit below the cached listing `tree` at `path` to the sink, in name order.
pub(crate) fn expand(
    cache: &Cache,
    tree: Id,
    path: &mut Vec<u8>,
    sink: &mut Sink<'_>,
    hits: &mut u64,
) -> Result<(), FindError> {
    let Some(s) = cache.get(tree, path) else {
        return Err(FindError::Listing {
            id: tree,
            path: String::from_utf8_lossy(path).into_owned(),
            why: "its summary is missing from the cache".into(),
        });
    };
    let base = path.len();
    for item in &s.items {
        push_name(path, base, &item.name);
        if let Some(h) = &item.hit {
            emit(sink, path, tree, h)?;
            *hits += 1;
        }
        if let Some(sub) = item.sub {
            expand(cache, sub, path, sink, hits)?;
        }
    }
    path.truncate(base);
    Ok(())
}

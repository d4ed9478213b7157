//! `find`: the entries whose names or paths match patterns, or the files and folders that use
//! given blobs, trees or packs, across snapshots, each distinct listing searched once.
//!
//! Each snapshot's listings are loaded in bulk ([`arca_repo::trees::TreeLoader`]) and walked
//! depth first in name order. What a listing holds that the search looks for is remembered
//! per tree id ([`summary`]): a listing met again in a later snapshot (or twice in one) is
//! answered from memory without being read. When a pattern holds a `/` the answer depends on
//! where the listing is, and listings are remembered per (tree id, path). Anchored patterns
//! leave unread the folders below which they cannot match.

mod ids;
mod names;
mod summary;
#[cfg(test)]
pub(crate) mod testrepo;
#[cfg(test)]
mod tests;
mod time;

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use arca_format::{Id, Node, NodeKind, NodeRef, Tree};
use arca_repo::trees::{Listings, TreeLoader};
use arca_repo::{Index, RepoError, Repository};

pub use ids::{ObjectKind, Wanted};
pub use names::NameQuery;
pub use time::parse_time;

use summary::{Cache, CachedHit, Item, Summary, emit, expand, push_name};

/// Memory the remembered listings may take by default.
pub const DEFAULT_CACHE_BUDGET: usize = 64 << 20;

/// A `find` failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FindError {
    /// The repository failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// A pattern does not compile.
    #[error(transparent)]
    Pattern(#[from] arca_fs::pattern::PatternError),
    /// A time is in none of the accepted forms.
    #[error(
        "invalid time {value:?}: expected YYYY-MM-DD, YYYY-MM-DD HH:MM, YYYY-MM-DD HH:MM:SS \
         or RFC 3339"
    )]
    Time {
        /// The text given.
        value: String,
    },
    /// `--oldest` lies after `--newest`.
    #[error("--oldest must be a time before --newest")]
    TimeWindow,
    /// An id argument is malformed.
    #[error("invalid {kind} id {value:?}: {why}")]
    BadId {
        /// blob, tree or pack.
        kind: &'static str,
        /// The argument.
        value: String,
        /// What is wrong.
        why: &'static str,
    },
    /// No object of the index has this id prefix.
    #[error("no {kind} in the index matches {value:?}")]
    NoSuchObject {
        /// blob, tree or pack.
        kind: &'static str,
        /// The argument.
        value: String,
    },
    /// Several objects have this id prefix.
    #[error("{kind} id prefix {value:?} is ambiguous: {count} or more objects match")]
    Ambiguous {
        /// blob, tree or pack.
        kind: &'static str,
        /// The argument.
        value: String,
        /// How many matched (at least).
        count: usize,
    },
    /// A listing could not be read.
    #[error("cannot read the listing of {path} (tree {id}): {why}")]
    Listing {
        /// Its tree id.
        id: Id,
        /// Where it is in the snapshot.
        path: String,
        /// Why.
        why: String,
    },
    /// Writing the results failed.
    #[error("writing the results: {0}")]
    Output(#[from] std::io::Error),
}

/// What to look for.
#[derive(Debug, Clone)]
pub enum Query {
    /// Entries matching patterns.
    Names(NameQuery),
    /// Files and folders using objects.
    Objects(Wanted),
}

impl Query {
    fn path_dependent(&self) -> bool {
        matches!(self, Query::Names(q) if q.path_dependent())
    }

    fn may_descend(&self, dir: &[u8]) -> bool {
        match self {
            Query::Names(q) => q.may_match_below(dir),
            Query::Objects(_) => true,
        }
    }

    /// Whether `node` at `path` is a hit: the blobs and tree looked for that it uses.
    fn check(&self, node: &Node, path: &[u8]) -> Option<(Vec<BlobHit>, Option<Id>)> {
        match self {
            Query::Names(q) => q.matches(node, path).then(|| (vec![], None)),
            Query::Objects(w) => {
                let mut blobs: Vec<BlobHit> = vec![];
                if node.kind() == NodeKind::File {
                    let mut offset = 0u64;
                    for c in &node.content {
                        if w.wants_data(&c.id) {
                            match blobs.iter_mut().find(|b| b.id == c.id) {
                                Some(b) => b.offsets.push(offset),
                                None => blobs.push(BlobHit {
                                    id: c.id,
                                    length: c.len,
                                    offsets: vec![offset],
                                }),
                            }
                        }
                        offset += u64::from(c.len);
                    }
                }
                let tree = node.subtree.filter(|s| node.is_dir() && w.wants_tree(s));
                (!blobs.is_empty() || tree.is_some()).then_some((blobs, tree))
            }
        }
    }
}

/// A data blob found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobHit {
    /// The blob.
    pub id: Id,
    /// Its plain length.
    pub length: u32,
    /// Where it lies in the file (several places when the file repeats it).
    pub offsets: Vec<u64>,
}

/// One entry found.
#[derive(Debug)]
pub struct Hit<'a> {
    /// Absolute path in the snapshot (bytes: names need not be UTF-8).
    pub path: &'a [u8],
    /// The entry, without its content list.
    pub node: &'a Node,
    /// The listing holding the entry (the root tree itself for `/`).
    pub parent_tree: Id,
    /// With [`Query::Objects`]: the data blobs looked for that the file uses.
    pub blobs: &'a [BlobHit],
    /// With [`Query::Objects`]: the folder's tree, when it is looked for.
    pub tree: Option<Id>,
}

/// Receives the hits in name order (depth first); an error stops the search.
pub type Sink<'s> = dyn FnMut(&Hit<'_>) -> std::io::Result<()> + 's;

/// Counts of a search, over all snapshots so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FindStats {
    /// Listings read and searched.
    pub listings_read: u64,
    /// Listings answered from memory (met before).
    pub listings_reused: u64,
}

/// Searches snapshots one after another, remembering what it learnt of each listing.
#[derive(Debug)]
pub struct Finder<'a> {
    repo: &'a Repository,
    index: &'a Index,
    query: Query,
    cache: Cache,
    stats: FindStats,
    /// Listings below a snapshot's root that could not be read, since the last
    /// [`Finder::take_skipped`]: their folders were left out, their siblings searched.
    skipped: Vec<FindError>,
}

/// What a walked listing left in the cache.
enum State {
    /// Nothing below it is a hit.
    Empty,
    /// Its summary is remembered.
    Cached,
    /// It holds hits but was not remembered (budget).
    Uncached,
}

impl<'a> Finder<'a> {
    /// A finder for `query` over `repo`, remembering up to [`DEFAULT_CACHE_BUDGET`] bytes.
    pub fn new(repo: &'a Repository, index: &'a Index, query: Query) -> Self {
        let cache = Cache::new(query.path_dependent(), DEFAULT_CACHE_BUDGET);
        Self {
            repo,
            index,
            query,
            cache,
            stats: FindStats::default(),
            skipped: vec![],
        }
    }

    /// The listings below a root that could not be read since the last call (each a
    /// [`FindError::Listing`]): the searches went on without them.
    pub fn take_skipped(&mut self) -> Vec<FindError> {
        std::mem::take(&mut self.skipped)
    }

    /// Sets how many bytes the remembered listings may take (0 remembers nothing).
    pub fn with_cache_budget(mut self, bytes: usize) -> Self {
        self.cache = Cache::new(self.query.path_dependent(), bytes);
        self
    }

    /// Counts so far.
    pub fn stats(&self) -> FindStats {
        self.stats
    }

    /// Estimated bytes the remembered listings take.
    pub fn cache_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// Searches the snapshot whose root tree is `root`, handing each hit to `sink` in name
    /// order; returns the number of hits.
    pub fn search(&mut self, root: Id, sink: &mut Sink<'_>) -> Result<u64, FindError> {
        let mut hits = 0;
        if let Query::Objects(w) = &self.query
            && w.wants_tree(&root)
        {
            let node = Node {
                kind: Some(NodeKind::Dir),
                mode: 0o755,
                subtree: Some(root),
                ..Node::default()
            };
            let h = CachedHit {
                node,
                blobs: vec![],
                tree: Some(root),
            };
            emit(sink, b"/", root, &h)?;
            hits += 1;
        }
        let mut path = b"/".to_vec();
        if self.cache.contains(root, &path) {
            self.stats.listings_reused += 1;
            expand(&self.cache, root, &mut path, sink, &mut hits)?;
            return Ok(hits);
        }
        let listings = self.load(root);
        let done = self.walk(&listings, root, &mut path, sink, &mut hits);
        self.cache.end_snapshot();
        done?;
        Ok(hits)
    }

    /// Loads the listings below `root` that are neither remembered nor out of the patterns'
    /// reach, each distinct one once.
    fn load(&self, root: Id) -> Listings {
        let stop = AtomicBool::new(false);
        let loader = TreeLoader::new(self.repo, self.index, &stop);
        let cache = &self.cache;
        let query = &self.query;
        let path_dependent = query.path_dependent();
        let seen = std::cell::RefCell::new(std::collections::HashSet::new());
        let keep = |node: &NodeRef<'_>, path: &Path, _: bool| -> Option<bool> {
            let sub = node.subtree?;
            let p = path.as_os_str().as_bytes();
            if cache.contains(sub, p) || !query.may_descend(p) {
                return None;
            }
            // Without paths in the patterns, a listing's children are queued once.
            (path_dependent || seen.borrow_mut().insert(sub)).then_some(true)
        };
        loader.load(root, &keep)
    }

    /// Searches the listing `tree` at `path` (loaded), handing its hits to `sink`.
    fn walk(
        &mut self,
        listings: &Listings,
        tree: Id,
        path: &mut Vec<u8>,
        sink: &mut Sink<'_>,
        hits: &mut u64,
    ) -> Result<State, FindError> {
        let failed = |why: String| FindError::Listing {
            id: tree,
            path: String::from_utf8_lossy(path).into_owned(),
            why,
        };
        let t = match listings.get(&tree) {
            Some(Ok(plain)) => Tree::decode(plain).map_err(|e| failed(e.to_string()))?,
            Some(Err(why)) => return Err(failed(why.clone())),
            None => return Err(failed("it was not loaded".into())),
        };
        self.stats.listings_read += 1;
        let base = path.len();
        let mut items = vec![];
        let mut complete = true;
        for mut node in t.nodes {
            push_name(path, base, &node.name);
            let sub_id = if node.is_dir() { node.subtree } else { None };
            let (name, hit) = match self.query.check(&node, path) {
                Some((blobs, tree_hit)) => {
                    node.content = Vec::new();
                    let name = node.name.clone();
                    let h = Box::new(CachedHit {
                        node,
                        blobs,
                        tree: tree_hit,
                    });
                    emit(sink, path, tree, &h)?;
                    *hits += 1;
                    (name, Some(h))
                }
                None => (std::mem::take(&mut node.name), None),
            };
            let mut sub = None;
            if let Some(s) = sub_id {
                match self.descend(listings, s, path, sink, hits)? {
                    State::Empty => {}
                    State::Cached => sub = Some(s),
                    State::Uncached => {
                        sub = Some(s);
                        complete = false;
                    }
                }
            }
            if hit.is_some() || sub.is_some() {
                items.push(Item { name, hit, sub });
            }
        }
        path.truncate(base);
        if items.is_empty() {
            self.cache.insert(tree, path, Summary::default());
            return Ok(State::Empty);
        }
        if complete && self.cache.insert(tree, path, Summary { items }) {
            Ok(State::Cached)
        } else {
            Ok(State::Uncached)
        }
    }

    /// Searches the subfolder listing `sub` at `path`: from memory if it was met before.
    fn descend(
        &mut self,
        listings: &Listings,
        sub: Id,
        path: &mut Vec<u8>,
        sink: &mut Sink<'_>,
        hits: &mut u64,
    ) -> Result<State, FindError> {
        if let Some(s) = self.cache.get(sub, path) {
            self.stats.listings_reused += 1;
            if s.items.is_empty() {
                return Ok(State::Empty);
            }
            expand(&self.cache, sub, path, sink, hits)?;
            return Ok(State::Cached);
        }
        if !self.query.may_descend(path) {
            return Ok(State::Empty);
        }
        match self.walk(listings, sub, path, sink, hits) {
            // A folder whose listing cannot be read is left out; its siblings are searched
            // (the whole snapshot was given up at the first one). Not remembered: the
            // listings above it are incomplete.
            Err(e @ FindError::Listing { .. }) => {
                self.skipped.push(e);
                Ok(State::Uncached)
            }
            r => r,
        }
    }
}

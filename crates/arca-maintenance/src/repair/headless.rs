//! Packs that no index file describes, for `repair packs`: listed by their own header when
//! it opens, carved ([`arca_repo::carve`]) when it does not, looking for the blobs the
//! snapshots reference that no index places.

use std::collections::{HashMap, HashSet};

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexPack, Tree};
use arca_repo::carve::{Wanted, carve};
use arca_repo::pack::pack_header_from_bytes;
use arca_repo::{Index, RepoError, Repository};

/// A pack whose header did not open, carved.
#[derive(Debug, Clone)]
pub struct CarvedPack {
    /// The pack.
    pub pack: Id,
    /// The kind of the blobs found (`None` when none was).
    pub kind: Option<BlobKind>,
    /// Blobs found that verified.
    pub blobs: usize,
    /// Blobs found that a snapshot references and no index placed.
    pub wanted_found: usize,
    /// Byte ranges (offset, length) that held no blob that verified: the pack is kept on
    /// the backend when there are any, for they may hold blobs a later arca can find.
    pub unresolved: Vec<(u64, u64)>,
}

impl CarvedPack {
    /// Bytes that held no blob that verified.
    pub fn unresolved_bytes(&self) -> u64 {
        self.unresolved.iter().map(|(_, n)| n).sum()
    }
}

/// A walk of the snapshots' listings collecting the blobs they reference that the index
/// does not place, with the length a file's content list gives each data blob: what a
/// carved pack may hold. Listings that cannot be read are passed over.
struct WantedWalk<'a> {
    repo: &'a Repository,
    index: &'a Index,
    wanted: HashMap<Id, Wanted>,
    seen: HashSet<Id>,
}

impl WantedWalk<'_> {
    /// Walks the listing `root` and everything below it that the index places.
    fn walk(&mut self, root: Id) {
        let mut queue = vec![root];
        while let Some(t) = queue.pop() {
            if !self.seen.insert(t) {
                continue;
            }
            if !self.index.contains(BlobKind::Tree, &t) {
                let tree = Wanted {
                    kind: BlobKind::Tree,
                    len: None,
                };
                self.wanted.entry(t).or_insert(tree);
                continue;
            }
            if let Ok(listing) = self.repo.load_tree(self.index, &t) {
                queue.extend(self.listed(&listing));
            }
        }
    }

    /// Notes the data `listing` uses that the index lacks; returns its sub-listings.
    fn listed(&mut self, listing: &Tree) -> Vec<Id> {
        let mut subs = vec![];
        for node in &listing.nodes {
            subs.extend(node.subtree);
            for c in &node.content {
                if !self.index.contains(BlobKind::Data, &c.id) {
                    let data = Wanted {
                        kind: BlobKind::Data,
                        len: Some(c.len),
                    };
                    self.wanted.insert(c.id, data);
                }
            }
        }
        subs
    }
}

/// The listings among the blobs `pack` found in `bytes`, decoded.
fn listings_in(repo: &Repository, id: &Id, pack: &IndexPack, bytes: &[u8]) -> Vec<Tree> {
    let mut out = vec![];
    for b in &pack.blobs {
        let Some(sealed) = bytes.get(b.offset as usize..(b.offset + b.length) as usize) else {
            continue;
        };
        if let Ok(plain) = repo.open_blob(BlobKind::Tree, &b.id, id, sealed, b.raw_length)
            && let Ok(t) = Tree::decode(&plain)
        {
            out.push(t);
        }
    }
    out
}

/// What each of the packs `ids` (none described by an index file) holds, as [`describe`]
/// gives it. Listings carved out of one extend what is looked for in the others (what they
/// reference is not in the index either), so the packs not wholly accounted for are carved
/// again while that finds more. A pack that cannot be read is left out (the salvage reads
/// it again and says why).
pub(super) fn describe_all(
    repo: &Repository,
    index: &Index,
    ids: &[Id],
) -> Result<HashMap<Id, (IndexPack, Option<CarvedPack>)>, RepoError> {
    let mut walk = WantedWalk {
        repo,
        index,
        wanted: HashMap::new(),
        seen: HashSet::new(),
    };
    for (id, _) in repo.list_ids(FileType::Snapshot)? {
        if let Ok(s) = repo.load_snapshot(&id) {
            walk.walk(s.tree);
        }
    }
    let mut out = HashMap::new();
    let mut todo: Vec<Id> = ids.to_vec();
    // Each round walks what the listings found in the last one reference; listings are
    // found whole in the first round whatever their depth (they end where the next one
    // starts), so a second round is what data packs need.
    for _ in 0..3 {
        let mut listings = vec![];
        for id in &todo {
            let bytes = match repo.backend().read(FileType::Pack, &id.to_hex()) {
                Ok(b) => b,
                // An empty or vanished file: nothing in it, nothing left to keep.
                Err(e) if e.is_not_found() => vec![],
                Err(_) => continue,
            };
            let (pack, carved) = describe(repo, index, id, &bytes, &walk.wanted);
            if pack.kind == BlobKind::Tree && carved.is_some() {
                listings.extend(listings_in(repo, id, &pack, &bytes));
            }
            out.insert(*id, (pack, carved));
        }
        let before = walk.wanted.len();
        for t in &listings {
            for sub in walk.listed(t) {
                walk.walk(sub);
            }
        }
        todo.retain(|id| {
            out.get(id)
                .is_some_and(|(_, c)| c.as_ref().is_some_and(|c| !c.unresolved.is_empty()))
        });
        if walk.wanted.len() == before || todo.is_empty() {
            break;
        }
    }
    Ok(out)
}

/// What pack `id` (whose bytes are `bytes`, and which no index file describes) holds: the
/// entries of its own header when that opens, otherwise those carving finds (each
/// verified) less those the index places already, with the carving's account.
fn describe(
    repo: &Repository,
    index: &Index,
    id: &Id,
    bytes: &[u8],
    wanted: &HashMap<Id, Wanted>,
) -> (IndexPack, Option<CarvedPack>) {
    let size = bytes.len() as u64;
    if let Ok(h) = pack_header_from_bytes(repo.sealer(), id, bytes) {
        let p = IndexPack {
            id: *id,
            kind: h.kind,
            size,
            blobs: h.entries,
        };
        return (p, None);
    }
    let mut c = carve(repo.key(), repo.sealer(), &repo.chunker(), bytes, wanted);
    // A blob the index places already (an earlier run saved it) is not copied again.
    let kind = c.kind.unwrap_or(BlobKind::Data);
    c.entries.retain(|e| !index.contains(kind, &e.id));
    let report = CarvedPack {
        pack: *id,
        kind: c.kind,
        blobs: c.entries.len(),
        wanted_found: c
            .entries
            .iter()
            .filter(|e| wanted.contains_key(&e.id))
            .count(),
        unresolved: c.unresolved,
    };
    let p = IndexPack {
        id: *id,
        kind: c.kind.unwrap_or(BlobKind::Data),
        size,
        blobs: c.entries,
    };
    (p, Some(report))
}

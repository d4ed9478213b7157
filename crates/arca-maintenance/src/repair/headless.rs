//! Packs that no index file describes, for `repair packs`: listed by their own header when
//! it opens, carved ([`arca_repo::carve`]) when it does not, looking for the blobs the
//! snapshots reference that no index places.

use std::collections::{HashMap, HashSet};

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexPack};
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

/// The blobs the snapshots reference that `index` does not place, with the length a file's
/// content list gives each data blob: what a carved pack may hold. Snapshots and listings
/// that cannot be read are passed over (what they reference cannot be known).
pub(super) fn wanted_blobs(
    repo: &Repository,
    index: &Index,
) -> Result<HashMap<Id, Wanted>, RepoError> {
    let mut wanted: HashMap<Id, Wanted> = HashMap::new();
    let mut seen: HashSet<Id> = HashSet::new();
    let mut queue: Vec<Id> = vec![];
    for (id, _) in repo.list_ids(FileType::Snapshot)? {
        if let Ok(s) = repo.load_snapshot(&id) {
            queue.push(s.tree);
        }
    }
    let tree = Wanted {
        kind: BlobKind::Tree,
        len: None,
    };
    while let Some(t) = queue.pop() {
        if !seen.insert(t) {
            continue;
        }
        if !index.contains(BlobKind::Tree, &t) {
            wanted.insert(t, tree);
            continue;
        }
        let Ok(listing) = repo.load_tree(index, &t) else {
            continue;
        };
        for node in &listing.nodes {
            if let Some(sub) = node.subtree {
                queue.push(sub);
            }
            for c in node
                .content
                .iter()
                .filter(|c| !index.contains(BlobKind::Data, &c.id))
            {
                wanted.insert(
                    c.id,
                    Wanted {
                        kind: BlobKind::Data,
                        len: Some(c.len),
                    },
                );
            }
        }
    }
    Ok(wanted)
}

/// What pack `id` (whose bytes are `bytes`, and which no index file describes) holds: the
/// entries of its own header when that opens, otherwise those carving finds (each
/// verified), with the carving's account.
pub(super) fn describe(
    repo: &Repository,
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
    let c = carve(repo.key(), repo.sealer(), &repo.chunker(), bytes, wanted);
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

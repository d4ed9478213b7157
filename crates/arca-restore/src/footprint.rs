//! The restore plan of a whole snapshot in numbers, made by the planner itself but never run:
//! what `arca stats` reports as a snapshot's restore plan (its size in memory included).

use std::collections::HashSet;
use std::mem::size_of;
use std::path::Path;

use arca_format::{Id, Xattrs};
use arca_repo::trees::Listings;
use arca_repo::{Index, Repository};

use crate::plan::{BlobPlan, BlockUse, DirPlan, EntryKind, EntryPlan, FilePlan, Plan, Planner};
use crate::trees::Selection;

/// The plan of restoring a whole snapshot, in numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanFootprint {
    /// Directories (the target itself not counted).
    pub dirs: u64,
    /// Regular files with their own content (hard links not counted).
    pub files: u64,
    /// Symlinks, FIFOs, devices and sockets.
    pub others: u64,
    /// Hard links to a file met earlier in the plan.
    pub hardlinks: u64,
    /// Blocks: (file, offset, blob) placements.
    pub blocks: u64,
    /// Distinct data blobs.
    pub blobs: u64,
    /// Distinct all-zero blobs of the largest chunk size (holes: never fetched).
    pub zero_blobs: u64,
    /// Distinct blobs the index does not have.
    pub missing_blobs: u64,
    /// Distinct packs the blobs to fetch lie in (after choosing among copies).
    pub packs: u64,
    /// Bytes of all files (hard links once).
    pub file_bytes: u64,
    /// Sealed bytes of the distinct blobs to fetch.
    pub fetch_bytes: u64,
    /// Bytes of the packs they lie in (whole packs).
    pub pack_bytes: u64,
    /// Heap bytes the plan takes (vectors at their capacity, names, paths, symlink targets,
    /// extended attributes, the hard-link table).
    pub memory_bytes: u64,
    /// Directory listings that could not be read (their entries are not in the plan).
    pub issues: u64,
}

/// Plans the restore of the snapshot whose root listing is `root` from its loaded `listings`
/// (every listing below the root, as [`arca_repo::trees::TreeLoader::load`] returns them with
/// nothing left out) and measures the plan. Nothing is read from the repository but the
/// key (to know the id of an all-zero block).
pub fn plan_footprint(
    repo: &Repository,
    index: &Index,
    listings: Listings,
    root: Id,
) -> PlanFootprint {
    let sel = Selection {
        includes: vec![],
        excludes: vec![],
        only: vec![],
    };
    let zero_id = repo.hole_blob_id();
    let plan = Planner {
        index,
        sel: &sel,
        target: Path::new("/"),
        keep_names: false,
        zero_id,
    }
    .build(listings, root);
    measure(&plan, index)
}

fn measure(plan: &Plan, index: &Index) -> PlanFootprint {
    let mut f = PlanFootprint {
        dirs: plan.dirs.len().saturating_sub(1) as u64,
        blocks: plan.uses.len() as u64,
        blobs: plan.blobs.len() as u64,
        file_bytes: plan.total_bytes,
        issues: plan.issues.len() as u64,
        memory_bytes: memory_bytes(plan) as u64,
        ..PlanFootprint::default()
    };
    for e in &plan.entries {
        match e.kind {
            EntryKind::File(_) => f.files += 1,
            EntryKind::Link(_) => f.hardlinks += 1,
            EntryKind::Symlink | EntryKind::Special => f.others += 1,
        }
    }
    let mut packs = HashSet::new();
    for b in &plan.blobs {
        if b.zero {
            f.zero_blobs += 1;
        } else if b.missing {
            f.missing_blobs += 1;
        } else {
            f.fetch_bytes += u64::from(b.length);
            packs.insert(b.pack);
        }
    }
    f.packs = packs.len() as u64;
    f.pack_bytes = packs
        .iter()
        .filter_map(|&p| index.packs().get(p as usize))
        .map(|p| p.size)
        .sum();
    f
}

fn xattr_bytes(x: &Xattrs) -> usize {
    x.capacity() * size_of::<(Vec<u8>, Vec<u8>)>()
        + x.iter()
            .map(|(k, v)| k.capacity() + v.capacity())
            .sum::<usize>()
}

fn meta_extra(m: &crate::plan::Meta) -> usize {
    m.extra.as_deref().map_or(0, |(target, x)| {
        size_of::<(Vec<u8>, Xattrs)>() + target.capacity() + xattr_bytes(x)
    })
}

/// Heap bytes of `plan`.
fn memory_bytes(plan: &Plan) -> usize {
    let dirs = plan.dirs.capacity() * size_of::<DirPlan>()
        + plan
            .dirs
            .iter()
            .map(|d| {
                d.path.capacity()
                    + d.snap_path.capacity()
                    + d.names.capacity() * size_of::<Vec<u8>>()
                    + d.names.iter().map(Vec::capacity).sum::<usize>()
                    + d.meta.as_ref().map_or(0, meta_extra)
            })
            .sum::<usize>();
    let entries = plan.entries.capacity() * size_of::<EntryPlan>()
        + plan
            .entries
            .iter()
            .map(|e| e.name.len() + meta_extra(&e.meta))
            .sum::<usize>();
    let links = plan.links.capacity() * (size_of::<u32>() + size_of::<Vec<u32>>())
        + plan
            .links
            .values()
            .map(|v| v.capacity() * size_of::<u32>())
            .sum::<usize>();
    dirs + entries
        + links
        + plan.files.capacity() * size_of::<FilePlan>()
        + plan.uses.capacity() * size_of::<BlockUse>()
        + plan.blobs.capacity() * size_of::<BlobPlan>()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::plan::tests::file;
    use arca_format::{BlobKind, IndexFile, IndexPack, Node, NodeKind, PackEntry, Tree};

    #[test]
    fn counts_links_holes_missing_blobs_and_packs() {
        let mut trees = Listings::new();
        let root = Id([100; 32]);
        let nodes = vec![
            file("a", &[(1, 10), (2, 20)], 7, 2),
            file("b", &[(1, 10)], 8, 1),
            file("c", &[(7, 5)], 9, 1),
            file("d", &[(1, 10), (2, 20)], 7, 2),
            file("hole", &[(0, 64)], 10, 1),
            Node {
                name: b"link".to_vec(),
                kind: Some(NodeKind::Symlink),
                link_target: b"a".to_vec(),
                ..Node::default()
            },
        ];
        trees.insert(root, Ok(Tree { nodes }.encode().unwrap()));
        let entry = |i: u8, offset, length| PackEntry {
            id: Id([i; 32]),
            offset,
            length,
            // As the listings give them.
            raw_length: if i == 2 { 20 } else { 10 },
        };
        let index = Index::from_files([&IndexFile {
            supersedes: vec![],
            packs: vec![
                IndexPack {
                    id: Id([50; 32]),
                    kind: BlobKind::Data,
                    size: 1000,
                    blobs: vec![entry(1, 8, 40), entry(2, 48, 50)],
                },
                IndexPack {
                    id: Id([51; 32]),
                    kind: BlobKind::Data,
                    size: 500,
                    blobs: vec![entry(3, 8, 40)],
                },
            ],
        }]);
        let sel = Selection {
            includes: vec![],
            excludes: vec![],
            only: vec![],
        };
        let plan = Planner {
            index: &index,
            sel: &sel,
            target: Path::new("/"),
            keep_names: false,
            zero_id: Id([0; 32]),
        }
        .build(trees, root);
        let f = measure(&plan, &index);
        assert_eq!(
            (f.files, f.hardlinks, f.others, f.dirs),
            (4, 1, 1, 0),
            "{f:?}"
        );
        assert_eq!(
            (f.blocks, f.blobs, f.zero_blobs, f.missing_blobs),
            (5, 4, 1, 1)
        );
        assert_eq!((f.packs, f.pack_bytes, f.fetch_bytes), (1, 1000, 90));
        assert_eq!(f.file_bytes, 30 + 10 + 5 + 64);
        assert!(f.memory_bytes as usize > 5 * std::mem::size_of::<BlockUse>());
    }
}

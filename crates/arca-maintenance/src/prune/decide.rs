//! From the marked index to a plan: per pack the used and unused blobs and bytes (one pass
//! over the index's locations), one copy kept of each used blob, and a decision per pack.

use arca_format::Id;
use arca_repo::pack::read_pack_header;
use arca_repo::{Index, RepoError, Repository};

use super::walk::Marks;
use super::{
    Count, KeepBlob, MaxUnused, PackAction, PackPlan, PlanStats, PruneOptions, PrunePlan, SoleCopy,
};

/// With `repack_small`, packs below this share of the target pack size are small.
const SMALL_PERCENT: u64 = 80;
/// Bytes a pack spends besides its blobs: envelope, sealed header (without entries), trailer.
const PACK_OVERHEAD: u64 = 8 + 11 + 40 + 8;
/// Header bytes per blob in a pack.
const ENTRY_BYTES: u64 = 44;

/// The indexed packs as the backend has them.
#[derive(Debug)]
pub(super) struct PackState {
    /// By index pack position: present with the indexed size (its blobs can be read).
    pub(super) usable: Vec<bool>,
    /// By index pack position: present in the backend at all.
    pub(super) present: Vec<bool>,
    /// By position in the backend listing: named by the index.
    pub(super) listed_indexed: Vec<bool>,
}

impl PackState {
    /// Compares the index with `listed` (the backend's packs, sorted by id).
    pub(super) fn of(index: &Index, listed: &[(Id, u64)]) -> Self {
        let n = index.packs().len();
        let mut s = Self {
            usable: vec![false; n],
            present: vec![false; n],
            listed_indexed: vec![false; listed.len()],
        };
        for (i, p) in index.packs().iter().enumerate() {
            // Every entry of the id: a listing that named a pack twice (a server's glitch,
            // a stray copy) left one entry unmarked, and prune deleted the pack as one no
            // index names (hunt 29).
            let lo = listed.partition_point(|(id, _)| *id < p.id);
            let hi = lo
                + listed[lo..]
                    .iter()
                    .take_while(|(id, _)| *id == p.id)
                    .count();
            for ((_, size), indexed) in listed[lo..hi].iter().zip(&mut s.listed_indexed[lo..hi]) {
                s.present[i] = true;
                s.usable[i] |= *size == p.size;
                *indexed = true;
            }
        }
        s
    }
}

/// Used and unused blobs of a pack.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    used_blobs: u32,
    unused_blobs: u32,
    used_bytes: u64,
    unused_bytes: u64,
}

impl Counts {
    fn total(&self) -> u64 {
        self.used_bytes + self.unused_bytes
    }
}

/// Orders packs by used share, emptiest first; on a tie the earlier position counts as the
/// fuller one (it comes last).
fn by_share(c: &[Counts], a: usize, b: usize) -> std::cmp::Ordering {
    let (x, y) = (&c[a], &c[b]);
    let lhs = u128::from(x.used_bytes) * u128::from(y.total().max(1));
    let rhs = u128::from(y.used_bytes) * u128::from(x.total().max(1));
    lhs.cmp(&rhs).then(b.cmp(&a))
}

/// A kept copy of a used blob stored more than once (its index position), and the packs of
/// the copies dropped in its favour.
type Kept = (usize, Vec<u32>);

/// Counts per pack, and one copy kept of each used blob stored more than once: the copy in
/// the pack with the largest used share, the others' marks cleared. Returns the extra copies
/// and the kept ones.
fn count(index: &Index, marks: &Marks, counts: &mut [Counts]) -> (u64, Vec<Kept>) {
    for pos in 0..index.len() {
        let Some((_, loc)) = index.at(pos) else { break };
        let c = &mut counts[loc.pack_index as usize];
        if marks.get(pos) {
            c.used_blobs += 1;
            c.used_bytes += u64::from(loc.length);
        } else {
            c.unused_blobs += 1;
            c.unused_bytes += u64::from(loc.length);
        }
    }
    if !index.has_copies() {
        return (0, vec![]);
    }
    // The locations of one id prefix have consecutive positions; copies are rare, so a
    // group is a handful of locations.
    let mut extra = 0;
    let mut kept = vec![];
    let mut pos = 0;
    let mut group = vec![];
    while let Some((key, _)) = index.at(pos) {
        group.clear();
        let mut end = pos;
        while let Some((k, loc)) = index.at(end) {
            if k != key {
                break;
            }
            if marks.get(end) {
                group.push((end, loc));
            }
            end += 1;
        }
        if group.len() > 1 {
            // Per kind, the marked copy in the fullest pack stays marked; decided before any
            // count changes.
            let keeper: Vec<bool> = group
                .iter()
                .map(|(_, loc)| {
                    let me = loc.pack_index as usize;
                    group.iter().all(|(_, l)| {
                        let other = l.pack_index as usize;
                        l.pack.kind != loc.pack.kind
                            || other == me
                            || by_share(counts, me, other) == std::cmp::Ordering::Greater
                    })
                })
                .collect();
            for (&(keep_pos, keep_loc), _) in group.iter().zip(&keeper).filter(|(_, k)| **k) {
                let dropped = group
                    .iter()
                    .zip(&keeper)
                    .filter(|((_, l), k)| !**k && l.pack.kind == keep_loc.pack.kind)
                    .map(|((_, l), _)| l.pack_index)
                    .collect();
                kept.push((keep_pos, dropped));
            }
            for (&(p, loc), keep) in group.iter().zip(keeper) {
                if !keep {
                    marks.clear(p);
                    let c = &mut counts[loc.pack_index as usize];
                    c.used_blobs -= 1;
                    c.used_bytes -= u64::from(loc.length);
                    c.unused_blobs += 1;
                    c.unused_bytes += u64::from(loc.length);
                    extra += 1;
                }
            }
        }
        pos = end;
    }
    (extra, kept)
}

/// Decides every pack's fate from the marks (see the module documentation of `prune`).
pub(super) fn decide(
    index: &Index,
    marks: &Marks,
    state: &PackState,
    opts: &PruneOptions,
    pack_size: u64,
) -> PrunePlan {
    let packs = index.packs();
    let mut counts = vec![Counts::default(); packs.len()];
    let (duplicate_blobs, kept) = count(index, marks, &mut counts);
    let mut actions: Vec<PackAction> = (0..packs.len())
        .map(|i| {
            if !state.present[i] {
                PackAction::Forget
            } else if !state.usable[i] || counts[i].used_blobs == 0 {
                PackAction::Delete
            } else {
                PackAction::Keep
            }
        })
        .collect();
    let mixed = |i: usize| actions[i] == PackAction::Keep && counts[i].unused_blobs > 0;
    let mut budget = opts.max_repack_bytes.unwrap_or(u64::MAX);
    let mut take = |i: usize, actions: &mut Vec<PackAction>| {
        if packs[i].size <= budget {
            budget -= packs[i].size;
            actions[i] = PackAction::Repack;
        }
    };
    // Mixed packs, largest unused share first.
    let mut candidates: Vec<usize> = (0..packs.len()).filter(|&i| mixed(i)).collect();
    candidates.sort_by(|&a, &b| by_share(&counts, a, b));
    // The unused bytes tolerated after prune; restic's reading of a percentage: unused at
    // most P % of the repository, so P / (100 - P) of the used bytes.
    let limit = match opts.max_unused {
        MaxUnused::Unlimited => None,
        MaxUnused::Bytes(limit) => Some(limit),
        MaxUnused::Percent(p) if p >= 100.0 => None,
        MaxUnused::Percent(p) => {
            let used: u64 = (0..packs.len())
                .filter(|&i| actions[i] != PackAction::Forget)
                .map(|i| counts[i].used_bytes)
                .sum();
            Some((used as f64 * p.max(0.0) / (100.0 - p)) as u64)
        }
    };
    if let Some(limit) = limit {
        // As restic: a listing pack that holds unused listings is repacked whatever the
        // unused share (within the repack budget). Listings are read by every walk, and
        // cached whole for remote repositories, so dead ones are not left to pile up until
        // data crosses the limit.
        for &i in &candidates {
            if packs[i].kind == arca_format::BlobKind::Tree {
                take(i, &mut actions);
            }
        }
        let mut left: u64 = (0..packs.len())
            .filter(|&i| actions[i] == PackAction::Keep)
            .map(|i| counts[i].unused_bytes)
            .sum();
        for i in candidates {
            if left <= limit {
                break;
            }
            if actions[i] == PackAction::Repack {
                continue;
            }
            take(i, &mut actions);
            if actions[i] == PackAction::Repack {
                left -= counts[i].unused_bytes;
            }
        }
    }
    if opts.repack_small {
        let small = |i: usize, actions: &[PackAction]| {
            actions[i] == PackAction::Keep && packs[i].size * 100 < pack_size * SMALL_PERCENT
        };
        for kind in [arca_format::BlobKind::Data, arca_format::BlobKind::Tree] {
            let of_kind: Vec<usize> = (0..packs.len())
                .filter(|&i| packs[i].kind == kind && small(i, &actions))
                .collect();
            let others =
                (0..packs.len()).any(|i| packs[i].kind == kind && actions[i] == PackAction::Repack);
            // One small pack alone would come out as the same small pack.
            if of_kind.len() > 1 || (others && !of_kind.is_empty()) {
                for i in of_kind {
                    take(i, &mut actions);
                }
            }
        }
    }
    let mut plan = finish(
        index,
        marks,
        state,
        counts,
        actions,
        duplicate_blobs,
        pack_size,
    );
    // The copies that become the only ones: a dropped copy's pack is deleted or repacked
    // without it.
    let gone = |p: &u32| {
        matches!(
            plan.packs[*p as usize].action,
            PackAction::Delete | PackAction::Repack
        )
    };
    plan.sole_copies = kept
        .into_iter()
        .filter_map(|(pos, dropped)| {
            let other = *dropped.iter().find(|p| gone(p))?;
            let (key, loc) = index.at(pos)?;
            Some(SoleCopy {
                pack: loc.pack_index,
                offset: loc.offset,
                key,
                other,
            })
        })
        .collect();
    plan.sole_copies.sort_unstable();
    plan
}

/// The plan from the decisions: packs, statistics and the blobs to copy.
fn finish(
    index: &Index,
    marks: &Marks,
    state: &PackState,
    counts: Vec<Counts>,
    actions: Vec<PackAction>,
    duplicate_blobs: u64,
    pack_size: u64,
) -> PrunePlan {
    let mut stats = PlanStats {
        duplicate_blobs,
        ..PlanStats::default()
    };
    let mut plan_packs = Vec::with_capacity(actions.len());
    for (i, ((p, c), action)) in index.packs().iter().zip(&counts).zip(&actions).enumerate() {
        let slot: Option<&mut Count> = match action {
            PackAction::Keep => Some(&mut stats.keep),
            PackAction::Repack => Some(&mut stats.repack),
            PackAction::Delete => Some(&mut stats.delete),
            PackAction::Forget => None,
        };
        match slot {
            Some(s) => {
                s.add(p.size);
                stats.used_blobs += u64::from(c.used_blobs);
                stats.used_bytes += c.used_bytes;
                stats.unused_blobs += u64::from(c.unused_blobs);
                stats.unused_bytes += c.unused_bytes;
            }
            None => stats.missing.add(p.size),
        }
        if *action == PackAction::Repack {
            stats.repack_blobs += u64::from(c.used_blobs);
            stats.repack_used_bytes += c.used_bytes;
        }
        if state.present[i] && !state.usable[i] {
            stats.damaged.add(p.size);
        }
        plan_packs.push(PackPlan {
            id: p.id,
            kind: p.kind,
            size: p.size,
            used_blobs: c.used_blobs,
            unused_blobs: c.unused_blobs,
            used_bytes: c.used_bytes,
            unused_bytes: c.unused_bytes,
            action: *action,
        });
    }
    let mut keep = vec![];
    if stats.repack.packs > 0 {
        for pos in 0..index.len() {
            let Some((key, loc)) = index.at(pos) else {
                break;
            };
            if actions[loc.pack_index as usize] == PackAction::Repack && marks.get(pos) {
                keep.push(KeepBlob {
                    pack: loc.pack_index,
                    offset: loc.offset,
                    key,
                });
            }
        }
        keep.sort_unstable();
    }
    let new_bytes = new_pack_bytes(stats.repack_used_bytes, stats.repack_blobs, pack_size);
    stats.freed_bytes = (stats.delete.bytes + stats.repack.bytes).saturating_sub(new_bytes);
    PrunePlan {
        packs: plan_packs,
        keep,
        stats,
        ..PrunePlan::default()
    }
}

/// About the bytes of the new packs holding `blobs` repacked blobs of `used_bytes` sealed
/// bytes.
pub(super) fn new_pack_bytes(used_bytes: u64, blobs: u64, pack_size: u64) -> u64 {
    if blobs == 0 {
        return 0;
    }
    let new_packs = used_bytes.div_ceil(pack_size.max(1)).max(1);
    used_bytes + blobs * ENTRY_BYTES + new_packs * PACK_OVERHEAD
}

/// The kept copies of used blobs that packs no index names hold too (left by a prune
/// stopped after uploading, or a backup killed before its index). Those packs are deleted
/// first, and with a damaged kept copy theirs would have been the only intact one (hunt 29):
/// these copies are read before. One small read per such pack, of its header, unless
/// `scanned` (the adoption's reading of them) has it already; a header that does not decode
/// offers no copy to rely on.
pub(super) fn orphan_copies(
    repo: &Repository,
    index: &Index,
    marks: &Marks,
    unreferenced: &[(Id, u64)],
    scanned: Option<&arca_repo::recover::HeaderScan>,
) -> Result<Vec<SoleCopy>, RepoError> {
    let known: std::collections::HashMap<Id, &arca_format::IndexPack> = scanned
        .map(|s| s.packs.iter().map(|p| (p.id, p)).collect())
        .unwrap_or_default();
    let mut copies = vec![];
    for (other, (id, size)) in unreferenced.iter().enumerate() {
        let read;
        let (kind, entries) = match known.get(id) {
            Some(p) => (p.kind, &p.blobs),
            None => match read_pack_header(repo.backend().as_ref(), repo.sealer(), id, *size) {
                Ok(h) => {
                    read = h;
                    (read.kind, &read.entries)
                }
                Err(e) if e.is_corruption() => continue,
                Err(e) => return Err(e),
            },
        };
        for e in entries {
            copies.extend(
                index
                    .positions(kind, &e.id)
                    .filter(|(pos, _)| marks.get(*pos))
                    .map(|(_, loc)| SoleCopy {
                        pack: loc.pack_index,
                        offset: loc.offset,
                        key: e.id.prefix16(),
                        other: other as u32,
                    }),
            );
        }
    }
    copies.sort_unstable();
    copies.dedup_by(|a, b| a.pack == b.pack && a.offset == b.offset);
    Ok(copies)
}

//! The repairs `check` proposes: what it found, counted by the kind of repair that fixes it,
//! and the proposals worded from those counts, in the order to run them.

use arca_format::Id;

use super::{CheckReport, Proposal, Repair};

/// What was found, by kind of repair, to word the proposals.
#[derive(Default)]
pub(super) struct Findings {
    pub(super) damaged_index_files: usize,
    pub(super) missing_packs: usize,
    /// Intact packs whose header does not match their index entries.
    pub(super) mismatched_packs: usize,
    pub(super) unindexed_packs: usize,
    pub(super) damaged_packs: Vec<Id>,
    /// Packs in no index whose header cannot be read, while the snapshots miss blobs: for
    /// `repair packs` to carve.
    pub(super) headless_packs: Vec<Id>,
    pub(super) damaged_snapshot_files: usize,
    /// Index files that could not be read (permissions, an I/O error): the blobs they list
    /// look missing, and no repair may be proposed on that.
    pub(super) unreadable_index_files: usize,
    pub(super) unused_blobs: u64,
    pub(super) unused_bytes: u64,
    /// Files and blobs made by a newer arca: refused, but not damage; no repair is
    /// proposed while there are any (one would delete or rewrite them).
    pub(super) newer: usize,
}

/// `1 pack`, `2 packs`.
pub(super) fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The repairs for what was found, in the order to run them.
pub(super) fn proposals(f: &Findings, rep: &CheckReport) -> Vec<Proposal> {
    let mut out = vec![];
    let mut why = vec![];
    if f.damaged_index_files > 0 {
        why.push(format!(
            "{} damaged",
            count(f.damaged_index_files as u64, "index file")
        ));
    }
    if f.missing_packs > 0 {
        why.push(format!(
            "{} named by the index missing",
            count(f.missing_packs as u64, "pack")
        ));
    }
    if f.mismatched_packs > 0 {
        why.push(format!(
            "{} not matching the index",
            count(f.mismatched_packs as u64, "intact pack")
        ));
    }
    if f.unindexed_packs > 0 {
        why.push(format!(
            "{} in no index (the next backup adopts those too)",
            count(f.unindexed_packs as u64, "pack")
        ));
    }
    let index = !why.is_empty();
    if index {
        out.push(Proposal {
            repair: Repair::Index,
            args: if f.mismatched_packs > 0 {
                vec!["--read-all-packs".into()]
            } else {
                vec![]
            },
            reason: why.join("; "),
        });
    }
    let packs_first = !f.damaged_packs.is_empty() || !f.headless_packs.is_empty();
    if packs_first {
        let mut ids: Vec<String> = f
            .damaged_packs
            .iter()
            .chain(&f.headless_packs)
            .map(Id::to_hex)
            .collect();
        ids.sort();
        ids.dedup();
        let mut why = vec![];
        if !f.damaged_packs.is_empty() {
            why.push(format!(
                "{} with damaged bytes: the blobs that verify are kept",
                count(f.damaged_packs.len() as u64, "pack")
            ));
        }
        if !f.headless_packs.is_empty() {
            why.push(format!(
                "{} in no index whose header is damaged: the blobs found in {} without the header are \
                 kept",
                count(f.headless_packs.len() as u64, "pack"),
                if f.headless_packs.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            ));
        }
        out.push(Proposal {
            repair: Repair::Packs,
            reason: why.join("; "),
            args: ids,
        });
    }
    let mut why = vec![];
    if !rep.affected.is_empty() {
        why.push(format!(
            "{} referencing lost or damaged data",
            count(rep.affected.len() as u64, "snapshot")
        ));
    }
    if f.damaged_snapshot_files > 0 {
        why.push(format!(
            "{} damaged",
            count(f.damaged_snapshot_files as u64, "snapshot file")
        ));
    }
    if !why.is_empty() {
        let mut reason = why.join("; ");
        if packs_first {
            reason.push_str(
                "; run the `repair packs` above first and check again: it keeps every blob \
                 of the damaged packs that still verifies",
            );
        } else if index {
            reason.push_str(
                "; repair the index first and check again: data the index lacked may be \
                 found again",
            );
        }
        if f.damaged_snapshot_files > 0 {
            // Their listings are still there until a prune: `recover` keeps them.
            reason.push_str(
                "; then run `arca recover` before the next prune: it saves, as a snapshot, \
                 the listings the removed snapshot files led to",
            );
        }
        out.push(Proposal {
            repair: Repair::Snapshots,
            args: vec![],
            reason,
        });
    }
    if f.unused_blobs > 0 {
        out.push(Proposal {
            repair: Repair::Prune,
            args: vec![],
            reason: format!(
                "{} ({} bytes in packs) used by no snapshot",
                count(f.unused_blobs, "blob"),
                f.unused_bytes
            ),
        });
    }
    out
}

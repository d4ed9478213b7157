//! What the plan says the restore will do, before it does it: per entry (for `--dry-run` and
//! verbose listings) and in totals (files to restore, bytes to fetch from how many packs,
//! bytes to copy locally, bytes already in place, entries to delete).

use std::collections::HashSet;
use std::path::Path;

use crate::Observer;
use crate::plan::{EntryKind, Plan};
use crate::reuse::Reusable;
use crate::scan::{DirAction, EntryAction, Scan};

/// What happens to one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Created (it is missing, or something else is in its place).
    Restore,
    /// An existing file whose wrong blocks are replaced.
    Update,
    /// Content right, metadata applied.
    Metadata,
    /// Removed (`--delete`).
    Delete,
    /// Left alone by the overwrite policy.
    Skip,
    /// Cannot be restored (the reason is reported as an issue).
    Blocked,
}

impl Action {
    /// Lower-case name for listings and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Action::Restore => "restore",
            Action::Update => "update",
            Action::Metadata => "metadata",
            Action::Delete => "delete",
            Action::Skip => "skip",
            Action::Blocked => "blocked",
        }
    }
}

/// One entry the restore changes (or would change).
#[derive(Debug, Clone)]
pub struct PlannedEntry<'a> {
    /// Path in the target.
    pub path: &'a Path,
    /// Kind of entry ("file", "dir", "symlink"...).
    pub kind: &'static str,
    /// What happens.
    pub action: Action,
    /// A new file's size (restore), or the bytes an update writes.
    pub bytes: u64,
}

/// The plan in numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanSummary {
    /// Regular files, directories, other entries and hard links in the restore.
    pub files: u64,
    /// Directories in the restore.
    pub dirs: u64,
    /// Directories to create.
    pub dirs_new: u64,
    /// Symlinks, FIFOs, devices, sockets.
    pub others: u64,
    /// Symlinks, FIFOs, devices and sockets to create.
    pub others_new: u64,
    /// Hard links.
    pub hardlinks: u64,
    /// Files to create.
    pub files_new: u64,
    /// Existing files to patch.
    pub files_updated: u64,
    /// Files whose content is right but metadata is not.
    pub files_metadata: u64,
    /// Existing directories whose metadata is not the snapshot's.
    pub dirs_metadata: u64,
    /// Symlinks and special files that are right but for their metadata.
    pub others_metadata: u64,
    /// Files already right.
    pub files_unchanged: u64,
    /// Files left alone (overwrite policy).
    pub files_skipped: u64,
    /// Files that cannot be restored (something in the way, or their folder is not
    /// restored); the reasons are reported as issues.
    pub files_blocked: u64,
    /// Entries and folders of any kind that cannot be restored, counting those whose own
    /// reason a real run reports (not those inside a folder that is not restored): a real run
    /// with any ends with exit code 3, and so does a dry run.
    pub reported_blocked: u64,
    /// Bytes of all files.
    pub bytes_total: u64,
    /// Bytes already in place.
    pub bytes_in_place: u64,
    /// File bytes to put in place (write, copy, holes).
    pub bytes_to_place: u64,
    /// Distinct blobs to fetch from the repository.
    pub blobs_to_fetch: u64,
    /// Their sealed bytes.
    pub bytes_to_fetch: u64,
    /// Distinct packs they lie in.
    pub packs_to_read: u64,
    /// File bytes written from fetched blobs.
    pub bytes_to_write: u64,
    /// File bytes copied from blocks already on the target (duplicates, found blocks, and
    /// blocks of files the restore replaces or links over: [`crate::reuse::local`]).
    pub bytes_to_copy: u64,
    /// File bytes from `--reuse-from` trees.
    pub bytes_to_reuse: u64,
    /// File bytes that are holes: blocks all of zeros (zero pages inside a block of data,
    /// which the plan cannot see, count as written, also in the run's summary).
    pub bytes_holes: u64,
    /// Entries to delete (`--delete`).
    pub deletes: u64,
}

fn kind_name(k: EntryKind, kind: arca_format::NodeKind) -> &'static str {
    match k {
        EntryKind::Link(_) => "hardlink",
        _ => kind.name(),
    }
}

/// What an entry to delete is, as entries are named (a symlink was called a file).
fn deleted_kind(path: &std::path::Path, is_dir: bool) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if is_dir {
        return "dir";
    }
    match arca_fs::lstat(path).map(|m| m.file_type()) {
        Ok(t) if t.is_symlink() => "symlink",
        Ok(t) if t.is_fifo() => "fifo",
        Ok(t) if t.is_char_device() => "chardev",
        Ok(t) if t.is_block_device() => "blockdev",
        Ok(t) if t.is_socket() => "socket",
        _ => "file",
    }
}

/// Which entries the observer hears about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tell {
    /// Every entry that changes but the files still to be hashed ([`Scan::is_deferred`])
    /// and their hard links.
    Settled,
    /// Only the files that were hashed while content moved, and their hard links (no
    /// directories, no deletions).
    Deferred,
}

/// Counts what the plan will do and tells the observer about the entries that change.
pub(crate) fn summarize(
    plan: &Plan,
    scan: &Scan,
    reuse: &Reusable,
    observer: &dyn Observer,
    tell: Tell,
) -> PlanSummary {
    // A hard link waits for its file: whether it is left or made again is known once the
    // file is hashed (a name already linked to a file patched in place was listed as
    // "restore hardlink").
    let deferred = |e: usize| match plan.entries[e].kind {
        EntryKind::Link(first) => scan.is_deferred(first),
        _ => scan.is_deferred(e as u32),
    };
    let told = |e: Option<usize>| match (tell, e) {
        (Tell::Settled, None) => true,
        (Tell::Settled, Some(e)) => !deferred(e),
        (Tell::Deferred, None) => false,
        (Tell::Deferred, Some(e)) => deferred(e),
    };
    let mut s = PlanSummary {
        dirs: plan.dirs.len() as u64 - 1,
        bytes_total: plan.total_bytes,
        deletes: scan.deletes.len() as u64,
        ..PlanSummary::default()
    };
    for d in scan.deletes.iter().filter(|_| told(None)) {
        observer.planned(&PlannedEntry {
            path: &d.path,
            kind: deleted_kind(&d.path, d.is_dir),
            action: Action::Delete,
            bytes: 0,
        });
    }
    for (d, dp) in plan.dirs.iter().enumerate().skip(1) {
        let action = match &scan.dirs[d] {
            DirAction::Create | DirAction::Replace => Action::Restore,
            // Inside a folder that is not restored: that folder's line says it.
            DirAction::Blocked(why) if !crate::scan::reported(why) => continue,
            DirAction::Blocked(_) => {
                s.reported_blocked += 1;
                Action::Blocked
            }
            DirAction::Exists if scan.dir_meta_wrong.get(d).is_some_and(|&w| w) => Action::Metadata,
            DirAction::Exists | DirAction::Followed => continue,
        };
        match action {
            Action::Restore => s.dirs_new += 1,
            Action::Metadata => s.dirs_metadata += 1,
            _ => {}
        }
        if !told(None) {
            continue;
        }
        observer.planned(&PlannedEntry {
            path: &dp.path,
            kind: "dir",
            action,
            bytes: 0,
        });
    }
    // Blobs already on the target (verified) or served earlier in the plan.
    let mut have: HashSet<u32> = plan
        .uses
        .iter()
        .zip(&scan.in_place)
        .filter(|&(_, &inp)| inp)
        .map(|(u, _)| u.blob)
        .collect();
    let mut packs = HashSet::new();
    for (e, ep) in plan.entries.iter().enumerate() {
        let action = &scan.entries[e];
        match ep.kind {
            EntryKind::Link(_) => s.hardlinks += 1,
            EntryKind::Symlink | EntryKind::Special => s.others += 1,
            EntryKind::File(_) => s.files += 1,
        }
        let mut bytes = 0;
        let shown = match action {
            // A hard link made over the name the target holds as another file (the group
            // split there) changes an existing entry, as a file patched does.
            EntryAction::Create if scan.links_over(e as u32) => Action::Update,
            EntryAction::Create | EntryAction::Replace => Action::Restore,
            EntryAction::Patch => Action::Update,
            EntryAction::Keep { meta_ok: false, .. } => {
                if matches!(ep.kind, EntryKind::Symlink | EntryKind::Special) {
                    s.others_metadata += 1;
                }
                Action::Metadata
            }
            EntryAction::Keep { meta_ok: true, .. } => {
                if let EntryKind::File(f) = ep.kind {
                    s.files_unchanged += 1;
                    s.bytes_in_place += plan.files[f as usize].size;
                }
                continue;
            }
            EntryAction::Skip => Action::Skip,
            EntryAction::Blocked(why) => {
                s.reported_blocked += u64::from(crate::scan::reported(why));
                Action::Blocked
            }
        };
        if matches!(ep.kind, EntryKind::Symlink | EntryKind::Special) && shown == Action::Restore {
            s.others_new += 1;
        }
        if let EntryKind::File(f) = ep.kind {
            match shown {
                Action::Restore => s.files_new += 1,
                Action::Update => s.files_updated += 1,
                Action::Metadata => {
                    s.files_metadata += 1;
                    s.bytes_in_place += plan.files[f as usize].size;
                }
                Action::Skip => s.files_skipped += 1,
                _ => s.files_blocked += 1,
            }
            if matches!(shown, Action::Restore | Action::Update) {
                let fresh = shown == Action::Restore;
                let fp = plan.files[f as usize];
                for u in fp.first..fp.end {
                    let bu = plan.uses[u as usize];
                    let bp = &plan.blobs[bu.blob as usize];
                    let len = u64::from(bp.raw_len);
                    if scan.in_place[u as usize] {
                        s.bytes_in_place += len;
                        continue;
                    }
                    s.bytes_to_place += len;
                    if bp.zero {
                        s.bytes_holes += len;
                        if !fresh {
                            bytes += len;
                        }
                        continue;
                    }
                    bytes += len;
                    if bp.missing {
                        continue;
                    }
                    if !have.insert(bu.blob) {
                        s.bytes_to_copy += len;
                    } else if let Some((from, _)) = reuse.get(&bu.blob) {
                        // The target's own blocks are local copies, as the restore counts them.
                        if from.local {
                            s.bytes_to_copy += len;
                        } else {
                            s.bytes_to_reuse += len;
                        }
                    } else {
                        s.blobs_to_fetch += 1;
                        s.bytes_to_fetch += u64::from(bp.length);
                        s.bytes_to_write += len;
                        packs.insert(bp.pack);
                    }
                }
                // A new file is listed with its size, as restic lists it (holes and all).
                if fresh {
                    bytes = fp.size;
                }
            }
        }
        // Inside a folder that is not restored: the folder's line says it (a blocked
        // repository listed each of its hundreds of folders and files).
        let inside_blocked =
            matches!(action, EntryAction::Blocked(why) if !crate::scan::reported(why));
        if inside_blocked || !told(Some(e)) {
            continue;
        }
        observer.planned(&PlannedEntry {
            path: &plan.entry_path(e as u32),
            kind: kind_name(ep.kind, ep.meta.kind),
            action: shown,
            bytes,
        });
    }
    s.packs_to_read = packs.len() as u64;
    s
}

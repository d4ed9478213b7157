//! Hashing the target's untrusted files while the network moves the content of the others: a
//! partial restore's two slow parts, reading what is there and fetching what is not, at once.
//!
//! Each file's outcome is acted on as it comes: whole files are finished here, the others go
//! to the scheduler to be written; the scheduler hears of both, for the blocks they hold.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::Sender;

use crate::ctx::Shared;
use crate::jobs::Late;
use crate::scan::{EntryAction, Scan, Scanner};
use crate::small_files::SmallFile;

/// Hashes `files` (entries the scan left as `Patch` for this) with `scanner`, finishing or
/// handing on each one; `after` (the scan) gets every outcome recorded. Returns when all are
/// hashed or the restore stops; dropping `tx` then tells the scheduler no more will come.
/// `room`: how many more files it may hold open to lend their blocks.
pub(crate) fn hash_while_restoring(
    scanner: &Scanner<'_>,
    sh: &Shared<'_>,
    files: Vec<SmallFile>,
    tx: Sender<Late>,
    after: &Mutex<Scan>,
    room: &AtomicUsize,
) {
    let plan = sh.plan;
    scanner.hash(files, &|h: &SmallFile, (action, held)| {
        {
            let mut after = after.lock().unwrap_or_else(|p| p.into_inner());
            after.record(plan, h, action.clone(), held.clone());
            // Kept or patched in place, it stays its inode: its further names that are that
            // inode already are left, and listed so (`-v` said "restore hardlink").
            if let (EntryAction::Keep { .. } | EntryAction::Patch, Some(links)) =
                (&action, plan.links.get(&h.entry))
            {
                scanner.settle_links_of(h.entry, links, &mut after);
            }
        }
        let uses = plan.file_uses(h.file);
        let mut held = held.unwrap_or_default();
        held.resize(uses.len(), false);
        let raw = |u: &crate::plan::BlockUse| u64::from(plan.blobs[u.blob as usize].raw_len);
        let held_bytes: u64 = uses
            .iter()
            .zip(&held)
            .filter(|(_, h)| **h)
            .map(|(u, _)| raw(u))
            .sum();
        // The progress total counted the whole file as to be placed.
        let settled = |bytes: u64| sh.progress.bytes_total.fetch_sub(bytes, Ordering::Relaxed);
        // Progress, for the watchdog.
        sh.counters.beats.fetch_add(1, Ordering::Relaxed);
        match action {
            EntryAction::Keep { meta_ok, meta_set } => {
                settled(uses.iter().map(raw).sum());
                // Its blocks may be what files being written wait for.
                let _ = tx.send(Late {
                    file: h.file,
                    held,
                    write: false,
                    lender: None,
                });
                sh.keep_entry(h.entry, meta_ok, meta_set);
            }
            EntryAction::Patch => {
                settled(held_bytes);
                let _ = tx.send(Late {
                    file: h.file,
                    held,
                    write: true,
                    lender: None,
                });
            }
            // Replace (other names, or unreadable): written anew. Whole (replaced only for
            // its names beyond the restore's), it is held open before it is removed, and
            // lends its blocks (as `reuse::local` counts them; `room`: files it may hold).
            _ => {
                let whole = !held.is_empty() && held.iter().all(|&x| x);
                let lender = whole
                    .then(|| arca_fs::open_noatime(&plan.entry_path(h.entry)).ok())
                    .flatten()
                    .filter(|_| {
                        room.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
                            r.checked_sub(1)
                        })
                        .is_ok()
                    })
                    .map(|f| crate::reuse::Source::opened(plan.entry_path(h.entry), f));
                if sh.remove_for_rewrite(h.entry, h.file) {
                    let _ = tx.send(Late {
                        file: h.file,
                        held: vec![false; uses.len()],
                        write: true,
                        lender,
                    });
                }
            }
        }
    });
}

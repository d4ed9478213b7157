//! Blocks other local trees can lend (`--reuse-from DIR`): the file at the same relative path
//! in DIR (an older restore, or the original source) is hashed with the snapshot's chunk
//! boundaries, and every block it holds becomes a source that is checked again when used.
//! The target lends its own blocks the same way ([`local`]): a file right in content that the
//! restore replaces (for names it has outside the restore), or another name of a file's
//! hard-link group that holds its content, is a source of local copies.
//! After the restore, `--verify` reads every restored file back against the snapshot.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use crate::RestoreIssue;
use crate::hashing::{BlockChecker, parallel_map};
use crate::plan::{EntryKind, Plan};
use crate::scan::{EntryAction, Scan};

/// A file that lends blocks.
#[derive(Debug)]
pub(crate) struct Source {
    pub path: PathBuf,
    /// The target's own file (its blocks count as local copies, not as `--reuse-from`).
    pub local: bool,
    /// Opened before the restore removes `path` ([`hold`]): read instead of `path`.
    pub held: OnceLock<File>,
}

impl Source {
    fn new(path: PathBuf, local: bool) -> Arc<Self> {
        Arc::new(Source {
            path,
            local,
            held: OnceLock::new(),
        })
    }

    /// The target's file at `path`, already open: read through `file`.
    pub fn opened(path: PathBuf, file: File) -> Arc<Self> {
        let src = Source::new(path, true);
        let _ = src.held.set(file);
        src
    }

    /// Reads `buf.len()` bytes at `offset`: from the file held open, else from `path`.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        match self.held.get() {
            Some(f) => f.read_exact_at(buf, offset),
            None => arca_fs::open_noatime(&self.path)?.read_exact_at(buf, offset),
        }
    }
}

/// Blob → (file, offset) of a file holding it (a `--reuse-from` tree's, or the target's own:
/// see [`local`]).
pub(crate) type Reusable = HashMap<u32, (Arc<Source>, u64)>;

/// Blocks the target itself holds where the restore would not find them: entries the scan
/// noted ([`crate::inodes::SharedInodes::note_lender`]) whose path holds file `f`'s content
/// by size and mtime (checked by hash when used). They lend only where the restore removes
/// or links over them: a file replaced though right (names outside the restore), held open
/// from before it is removed ([`hold`]; at most a quarter of the files this process may
/// open, the same ones in a dry run); a further name of a group whose first name is written
/// anew, read by its path, which stays until the group's names are linked. Returns the
/// blocks, and the sources to hold open before the restore removes them.
pub(crate) fn local(
    plan: &Plan,
    scan: &Scan,
    mut lenders: Vec<(u32, u32)>,
) -> (Reusable, Vec<Arc<Source>>) {
    let mut map = Reusable::new();
    let mut to_hold = vec![];
    let room = held_at_most();
    // In entry order (the scan notes them as its threads come to them): the dry run lends
    // the same blocks from the same files.
    lenders.sort_unstable();
    for (e, f) in lenders {
        let lends = match plan.entries[e as usize].kind {
            EntryKind::File(_) => {
                scan.entries[e as usize] == EntryAction::Replace && to_hold.len() < room
            }
            EntryKind::Link(first) => {
                matches!(
                    scan.entries[first as usize],
                    EntryAction::Create | EntryAction::Replace // Not when the first name had to be hashed: a real run hashes it while
                                                               // content moves, after the sources are chosen, so a dry run (which hashes
                                                               // it first) would count copies the real run fetches.
                ) && !scan.hashed_or_deferred(first)
                    && scan.entries[e as usize] == EntryAction::Create
            }
            _ => false,
        };
        if !lends {
            continue;
        }
        let src = Source::new(plan.entry_path(e), true);
        let mut lent = false;
        for u in plan.file_uses(f) {
            if !plan.blobs[u.blob as usize].zero {
                map.entry(u.blob).or_insert_with(|| {
                    lent = true;
                    (src.clone(), u.offset)
                });
            }
        }
        if lent && matches!(plan.entries[e as usize].kind, EntryKind::File(_)) {
            to_hold.push(src);
        }
    }
    (map, to_hold)
}

/// How many of the target's files the restore holds open at most to lend their blocks.
pub(crate) fn held_at_most() -> usize {
    usize::try_from(arca_fs::open_files_allowed() / 4).unwrap_or(256)
}

/// Opens the sources [`local`] found that the restore removes, before it removes them; one
/// that cannot be opened lends nothing (its blocks are fetched after all).
pub(crate) fn hold(sources: &[Arc<Source>]) {
    for s in sources {
        if let Ok(f) = arca_fs::open_noatime(&s.path) {
            let _ = s.held.set(f);
        }
    }
}

/// Finds blocks the files to restore need that `dirs` hold at the same relative paths: below
/// a folder as the snapshot's paths are below the target (an older restore, `/` for the
/// original files), or below a backed-up path (`roots`, beside the `target`) as the files are below it (the
/// original source named itself: it gave nothing, unsaid, hunt 30). Every block is checked by
/// hash, so a file found the second way that is not the same one lends nothing.
pub(crate) fn find(
    plan: &Plan,
    scan: &Scan,
    (target, roots): (&Path, &[PathBuf]),
    dirs: &[PathBuf],
    checker: &BlockChecker,
    threads: usize,
    stop: &AtomicBool,
) -> Reusable {
    let files: Vec<u32> = (0..plan.files.len() as u32)
        .filter(|&f| scan.entries[plan.files[f as usize].entry as usize].writes())
        .collect();
    let found = parallel_map(files.len(), threads, stop, |i| {
        let f = files[i];
        let fp = plan.files[f as usize];
        let entry_path = plan.entry_path(fp.entry);
        let Ok(rel) = entry_path.strip_prefix(target) else {
            return vec![];
        };
        let in_snapshot = Path::new("/").join(rel);
        let below_roots: Vec<&Path> = roots
            .iter()
            .filter_map(|r| in_snapshot.strip_prefix(r).ok())
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        let mut candidates = vec![];
        for dir in dirs {
            candidates.push(dir.join(rel));
            candidates.extend(below_roots.iter().map(|p| dir.join(p)));
        }
        candidates.dedup();
        let mut out = vec![];
        for p in candidates {
            let Ok(m) = arca_fs::lstat(&p) else {
                continue;
            };
            if !m.is_file() {
                continue;
            }
            let Ok(src) = arca_fs::open_noatime(&p) else {
                continue;
            };
            let mut buf = vec![];
            for (k, u) in plan.file_uses(f).iter().enumerate() {
                let ui = fp.first as usize + k;
                let bp = &plan.blobs[u.blob as usize];
                if scan.in_place[ui] || bp.zero {
                    continue;
                }
                if checker.holds(&src, m.len(), u, &mut buf).unwrap_or(false) {
                    out.push((u.blob, p.clone(), u.offset));
                }
            }
        }
        out
    });
    let mut map = Reusable::new();
    let mut sources: HashMap<PathBuf, Arc<Source>> = HashMap::new();
    for (b, p, off) in found.into_iter().flatten().flatten() {
        let src = sources
            .entry(p)
            .or_insert_with_key(|p| Source::new(p.clone(), false))
            .clone();
        map.entry(b).or_insert((src, off));
    }
    map
}

/// Reads every restored file back and checks each block against the snapshot. Returns the
/// files checked and the problems found.
pub(crate) fn verify(
    plan: &Plan,
    scan: &Scan,
    failed: &dyn Fn(u32) -> bool,
    checker: &BlockChecker,
    threads: usize,
    stop: &AtomicBool,
) -> (u64, Vec<RestoreIssue>) {
    let files: Vec<u32> = (0..plan.files.len() as u32)
        .filter(|&f| {
            let e = plan.files[f as usize].entry as usize;
            !failed(f)
                && matches!(plan.entries[e].kind, EntryKind::File(_))
                && !matches!(scan.entries[e], EntryAction::Skip | EntryAction::Blocked(_))
        })
        .collect();
    let res = parallel_map(files.len(), threads, stop, |i| {
        let f = files[i];
        let fp = plan.files[f as usize];
        let path = &plan.entry_path(fp.entry);
        let size = match arca_fs::lstat(path) {
            Ok(m) if m.is_file() => m.len(),
            Ok(_) => {
                return Some(format!(
                    "{}: is not a regular file",
                    arca_format::text::shown(path)
                ));
            }
            Err(e) => return Some(format!("{}: {e}", arca_format::text::shown(path))),
        };
        if size != fp.size {
            return Some(format!(
                "{}: verification failed: {size} bytes, the snapshot has {}",
                arca_format::text::shown(path),
                fp.size
            ));
        }
        match checker.held(path, size, plan.file_uses(f)) {
            Ok(held) => held.iter().position(|&h| !h).map(|k| {
                format!(
                    "{}: verification failed: the block at offset {} differs from the snapshot",
                    arca_format::text::shown(path),
                    plan.file_uses(f)[k].offset
                )
            }),
            Err(e) => Some(format!(
                "{}: verification failed: {e}",
                arca_format::text::shown(path)
            )),
        }
    });
    let issues = files
        .iter()
        .zip(res)
        .filter_map(|(&f, r)| {
            r.flatten().map(|message| RestoreIssue {
                path: plan.file_path(f),
                message,
            })
        })
        .collect();
    (files.len() as u64, issues)
}

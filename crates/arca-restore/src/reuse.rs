//! Blocks other local trees can lend (`--reuse-from DIR`): the file at the same relative path
//! in DIR (an older restore, or the original source) is hashed with the snapshot's chunk
//! boundaries, and every block it holds becomes a source that is checked again when used.
//! After the restore, `--verify` reads every restored file back against the snapshot.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use crate::RestoreIssue;
use crate::hashing::{BlockChecker, parallel_map};
use crate::plan::{EntryKind, Plan};
use crate::scan::{EntryAction, Scan};

/// Blob → (file, offset) of a `--reuse-from` tree holding it.
pub(crate) type Reusable = HashMap<u32, (PathBuf, u64)>;

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
    for (b, p, off) in found.into_iter().flatten().flatten() {
        map.entry(b).or_insert((p, off));
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

//! The backed-up paths of a snapshot as its trees spell them, for `--delete` (which deletes
//! only inside them) and for the symlinks a backup followed on the way to them.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::plan::Plan;

/// A path that may be a backed-up one: found by its exact spelling, or only as spelled with
/// the bytes that are not UTF-8 replaced (U+FFFD), where another path may look the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The path as the trees spell it.
    pub path: PathBuf,
    /// Found only as spelled with its bytes that are not UTF-8 replaced.
    pub lossy: bool,
}

/// The backed-up paths among `candidates`. A path found only by its replaced spelling is
/// left out when it holds another candidate: `backup /x/dir\xff /x/dir\xfe/sub` lists
/// `/x/dir\u{FFFD}` twice in spirit, and `/x/dir\xfe` (only on the way to `sub`) looks like the
/// first. Taking it for backed up let `--delete` remove files of the folder above `sub` (hunt
/// 30). Left out, a folder that really was named with one inside it (`backup /a\xff
/// /a\xff/b`) has its own extra entries kept, its inner path still counts: no more is kept
/// than the user asked, and nothing is deleted that was not backed up.
pub fn settle(candidates: Vec<Candidate>) -> Vec<PathBuf> {
    let holds_another = |c: &Candidate| {
        candidates
            .iter()
            .any(|d| d.path != c.path && d.path.starts_with(&c.path))
    };
    let mut roots: Vec<PathBuf> = candidates
        .iter()
        .filter(|c| !c.lossy || !holds_another(c))
        .map(|c| c.path.clone())
        .collect();
    roots.sort();
    roots.dedup();
    roots
}

/// The backed-up paths as the snapshot's trees spell them, for the snapshot's `paths`. A path
/// with bytes that are not UTF-8 replaced (U+FFFD) is matched, as so replaced, against the
/// plan's folders and entries (`--delete` never found a folder inside one to be backed up),
/// then [`settle`]d.
pub(crate) fn exact_roots(plan: &Plan, paths: &[String]) -> Vec<PathBuf> {
    let mut candidates = Vec::with_capacity(paths.len());
    for p in paths {
        if !p.contains(char::REPLACEMENT_CHARACTER) {
            candidates.push(Candidate {
                path: PathBuf::from(p),
                lossy: false,
            });
            continue;
        }
        let lossy = |q: &Path| q.to_string_lossy() == p.as_str();
        let dirs = plan.dirs.iter().map(|d| &d.snap_path).filter(|q| lossy(q));
        let entries = plan.entries.iter().filter_map(|e| {
            let q = plan.dirs[e.parent as usize]
                .snap_path
                .join(OsStr::from_bytes(&e.name));
            lossy(&q).then_some(q)
        });
        candidates.extend(
            dirs.cloned()
                .chain(entries)
                .map(|path| Candidate { path, lossy: true }),
        );
    }
    settle(candidates)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(p: &[u8], lossy: bool) -> Candidate {
        Candidate {
            path: PathBuf::from(OsStr::from_bytes(p)),
            lossy,
        }
    }

    #[test]
    fn a_lookalike_on_the_way_to_another_root_is_not_backed_up() {
        // backup /x/dir\xff /x/dir\xfe/sub: "/x/dir\u{FFFD}" matches both dir\xff and dir\xfe.
        let roots = settle(vec![
            c(b"/x/dir\xff", true),
            c(b"/x/dir\xfe", true),
            c(b"/x/dir\xfe/sub", true),
        ]);
        assert_eq!(
            roots,
            vec![
                PathBuf::from(OsStr::from_bytes(b"/x/dir\xfe/sub")),
                PathBuf::from(OsStr::from_bytes(b"/x/dir\xff")),
            ]
        );
    }

    #[test]
    fn exact_roots_stay_even_when_they_hold_another() {
        // backup ~ ~/data/photos: both are backed up, the outer one too.
        let roots = settle(vec![c(b"/home/u", false), c(b"/home/u/data", false)]);
        assert_eq!(
            roots,
            vec![PathBuf::from("/home/u"), PathBuf::from("/home/u/data")]
        );
    }
}

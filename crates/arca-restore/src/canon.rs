//! Where an entry lands on a case-insensitive target, told by the names its folders list
//! rather than by inode numbers, which some file systems give per name, not per file.
//!
//! exfat-fuse (any path-based FUSE file system) and SMB mounts without the server's inode
//! numbers answer `report.txt` and `Report.txt` with two inode numbers for one file, so an
//! inode comparison finds no alias there. A folder's listing does not lie: it holds the one
//! name the file system stored, and a name that leads somewhere without being listed is
//! another's under a different case.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::aliases::folded;
use crate::plan::{NO_PARENT, Plan};

/// The name folder `folder`, whose `listing` is at hand, holds `name` under: `name` itself
/// when listed; when it is not listed and yet leads somewhere (a case-insensitive file
/// system), the one listed name that folds equal to it. `None` when `name` leads nowhere or
/// no single listed name explains it.
pub(crate) fn stored_in(
    folder: &Path,
    listing: &[(Vec<u8>, bool)],
    name: &[u8],
) -> Option<Vec<u8>> {
    if listing.iter().any(|(n, _)| n[..] == *name) {
        return Some(name.to_vec());
    }
    arca_fs::lstat(&folder.join(OsStr::from_bytes(name))).ok()?;
    let want = folded(name);
    let mut twins = listing.iter().filter(|(n, _)| folded(n) == want);
    match (twins.next(), twins.next()) {
        (Some((n, _)), None) => Some(n.clone()),
        _ => None,
    }
}

/// Whether `listing` holds two names that fold equal: its folder tells case apart.
fn tells_case(listing: &[(Vec<u8>, bool)]) -> bool {
    let mut folds: Vec<u64> = listing.iter().map(|(n, _)| folded(n)).collect();
    folds.sort_unstable();
    folds.windows(2).any(|w| w[0] == w[1])
}

/// Each risky folder's path as the target stores it, found once (a folder's stored name does
/// not change while the restore runs), and entries' paths from them.
#[derive(Debug, Default)]
pub(crate) struct Canon {
    /// Per folder of the plan, whether its path may alias another's.
    risky_dirs: Vec<bool>,
    /// Stored paths of the risky folders found so far.
    dirs: Mutex<HashMap<u32, PathBuf>>,
    /// Folders found to hold two names that fold equal: they tell case apart, so every name
    /// there is stored as it is, and they are not listed again (a folder of 10,000 such
    /// names was listed once per file, 20 s instead of 2).
    sensitive: Mutex<HashSet<PathBuf>>,
}

impl Canon {
    /// For the folders `risky_dirs` marks (see [`crate::aliases::Risky`]).
    pub fn new(risky_dirs: Vec<bool>) -> Self {
        Self {
            risky_dirs,
            dirs: Mutex::new(HashMap::new()),
            sensitive: Mutex::new(HashSet::new()),
        }
    }

    /// The path folder `d` has on the target: its own but for the names a case-insensitive
    /// file system stored differently. A folder not there yet keeps its own name.
    pub fn dir(&self, plan: &Plan, d: u32) -> PathBuf {
        let dp = &plan.dirs[d as usize];
        if dp.parent == NO_PARENT || !self.risky_dir(d) {
            return dp.path.clone();
        }
        if let Some(p) = self.lock().get(&d) {
            return p.clone();
        }
        let parent = self.dir(plan, dp.parent);
        let name = dp.path.file_name().map_or(&[][..], OsStrExt::as_bytes);
        match self.stored(&parent, name) {
            Some(stored) => {
                let p = parent.join(OsStr::from_bytes(&stored));
                self.lock().insert(d, p.clone());
                p
            }
            None => parent.join(OsStr::from_bytes(name)),
        }
    }

    /// The path entry `e` has on the target, as [`Self::dir`] finds its folder's; its own
    /// name when it leads nowhere.
    pub fn entry(&self, plan: &Plan, e: u32) -> PathBuf {
        let ep = &plan.entries[e as usize];
        let folder = self.dir(plan, ep.parent);
        let name = self
            .stored(&folder, &ep.name)
            .unwrap_or_else(|| ep.name.to_vec());
        folder.join(OsStr::from_bytes(&name))
    }

    /// Whether folder `d` may alias another's (or lies below one that may).
    pub fn risky_dir(&self, d: u32) -> bool {
        self.risky_dirs.get(d as usize).is_some_and(|&r| r)
    }

    /// The name `folder` holds `name` under ([`stored_in`], `None` when the folder cannot be
    /// listed); a folder found to tell case apart is not listed again.
    pub fn stored(&self, folder: &Path, name: &[u8]) -> Option<Vec<u8>> {
        let sensitive = || self.sensitive.lock().unwrap_or_else(|p| p.into_inner());
        if sensitive().contains(folder) {
            return Some(name.to_vec());
        }
        let listing = arca_fs::list_dir_noatime(folder).ok()?;
        if tells_case(&listing) {
            sensitive().insert(folder.to_path_buf());
        }
        stored_in(folder, &listing, name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, PathBuf>> {
        self.dirs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::stored_in;

    fn stored_name(folder: &std::path::Path, name: &[u8]) -> Option<Vec<u8>> {
        let listing = arca_fs::list_dir_noatime(folder).ok()?;
        stored_in(folder, &listing, name)
    }

    /// A listed name is its own; one not listed that leads nowhere has none (a
    /// case-sensitive folder: `Report.txt` is not `report.txt`'s).
    #[test]
    fn a_name_is_stored_as_listed() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("Report.txt"), b"x").unwrap();
        assert_eq!(
            stored_name(tmp.path(), b"Report.txt").as_deref(),
            Some(&b"Report.txt"[..])
        );
        assert_eq!(stored_name(tmp.path(), b"report.txt"), None);
        assert_eq!(stored_name(&tmp.path().join("gone"), b"x"), None);
    }
}

//! The estimate scan: a walk of the backup's paths, run beside the backup, that counts the
//! regular files and bytes the backup will process so a progress display can show totals,
//! a percentage and an ETA (as restic's scanner does).
//!
//! It follows the backup's rules (no symlink following, the same exclusions, file-system
//! boundaries, loops) but stores nothing and reports nothing: whatever cannot be read is
//! skipped silently, since the backup itself warns about it. As the backup does, it looks at
//! a folder's entries in the folder it listed, held open (`fstatat`), not by their paths,
//! which walked every component again for each; it holds one folder open at a time, and
//! counts the folder's files as soon as it is listed.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use arca_fs::Stat;

use crate::Progress;
use crate::filter::{Excludes, Filter};
use crate::sources;

/// A directory's folders left to walk, with their lstat.
type Folders = std::vec::IntoIter<(Vec<u8>, Stat)>;

/// Files counted locally before the shared totals are updated.
const FLUSH_EVERY: u64 = 128;

/// Walks `paths` as a backup with these `excludes` and `one_file_system` would, adding each
/// regular file to `progress.total_files` and its size to `progress.total_bytes` as it goes,
/// and sets `progress.totals_final` once done. Returns early (totals not final) when `stop`
/// is set. Never fails: unreadable entries are skipped, invalid patterns make it do nothing
/// (the backup refuses them).
pub fn estimate(
    paths: &[PathBuf],
    excludes: &Excludes,
    one_file_system: bool,
    progress: &Progress,
    stop: &AtomicBool,
) {
    let Ok(filter) = Filter::new(excludes) else {
        return;
    };
    let mut scan = Scan {
        filter,
        one_file_system,
        progress,
        stop,
        ancestors: vec![],
        files: 0,
        bytes: 0,
    };
    for target in targets(paths) {
        if scan.stopped() {
            break;
        }
        if scan.filter.excludes_target(&target) {
            continue;
        }
        let Ok(meta) = arca_fs::lstat(&target) else {
            continue;
        };
        scan.entry(&mut target.clone(), &Stat::from(&meta), None);
    }
    scan.flush();
    if !scan.stopped() {
        progress.totals_final.store(true, Ordering::Release);
    }
}

/// The paths the backup will walk: absolute, without duplicates or paths inside others.
fn targets(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut abs: Vec<PathBuf> = paths
        .iter()
        .filter_map(|p| sources::absolute(p).ok())
        .collect();
    abs.sort();
    abs.dedup();
    let mut out: Vec<PathBuf> = Vec::with_capacity(abs.len());
    for p in abs {
        if !out.iter().any(|o| p.starts_with(o)) {
            out.push(p);
        }
    }
    out
}

struct Scan<'a> {
    filter: Filter,
    one_file_system: bool,
    progress: &'a Progress,
    stop: &'a AtomicBool,
    /// (device, inode) of the directories being walked, to stop at loops.
    ancestors: Vec<(u64, u64)>,
    /// Counted, not yet added to `progress`.
    files: u64,
    bytes: u64,
}

impl Scan<'_> {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn flush(&mut self) {
        if self.files > 0 {
            // Bytes first: a reader seeing the new file count sees their bytes too.
            self.progress
                .total_bytes
                .fetch_add(self.bytes, Ordering::Relaxed);
            self.progress
                .total_files
                .fetch_add(self.files, Ordering::Relaxed);
            self.files = 0;
            self.bytes = 0;
        }
    }

    /// One entry at `path` (restored to its value on return), in a directory on device
    /// `dir_dev` (none for a backed-up path), and everything below it, depth first with a
    /// stack of its own (no recursion: a tree thousands of levels deep overflowed it).
    fn entry(&mut self, path: &mut PathBuf, meta: &Stat, dir_dev: Option<u64>) {
        let base = self.ancestors.len();
        // Per directory being walked: its folders left and its device.
        let mut stack: Vec<(Folders, u64)> = vec![];
        if let Some(dirs) = self.enter(path, meta, dir_dev) {
            stack.push((dirs, meta.dev));
        }
        while let Some((dirs, dev)) = stack.last_mut() {
            let dev = *dev;
            let next = if self.stopped() { None } else { dirs.next() };
            let Some((name, meta)) = next else {
                stack.pop();
                self.ancestors.truncate(base + stack.len());
                if !stack.is_empty() {
                    path.pop();
                }
                continue;
            };
            path.push(OsStr::from_bytes(&name));
            if let Some(dirs) = self.enter(path, &meta, Some(dev)) {
                stack.push((dirs, meta.dev));
                continue;
            }
            path.pop();
        }
        self.flush();
    }

    /// Counts the entry at `path` if it is a file; if it is a directory to walk, notes it
    /// among the ancestors, counts the files in it and returns its folders (not excluded),
    /// sorted, with their lstat.
    fn enter(&mut self, path: &mut PathBuf, meta: &Stat, dir_dev: Option<u64>) -> Option<Folders> {
        if meta.is_file() {
            self.count(meta.size);
            return None;
        }
        let key = (meta.dev, meta.ino);
        if !meta.is_dir()
            || self.ancestors.contains(&key)
            || (self.one_file_system && dir_dev.is_some_and(|d| d != meta.dev))
            // A tag that cannot be read leaves the directory backed up.
            || matches!(self.filter.tagged(path), Ok(Some(_)))
        {
            return None;
        }
        let mut listing = arca_fs::list_dir_names_and_ids(path).ok()?;
        // The backup's order, so that the scan stays ahead of it.
        listing.names.sort_unstable();
        let mut dirs = vec![];
        for name in listing.names {
            path.push(OsStr::from_bytes(&name));
            let excluded = self.filter.excludes_path(path);
            path.pop();
            if excluded {
                continue;
            }
            match listing.dir.lstat(&name) {
                Ok(m) if m.is_file() => self.count(m.size),
                Ok(m) if m.is_dir() => dirs.push((name, m)),
                _ => {}
            }
        }
        self.ancestors.push(key);
        Some(dirs.into_iter())
    }

    /// Counts a file of `size` bytes, unless the size limit leaves it out.
    fn count(&mut self, size: u64) {
        if !self.filter.too_large(size) {
            self.files += 1;
            self.bytes += size;
            if self.files >= FLUSH_EVERY {
                self.flush();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    fn run(paths: &[PathBuf], x: &Excludes) -> (u64, u64, bool) {
        let p = Progress::default();
        estimate(paths, x, false, &p, &AtomicBool::new(false));
        (
            p.total_files.load(Ordering::Relaxed),
            p.total_bytes.load(Ordering::Relaxed),
            p.totals_final.load(Ordering::Relaxed),
        )
    }

    /// A tree of `dirs` directories of 40 files each (more than one flush), sizes varying;
    /// returns the file count and byte sum.
    fn tree(root: &Path, dirs: usize) -> (u64, u64) {
        let (mut files, mut bytes) = (0, 0);
        for d in 0..dirs {
            let dir = root.join(format!("d{d}")).join("sub");
            fs::create_dir_all(&dir).unwrap();
            for f in 0..40 {
                let len = (d * 131 + f * 17) % 1000;
                fs::write(dir.join(format!("f{f}")), vec![b'x'; len]).unwrap();
                files += 1;
                bytes += len as u64;
            }
        }
        (files, bytes)
    }

    #[test]
    fn totals_match_the_tree_and_exclusions_are_honoured() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("src");
        let (files, bytes) = tree(&root, 5);
        assert_eq!(
            run(std::slice::from_ref(&root), &Excludes::default()),
            (files, bytes, true)
        );
        // Named twice, and a path inside another: counted once.
        assert_eq!(
            run(
                &[root.clone(), root.join("d1"), root.clone()],
                &Excludes::default()
            ),
            (files, bytes, true)
        );

        // Symlinks, empty directories and special entries are not files; links not followed.
        std::os::unix::fs::symlink(root.join("d0"), root.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("d0/sub/f1"), root.join("flink")).unwrap();
        fs::create_dir(root.join("empty")).unwrap();
        assert_eq!(
            run(std::slice::from_ref(&root), &Excludes::default()),
            (files, bytes, true)
        );

        // Patterns, tag files (a tagged directory's contents are left out), size limits.
        fs::write(root.join("big.tmp"), vec![0u8; 5000]).unwrap();
        fs::write(root.join("d2/.nobackup"), b"").unwrap();
        let d2: u64 = (0..40).map(|f| ((2 * 131 + f * 17) % 1000) as u64).sum();
        let x = Excludes {
            patterns: vec!["*.tmp".into(), format!("{}/d3", root.display())],
            if_present: vec![".nobackup".into()],
            ..Excludes::default()
        };
        let d3: u64 = (0..40).map(|f| ((3 * 131 + f * 17) % 1000) as u64).sum();
        assert_eq!(
            run(std::slice::from_ref(&root), &x),
            (files - 80, bytes - d2 - d3, true)
        );
        let x = Excludes {
            larger_than: Some(999),
            ..Excludes::default()
        };
        assert_eq!(
            run(std::slice::from_ref(&root), &x),
            (files + 1, bytes, true),
            "big.tmp is left out; the .nobackup tag is a file like any other"
        );
    }

    #[test]
    fn stops_early_and_never_fails() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("src");
        tree(&root, 2);
        let p = Progress::default();
        estimate(
            std::slice::from_ref(&root),
            &Excludes::default(),
            true,
            &p,
            &AtomicBool::new(true),
        );
        assert!(!p.totals_final.load(Ordering::Relaxed));
        assert_eq!(p.total_files.load(Ordering::Relaxed), 0);

        // Missing paths and invalid patterns: nothing counted, no panic.
        assert_eq!(
            run(&[d.path().join("missing")], &Excludes::default()),
            (0, 0, true)
        );
        let bad = Excludes {
            if_present: vec!["a/b".into()],
            ..Excludes::default()
        };
        assert_eq!(run(&[root], &bad), (0, 0, false));
    }
}

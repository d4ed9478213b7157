//! Mount points, from `/proc/self/mountinfo`: a directory tree is not removed across one.

use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// A mount point at or below directory `dir` (which is not a symlink), if there is one. A
/// bind mount of the same file system counts, which comparing device numbers would miss.
/// From the mount table; when it or the directory's real path cannot be read (no /proc, a
/// path longer than the kernel takes), by walking the tree's folders for a mount root
/// (statx) or another device. (Going on as without mounts let `restore --delete` empty a
/// file system mounted below a path longer than 4096 bytes: hunt 23.)
pub fn mount_point_within(dir: &Path) -> Option<PathBuf> {
    let table = fs::read("/proc/self/mountinfo").ok();
    let real = fs::canonicalize(dir).ok();
    match (table, real) {
        (Some(table), Some(real)) => table
            .split(|&b| b == b'\n')
            .filter_map(|line| line.split(|&b| b == b' ').nth(4))
            .map(|field| PathBuf::from(OsString::from_vec(unescape(field))))
            .find(|m| m.starts_with(&real))
            // Named as `dir` names it: a relative target's mount point was shown absolute,
            // and one at `dir` itself was not known for `dir` (named twice in messages).
            .map(|m| match m.strip_prefix(&real) {
                Ok(rest) if rest.as_os_str().is_empty() => dir.to_path_buf(),
                Ok(rest) => dir.join(rest),
                Err(_) => m,
            }),
        _ => mount_by_walk(dir),
    }
}

/// [`mount_point_within`] by walking the entries below `dir`: the first that is a mount
/// root (a folder, or a file bind-mounted), or on another device than `dir`. A folder that cannot be read is not looked into
/// (nothing can be removed there either).
fn mount_by_walk(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let dev = crate::lstat(dir).ok()?.dev();
    if is_mount_root(dir) {
        return Some(dir.to_path_buf());
    }
    // An explicit stack: trees thousands of folders deep are walked without recursion.
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(names) = crate::list_dir_names(&d) else {
            continue;
        };
        for name in names {
            let p = d.join(std::ffi::OsStr::from_bytes(&name));
            match crate::lstat(&p) {
                // A file can be a mount point too (a bind mount of a file).
                Ok(m) if m.dev() != dev || (!m.is_symlink() && is_mount_root(&p)) => {
                    return Some(p);
                }
                Ok(m) if m.is_dir() => todo.push(p),
                _ => {}
            }
        }
    }
    None
}

/// Whether folder `path` (of any length) is the root of a mount, bind mounts included
/// (statx's `STATX_ATTR_MOUNT_ROOT`, Linux 5.8; false where the kernel does not tell).
fn is_mount_root(path: &Path) -> bool {
    crate::io_on_long_path(path, crate::statx_attributes)
        .is_ok_and(|a| a & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0)
}

/// A mountinfo field with its octal escapes (`\040` for a space) decoded.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_decoded() {
        assert_eq!(unescape(br"/mnt/a\040b\134c\012"), b"/mnt/a b\\c\n");
        assert_eq!(unescape(br"/plain\9"), br"/plain\9");
    }

    #[test]
    fn proc_holds_a_mount_point_and_a_plain_folder_none() {
        if Path::new("/proc/self/mountinfo").exists() {
            assert_eq!(
                mount_point_within(Path::new("/proc")),
                Some(PathBuf::from("/proc"))
            );
        }
        let d = tempfile::tempdir().unwrap();
        assert_eq!(mount_point_within(d.path()), None);
    }

    /// The mount point is named as the folder asked about names it (a relative target's was
    /// shown absolute, and messages named the path twice).
    #[test]
    fn the_mount_point_is_named_as_the_folder_is() {
        if Path::new("/proc/self/mountinfo").exists() {
            let odd = Path::new("/proc/self/..");
            assert_eq!(mount_point_within(odd).as_deref(), Some(odd));
        }
    }

    /// The walk finds a mount below a folder (here /proc's own mounts, or /sys's) and none in
    /// a plain tree, at any depth, also past 4096 bytes.
    #[test]
    fn the_walk_finds_mounts_at_any_depth() {
        if Path::new("/proc/self/mountinfo").exists() {
            assert_eq!(
                mount_by_walk(Path::new("/proc")),
                Some(PathBuf::from("/proc"))
            );
        }
        let d = tempfile::tempdir().unwrap();
        let mut deep = d.path().to_path_buf();
        for _ in 0..25 {
            deep.push("d".repeat(200));
            crate::io_on_long_path(&deep, |p| fs::create_dir(p)).unwrap();
        }
        assert!(deep.as_os_str().len() > 4096);
        assert_eq!(mount_by_walk(d.path()), None);
        assert_eq!(mount_point_within(d.path()), None);
    }
}

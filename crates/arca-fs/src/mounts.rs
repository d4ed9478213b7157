//! Mount points, from `/proc/self/mountinfo`: a directory tree is not removed across one.

use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// A mount point at or below directory `dir` (which is not a symlink), if there is one. A
/// bind mount of the same file system counts, which comparing device numbers would miss.
/// `None` when the mount table or the directory's real path cannot be read (no /proc, a
/// path longer than the kernel takes): the caller then goes on as without mounts.
pub fn mount_point_within(dir: &Path) -> Option<PathBuf> {
    let table = fs::read("/proc/self/mountinfo").ok()?;
    let dir = fs::canonicalize(dir).ok()?;
    table
        .split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ').nth(4))
        .map(|field| PathBuf::from(OsString::from_vec(unescape(field))))
        .find(|m| m.starts_with(&dir))
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
}

//! Compares two trees entry by entry: kind, mode, owner, times (ns), size, xattrs, symlink
//! targets, device numbers, hard-link groups, then file bytes.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Metadata of one entry, captured before any content is read (reads move atimes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Kind letter: f d l p s c b.
    pub kind: char,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size (files).
    pub size: u64,
    /// mtime (s, ns).
    pub mtime: (i64, i64),
    /// atime (s, ns).
    pub atime: (i64, i64),
    /// Symlink target.
    pub link: Vec<u8>,
    /// Device number.
    pub rdev: u64,
    /// Sorted xattrs.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Inode (only used to compare hard-link groups, not values).
    pub ino: u64,
}

/// Captures every entry below `root` (relative paths as keys), metadata first.
pub fn snapshot(root: &Path) -> io::Result<BTreeMap<PathBuf, Entry>> {
    let mut out = BTreeMap::new();
    walk(root, Path::new(""), &mut out)?;
    Ok(out)
}

/// The names in a directory, read without moving its access time (comparing must not change
/// what it compares).
fn list_noatime(dir: &Path) -> io::Result<Vec<std::ffi::OsString>> {
    use nix::dir::Dir;
    use nix::fcntl::OFlag;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut d = Dir::open(dir, flags | OFlag::O_NOATIME, nix::sys::stat::Mode::empty())
        .or_else(|_| Dir::open(dir, flags, nix::sys::stat::Mode::empty()))
        .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
    let mut out = vec![];
    for e in d.iter() {
        let e = e.map_err(|e| io::Error::from_raw_os_error(e as i32))?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            out.push(std::ffi::OsStr::from_bytes(n).to_os_string());
        }
    }
    Ok(out)
}

/// A file's bytes, read without moving its access time.
fn read_noatime(p: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOATIME)
        .open(p)
        .or_else(|_| fs::File::open(p))?;
    let mut v = vec![];
    f.read_to_end(&mut v)?;
    Ok(v)
}

fn walk(root: &Path, rel: &Path, out: &mut BTreeMap<PathBuf, Entry>) -> io::Result<()> {
    let dir = root.join(rel);
    let mut names = list_noatime(&dir)?;
    names.sort();
    let mut subdirs = vec![];
    for n in names {
        let r = rel.join(&n);
        let p = root.join(&r);
        let m = fs::symlink_metadata(&p)?;
        let ft = m.file_type();
        let kind = if ft.is_file() {
            'f'
        } else if ft.is_dir() {
            'd'
        } else if ft.is_symlink() {
            'l'
        } else if ft.is_fifo() {
            'p'
        } else if ft.is_socket() {
            's'
        } else if ft.is_char_device() {
            'c'
        } else {
            'b'
        };
        let mut xattrs: Vec<(Vec<u8>, Vec<u8>)> = xattr::list(&p)
            .map(|names| {
                names
                    .filter_map(|k| {
                        xattr::get(&p, &k)
                            .ok()
                            .flatten()
                            .map(|v| (k.as_bytes().to_vec(), v))
                    })
                    .collect()
            })
            .unwrap_or_default();
        xattrs.sort();
        out.insert(
            r.clone(),
            Entry {
                kind,
                mode: m.mode() & 0o7777,
                uid: m.uid(),
                gid: m.gid(),
                size: if kind == 'f' { m.size() } else { 0 },
                mtime: (m.mtime(), m.mtime_nsec()),
                atime: (m.atime(), m.atime_nsec()),
                link: if kind == 'l' {
                    fs::read_link(&p)?.as_os_str().as_bytes().to_vec()
                } else {
                    vec![]
                },
                rdev: if matches!(kind, 'c' | 'b') {
                    m.rdev()
                } else {
                    0
                },
                xattrs,
                ino: m.ino(),
            },
        );
        if kind == 'd' {
            subdirs.push(r);
        }
    }
    for r in subdirs {
        walk(root, &r, out)?;
    }
    Ok(())
}

/// Differences between two trees on disk (captured now), as readable lines; an unreadable
/// tree is one difference.
pub fn diff_trees(expected: &Path, actual: &Path) -> Vec<String> {
    match (snapshot(expected), snapshot(actual)) {
        (Ok(e), Ok(a)) => diff(&e, expected, &a, actual),
        (Err(e), _) => vec![format!("cannot read {}: {e}", expected.display())],
        (_, Err(e)) => vec![format!("cannot read {}: {e}", actual.display())],
    }
}

/// Differences between an expected capture and an actual tree, as readable lines. Compares
/// metadata of the captures, hard-link groups, and file contents (read last).
pub fn diff(
    expected: &BTreeMap<PathBuf, Entry>,
    exp_root: &Path,
    actual: &BTreeMap<PathBuf, Entry>,
    act_root: &Path,
) -> Vec<String> {
    let mut d = vec![];
    for (p, e) in expected {
        let Some(a) = actual.get(p) else {
            d.push(format!("missing: {}", p.display()));
            continue;
        };
        let (mut e2, mut a2) = (e.clone(), a.clone());
        e2.ino = 0;
        a2.ino = 0;
        if e2 != a2 {
            d.push(format!(
                "metadata differs for {}:\n  expected {e2:?}\n  actual   {a2:?}",
                p.display()
            ));
        }
    }
    for p in actual.keys() {
        if !expected.contains_key(p) {
            d.push(format!("unexpected: {}", p.display()));
        }
    }
    // Hard-link groups: paths sharing an inode must share one in the other tree too.
    let groups = |m: &BTreeMap<PathBuf, Entry>| {
        let mut g: BTreeMap<u64, Vec<PathBuf>> = BTreeMap::new();
        for (p, e) in m {
            if e.kind == 'f' {
                g.entry(e.ino).or_default().push(p.clone());
            }
        }
        let mut v: Vec<Vec<PathBuf>> = g.into_values().filter(|v| v.len() > 1).collect();
        v.sort();
        v
    };
    let (ge, ga) = (groups(expected), groups(actual));
    if ge != ga {
        d.push(format!(
            "hard-link groups differ: expected {ge:?}, actual {ga:?}"
        ));
    }
    for (p, e) in expected {
        if e.kind == 'f' && actual.contains_key(p) {
            match (
                read_noatime(&exp_root.join(p)),
                read_noatime(&act_root.join(p)),
            ) {
                (Ok(x), Ok(y)) if x == y => {}
                (Ok(_), Ok(_)) => d.push(format!("content differs: {}", p.display())),
                (x, y) => d.push(format!(
                    "cannot read {}: {:?} / {:?}",
                    p.display(),
                    x.err(),
                    y.err()
                )),
            }
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn diff_sees_every_kind_of_difference() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        generate::every_kind(&a, 5).unwrap();
        let b = t.path().join("b");
        generate::every_kind(&b, 5).unwrap();
        let ea = snapshot(&a).unwrap();
        let d = diff(&ea, &a, &snapshot(&b).unwrap(), &b);
        assert!(d.is_empty(), "{}", d.join("\n"));
        type Change = Box<dyn Fn(&Path)>;
        let changes: Vec<Change> = vec![
            Box::new(|p| {
                fs::set_permissions(p.join("setgid"), fs::Permissions::from_mode(0o750)).unwrap()
            }),
            Box::new(|p| {
                generate::set_times(&p.join("small.txt"), (5, 5), (1_500_000_000, 1)).unwrap()
            }),
            Box::new(|p| xattr::set(p.join("small.txt"), "user.comment", b"other").unwrap()),
            Box::new(|p| crate::flip_byte(&p.join("dir/nested/random.bin"), 10).unwrap()),
            Box::new(|p| fs::remove_file(p.join("fifo")).unwrap()),
        ];
        for (i, change) in changes.iter().enumerate() {
            let c = t.path().join(format!("c{i}"));
            generate::every_kind(&c, 5).unwrap();
            change(&c);
            assert!(
                !diff(&ea, &a, &snapshot(&c).unwrap(), &c).is_empty(),
                "change {i} not seen"
            );
        }
    }
}

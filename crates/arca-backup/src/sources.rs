//! Turning the paths given to `backup` into absolute, normalized paths and a tree of the
//! directories leading to them, which becomes the snapshot's root listing.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// `s` with a leading `~/`, or `~` alone, made the home folder (`$HOME`), as profiles write
/// paths (`~` alone was left as is, and so backed up `$PWD/~`). `~user` is left as is.
pub fn expand_home(s: &str) -> String {
    let rest = if s == "~" {
        Some("")
    } else {
        s.strip_prefix("~/")
    };
    match (rest, std::env::var_os("HOME").filter(|h| !h.is_empty())) {
        (Some(""), Some(home)) => home.to_string_lossy().into_owned(),
        (Some(rest), Some(home)) => Path::new(&home).join(rest).to_string_lossy().into_owned(),
        _ => s.to_string(),
    }
}

/// Makes `p` absolute against the working directory (as [`working_dir`] names it) and removes
/// `.` and `..` lexically (symlinks are not resolved: the path is stored as the user named it).
pub fn absolute(p: &Path) -> io::Result<PathBuf> {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        working_dir()?.join(p)
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    Ok(out)
}

/// The working directory as the user's shell names it: `$PWD` when it is absolute and leads to
/// the working directory, so that `cd /home/link && arca backup .` stores `/home/link` as
/// restic does (and a parent snapshot made so is found); else the kernel's physical path.
/// `$PWD` also names a working directory deeper than `PATH_MAX`, which `getcwd` cannot.
fn working_dir() -> io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let shell = std::env::var_os("PWD")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    if let (Some(pwd), Ok(here)) = (shell, std::fs::metadata(".")) {
        let same = arca_fs::io_on_long_path(&pwd, |p| std::fs::metadata(p))
            .is_ok_and(|m| (m.dev(), m.ino()) == (here.dev(), here.ino()));
        if same {
            return Ok(pwd);
        }
    }
    std::env::current_dir()
}

/// A node of the source tree: either a backed-up path (`target`) or a directory on the way
/// to one.
#[derive(Debug, Default)]
pub struct SourceTree {
    /// True when this path itself was named on the command line.
    pub target: bool,
    /// Children by name, in byte order.
    pub children: BTreeMap<Vec<u8>, SourceTree>,
}

impl SourceTree {
    /// Builds the tree of absolute paths. A path inside another named path stays below it as
    /// a child of the target: the walk of the outer path usually covers it, but not when the
    /// way to it goes through a symlink (`backup ~ ~/data/photos`, `data` a symlink) or onto
    /// another file system with `--one-file-system`; the walk then stores the way to it as
    /// when it is backed up alone (restic's rule).
    pub fn build(paths: &[PathBuf]) -> Self {
        let mut root = SourceTree::default();
        for p in paths {
            let mut node = &mut root;
            for c in p.components() {
                if let Component::Normal(n) = c {
                    node = node.children.entry(n.as_bytes().to_vec()).or_default();
                }
            }
            node.target = true;
        }
        root
    }
}

/// Joins a name (raw bytes) to a path.
pub fn join(dir: &Path, name: &[u8]) -> PathBuf {
    dir.join(OsString::from_vec(name.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_lexically() {
        assert_eq!(
            absolute(Path::new("/a/./b/../c/")).unwrap(),
            PathBuf::from("/a/c")
        );
        assert_eq!(absolute(Path::new("/..")).unwrap(), PathBuf::from("/"));
        assert!(absolute(Path::new("rel")).unwrap().is_absolute());
    }

    #[test]
    fn nested_paths_stay_below_their_targets() {
        let t = SourceTree::build(&[
            PathBuf::from("/a/b"),
            PathBuf::from("/a/b/c"),
            PathBuf::from("/a/d"),
            PathBuf::from("/e"),
        ]);
        let a = &t.children[&b"a".to_vec()];
        assert!(!a.target);
        let b = &a.children[&b"b".to_vec()];
        assert!(b.target);
        assert!(b.children[&b"c".to_vec()].target);
        assert!(a.children[&b"d".to_vec()].target);
        assert!(t.children[&b"e".to_vec()].target);
        let all = SourceTree::build(&[PathBuf::from("/x"), PathBuf::from("/")]);
        assert!(all.target && all.children[&b"x".to_vec()].target);
    }
}

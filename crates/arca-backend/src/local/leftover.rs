//! What an `init` that stopped before writing the config (killed, interrupted, or failed on a
//! full disk) leaves in a local folder: the repository's folders, key files and temporary
//! files. `init` run again clears that instead of refusing a folder that is not empty.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The folders `init` makes (and the 256 folders of `data/`).
pub(super) const FOLDERS: [&str; 5] = ["keys", "snapshots", "index", "data", "locks"];

fn is_temp(name: &OsStr) -> bool {
    name.as_encoded_bytes().starts_with(b".tmp-")
}

fn is_hex(name: &OsStr, len: usize) -> bool {
    let b = name.as_encoded_bytes();
    b.len() == len && b.iter().all(u8::is_ascii_hexdigit)
}

/// The files to remove from `root` (a folder without a config) when it holds nothing but what
/// an interrupted `init` leaves: [`FOLDERS`], the two-digit folders of `data/`, key files
/// and temporary files. `None` when anything else is there (it is no leftover of ours).
pub(super) fn of_init(root: &Path) -> io::Result<Option<Vec<PathBuf>>> {
    let mut files = vec![];
    for e in fs::read_dir(root)? {
        let e = e?;
        let (name, ty) = (e.file_name(), e.file_type()?);
        if ty.is_file() && is_temp(&name) {
            files.push(e.path());
            continue;
        }
        let Some(folder) = name.to_str().filter(|n| FOLDERS.contains(n)) else {
            return Ok(None);
        };
        if !ty.is_dir() {
            return Ok(None);
        }
        for f in fs::read_dir(e.path())? {
            let f = f?;
            let (name, ty) = (f.file_name(), f.file_type()?);
            if folder == "data" && ty.is_dir() && is_hex(&name, 2) {
                for g in fs::read_dir(f.path())? {
                    let g = g?;
                    if !(g.file_type()?.is_file() && is_temp(&g.file_name())) {
                        return Ok(None);
                    }
                    files.push(g.path());
                }
            } else if ty.is_file() && (is_temp(&name) || (folder == "keys" && is_hex(&name, 64))) {
                files.push(f.path());
            } else {
                return Ok(None);
            }
        }
    }
    Ok(Some(files))
}

//! What an `init` that stopped before writing the config (killed, interrupted, or failed on a
//! full disk) leaves in a local folder, found by the rules of [`crate::leftover`]. `init` run
//! again clears that instead of refusing a folder that is not empty.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::leftover::{Kind, Place, Verdict, classify};

fn kind(ty: fs::FileType) -> Kind {
    if ty.is_file() {
        Kind::File
    } else if ty.is_dir() {
        Kind::Dir
    } else {
        Kind::Other
    }
}

/// The files to remove from `root` (a folder without a config) when it holds nothing but what
/// an interrupted `init` leaves. `None` when anything else is there (it is no leftover of ours).
pub(super) fn of_init(root: &Path) -> io::Result<Option<Vec<PathBuf>>> {
    let mut files = vec![];
    let mut dirs = vec![(root.to_path_buf(), Place::Root)];
    while let Some((dir, place)) = dirs.pop() {
        for e in fs::read_dir(&dir)? {
            let e = e?;
            match classify(
                place,
                e.file_name().as_encoded_bytes(),
                kind(e.file_type()?),
            ) {
                Verdict::Remove => files.push(e.path()),
                Verdict::Enter(inner) => dirs.push((e.path(), inner)),
                Verdict::Foreign => return Ok(None),
            }
        }
    }
    Ok(Some(files))
}

//! What an `init` that stopped before writing the config (killed, cut off, or failed on a full
//! disk) leaves in an SFTP folder: found, so that `init` run again clears it, as it does locally.

use std::time::{Duration, SystemTime};

use futures_util::{StreamExt, TryStreamExt, stream};

use super::io::{Fail, join};
use super::session::Session;

/// The folders `init` makes (and the 256 folders of `data/`).
pub(super) const FOLDERS: [&str; 5] = ["keys", "snapshots", "index", "data", "locks"];

/// Files younger than this are another init's, about to write its config.
pub(super) const SETTLES: Duration = Duration::from_secs(60);

/// Listings in flight while the `data/` folders are looked at.
const LISTINGS: usize = 16;

/// What an interrupted `init` left: the files to remove, the folders already there (relative
/// to the repository folder), and whether a file is younger than [`SETTLES`].
#[derive(Debug, Default)]
pub(super) struct Leftover {
    pub files: Vec<String>,
    pub folders: Vec<String>,
    pub fresh: bool,
}

fn is_temp(name: &str) -> bool {
    name.starts_with(".tmp-")
}

fn is_hex(name: &str, len: usize) -> bool {
    name.len() == len && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One folder's entries: name, whether a folder, whether a plain file, last modified.
async fn entries(
    s: &Session,
    dir: &str,
) -> Result<Vec<(String, bool, bool, Option<SystemTime>)>, Fail> {
    let handle = s.sftp.fs().open_dir(dir).await?;
    let listed: Vec<_> = handle.read_dir().try_collect().await?;
    Ok(listed
        .into_iter()
        .filter_map(|e| {
            // A name that is not UTF-8 is none of ours: kept as a foreign entry.
            let name = e.filename().to_str().unwrap_or("\u{FFFD}").to_string();
            let meta = e.metadata();
            let ty = meta.file_type();
            let modified = meta.modified().map(|t| t.as_system_time());
            (name != "." && name != "..").then(|| {
                (
                    name,
                    ty.is_some_and(|t| t.is_dir()),
                    ty.is_some_and(|t| t.is_file()),
                    modified,
                )
            })
        })
        .collect())
}

/// [`Leftover`] of the repository folder `root` (which has no config), or `None` when it
/// holds anything an `init` does not leave (it is not ours to clear).
pub(super) async fn of_init(s: &Session, root: &str) -> Result<Option<Leftover>, Fail> {
    let mut found = Leftover::default();
    let now = SystemTime::now();
    let note = |found: &mut Leftover, path: String, modified: Option<SystemTime>| {
        // No date, or a date ahead of this clock: taken for fresh (the safe side).
        found.fresh |= modified.is_none_or(|t| now.duration_since(t).map_or(true, |a| a < SETTLES));
        found.files.push(path);
    };
    let mut shards = vec![];
    for (name, is_dir, is_file, modified) in entries(s, root).await? {
        if is_file && is_temp(&name) {
            note(&mut found, join(root, &name), modified);
            continue;
        }
        let Some(folder) = FOLDERS.iter().find(|f| **f == name) else {
            return Ok(None);
        };
        if !is_dir {
            return Ok(None);
        }
        found.folders.push(name.clone());
        let dir = join(root, folder);
        for (name, is_dir, is_file, modified) in entries(s, &dir).await? {
            if *folder == "data" && is_dir && is_hex(&name, 2) {
                found.folders.push(format!("data/{name}"));
                shards.push(join(&dir, &name));
            } else if is_file && (is_temp(&name) || (*folder == "keys" && is_hex(&name, 64))) {
                note(&mut found, join(&dir, &name), modified);
            } else {
                return Ok(None);
            }
        }
    }
    let listed: Vec<_> = stream::iter(
        shards
            .into_iter()
            .map(|dir| async move { entries(s, &dir).await.map(|e| (dir, e)) }),
    )
    .buffer_unordered(LISTINGS)
    .try_collect()
    .await?;
    for (dir, files) in listed {
        for (name, _, is_file, modified) in files {
            if !(is_file && is_temp(&name)) {
                return Ok(None);
            }
            note(&mut found, join(&dir, &name), modified);
        }
    }
    Ok(Some(found))
}

//! What an `init` that stopped before writing the config (killed, cut off, or failed on a full
//! disk) leaves in an SFTP folder: found, so that `init` run again clears it, as it does locally.

use std::time::SystemTime;

use arca_backend::leftover::{self, Kind, Place, Verdict, classify};
use futures_util::{StreamExt, TryStreamExt, stream};

use super::io::{Fail, join};
use super::session::Session;

/// Listings in flight while the `data/` folders are looked at.
const LISTINGS: usize = 16;

/// What an interrupted `init` left: the files to remove, the folders already there (relative
/// to the repository folder), and whether a file is younger than [`leftover::SETTLES`].
#[derive(Debug, Default)]
pub(super) struct Leftover {
    pub files: Vec<String>,
    pub folders: Vec<String>,
    pub fresh: bool,
}

/// One folder's entries: name, kind, last modified.
async fn entries(s: &Session, dir: &str) -> Result<Vec<(String, Kind, Option<SystemTime>)>, Fail> {
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
            let kind = match ty {
                Some(t) if t.is_file() => Kind::File,
                Some(t) if t.is_dir() => Kind::Dir,
                _ => Kind::Other,
            };
            (name != "." && name != "..").then_some((name, kind, modified))
        })
        .collect())
}

/// [`Leftover`] of the repository folder `root` (which has no config), or `None` when it
/// holds anything an `init` does not leave (it is not ours to clear).
pub(super) async fn of_init(s: &Session, root: &str) -> Result<Option<Leftover>, Fail> {
    let mut found = Leftover::default();
    let now = SystemTime::now();
    let note = |found: &mut Leftover, path: String, modified: Option<SystemTime>| {
        found.fresh |= leftover::is_fresh(modified, now);
        found.files.push(path);
    };
    let mut shards = vec![];
    for (name, kind, modified) in entries(s, root).await? {
        let folder = match classify(Place::Root, name.as_bytes(), kind) {
            Verdict::Remove => {
                note(&mut found, join(root, &name), modified);
                continue;
            }
            Verdict::Enter(place) => place,
            Verdict::Foreign => return Ok(None),
        };
        found.folders.push(name.clone());
        let dir = join(root, &name);
        for (inner, kind, modified) in entries(s, &dir).await? {
            match classify(folder, inner.as_bytes(), kind) {
                Verdict::Remove => note(&mut found, join(&dir, &inner), modified),
                Verdict::Enter(place) => {
                    found.folders.push(format!("{name}/{inner}"));
                    shards.push((join(&dir, &inner), place));
                }
                Verdict::Foreign => return Ok(None),
            }
        }
    }
    let listed: Vec<_> = stream::iter(
        shards
            .into_iter()
            .map(|(dir, place)| async move { entries(s, &dir).await.map(|e| (dir, place, e)) }),
    )
    .buffer_unordered(LISTINGS)
    .try_collect()
    .await?;
    for (dir, place, files) in listed {
        for (name, kind, modified) in files {
            match classify(place, name.as_bytes(), kind) {
                Verdict::Remove => note(&mut found, join(&dir, &name), modified),
                // Only `data/` has folders within, and they hold none.
                Verdict::Enter(_) | Verdict::Foreign => return Ok(None),
            }
        }
    }
    Ok(Some(found))
}

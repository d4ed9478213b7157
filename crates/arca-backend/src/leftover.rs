//! What an `init` that stopped before writing the config (killed, cut off, or failed on a full
//! disk) leaves in a repository folder, told from anything else: the rules every backend's
//! `init` follows to clear it when run again. Only the rules live here; each backend walks its
//! own folders with them.

use std::time::{Duration, SystemTime};

/// The folders `init` makes (and the 256 folders of `data/`).
pub const FOLDERS: [&str; 5] = ["keys", "snapshots", "index", "data", "locks"];

/// Files younger than this are another init's, about to write its config: removing its key
/// would leave a repository no password opens.
pub const SETTLES: Duration = Duration::from_secs(60);

/// What an entry is, as a listing tells it (a symbolic link is [`Kind::Other`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A plain file.
    File,
    /// A folder.
    Dir,
    /// Anything else (a symbolic link, a device, a socket; or a kind not told).
    Other,
}

/// Where an entry was listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The repository folder itself.
    Root,
    /// One of [`FOLDERS`].
    Folder(&'static str),
    /// A two-digit folder of `data/`.
    Shard,
}

/// What to do with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A file an interrupted init leaves: removed.
    Remove,
    /// A folder an init makes: kept, and what it holds looked at in this place.
    Enter(Place),
    /// Anything else: the folder is not an interrupted init's, and nothing is cleared.
    Foreign,
}

fn is_temp(name: &[u8]) -> bool {
    name.starts_with(b".tmp-")
}

fn is_hex(name: &[u8], len: usize) -> bool {
    name.len() == len && name.iter().all(u8::is_ascii_hexdigit)
}

/// The verdict on the entry `name` (bytes of the name as stored) of kind `kind` in `place`.
pub fn classify(place: Place, name: &[u8], kind: Kind) -> Verdict {
    let file = kind == Kind::File;
    let dir = kind == Kind::Dir;
    match place {
        Place::Root if file && is_temp(name) => Verdict::Remove,
        Place::Root => match FOLDERS.iter().find(|f| f.as_bytes() == name) {
            Some(folder) if dir => Verdict::Enter(Place::Folder(folder)),
            _ => Verdict::Foreign,
        },
        Place::Folder("data") if dir && is_hex(name, 2) => Verdict::Enter(Place::Shard),
        Place::Folder(folder)
            if file && (is_temp(name) || (folder == "keys" && is_hex(name, 64))) =>
        {
            Verdict::Remove
        }
        Place::Shard if file && is_temp(name) => Verdict::Remove,
        Place::Folder(_) | Place::Shard => Verdict::Foreign,
    }
}

/// Whether a leftover file last modified at `modified` may be a running init's (younger than
/// [`SETTLES`] at `now`). No date, or a date ahead of `now`, is taken for fresh (the safe side).
pub fn is_fresh(modified: Option<SystemTime>, now: SystemTime) -> bool {
    modified.is_none_or(|t| now.duration_since(t).map_or(true, |age| age < SETTLES))
}

/// Why `init` refuses a folder holding fresh leftovers.
pub fn busy_reason() -> String {
    format!(
        "another init is creating a repository here (its files are less than {} s old); if \
         none is running, run init again in a minute",
        SETTLES.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn an_inits_files_and_folders_are_leftovers() {
        assert_eq!(
            classify(Place::Root, b".tmp-1", Kind::File),
            Verdict::Remove
        );
        for f in FOLDERS {
            assert_eq!(
                classify(Place::Root, f.as_bytes(), Kind::Dir),
                Verdict::Enter(Place::Folder(f))
            );
        }
        let keys = Place::Folder("keys");
        assert_eq!(classify(keys, KEY.as_bytes(), Kind::File), Verdict::Remove);
        assert_eq!(classify(keys, b".tmp-x", Kind::File), Verdict::Remove);
        let data = Place::Folder("data");
        assert_eq!(
            classify(data, b"0a", Kind::Dir),
            Verdict::Enter(Place::Shard)
        );
        assert_eq!(
            classify(Place::Shard, b".tmp-y", Kind::File),
            Verdict::Remove
        );
    }

    #[test]
    fn anything_else_is_foreign() {
        let cases: [(Place, &[u8], Kind); 9] = [
            (Place::Root, b"config", Kind::File),
            (Place::Root, b"keys", Kind::File),
            (Place::Root, b"keys", Kind::Other),
            (Place::Root, b".tmp-1", Kind::Other),
            (Place::Root, b"photos", Kind::Dir),
            (Place::Folder("snapshots"), KEY.as_bytes(), Kind::File),
            (Place::Folder("keys"), b"0a", Kind::Dir),
            (Place::Folder("index"), b"0a", Kind::Dir),
            (Place::Shard, KEY.as_bytes(), Kind::File),
        ];
        for (place, name, kind) in cases {
            assert_eq!(
                classify(place, name, kind),
                Verdict::Foreign,
                "{place:?} {name:?}"
            );
        }
    }

    #[test]
    fn files_younger_than_a_minute_or_undated_are_a_running_inits() {
        let now = SystemTime::now();
        assert!(is_fresh(None, now));
        assert!(is_fresh(Some(now - Duration::from_secs(59)), now));
        assert!(is_fresh(Some(now + Duration::from_secs(5)), now));
        assert!(!is_fresh(Some(now - Duration::from_secs(61)), now));
    }
}

//! Where the local cache of a remote repository lives ([`CacheMode`]); the caching itself is
//! `arca_backend::CachedBackend`, set up by [`crate::Repository::open_cached`].

use std::path::PathBuf;

/// Whether and where a repository opened by [`crate::Repository::open_cached`] keeps its
/// local cache. A repository in a local folder never uses one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CacheMode {
    /// No cache.
    Off,
    /// Under [`default_root`]; without a cache when that is unknown.
    #[default]
    Default,
    /// Under this folder (one subfolder per repository id).
    Dir(PathBuf),
}

impl CacheMode {
    /// The cache root: the folder holding one subfolder per repository; `None` when off or
    /// when no default is known.
    pub fn root(&self) -> Option<PathBuf> {
        match self {
            CacheMode::Off => None,
            CacheMode::Default => default_root(),
            CacheMode::Dir(p) => Some(p.clone()),
        }
    }
}

/// `$XDG_CACHE_HOME/arca`, else `$HOME/.cache/arca` (relative or empty values are ignored, as
/// the XDG base directory specification asks); `None` if neither is set.
pub fn default_root() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .map(|p| p.join("arca"))
        .or_else(|| absolute("HOME").map(|p| p.join(".cache").join("arca")))
}

/// Where restores keep the power-cut marker (arca-restore's `durable`): `restores` under the
/// cache folder `cache_dir` (an empty value counts as unset), else under [`default_root`];
/// `None` when neither is known. Not a cache: kept with the cache turned off too.
pub fn restore_markers(cache_dir: Option<&std::path::Path>) -> Option<PathBuf> {
    match cache_dir {
        Some(d) if !d.as_os_str().is_empty() => Some(d.to_path_buf()),
        _ => default_root(),
    }
    .map(|d| d.join("restores"))
}

/// One repository's folder under a cache root.
#[derive(Debug, Clone)]
pub struct CacheFolder {
    /// The repository id (the folder's name).
    pub repo_id: String,
    /// The folder.
    pub path: PathBuf,
    /// When a command last opened the repository through it (the folder's mtime, set on
    /// every open).
    pub last_used: std::time::SystemTime,
}

/// The repository folders under the cache root `root` (folders named by a 64-digit id; other
/// entries are not arca's and are left out), oldest use first. A missing root has none.
pub fn cache_folders(root: &std::path::Path) -> std::io::Result<Vec<CacheFolder>> {
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(e),
    };
    let mut out = vec![];
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !arca_backend::is_file_id(&name) {
            continue;
        }
        let meta = entry.metadata()?;
        if meta.is_dir() {
            out.push(CacheFolder {
                repo_id: name,
                path: entry.path(),
                last_used: meta.modified()?,
            });
        }
    }
    out.sort_by_key(|c| c.last_used);
    Ok(out)
}

/// Marks the cache folder `dir` as used now (its mtime; `cache --cleanup` removes the folders
/// unused for long; a folder made now is new anyway). Best effort: a cache never fails a
/// command.
pub(crate) fn mark_used(dir: &std::path::Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::time::Duration;

    use arca_backend::{Backend, BackendStats, FileType, MemoryBackend, MeteredBackend, Throttle};
    use arca_format::{BlobKind, Id, IndexFile};

    use super::*;
    use crate::Repository;
    use crate::blob::seal_blob;
    use crate::pack::PackWriter;
    use crate::testing::repo;

    /// A memory backend that counts as remote (a simulated latency), and its counters.
    fn remote() -> (Arc<dyn Backend>, Arc<BackendStats>) {
        let m = MeteredBackend::new(
            MemoryBackend::new(),
            Throttle {
                latency: Duration::from_micros(1),
                bandwidth: 0,
            },
        );
        let stats = m.stats();
        (Arc::new(m), stats)
    }

    /// Writes a tree pack of `n` blobs and an index file naming it; returns the blobs.
    fn tree_pack(r: &Repository, n: u32) -> Vec<(Id, Vec<u8>)> {
        let mut w = PackWriter::new(BlobKind::Tree, 1 << 16);
        let mut blobs = vec![];
        for i in 0..n {
            let data = format!("listing {i} ").repeat(i as usize + 1).into_bytes();
            let id = r.key().blob_id(&data);
            w.add(&seal_blob(r.sealer(), BlobKind::Tree, id, &data, 0).unwrap())
                .unwrap();
            blobs.push((id, data));
        }
        let p = w.finish(r.sealer()).unwrap();
        r.backend()
            .write(FileType::Pack, &p.id.to_hex(), &p.bytes)
            .unwrap();
        r.save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![p.index],
        })
        .unwrap();
        blobs
    }

    #[test]
    fn a_reopened_repository_reads_keys_index_and_trees_locally() {
        let tmp = tempfile::tempdir().unwrap();
        let mode = CacheMode::Dir(tmp.path().join("cache"));
        let (b, stats) = remote();
        let blobs = tree_pack(&repo(Arc::clone(&b)), 20);
        let requests = || stats.snapshot().requests;

        let r0 = requests();
        let uncached = Repository::open_cached(Arc::clone(&b), b"pw", &CacheMode::Off).unwrap();
        assert_eq!(requests() - r0, 3, "config, key listing, key");
        let index = uncached.load_index().unwrap();
        let r0 = requests();
        for (id, data) in &blobs {
            assert_eq!(
                &uncached.read_blob(&index, BlobKind::Tree, id).unwrap(),
                data
            );
        }
        assert_eq!(requests() - r0, blobs.len() as u64);

        // First cached run: everything is read remotely once.
        let r = Repository::open_cached(Arc::clone(&b), b"pw", &mode).unwrap();
        let index = r.load_index().unwrap();
        let r0 = requests();
        for (id, data) in &blobs {
            assert_eq!(&r.read_blob(&index, BlobKind::Tree, id).unwrap(), data);
        }
        assert_eq!(requests() - r0, 1, "one whole read of the tree pack");
        let dir = tmp
            .path()
            .join("cache")
            .join(Id(r.config().repo_id).to_hex());
        assert!(dir.join("keys").read_dir().unwrap().count() == 1);
        assert!(tmp.path().join("cache/CACHEDIR.TAG").is_file());

        // The next run: config and key listing to open, the index listing, nothing else.
        let r0 = requests();
        let r = Repository::open_cached(Arc::clone(&b), b"pw", &mode).unwrap();
        assert_eq!(requests() - r0, 2, "config, key listing");
        let index = r.load_index().unwrap();
        for (id, data) in &blobs {
            assert_eq!(&r.read_blob(&index, BlobKind::Tree, id).unwrap(), data);
        }
        assert_eq!(requests() - r0, 3, "and the index listing");
        // A wrong password still fails.
        assert!(matches!(
            Repository::open_cached(Arc::clone(&b), b"wrong", &mode),
            Err(crate::RepoError::WrongPassword { .. })
        ));
    }

    #[test]
    fn every_key_file_tried_is_cached() {
        let tmp = tempfile::tempdir().unwrap();
        let mode = CacheMode::Dir(tmp.path().join("cache"));
        let (b, stats) = remote();
        let r = repo(Arc::clone(&b));
        let cheap = arca_format::KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        };
        for pw in [&b"a"[..], b"b", b"c"] {
            r.add_key(pw, cheap).unwrap();
        }
        // The keys tried before the one that opens are cached too: after the last key
        // (in name order) has opened once, no password reads a key file.
        let last = r.list_keys().unwrap().pop().unwrap().id;
        let pws = [&b"pw"[..], b"a", b"b", b"c"];
        for pw in pws {
            let opened = Repository::open_cached(Arc::clone(&b), pw, &mode).unwrap();
            if opened.key_id() == last {
                break;
            }
        }
        for pw in pws {
            let r0 = stats.snapshot().requests;
            Repository::open_cached(Arc::clone(&b), pw, &mode).unwrap();
            assert_eq!(stats.snapshot().requests - r0, 2, "config, key listing");
        }
        // A key removed by another client leaves the cache at the next open.
        let removed = r.add_key(b"d", cheap).unwrap();
        let opened = Repository::open_cached(Arc::clone(&b), b"d", &mode).unwrap();
        let keys = tmp
            .path()
            .join("cache")
            .join(Id(opened.config().repo_id).to_hex())
            .join("keys");
        assert!(keys.join(removed.to_hex()).is_file());
        r.remove_key(&removed).unwrap();
        Repository::open_cached(Arc::clone(&b), b"pw", &mode).unwrap();
        assert!(!keys.join(removed.to_hex()).exists());
        assert_eq!(keys.read_dir().unwrap().count(), 4);
    }

    #[test]
    fn local_repositories_and_unusable_roots_go_uncached() {
        let tmp = tempfile::tempdir().unwrap();
        let local: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        tree_pack(&repo(Arc::clone(&local)), 3);
        let root = tmp.path().join("cache");
        let r = Repository::open_cached(local, b"pw", &CacheMode::Dir(root.clone())).unwrap();
        r.load_index().unwrap();
        assert!(!root.exists(), "a local repository needs no cache");

        let (b, _) = remote();
        let blobs = tree_pack(&repo(Arc::clone(&b)), 3);
        let file = tmp.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        for bad in [file.clone(), file.join("below")] {
            let r = Repository::open_cached(Arc::clone(&b), b"pw", &CacheMode::Dir(bad)).unwrap();
            let index = r.load_index().unwrap();
            for (id, data) in &blobs {
                assert_eq!(&r.read_blob(&index, BlobKind::Tree, id).unwrap(), data);
            }
        }
    }

    #[test]
    fn default_root_follows_xdg() {
        assert_eq!(CacheMode::Off.root(), None);
        assert_eq!(
            CacheMode::Dir(PathBuf::from("/x")).root(),
            Some(PathBuf::from("/x"))
        );
        if let Some(p) = default_root() {
            assert!(p.is_absolute() && p.ends_with("arca"));
        }
    }

    #[test]
    fn restore_markers_sit_under_the_cache_folder() {
        assert_eq!(
            restore_markers(Some(std::path::Path::new("/x"))),
            Some(PathBuf::from("/x/restores"))
        );
        // An empty folder counts as unset, as `--cache-dir ''` does.
        assert_eq!(
            restore_markers(Some(std::path::Path::new(""))),
            default_root().map(|d| d.join("restores"))
        );
        assert_eq!(
            restore_markers(None),
            default_root().map(|d| d.join("restores"))
        );
    }
}

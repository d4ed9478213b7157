//! A local cache of one remote repository: key, index and snapshot files and whole tree packs,
//! each verified on use against its name (the BLAKE3 of its bytes); cache failures never fail.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::{
    Backend, BackendError, BackendHints, ErrorKind, FileInfo, FileSink, FileType, Result,
    is_file_id,
};

/// The contents of the `CACHEDIR.TAG` file written into a new cache root, so backup tools
/// (arca's `--exclude-caches` too) skip the cache.
pub const CACHEDIR_TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by arca.\n\
# For information about cache directory tags see https://bford.info/cachedir/\n";

/// Temporary files older than this in a cache folder are left over from a crash.
const STALE_TMP: Duration = Duration::from_secs(3600);

/// Prefix of temporary file names (as in repositories; never a 64-digit id).
const TMP_PREFIX: &str = arca_fs::TEMP_PREFIX;

/// Creates the cache root `root` (mode 0700) if it is missing, with a `CACHEDIR.TAG` in it.
/// An existing folder is used as it is: a tag is only written into a folder created here,
/// so pointing the cache at a folder of other files never hides them from backup tools.
pub fn prepare_root(root: &Path) -> io::Result<()> {
    match fs::metadata(root) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a directory",
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    make_dirs(root)?;
    fs::write(root.join("CACHEDIR.TAG"), CACHEDIR_TAG)
}

/// Looks for a verified copy of file `name` of type `t` in the cache folder of any repository
/// under `root` (a key file must be found before the repository, and so its cache folder, is
/// known). Any copy that hashes to its name is the file, whichever folder holds it.
pub fn find_in_root(root: &Path, t: FileType, name: &str) -> Option<Vec<u8>> {
    if !is_file_id(name) {
        return None;
    }
    let rel = t.path(name);
    fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(is_file_id))
        .find_map(|e| {
            fs::read(e.path().join(&rel))
                .ok()
                .filter(|d| hash_hex(d) == name)
        })
}

/// The name a repository file's bytes must have.
fn hash_hex(data: &[u8]) -> String {
    blake3::hash(data).to_hex().to_string()
}

/// File types whose every file is kept whole in the cache.
fn whole_file_type(t: FileType) -> bool {
    matches!(t, FileType::Key | FileType::Snapshot | FileType::Index)
}

/// `create_dir_all` with mode 0700 for the folders it creates.
fn make_dirs(p: &Path) -> io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(0o700).create(p)
}

/// What is known about a tree pack named by [`Backend::note_tree_packs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PackState {
    /// Not looked at yet in this process.
    Unchecked,
    /// The cached copy hashes to its name; its size.
    Ready(u64),
    /// No usable copy can be had (the fetch failed or the cache cannot be written): ranges
    /// go to the inner backend.
    Bypass,
}

/// Where the bytes of a range of a noted pack come from.
enum Source {
    /// The verified cached copy, of this size.
    File(u64),
    /// The whole pack, just fetched.
    Bytes(Vec<u8>),
    /// The inner backend.
    Inner,
}

/// A backend decorator keeping local copies of a remote repository's key, index and snapshot
/// files and of its tree packs.
///
/// Listing key, index or snapshot files always asks the inner backend and drops the cached
/// copies it no longer lists, so changes made by other clients are seen; listing packs does the
/// same for cached packs. Packs are cached only when a caller names them with
/// [`Backend::note_tree_packs`]: their ranges are then served from one whole local copy, fetched
/// with a single request on first use and verified once per process. Other files (the config,
/// data packs) pass through.
///
/// The cache folder mirrors the repository layout (`keys/<id>`, `snapshots/<id>`,
/// `index/<id>`, `data/<xx>/<id>`). Files are written to a temporary name and renamed, so
/// processes sharing the folder see whole files or none; a copy that does not hash to its name
/// (a damaged disk, another tool) is deleted and fetched again. A cache that cannot be written
/// (disk full, read-only) is reported once on stderr and otherwise ignored.
pub struct CachedBackend {
    inner: Arc<dyn Backend>,
    dir: PathBuf,
    /// Tree packs noted so far, each with its own lock so one thread fetches it.
    packs: Mutex<HashMap<String, Arc<Mutex<PackState>>>>,
    warned: AtomicBool,
}

impl fmt::Debug for CachedBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedBackend")
            .field("inner", &self.inner)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update leaves the state consistent, so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CachedBackend {
    /// Caches `inner`'s files in `dir` (the folder of this one repository, created when the
    /// first copy is stored).
    pub fn new(inner: Arc<dyn Backend>, dir: impl Into<PathBuf>) -> Self {
        Self {
            inner,
            dir: dir.into(),
            packs: Mutex::new(HashMap::new()),
            warned: AtomicBool::new(false),
        }
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }

    fn path(&self, t: FileType, name: &str) -> PathBuf {
        self.dir.join(t.path(name))
    }

    /// Keeps a copy of a key, index or snapshot file read by other means, if `data` hashes to
    /// `name`. Never fails: a cache that cannot be written is reported once on stderr.
    pub fn store(&self, t: FileType, name: &str, data: &[u8]) {
        if (whole_file_type(t) || t == FileType::Pack) && is_file_id(name) && hash_hex(data) == name
        {
            self.store_verified(t, name, data);
        }
    }

    /// Stores bytes already known to hash to `name`; false if the cache could not take them.
    fn store_verified(&self, t: FileType, name: &str, data: &[u8]) -> bool {
        match self.try_store(t, name, data) {
            Ok(()) => true,
            Err(e) => {
                self.warn(&e);
                false
            }
        }
    }

    fn try_store(&self, t: FileType, name: &str, data: &[u8]) -> io::Result<()> {
        let path = self.path(t, name);
        let parent = path
            .parent()
            .ok_or_else(|| io::Error::other("cache path has no parent"))?;
        make_dirs(parent)?;
        let mut rnd = [0u8; 8];
        getrandom::getrandom(&mut rnd).map_err(|e| io::Error::other(e.to_string()))?;
        let tmp = parent.join(format!("{TMP_PREFIX}{}", hex::encode(rnd)));
        let res = (|| {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(data)?;
            drop(f);
            match fs::rename(&tmp, &path) {
                // A folder stands in the way: it goes.
                Err(_) if remove_folder(&path) => fs::rename(&tmp, &path),
                r => r,
            }
        })();
        if res.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        res
    }

    fn warn(&self, e: &io::Error) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            #[allow(clippy::print_stderr)]
            {
                let _ = writeln!(
                    std::io::stderr(),
                    "arca: warning: cannot write to the local cache {}: {e} (carrying on without it)",
                    self.dir.display()
                );
            }
        }
    }

    fn drop_copy(&self, t: FileType, name: &str) {
        let path = self.path(t, name);
        if fs::remove_file(&path).is_err() {
            remove_folder(&path);
        }
    }

    /// After `name` was deleted from the repository: its cached copy goes too.
    fn forget(&self, t: FileType, name: &str) {
        if t == FileType::Pack {
            self.recheck(name);
        }
        if is_file_id(name) {
            self.drop_copy(t, name);
        }
    }

    /// The cached copy of a whole file, if present and verified; a damaged one is deleted.
    fn load(&self, t: FileType, name: &str) -> Option<Vec<u8>> {
        match fs::read(self.path(t, name)) {
            Ok(d) if hash_hex(&d) == name => Some(d),
            Ok(_) => {
                self.drop_copy(t, name);
                None
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(_) => {
                self.drop_copy(t, name);
                None
            }
        }
    }

    /// Drops the cached copies of type `t` (and stale temporary files) whose names `listed`,
    /// a fresh listing of the repository, no longer holds. Never fails.
    pub fn refresh(&self, t: FileType, listed: &[FileInfo]) {
        let names: HashSet<&str> = listed.iter().map(|f| f.name.as_str()).collect();
        let top = self.dir.join(t.dir());
        if t == FileType::Pack {
            let Ok(shards) = fs::read_dir(&top) else {
                return;
            };
            for s in shards.filter_map(|e| e.ok()) {
                self.prune_folder(&s.path(), &names);
            }
            // A pack dropped here must be verified (and so fetched) again before use.
            let gone: Vec<_> = lock(&self.packs)
                .iter()
                .filter(|(name, _)| !names.contains(name.as_str()))
                .map(|(_, slot)| Arc::clone(slot))
                .collect();
            for slot in gone {
                *lock(&slot) = PackState::Unchecked;
            }
        } else if whole_file_type(t) {
            self.prune_folder(&top, &names);
        }
    }

    fn prune_folder(&self, dir: &Path, keep: &HashSet<&str>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let stale = if is_file_id(name) {
                !keep.contains(name)
            } else {
                arca_fs::is_stale_temp(&e, STALE_TMP)
            };
            if stale {
                let _ = fs::remove_file(e.path());
            }
        }
    }

    fn slot(&self, name: &str) -> Option<Arc<Mutex<PackState>>> {
        lock(&self.packs).get(name).cloned()
    }

    /// The copy of noted pack `name` must be verified (or fetched) again before use.
    fn recheck(&self, name: &str) {
        if let Some(slot) = self.slot(name) {
            *lock(&slot) = PackState::Unchecked;
        }
    }

    /// Where to read the noted pack `name` from, verifying the cached copy or fetching the
    /// whole pack on first use. `None` if the pack was not noted.
    fn source(&self, name: &str) -> Option<Source> {
        let slot = self.slot(name)?;
        let mut st = lock(&slot);
        match *st {
            PackState::Ready(size) => return Some(Source::File(size)),
            PackState::Bypass => return Some(Source::Inner),
            PackState::Unchecked => {}
        }
        if let Some(size) = self.verify_pack(name) {
            *st = PackState::Ready(size);
            return Some(Source::File(size));
        }
        match self.inner.read(FileType::Pack, name) {
            Ok(d) if hash_hex(&d) == name => {
                *st = if self.store_verified(FileType::Pack, name, &d) {
                    PackState::Ready(d.len() as u64)
                } else {
                    PackState::Bypass
                };
                Some(Source::Bytes(d))
            }
            // A failed or damaged fetch: the caller's own range read reports the problem.
            _ => {
                *st = PackState::Bypass;
                Some(Source::Inner)
            }
        }
    }

    /// The size of the cached copy of pack `name` if it hashes to its name; a damaged copy is
    /// deleted.
    fn verify_pack(&self, name: &str) -> Option<u64> {
        let path = self.path(FileType::Pack, name);
        let mut f = match fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(_) => {
                let _ = fs::remove_file(&path);
                return None;
            }
        };
        let mut h = blake3::Hasher::new();
        let ok = h
            .update_reader(&mut f)
            .map(|h| h.finalize().to_hex().as_str() == name);
        match (ok, f.metadata()) {
            (Ok(true), Ok(m)) => Some(m.len()),
            _ => {
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    fn short_read(&self, name: &str, offset: u64, len: u64, size: u64) -> BackendError {
        BackendError::new(
            "read",
            format!("{}/{}", self.inner.location(), FileType::Pack.path(name)),
            ErrorKind::ShortRead,
            format!("range {offset}+{len} beyond the end of the {size}-byte file"),
        )
    }

    /// Reads a range of a noted pack into `buf` from its local copy; `None` when the inner
    /// backend must serve it (not noted, no usable copy).
    fn cached_range(
        &self,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Option<Result<()>> {
        let within = |size: u64| offset.checked_add(len).is_some_and(|end| end <= size);
        match self.source(name)? {
            Source::Inner => None,
            Source::Bytes(d) => {
                let size = d.len() as u64;
                if !within(size) {
                    return Some(Err(self.short_read(name, offset, len, size)));
                }
                buf.clear();
                buf.extend_from_slice(&d[offset as usize..(offset + len) as usize]);
                Some(Ok(()))
            }
            Source::File(size) => {
                if !within(size) {
                    return Some(Err(self.short_read(name, offset, len, size)));
                }
                let n = usize::try_from(len).ok()?;
                let read = fs::File::open(self.path(FileType::Pack, name)).and_then(|f| {
                    buf.clear();
                    buf.resize(n, 0);
                    f.read_exact_at(buf, offset)
                });
                match read {
                    Ok(()) => Some(Ok(())),
                    Err(_) => {
                        // Removed or damaged since it was verified: check (or fetch) it
                        // again next time, and let the inner backend serve this range.
                        self.recheck(name);
                        None
                    }
                }
            }
        }
    }
}

impl Backend for CachedBackend {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> Result<()> {
        self.inner.create()
    }
    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        let l = self.inner.list(t)?;
        self.refresh(t, &l);
        Ok(l)
    }
    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        if whole_file_type(t) && is_file_id(name) {
            if let Some(d) = self.load(t, name) {
                return Ok(d);
            }
            let d = self.inner.read(t, name)?;
            // A copy that does not match its name is not kept; the caller sees the damage.
            if hash_hex(&d) == name {
                self.store_verified(t, name, &d);
            }
            return Ok(d);
        }
        if t == FileType::Pack {
            match self.source(name) {
                Some(Source::Bytes(d)) => return Ok(d),
                Some(Source::File(_)) => match fs::read(self.path(t, name)) {
                    Ok(d) => return Ok(d),
                    Err(_) => self.recheck(name),
                },
                Some(Source::Inner) | None => {}
            }
        }
        self.inner.read(t, name)
    }
    fn read_stored(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        self.inner.read_stored(t, name)
    }
    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        if t == FileType::Pack {
            let mut buf = vec![];
            if let Some(r) = self.cached_range(name, offset, len, &mut buf) {
                return r.map(|()| buf);
            }
        }
        self.inner.read_range(t, name, offset, len)
    }
    fn read_range_into(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        if t == FileType::Pack
            && let Some(r) = self.cached_range(name, offset, len, buf)
        {
            return r;
        }
        self.inner.read_range_into(t, name, offset, len, buf)
    }
    fn read_range_bulk(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<usize> {
        if t == FileType::Pack
            && let Some(r) = self.cached_range(name, offset, len, buf)
        {
            return r.map(|()| 0);
        }
        self.inner.read_range_bulk(t, name, offset, len, buf)
    }
    fn hints(&self) -> BackendHints {
        self.inner.hints()
    }
    fn local_folder(&self) -> Option<std::path::PathBuf> {
        self.inner.local_folder()
    }
    fn root_kind(&self) -> crate::RootKind {
        self.inner.root_kind()
    }
    fn note_tree_packs(&self, names: &[String]) {
        {
            let mut packs = lock(&self.packs);
            for n in names.iter().filter(|n| is_file_id(n)) {
                packs
                    .entry(n.clone())
                    .or_insert_with(|| Arc::new(Mutex::new(PackState::Unchecked)));
            }
        }
        self.inner.note_tree_packs(names);
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        self.inner.write(t, name, data)?;
        if whole_file_type(t) {
            self.store(t, name, data);
        } else if t == FileType::Pack
            && let Some(slot) = self.slot(name)
            && hash_hex(data) == name
        {
            let mut st = lock(&slot);
            if self.store_verified(t, name, data) {
                *st = PackState::Ready(data.len() as u64);
            }
        }
        Ok(())
    }
    fn sink(&self, t: FileType) -> Result<Option<Box<dyn FileSink>>> {
        // Only whole writes are copied into the cache: files it keeps go through `write`.
        if whole_file_type(t) {
            return Ok(None);
        }
        self.inner.sink(t)
    }
    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        let r = self.inner.delete(t, name);
        if r.is_ok() || r.as_ref().is_err_and(BackendError::is_not_found) {
            self.forget(t, name);
        }
        r
    }
    fn remove(&self, t: FileType, name: &str) -> Result<()> {
        self.inner.remove(t, name)?;
        self.forget(t, name);
        Ok(())
    }
    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        self.inner.stat(t, name)
    }
    fn remove_stale_temp(&self, older_than: std::time::Duration, remove: bool) -> Result<u64> {
        self.inner.remove_stale_temp(older_than, remove)
    }
    fn sync_removals(&self) -> Result<()> {
        self.inner.sync_removals()
    }
}

/// Removes the folder at `path` (one standing where a cached copy belongs); whether there was
/// one and it went.
fn remove_folder(path: &Path) -> bool {
    path.symlink_metadata().is_ok_and(|m| m.is_dir()) && fs::remove_dir_all(path).is_ok()
}

#[cfg(test)]
mod tests;

//! The local-folder backend: one file per repository file, written to a temporary name,
//! fsynced, renamed into place and the directory fsynced, so a crash leaves no partial file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::{Backend, BackendError, BackendHints, ErrorKind, FileInfo, FileSink, FileType, Result};

mod leftover;

/// A repository in a local directory.
#[derive(Debug, Clone)]
pub struct LocalBackend {
    root: PathBuf,
    modes: Modes,
    /// Folders files were deleted from since the last [`Backend::sync_removals`].
    removed_from: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<PathBuf>>>,
}

/// The permissions the repository's folders and files are made with, as restic's: private
/// (0700, 0600, less the umask), or open to the group (0770, 0660, whatever the umask) when
/// the repository's `config` is readable by its group, so that a repository shared by a group
/// stays shared (a member's backup under umask 077 locked the others out of its files).
/// The files hold keys and sealed data: a key file readable by anyone lets anyone try
/// passwords offline.
#[derive(Debug, Clone, Copy)]
struct Modes {
    dir: u32,
    file: u32,
}

impl Modes {
    fn of(root: &Path) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let shared =
            fs::metadata(root.join("config")).is_ok_and(|m| m.permissions().mode() & 0o040 != 0);
        if shared {
            Modes {
                dir: 0o770,
                file: 0o660,
            }
        } else {
            Modes {
                dir: 0o700,
                file: 0o600,
            }
        }
    }

    /// Whether the group shares the repository: its modes are then set past the umask.
    fn shared(self) -> bool {
        self.file & 0o060 != 0
    }

    /// Creates `dir` and the folders above it that are missing.
    fn create_dir_all(self, dir: &Path) -> io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        fs::DirBuilder::new()
            .recursive(true)
            .mode(self.dir)
            .create(dir)?;
        if self.shared() {
            fs::set_permissions(dir, fs::Permissions::from_mode(self.dir))?;
        }
        Ok(())
    }

    /// Creates the new file `path` for writing.
    fn create_new(self, path: &Path) -> io::Result<File> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        // A moment without a free descriptor (a low `ulimit -n`, the readers holding theirs)
        // is waited out.
        let f = arca_fs::patiently(|| {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(self.file)
                .open(path)
        })?;
        if self.shared() {
            f.set_permissions(fs::Permissions::from_mode(self.file))?;
        }
        Ok(f)
    }
}

impl LocalBackend {
    /// A backend rooted at `root` (which need not exist yet).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let modes = Modes::of(&root);
        Self {
            root,
            modes,
            removed_from: Default::default(),
        }
    }

    /// Reads `len` bytes at `offset` of a file into `buf`; `sequential` tells the kernel to
    /// read ahead generously (`POSIX_FADV_SEQUENTIAL`).
    fn read_at(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
        sequential: bool,
    ) -> Result<()> {
        let p = self.file(t, name);
        let f = arca_fs::patiently(|| File::open(&p))
            .map_err(|e| BackendError::io("read", Self::shown(&p), e))?;
        let n = usize::try_from(len).map_err(|_| {
            BackendError::new(
                "read",
                Self::shown(&p),
                ErrorKind::Other,
                format!("range of {len} bytes"),
            )
        })?;
        if sequential {
            use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};
            // Advice only: a file system that ignores it reads as it would anyway.
            let _ = posix_fadvise(&f, 0, 0, PosixFadviseAdvice::POSIX_FADV_SEQUENTIAL);
        }
        // Reusing the buffer's allocation: only growth is zero-filled.
        buf.resize(n, 0);
        f.read_exact_at(buf, offset).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                BackendError::new(
                    "read",
                    Self::shown(&p),
                    ErrorKind::ShortRead,
                    format!("file is {size} bytes, wanted {len} bytes at offset {offset}"),
                )
            } else {
                BackendError::io("read", Self::shown(&p), e)
            }
        })
    }

    /// The repository directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn file(&self, t: FileType, name: &str) -> PathBuf {
        self.root.join(t.path(name))
    }

    fn shown(p: &Path) -> String {
        p.display().to_string()
    }

    /// Whether the root holds a repository's `config`.
    fn is_repository(&self) -> bool {
        self.root.join("config").is_file()
    }

    /// Creates `dir`, a folder of the repository that is missing (copy and sync tools drop
    /// empty folders; repositories made before locks existed have no `locks/`), as restic
    /// does. Only inside a repository whose `config` is there: a repository on a disk that
    /// is not mounted must fail, not grow again on the mount point.
    fn recreate_dir(&self, dir: &Path) -> io::Result<()> {
        if !self.is_repository() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} is not a repository (no config)", self.root.display()),
            ));
        }
        self.modes.create_dir_all(dir)
    }

    /// The repository files (names that are ids) directly in `d`, with their sizes.
    fn list_dir(&self, d: &Path) -> Result<Vec<FileInfo>> {
        let mut out = vec![];
        let rd = match fs::read_dir(d) {
            // A missing folder of a repository holds nothing (see `recreate_dir`).
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.is_repository() => {
                return Ok(out);
            }
            r => r.map_err(|e| BackendError::io("list", Self::shown(d), e))?,
        };
        for e in rd {
            let e = e.map_err(|e| BackendError::io("list", Self::shown(d), e))?;
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !crate::is_file_id(&name) {
                continue;
            }
            match e.metadata() {
                Ok(m) if m.is_file() => out.push(FileInfo {
                    name,
                    size: m.len(),
                }),
                Ok(_) => {}
                // Deleted between readdir and stat: not listed.
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(BackendError::io("stat", Self::shown(&e.path()), err)),
            }
        }
        Ok(out)
    }
}

/// Folders listed at once by [`LocalBackend::list`].
const LIST_THREADS: usize = 16;

/// `f` over `items` on up to `threads` threads, results in the order of `items`; the first
/// error (in that order) is returned.
fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    if items.len() <= 1 {
        return items.iter().map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<R>>> =
        std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.min(items.len()))
            .map(|_| {
                s.spawn(|| {
                    let mut done = vec![];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, f(item)));
                    }
                    done
                })
            })
            .collect();
        for w in workers {
            // A worker only panics if `f` does; its slots stay empty and are reported below.
            for (i, r) in w.join().unwrap_or_default() {
                slots[i] = Some(r);
            }
        }
    });
    slots
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(BackendError::new(
                    "list",
                    String::new(),
                    ErrorKind::Other,
                    "a listing thread failed".into(),
                ))
            })
        })
        .collect()
}

/// A temporary name in `dir`, `.tmp-` and 16 random hex digits (what
/// [`Backend::remove_stale_temp`] looks for).
fn temp_name(dir: &Path) -> io::Result<PathBuf> {
    let mut rnd = [0u8; 8];
    getrandom::getrandom(&mut rnd).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(dir.join(format!(".tmp-{}", hex::encode(rnd))))
}

/// A file written in pieces ([`Backend::sink`]): a temporary file in its type's folder,
/// synced and renamed into place by the commit; removed when dropped before it.
///
/// The pieces go through the page cache: a write is a copy into memory that the kernel
/// writes out in the background, so the thread filling the file (a backup's packer) never
/// waits for the disk. The commit (a backup's uploader) syncs the file, then drops its
/// cached pages, which would only push other data out of the cache. Written around the
/// cache with `O_DIRECT`, the packer waited for every piece: a pipeline stall of about a
/// second on a 512 MiB backup.
struct LocalSink {
    backend: LocalBackend,
    t: FileType,
    tmp: PathBuf,
    file: Option<File>,
    len: u64,
}

impl std::fmt::Debug for LocalSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSink")
            .field("tmp", &self.tmp)
            .field("len", &self.len)
            .finish()
    }
}

impl FileSink for LocalSink {
    fn write(&mut self, data: &[u8]) -> Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Err(BackendError::new(
                "write",
                LocalBackend::shown(&self.tmp),
                ErrorKind::Other,
                "written after a failed write".into(),
            ));
        };
        match file.write_all(data) {
            Ok(()) => {
                self.len += data.len() as u64;
                Ok(())
            }
            Err(e) => {
                // What was written is of no use any more; the drop removes it.
                self.file = None;
                Err(BackendError::io("write", LocalBackend::shown(&self.tmp), e))
            }
        }
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn commit(mut self: Box<Self>, name: &str) -> Result<()> {
        use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};

        let p = self.backend.file(self.t, name);
        let failed = |e| BackendError::io("write", LocalBackend::shown(&p), e);
        let f = self
            .file
            .take()
            .ok_or_else(|| failed(io::Error::other("commit after a failed write")))?;
        f.sync_all().map_err(failed)?;
        // Synced pages are clean: dropping them is free. A hint: its failure changes nothing.
        let _ = posix_fadvise(&f, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED);
        drop(f);
        match fs::rename(&self.tmp, &p) {
            // A missing shard of `data/` (see `recreate_dir`).
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.tmp.exists() => {
                let dir = p.parent().unwrap_or(&self.backend.root);
                self.backend.recreate_dir(dir).map_err(failed)?;
                fs::rename(&self.tmp, &p).map_err(failed)?;
            }
            r => r.map_err(failed)?,
        }
        // Renamed: nothing for the drop to remove, even if the sync below fails.
        self.tmp = PathBuf::new();
        sync_dir(p.parent().unwrap_or(&self.backend.root)).map_err(failed)
    }
}

impl Drop for LocalSink {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    arca_fs::patiently(|| File::open(dir))?.sync_all()
}

/// How old the files of an interrupted `init` must be before another init removes them.
const INIT_SETTLES: std::time::Duration = std::time::Duration::from_secs(60);

impl Backend for LocalBackend {
    fn location(&self) -> String {
        Self::shown(&self.root)
    }

    fn create(&self) -> Result<()> {
        let loc = self.location();
        match fs::read_dir(&self.root) {
            Ok(mut entries) => {
                if self.root.join("config").exists() {
                    return Err(BackendError::new(
                        "create repository",
                        loc,
                        ErrorKind::AlreadyExists,
                        "a repository already exists here".into(),
                    ));
                }
                if entries.next().is_some() {
                    // An init that stopped before the config may be run again.
                    let failed = |e| BackendError::io("create repository", loc.clone(), e);
                    let Some(files) = leftover::of_init(&self.root).map_err(failed)? else {
                        return Err(BackendError::new(
                            "create repository",
                            loc,
                            ErrorKind::AlreadyExists,
                            "directory is not empty".into(),
                        ));
                    };
                    // Files written moments ago are another init's, which is about to write
                    // its config: removing its key left a repository no password opens.
                    let fresh = files.iter().any(|f| {
                        fs::symlink_metadata(f)
                            .and_then(|m| m.modified())
                            .is_ok_and(|t| t.elapsed().map_or(true, |a| a < INIT_SETTLES))
                    });
                    if fresh {
                        return Err(BackendError::new(
                            "create repository",
                            loc,
                            ErrorKind::AlreadyExists,
                            format!(
                                "another init is creating a repository here (its files are \
                                 less than {} s old); if none is running, run init again in a \
                                 minute",
                                INIT_SETTLES.as_secs()
                            ),
                        ));
                    }
                    for f in files {
                        fs::remove_file(&f).map_err(|e| {
                            BackendError::io("create repository", Self::shown(&f), e)
                        })?;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.modes
                    .create_dir_all(&self.root)
                    .map_err(|e| BackendError::io("create repository", loc.clone(), e))?;
            }
            Err(e) => return Err(BackendError::io("create repository", loc, e)),
        }
        let mut dirs: Vec<PathBuf> = leftover::FOLDERS
            .iter()
            .map(|d| self.root.join(d))
            .collect();
        dirs.extend((0..=255u8).map(|i| self.root.join("data").join(hex::encode([i]))));
        for d in &dirs {
            self.modes
                .create_dir_all(d)
                .map_err(|e| BackendError::io("create directory", Self::shown(d), e))?;
        }
        sync_dir(&self.root).map_err(|e| BackendError::io("sync", loc, e))?;
        Ok(())
    }

    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        if t == FileType::Config {
            return crate::list_config(self);
        }
        let base = self.root.join(t.dir());
        let dirs: Vec<PathBuf> = if t == FileType::Pack {
            let mut v = vec![];
            let rd = match fs::read_dir(&base) {
                Err(e) if e.kind() == io::ErrorKind::NotFound && self.is_repository() => {
                    return Ok(vec![]);
                }
                r => r.map_err(|e| BackendError::io("list", Self::shown(&base), e))?,
            };
            for e in rd {
                let e = e.map_err(|e| BackendError::io("list", Self::shown(&base), e))?;
                let name = e.file_name();
                if name.len() == 2 && e.file_type().map(|f| f.is_dir()).unwrap_or(false) {
                    v.push(e.path());
                }
            }
            v
        } else {
            vec![base]
        };
        // The 256 pack folders are read side by side: on a cold cache each is a few disk
        // reads (its blocks and its files' inodes), which queue far better than they chain.
        let listed = parallel_map(&dirs, LIST_THREADS, |d| {
            let mut files = self.list_dir(d)?;
            if t == FileType::Pack {
                // Only where the pack is read and deleted: a stray copy in another folder
                // would be listed as a second pack of that id.
                let shard = d.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                files.retain(|f| f.name.starts_with(shard));
            }
            Ok(files)
        })?;
        Ok(listed.into_iter().flatten().collect())
    }

    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        let p = self.file(t, name);
        fs::read(&p).map_err(|e| BackendError::io("read", Self::shown(&p), e))
    }

    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.read_range_into(t, name, offset, len, &mut buf)?;
        Ok(buf)
    }

    fn read_range_into(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        self.read_at(t, name, offset, len, buf, false)
    }

    fn read_range_bulk(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<usize> {
        // Through the page cache, with the file marked sequential: the kernel then reads
        // ahead of each request on its own, so the disk keeps more and larger requests queued
        // than the caller's threads have reads in flight. A cold restore of 1 GiB on the test
        // machine took 1.06 s this way (8 reads in flight) against 1.32 s with `O_DIRECT`
        // reads (4 in flight; 1.30 s with 16), medians of 12 interleaved runs: the kernel's
        // copy costs less than the disk time it saves.
        self.read_at(t, name, offset, len, buf, len >= crate::uncached::WORTH_IT)?;
        Ok(0)
    }

    fn prefetch(&self, t: FileType, name: &str, offset: u64, len: u64) {
        use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};
        // Advice only: a file that cannot be opened is met again, and reported, when read.
        if let (Ok(f), Ok(off), Ok(n)) = (
            File::open(self.file(t, name)),
            i64::try_from(offset),
            i64::try_from(len),
        ) {
            let _ = posix_fadvise(&f, off, n, PosixFadviseAdvice::POSIX_FADV_WILLNEED);
        }
    }

    fn warm(&self, types: &[FileType]) {
        use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};
        let dirs: Vec<(FileType, PathBuf)> = types
            .iter()
            .filter(|t| **t != FileType::Pack && **t != FileType::Config)
            .map(|t| (*t, self.root.join(t.dir())))
            .collect();
        // Listing and opening wait for the disk; the reads themselves are started and left.
        let _ = parallel_map(&dirs, LIST_THREADS, |(_, d)| {
            for f in self.list_dir(d)? {
                if let Ok(file) = File::open(d.join(&f.name)) {
                    let _ = posix_fadvise(&file, 0, 0, PosixFadviseAdvice::POSIX_FADV_WILLNEED);
                }
            }
            Ok(())
        });
    }

    fn local_folder(&self) -> Option<PathBuf> {
        Some(self.root.clone())
    }

    fn hints(&self) -> BackendHints {
        BackendHints {
            local: true,
            ..Default::default()
        }
    }

    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        let p = self.file(t, name);
        let dir = p.parent().unwrap_or(&self.root).to_path_buf();
        let tmp = temp_name(&dir).map_err(|e| BackendError::io("write", Self::shown(&p), e))?;
        let res = (|| -> io::Result<()> {
            let create = || self.modes.create_new(&tmp);
            let mut f = match create() {
                Err(e) if e.kind() == io::ErrorKind::NotFound && t != FileType::Config => {
                    self.recreate_dir(&dir)?;
                    create()?
                }
                r => r?,
            };
            // Large files (packs) go to the disk around the page cache: they are synced
            // right away, so caching them would only cost a copy.
            let direct = data.len() as u64 >= crate::uncached::WORTH_IT
                && crate::uncached::write_new(&tmp, data)?;
            if !direct {
                f.write_all(data)?;
            }
            f.sync_all()?;
            drop(f);
            if t == FileType::Config {
                // Never over another config: of two inits racing in one folder, the second
                // fails instead of replacing the first's (whose keys then opened nothing).
                fs::hard_link(&tmp, &p)?;
                fs::remove_file(&tmp)?;
            } else {
                fs::rename(&tmp, &p)?;
            }
            sync_dir(&dir)
        })();
        if let Err(e) = res {
            let _ = fs::remove_file(&tmp);
            return Err(BackendError::io("write", Self::shown(&p), e));
        }
        Ok(())
    }

    fn sink(&self, t: FileType) -> Result<Option<Box<dyn FileSink>>> {
        // In the type's own folder (packs: `data/`, beside their shards): the final name,
        // and so the shard, is known only when the file is complete.
        let dir = self.root.join(t.dir());
        let tmp = temp_name(&dir).map_err(|e| BackendError::io("write", Self::shown(&dir), e))?;
        let create = || self.modes.create_new(&tmp);
        let file = match create() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.recreate_dir(&dir).and_then(|()| create())
            }
            r => r,
        }
        .map_err(|e| BackendError::io("write", Self::shown(&tmp), e))?;
        Ok(Some(Box::new(LocalSink {
            backend: self.clone(),
            t,
            tmp,
            file: Some(file),
            len: 0,
        })))
    }

    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        let p = self.file(t, name);
        fs::remove_file(&p).map_err(|e| BackendError::io("delete", Self::shown(&p), e))?;
        // Locks and packs need not stay deleted: a lock back after a power cut is stale, a
        // pack back is named by no index (the next prune removes it). Syncing the folders of
        // the packs a prune deletes would cost a journal commit per shard.
        if !matches!(t, FileType::Lock | FileType::Pack)
            && let Some(dir) = p.parent()
        {
            self.removed_from
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(dir.to_path_buf());
        }
        Ok(())
    }

    fn sync_removals(&self) -> Result<()> {
        let dirs =
            std::mem::take(&mut *self.removed_from.lock().unwrap_or_else(|p| p.into_inner()));
        for dir in dirs {
            match sync_dir(&dir) {
                // A folder removed since (`data/xx` emptied): nothing left to come back there.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                r => r.map_err(|e| BackendError::io("sync", Self::shown(&dir), e))?,
            }
        }
        Ok(())
    }

    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        let p = self.file(t, name);
        let m = fs::metadata(&p).map_err(|e| BackendError::io("stat", Self::shown(&p), e))?;
        Ok(FileInfo {
            name: name.to_string(),
            size: m.len(),
        })
    }

    fn remove_stale_temp(&self, older_than: Duration, remove: bool) -> Result<u64> {
        // Writes put their temporary file in the target's folder: the root (config), the
        // folders of the file types, and the shards of `data`.
        let mut dirs = vec![self.root.clone()];
        for t in FileType::ALL.into_iter().filter(|t| *t != FileType::Config) {
            dirs.push(self.root.join(t.dir()));
        }
        let data = self.root.join(FileType::Pack.dir());
        match fs::read_dir(&data) {
            Ok(rd) => {
                for e in rd {
                    let e = e.map_err(|e| BackendError::io("list", Self::shown(&data), e))?;
                    if e.file_name().len() == 2 && e.file_type().is_ok_and(|f| f.is_dir()) {
                        dirs.push(e.path());
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(BackendError::io("list", Self::shown(&data), e)),
        }
        let now = SystemTime::now();
        let mut removed = 0;
        for d in dirs {
            let rd = match fs::read_dir(&d) {
                Ok(rd) => rd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(BackendError::io("list", Self::shown(&d), e)),
            };
            for e in rd {
                let e = e.map_err(|e| BackendError::io("list", Self::shown(&d), e))?;
                if !e.file_name().as_encoded_bytes().starts_with(b".tmp-") {
                    continue;
                }
                let p = e.path();
                let stale = match e.metadata() {
                    Ok(m) => {
                        m.is_file()
                            && m.modified().is_ok_and(|t| {
                                now.duration_since(t).is_ok_and(|age| age > older_than)
                            })
                    }
                    Err(err) if err.kind() == io::ErrorKind::NotFound => false,
                    Err(err) => return Err(BackendError::io("stat", Self::shown(&p), err)),
                };
                if !stale {
                    continue;
                }
                if !remove {
                    removed += 1;
                    continue;
                }
                match fs::remove_file(&p) {
                    Ok(()) => removed += 1,
                    // Renamed into place or removed by its writer meanwhile.
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                    Err(err) => return Err(BackendError::io("delete", Self::shown(&p), err)),
                }
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conformance() {
        let d = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(d.path().join("repo"));
        b.create().unwrap();
        crate::conformance(&b);
        // No temporary files are left behind.
        for e in walk(d.path()) {
            assert!(!e.contains(".tmp-"), "{e}");
        }
    }

    /// Deletions remember their folders until synced (not a lock's or a pack's); a folder
    /// removed since is no error. (That the fsync makes them durable is the kernel's part.)
    #[test]
    fn sync_removals_syncs_the_folders_deleted_from_once() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("repo");
        let b = LocalBackend::new(&root);
        b.create().unwrap();
        let pack = "ab".repeat(32);
        b.write(FileType::Pack, &pack, b"p").unwrap();
        b.write(FileType::Snapshot, "aa", b"s").unwrap();
        b.write(FileType::Lock, "bb", b"l").unwrap();
        b.delete(FileType::Pack, &pack).unwrap();
        b.delete(FileType::Snapshot, "aa").unwrap();
        b.delete(FileType::Lock, "bb").unwrap();
        let dirs = |b: &LocalBackend| b.removed_from.lock().unwrap().clone();
        let expected: std::collections::BTreeSet<PathBuf> = [root.join("snapshots")].into();
        assert_eq!(dirs(&b), expected);
        fs::remove_dir(root.join("snapshots")).unwrap();
        b.sync_removals().unwrap();
        assert!(dirs(&b).is_empty());
    }

    /// A new repository is private (as restic's: nobody else can copy its key files to try
    /// passwords); one whose config its group may read stays open to the group.
    #[test]
    fn folders_and_files_are_private_unless_the_group_shares_the_repository() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("repo");
        let b = LocalBackend::new(&root);
        b.create().unwrap();
        b.write(FileType::Config, "", b"c").unwrap();
        b.write(FileType::Key, "aa", b"k").unwrap();
        let mut sink = b.sink(FileType::Pack).unwrap().unwrap();
        sink.write(b"pack").unwrap();
        sink.commit(&"ab".repeat(32)).unwrap();
        for dir in ["", "keys", "data", "data/ab", "index", "snapshots", "locks"] {
            assert_eq!(mode(&root.join(dir)) & 0o077, 0, "{dir}");
        }
        assert_eq!(mode(&root.join("config")), 0o600);
        assert_eq!(mode(&root.join("keys/aa")), 0o600);
        assert_eq!(mode(&root.join("data/ab").join("ab".repeat(32))) & 0o077, 0);
        // Shared with a group: new folders and files are too, whatever the umask of the
        // member writing them (077 locked the group out).
        fs::set_permissions(root.join("config"), fs::Permissions::from_mode(0o640)).unwrap();
        let b = LocalBackend::new(&root);
        fs::remove_dir(root.join("locks")).unwrap();
        let umask = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
        let written = (
            b.write(FileType::Snapshot, "bb", b"s"),
            b.write(FileType::Lock, "cc", b"l"),
        );
        nix::sys::stat::umask(umask);
        written.0.unwrap();
        written.1.unwrap();
        assert_eq!(mode(&root.join("snapshots/bb")), 0o660);
        assert_eq!(mode(&root.join("locks")), 0o770);
        assert_eq!(mode(&root.join("locks/cc")), 0o660);
    }

    #[test]
    fn bulk_reads_at_any_offset() {
        let d = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(d.path().join("repo"));
        b.create().unwrap();
        let id = "ab".repeat(32);
        let data: Vec<u8> = (0..1_000_003u32).map(|i| (i * 7 % 251) as u8).collect();
        b.write(FileType::Pack, &id, &data).unwrap();
        let mut buf = vec![];
        for (off, len) in [
            (0, 200_000),
            (12_345, 300_001),
            (4096, 131_072),
            (700_000, 300_003),
        ] {
            let at = b
                .read_range_bulk(FileType::Pack, &id, off, len, &mut buf)
                .unwrap();
            assert_eq!(
                &buf[at..at + len as usize],
                &data[off as usize..(off + len) as usize],
                "{off} {len}"
            );
        }
        let e = b
            .read_range_bulk(FileType::Pack, &id, 900_000, 200_000, &mut buf)
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::ShortRead, "{e}");
        assert!(
            b.read_range_bulk(FileType::Pack, &"cd".repeat(32), 0, 200_000, &mut buf)
                .unwrap_err()
                .is_not_found()
        );
    }

    #[test]
    fn stale_temporary_files_are_removed_and_fresh_ones_kept() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("repo");
        let b = LocalBackend::new(&root);
        b.create().unwrap();
        let hour_ago = SystemTime::now() - Duration::from_secs(2 * 3600);
        let mut stale = vec![];
        for dir in [
            "",
            "keys",
            "snapshots",
            "index",
            "locks",
            "data/00",
            "data/ab",
        ] {
            let old = root.join(dir).join(".tmp-0123456789abcdef");
            fs::write(&old, b"partial").unwrap();
            File::options()
                .write(true)
                .open(&old)
                .unwrap()
                .set_modified(hour_ago)
                .unwrap();
            stale.push(old);
        }
        let fresh = root.join("data/ab/.tmp-fedcba9876543210");
        fs::write(&fresh, b"being written").unwrap();
        // An old file that is not temporary stays.
        let other = root.join("index/notes");
        fs::write(&other, b"x").unwrap();
        File::options()
            .write(true)
            .open(&other)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        // Counted without removing, then removed.
        assert_eq!(
            b.remove_stale_temp(Duration::from_secs(3600), false)
                .unwrap(),
            7
        );
        assert_eq!(
            b.remove_stale_temp(Duration::from_secs(3600), true)
                .unwrap(),
            7
        );
        assert!(stale.iter().all(|p| !p.exists()));
        assert!(fresh.exists() && other.exists());
        assert_eq!(
            b.remove_stale_temp(Duration::from_secs(3600), true)
                .unwrap(),
            0
        );
        assert_eq!(b.remove_stale_temp(Duration::ZERO, true).unwrap(), 1);
        assert!(!fresh.exists());
        // Nothing to do in a folder that is not a repository.
        let none = LocalBackend::new(d.path().join("nope"));
        assert_eq!(none.remove_stale_temp(Duration::ZERO, true).unwrap(), 0);
    }

    #[test]
    fn warming_is_a_hint_that_never_fails() {
        let tmp = tempfile::tempdir().unwrap();
        // No repository at all, then one without `locks/`, then a full one.
        let missing = LocalBackend::new(tmp.path().join("nothing"));
        missing.warm(&[FileType::Lock, FileType::Snapshot, FileType::Index]);
        let b = LocalBackend::new(tmp.path().join("repo"));
        b.create().unwrap();
        b.write(FileType::Snapshot, &"ab".repeat(32), b"snap")
            .unwrap();
        fs::remove_dir(tmp.path().join("repo/locks")).unwrap();
        b.warm(&[
            FileType::Lock,
            FileType::Snapshot,
            FileType::Index,
            FileType::Pack,
        ]);
        assert_eq!(
            b.read(FileType::Snapshot, &"ab".repeat(32)).unwrap(),
            b"snap"
        );
    }

    #[test]
    fn prefetching_is_a_hint_that_never_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(tmp.path().join("repo"));
        b.create().unwrap();
        let name = "cd".repeat(32);
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        b.write(FileType::Pack, &name, &data).unwrap();
        // A missing file, ranges past the end and beyond what the kernel takes: no effect.
        b.prefetch(FileType::Pack, &"ef".repeat(32), 0, 1 << 20);
        b.prefetch(FileType::Pack, &name, 1 << 40, 4096);
        b.prefetch(FileType::Pack, &name, u64::MAX, u64::MAX);
        b.prefetch(FileType::Pack, &name, 0, 100_000);
        let mut buf = vec![];
        let at = b
            .read_range_bulk(FileType::Pack, &name, 1000, 5000, &mut buf)
            .unwrap();
        assert_eq!(&buf[at..at + 5000], &data[1000..6000]);
    }

    #[test]
    fn refuses_non_empty_dir_and_reports_missing_repo() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("x"), b"x").unwrap();
        assert_eq!(
            LocalBackend::new(d.path()).create().unwrap_err().kind,
            ErrorKind::AlreadyExists
        );
        let missing = LocalBackend::new(d.path().join("nope"));
        let e = missing.list(FileType::Key).unwrap_err();
        assert!(e.is_not_found());
        assert!(e.to_string().contains("nope"), "{e}");
    }

    #[test]
    fn missing_folders_of_a_repository_are_empty_and_made_again() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("repo");
        let b = LocalBackend::new(&root);
        b.create().unwrap();
        b.write(FileType::Config, "config", b"c").unwrap();
        // As a copy tool that drops empty folders leaves it.
        for t in ["index", "snapshots", "locks", "data"] {
            fs::remove_dir_all(root.join(t)).unwrap();
        }
        for t in [
            FileType::Index,
            FileType::Snapshot,
            FileType::Lock,
            FileType::Pack,
        ] {
            assert_eq!(b.list(t).unwrap(), vec![], "{t:?}");
        }
        let id = "ab".repeat(32);
        b.write(FileType::Index, &id, b"i").unwrap();
        b.write(FileType::Pack, &id, b"p").unwrap();
        let mut sink = b.sink(FileType::Pack).unwrap().unwrap();
        sink.write(b"q").unwrap();
        let other = "cd".repeat(32);
        sink.commit(&other).unwrap();
        assert_eq!(b.read(FileType::Index, &id).unwrap(), b"i");
        assert_eq!(b.read(FileType::Pack, &id).unwrap(), b"p");
        assert_eq!(b.read(FileType::Pack, &other).unwrap(), b"q");
        // A shard folder missing under an existing data/.
        fs::remove_dir_all(root.join("data/cd")).unwrap();
        let mut sink = b.sink(FileType::Pack).unwrap().unwrap();
        sink.write(b"r").unwrap();
        sink.commit(&other).unwrap();
        assert_eq!(b.read(FileType::Pack, &other).unwrap(), b"r");
        // Without its config the folder is no repository: nothing is made there.
        fs::remove_file(root.join("config")).unwrap();
        fs::remove_dir_all(root.join("index")).unwrap();
        assert!(b.list(FileType::Index).unwrap_err().is_not_found());
        assert!(b.write(FileType::Index, &id, b"i").is_err());
        assert!(!root.join("index").exists());
    }

    fn walk(p: &Path) -> Vec<String> {
        let mut out = vec![];
        for e in fs::read_dir(p).unwrap() {
            let e = e.unwrap();
            out.push(e.path().display().to_string());
            if e.file_type().unwrap().is_dir() {
                out.extend(walk(&e.path()));
            }
        }
        out
    }
}

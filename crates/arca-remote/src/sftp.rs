//! SFTP repositories over the system's OpenSSH client (`ssh host -s sftp`, so the user's ssh
//! configuration, agent, keys and known_hosts apply), all requests multiplexed on one session.

// Every `Backend` call, from any thread, sends its requests on the one session (at most
// `connections` calls at once); large transfers are split into 255 KiB requests kept in
// flight together, so latency is paid once, not per request. When the session dies the
// failing calls are transient and the next call starts a new session.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arca_backend::{
    Backend, BackendError, BackendHints, ErrorKind, FileInfo, FileType, Result, RootKind,
};
use futures_util::{StreamExt, TryStreamExt, stream};

use crate::SftpLocation;
use crate::runtime::{Gate, block_on};

mod io;
mod leftover;
mod options;
mod session;
mod words;

use io::{
    CHUNK, Class, Fail, class, is_id, is_stale_temp, join, not_found, read_exact, read_once,
    read_upto, temp_name, write_all,
};
pub use options::SftpOptions;
use session::{Session, lock};

/// Folders created or listed at once (the 256 shards of `data`: two round trips' worth; each
/// listing holds a handle on the server).
const DIRS: usize = 128;

/// A repository folder on an SFTP server.
#[derive(Debug)]
pub struct SftpBackend {
    /// `sftp://...`, for messages.
    location: String,
    /// The location as given, to name the folders above the repository's as it is named.
    loc: SftpLocation,
    /// The folder on the server, as SFTP paths spell it (relative: from the login folder).
    root: String,
    argv: Vec<String>,
    gate: Gate,
    /// `sftp.timeout` ([`SftpOptions::timeout`]).
    opts: SftpOptions,
    current: Mutex<Option<Arc<Session>>>,
    /// Held while a session starts; counts the sessions started.
    starting: tokio::sync::Mutex<u64>,
}

impl SftpBackend {
    /// Starts the session (nothing is created on the server).
    pub fn open(loc: &SftpLocation, opts: &SftpOptions) -> Result<Self> {
        let path = loc.path.strip_prefix("~/").unwrap_or(&loc.path);
        let b = Self {
            location: loc.to_string(),
            loc: loc.clone(),
            root: path.to_string(),
            argv: opts.argv(loc),
            gate: Gate::new(opts.connections),
            opts: opts.clone(),
            current: Mutex::new(None),
            starting: tokio::sync::Mutex::new(0),
        };
        block_on(&b.location, b.session())??;
        Ok(b)
    }

    /// Path of a repository file on the server.
    fn remote(&self, rel: &str) -> String {
        join(&self.root, rel)
    }

    /// Full location of a repository file (or of the repository, for `""`), for messages.
    fn shown(&self, rel: &str) -> String {
        if rel.is_empty() {
            self.location.clone()
        } else {
            join(&self.location, rel)
        }
    }

    /// The live session, started if there is none (one start at a time).
    async fn session(&self) -> Result<Arc<Session>> {
        if let Some(s) = self.live() {
            return Ok(s);
        }
        let mut started = self.starting.lock().await;
        if let Some(s) = self.live() {
            return Ok(s);
        }
        let s = Arc::new(Session::start(&self.argv, &self.location, *started > 0).await?);
        *started += 1;
        *lock(&self.current) = Some(s.clone());
        Ok(s)
    }

    fn live(&self) -> Option<Arc<Session>> {
        let mut cur = lock(&self.current);
        match cur.as_ref() {
            Some(s) if s.alive() => Some(s.clone()),
            Some(_) => {
                *cur = None;
                None
            }
            None => None,
        }
    }

    /// Runs one operation on the session, admitted by the gate. An operation waiting while
    /// the server says nothing for `sftp.timeout` (a stuck sftp-server or disk, with sshd
    /// still answering keepalives: commands hung for good, hunt 23) gives the session up (the
    /// next operation starts another) and fails as transient, to be retried. A slow link that
    /// keeps delivering is not cut, however long the transfer.
    fn run<T, Fut>(
        &self,
        op: &'static str,
        rel: &str,
        f: impl FnOnce(Arc<Session>) -> Fut,
    ) -> Result<T>
    where
        Fut: Future<Output = Result<T, Fail>>,
    {
        let _pass = self.gate.enter();
        let limit = self.opts.timeout.unwrap_or(options::DEFAULT_TIMEOUT);
        let stalled = || {
            BackendError::new(
                op,
                self.shown(rel),
                ErrorKind::Transient,
                format!(
                    "the SFTP server said nothing for {} s (a stuck server or disk; \
                     -o sftp.timeout sets the limit)",
                    limit.as_secs()
                ),
            )
        };
        block_on(&self.location, async {
            // A session that does not start (a command that never speaks SFTP) counts too.
            let s = match tokio::time::timeout(limit, self.session()).await {
                Ok(s) => s?,
                Err(_) => return Err(stalled()),
            };
            let started = std::time::Instant::now();
            let tick = limit.min(std::time::Duration::from_secs(1));
            let work = f(s.clone());
            tokio::pin!(work);
            loop {
                match tokio::time::timeout(tick, &mut work).await {
                    Ok(r) => return r.map_err(|e| self.fail(op, rel, &s, e)),
                    Err(_) if s.silent_for().min(started.elapsed()) >= limit => {
                        let mut cur = lock(&self.current);
                        if cur.as_ref().is_some_and(|c| Arc::ptr_eq(c, &s)) {
                            *cur = None;
                        }
                        return Err(stalled());
                    }
                    Err(_) => {}
                }
            }
        })?
    }

    fn fail(&self, op: &'static str, rel: &str, s: &Arc<Session>, e: Fail) -> BackendError {
        let at = self.shown(rel);
        match e {
            Fail::Short(end) => BackendError::new(
                op,
                at,
                ErrorKind::ShortRead,
                format!("the file ends at byte {end}, before the requested range"),
            ),
            Fail::Kind(kind, msg) => BackendError::new(op, at, kind, msg),
            Fail::Sftp(e) => match class(&e) {
                Class::Status(kind, msg) => BackendError::new(op, at, kind, msg),
                Class::Other(msg) => BackendError::new(op, at, ErrorKind::Other, msg),
                Class::Lost(msg) => {
                    s.mark_lost();
                    let mut cur = lock(&self.current);
                    if cur.as_ref().is_some_and(|c| Arc::ptr_eq(c, s)) {
                        *cur = None;
                    }
                    drop(cur);
                    BackendError::new(
                        op,
                        at,
                        ErrorKind::Transient,
                        format!(
                            "the SFTP session was lost ({}; {msg}); the next request starts \
                             a new one",
                            s.last_words()
                        ),
                    )
                }
            },
        }
    }

    /// Reads `out.len()` bytes at `offset` of a file.
    fn read_into(&self, t: FileType, name: &str, offset: u64, out: &mut [u8]) -> Result<()> {
        let rel = t.path(name);
        let path = self.remote(&rel);
        let len = out.len();
        self.run("read", &rel, |s| async move {
            let file = s.sftp.open(&path).await?;
            read_exact(&file, offset, out).await.map_err(|e| match e {
                Fail::Short(end) => Fail::Kind(
                    ErrorKind::ShortRead,
                    format!("the file ends at byte {end}; wanted {len} bytes at offset {offset}"),
                ),
                e => e,
            })
        })
    }

    async fn write_file(s: &Session, dir: &str, path: &str, data: &[u8]) -> Result<(), Fail> {
        let tmp = join(dir, &temp_name());
        let open = || async {
            let mut o = s.sftp.options();
            o.write(true).create_new(true);
            o.open(&tmp).await
        };
        let mut file = match open().await {
            Err(e)
                if matches!(class(&e), Class::Status(ErrorKind::NotFound, _))
                    && !dir.is_empty() =>
            {
                // A folder of the layout is missing (a repository made by another tool):
                // make it, not its parents, and try once more.
                let _ = Self::make_private_dir(s, dir).await;
                open().await?
            }
            r => r?,
        };
        let written = async {
            write_all(&file, data).await?;
            if s.sftp.support_fsync() {
                file.sync_all().await?;
            }
            file.close().await?;
            let mut fs = s.sftp.fs();
            match fs.rename(&tmp, path).await {
                Err(e)
                    if !s.sftp.support_posix_rename()
                        && matches!(class(&e), Class::Status(ErrorKind::Other, _)) =>
                {
                    // Plain SFTP rename refuses an existing target (a generic failure): replace
                    // it in two steps, the only way such a server allows.
                    match fs.remove_file(path).await {
                        Err(e) if !matches!(class(&e), Class::Status(ErrorKind::NotFound, _)) => {
                            return Err(e.into());
                        }
                        _ => {}
                    }
                    fs.rename(&tmp, path).await?;
                }
                r => r?,
            }
            Ok::<(), Fail>(())
        }
        .await;
        if written.is_err() {
            let _ = s.sftp.fs().remove_file(&tmp).await;
        }
        written
    }

    /// Makes folder `path` of the repository readable by its owner alone (0700, as the local
    /// backend makes them): whatever mode the server gives the files inside, nobody else can
    /// reach them, and no round trip per file is spent on setting their modes.
    async fn make_private_dir(
        s: &Session,
        path: &str,
    ) -> std::result::Result<(), openssh_sftp_client::Error> {
        s.sftp
            .fs()
            .dir_builder()
            .permissions(openssh_sftp_client::metadata::Permissions::from(0o700u16))
            .create(path)
            .await
    }

    /// Creates the repository folder and its missing parents, like `mkdir -p`.
    async fn make_root(&self, s: &Session) -> Result<(), Fail> {
        let mut fs = s.sftp.fs();
        let root = self.root.trim_end_matches('/');
        // Usually the parent exists: one round trip.
        if Self::make_private_dir(s, root).await.is_ok() {
            return Ok(());
        }
        let mut prefixes = vec![];
        for (i, c) in root.char_indices() {
            if c == '/' && i > 0 {
                prefixes.push(&root[..i]);
            }
        }
        prefixes.push(root);
        for p in prefixes {
            match fs.metadata(p).await {
                Ok(m) if m.file_type().is_none_or(|t| t.is_dir()) => {}
                Ok(m) => {
                    return Err(Fail::Kind(
                        ErrorKind::AlreadyExists,
                        arca_backend::file_not_folder(Some(&self.shown_path(p)), not_folder(&m)),
                    ));
                }
                Err(e) if matches!(class(&e), Class::Status(ErrorKind::NotFound, _)) => {
                    if p == root {
                        Self::make_private_dir(s, p).await?;
                    } else {
                        fs.create_dir(p).await?;
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Paths of the temporary files in `dir` last modified more than `older_than` before
    /// `now`.
    async fn stale_temp_in(
        s: &Session,
        dir: &str,
        now: SystemTime,
        older_than: Duration,
    ) -> Result<Vec<String>, Fail> {
        let handle = s.sftp.fs().open_dir(dir).await?;
        let entries: Vec<_> = handle.read_dir().try_collect().await?;
        Ok(entries
            .into_iter()
            .filter_map(|e| {
                let name = e.filename().to_str()?;
                let meta = e.metadata();
                let modified = meta.modified().map(|t| t.as_system_time());
                (meta.file_type().is_none_or(|t| t.is_file())
                    && is_stale_temp(name, modified, now, older_than))
                .then(|| join(dir, name))
            })
            .collect())
    }

    /// A path on the server (the root or a folder above it) as a location, for messages:
    /// written as the repository's location is (a `%` escaped, a leading `~/` kept), so
    /// that a folder above the repository is named as the user named the repository. It was
    /// the bare server path when the location did not end with the server path (a `%` in
    /// it).
    fn shown_path(&self, path: &str) -> String {
        let path = match self.loc.path.starts_with("~/") {
            true => format!("~/{path}"),
            false => path.to_string(),
        };
        SftpLocation {
            path,
            ..self.loc.clone()
        }
        .to_string()
    }

    /// What is at the root: the root and every folder above it within the path are stated at
    /// once (one round trip); the nearest that exists tells. As a local folder says it: a
    /// file at the root, or above it, is in the way (OpenSSH's server says "No such file" of
    /// a path through a file). [`RootKind::Unknown`] when a stat fails otherwise.
    fn what_is_there(&self) -> RootKind {
        let root = match self.root.trim_end_matches('/') {
            "" if self.root.starts_with('/') => "/",
            "" => ".",
            r => r,
        };
        let mut paths = vec![root];
        paths.extend(
            root.char_indices()
                .rev()
                .filter(|&(i, c)| c == '/' && i > 0)
                .map(|(i, _)| &root[..i]),
        );
        let paths = &paths;
        let Ok(found) = self.run("stat", "", |s| async move {
            let stats = paths.iter().map(|p| {
                let s = &s;
                async move { s.sftp.fs().metadata(*p).await.map_err(Fail::from) }
            });
            Ok(futures_util::future::join_all(stats).await)
        }) else {
            return RootKind::Unknown;
        };
        for (p, m) in paths.iter().zip(found) {
            let why = match m {
                Ok(m) if m.file_type().is_none_or(|t| t.is_dir()) => {
                    return match *p == root {
                        true => RootKind::Folder,
                        false => RootKind::Nothing,
                    };
                }
                Ok(m) if *p == root => arca_backend::file_not_folder(None, not_folder(&m)),
                Ok(m) => arca_backend::file_not_folder(Some(&self.shown_path(p)), not_folder(&m)),
                Err(e) if not_found(&e) => continue,
                Err(_) => return RootKind::Unknown,
            };
            return RootKind::FileInTheWay(why);
        }
        RootKind::Nothing
    }

    async fn list_dir(s: &Session, path: String) -> Result<Vec<FileInfo>, Fail> {
        let dir = s.sftp.fs().open_dir(&path).await?;
        let entries: Vec<_> = dir.read_dir().try_collect().await?;
        Ok(entries
            .into_iter()
            .filter_map(|e| {
                let name = e.filename().to_str()?;
                let meta = e.metadata();
                (is_id(name) && meta.file_type().is_none_or(|t| t.is_file())).then(|| FileInfo {
                    name: name.to_string(),
                    size: meta.len().unwrap_or(0),
                })
            })
            .collect())
    }
}

/// What a remote entry that is no folder is, as [`arca_backend::file_not_folder`] says it.
fn not_folder(m: &openssh_sftp_client::metadata::MetaData) -> arca_backend::NotFolder {
    use arca_backend::NotFolder;
    match m.file_type() {
        Some(t) if t.is_char_device() || t.is_block_device() => NotFolder::Device,
        Some(t) if t.is_fifo() => NotFolder::Pipe,
        Some(t) if t.is_socket() => NotFolder::Socket,
        _ => NotFolder::File,
    }
}

impl Backend for SftpBackend {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn create(&self) -> Result<()> {
        self.run("create repository", "", |s| async move {
            // The folders an interrupted init already made.
            let mut made: Vec<String> = vec![];
            match s.sftp.fs().open_dir(&self.root).await {
                Ok(dir) => {
                    let entries: Vec<_> = dir.read_dir().try_collect().await?;
                    let names: Vec<String> = entries
                        .iter()
                        .filter_map(|e| e.filename().to_str().map(str::to_string))
                        .filter(|n| n != "." && n != "..")
                        .collect();
                    if names.iter().any(|n| n == "config") {
                        return Err(Fail::Kind(
                            ErrorKind::AlreadyExists,
                            "a repository already exists here".into(),
                        ));
                    }
                    if !names.is_empty() {
                        // An init that stopped before the config may be run again (hunt 30:
                        // one cut off on a full disk left the folders, and every init after
                        // it refused the folder).
                        let Some(left) = leftover::of_init(&s, &self.root).await? else {
                            return Err(Fail::Kind(
                                ErrorKind::AlreadyExists,
                                arca_backend::folder_not_empty(names.len() as u64),
                            ));
                        };
                        if left.fresh {
                            return Err(Fail::Kind(
                                ErrorKind::AlreadyExists,
                                arca_backend::leftover::busy_reason(),
                            ));
                        }
                        for f in &left.files {
                            s.sftp.fs().remove_file(f).await?;
                        }
                        made = left.folders;
                    }
                }
                Err(e) if matches!(class(&e), Class::Status(ErrorKind::NotFound, _)) => {
                    self.make_root(&s).await?;
                }
                Err(e) => {
                    return match s.sftp.fs().metadata(&self.root).await {
                        Ok(m) if m.file_type().is_some_and(|t| !t.is_dir()) => Err(Fail::Kind(
                            ErrorKind::AlreadyExists,
                            arca_backend::file_not_folder(None, not_folder(&m)),
                        )),
                        _ => Err(e.into()),
                    };
                }
            }
            let mkdirs = |dirs: Vec<String>| {
                let s = &s;
                stream::iter(dirs.into_iter().map(move |d| async move {
                    Self::make_private_dir(s, &d).await.map_err(Fail::from)
                }))
                .buffer_unordered(DIRS)
                .try_collect::<()>()
            };
            let missing = |dirs: Vec<String>| -> Vec<String> {
                dirs.into_iter()
                    .filter(|d| !made.contains(d))
                    .map(|d| self.remote(&d))
                    .collect()
            };
            mkdirs(missing(
                arca_backend::leftover::FOLDERS.map(str::to_string).to_vec(),
            ))
            .await?;
            mkdirs(missing(
                (0..=255u8)
                    .map(|i| format!("data/{}", hex::encode([i])))
                    .collect(),
            ))
            .await
        })
    }

    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        if t == FileType::Config {
            return arca_backend::list_config(self);
        }
        let dir = t.dir();
        self.run("list", dir, |s| async move {
            if t == FileType::Lock {
                // Repositories made before locks existed have no `locks/`: no locks.
                return match Self::list_dir(&s, self.remote(dir)).await {
                    Err(e) if not_found(&e) => Ok(vec![]),
                    r => r,
                };
            }
            if t != FileType::Pack {
                return match Self::list_dir(&s, self.remote(dir)).await {
                    // Copy and sync tools drop empty folders (a new repository moved here
                    // has no `index/` yet): inside a repository whose config is there, a
                    // missing folder holds nothing, as on a local disk. Every command but
                    // `snapshots` failed with "not found".
                    Err(e)
                        if not_found(&e)
                            && s.sftp.fs().metadata(self.remote("config")).await.is_ok() =>
                    {
                        Ok(vec![])
                    }
                    r => r,
                };
            }
            // The 256 shards at once; a missing shard is empty, a missing `data` is not.
            let shards = (0..=255u8).map(|i| {
                let s = &s;
                let shard = hex::encode([i]);
                let path = self.remote(&format!("data/{shard}"));
                async move {
                    match Self::list_dir(s, path).await {
                        Err(e) if not_found(&e) => Ok(None),
                        // Only where the pack is read and deleted: a stray copy in another
                        // folder would be listed as a second pack of that id.
                        r => r.map(|mut files| {
                            files.retain(|f| f.name.starts_with(&shard));
                            Some(files)
                        }),
                    }
                }
            });
            let found: Vec<Option<Vec<FileInfo>>> = stream::iter(shards)
                .buffer_unordered(DIRS)
                .try_collect()
                .await?;
            if found.iter().all(Option::is_none) {
                s.sftp.fs().metadata(self.remote(dir)).await?;
            }
            Ok(found.into_iter().flatten().flatten().collect())
        })
    }

    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        let rel = t.path(name);
        let path = self.remote(&rel);
        self.run("read", &rel, |s| async move {
            let file = s.sftp.open(&path).await?;
            // The size and the first chunk in one round trip: most files fit in it (a
            // second request would only learn that the file ends there).
            let mut first = vec![0u8; CHUNK];
            let (mut f1, mut f2) = (file.clone(), file.clone());
            let (meta, got) = tokio::join!(f1.metadata(), read_once(&mut f2, 0, &mut first));
            drop((f1, f2));
            let got = got?;
            let size = meta?.len();
            match size {
                Some(size) if size as usize <= got => {
                    first.truncate(size as usize);
                    Ok(first)
                }
                Some(size) => {
                    let size = usize::try_from(size).map_err(|_| {
                        Fail::Kind(ErrorKind::Other, format!("file too large ({size} bytes)"))
                    })?;
                    let mut out = first;
                    out.resize(size, 0);
                    read_exact(&file, got as u64, &mut out[got..]).await?;
                    Ok(out)
                }
                None => {
                    // The server gave no size: read on until the file ends.
                    let mut out = first;
                    out.truncate(got);
                    let mut f = file.clone();
                    let mut buf = vec![0u8; CHUNK];
                    loop {
                        let n = read_upto(&mut f, out.len() as u64, &mut buf).await?;
                        out.extend_from_slice(&buf[..n]);
                        if n < buf.len() {
                            return Ok(out);
                        }
                    }
                }
            }
        })
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
        let n = usize::try_from(len).map_err(|_| {
            BackendError::new(
                "read",
                self.shown(&t.path(name)),
                ErrorKind::Other,
                format!("range of {len} bytes is too large"),
            )
        })?;
        // Reusing the buffer's allocation: only growth is zero-filled, the rest is overwritten.
        buf.resize(n, 0);
        self.read_into(t, name, offset, buf)
    }

    fn root_kind(&self) -> RootKind {
        self.what_is_there()
    }

    fn hints(&self) -> BackendHints {
        BackendHints {
            local: false,
            connections: Some(self.gate.limit()),
            ..Default::default()
        }
    }

    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        let rel = t.path(name);
        let path = self.remote(&rel);
        let dir = match path.rsplit_once('/') {
            Some(("", _)) => "/".to_string(),
            Some((d, _)) => d.to_string(),
            None => String::new(),
        };
        self.run("write", &rel, |s| async move {
            Self::write_file(&s, &dir, &path, data).await
        })
    }

    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        let rel = t.path(name);
        let path = self.remote(&rel);
        self.run("delete", &rel, |s| async move {
            s.sftp.fs().remove_file(&path).await.map_err(Fail::from)
        })
    }

    fn remove_stale_temp(&self, older_than: Duration, remove: bool) -> Result<u64> {
        self.run("remove temporary files", "", |s| async move {
            // Writes put their temporary file in the target's folder: the root (config), the
            // folders of the file types, and the 256 shards of `data`.
            let root = if self.root.is_empty() {
                ".".to_string()
            } else {
                self.root.clone()
            };
            let mut dirs = vec![root];
            dirs.extend(
                FileType::ALL
                    .into_iter()
                    .filter(|t| *t != FileType::Config)
                    .map(|t| self.remote(t.dir())),
            );
            dirs.extend((0..=255u8).map(|i| self.remote(&format!("data/{}", hex::encode([i])))));
            let now = SystemTime::now();
            let s = &s;
            let found: Vec<Vec<String>> = stream::iter(dirs.into_iter().map(|dir| async move {
                match Self::stale_temp_in(s, &dir, now, older_than).await {
                    Err(e) if not_found(&e) => Ok(vec![]),
                    r => r,
                }
            }))
            .buffer_unordered(DIRS)
            .try_collect()
            .await?;
            if !remove {
                return Ok(found.iter().map(|f| f.len() as u64).sum());
            }
            let removals = found.into_iter().flatten().map(|path| async move {
                match s.sftp.fs().remove_file(&path).await.map_err(Fail::from) {
                    Ok(()) => Ok(1u64),
                    // Renamed into place or removed by its writer meanwhile.
                    Err(e) if not_found(&e) => Ok(0),
                    Err(e) => Err(e),
                }
            });
            stream::iter(removals)
                .buffer_unordered(DIRS)
                .try_fold(0u64, |n, r| async move { Ok(n + r) })
                .await
        })
    }

    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        let rel = t.path(name);
        let path = self.remote(&rel);
        self.run("stat", &rel, |s| async move {
            let m = s.sftp.fs().metadata(&path).await?;
            let size = m
                .len()
                .ok_or_else(|| Fail::Kind(ErrorKind::Other, "the server gave no size".into()))?;
            Ok(FileInfo {
                name: name.to_string(),
                size,
            })
        })
    }
}

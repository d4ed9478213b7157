//! Where repository files live. One small synchronous [`Backend`] trait (list, read whole or
//! a range, write atomically, delete, stat) and its implementations and decorators (metering,
//! fault injection, retrying, a local cache of remote repositories).
//!
//! Backends know the repository layout (`config`, `keys/`, `snapshots/`, `index/`,
//! `data/<2 hex>/`) but nothing about the bytes they store.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

pub mod cache;
mod fault;
pub mod leftover;
mod local;
mod memory;
mod metered;
mod retry;
pub mod uncached;

pub use cache::CachedBackend;
pub use fault::{Fault, FaultBackend, Op, Rule, Trigger};
pub use local::{LocalBackend, NotFolder, file_in_the_way, file_not_folder, folder_not_empty};
pub use memory::MemoryBackend;
pub use metered::{BackendStats, MeteredBackend, StatsSnapshot, Throttle};
pub use retry::{RetryBackend, RetryNotice, RetryPolicy, RetryStats, notify_retry, on_retry};

/// The kinds of repository files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// The single `config` file.
    Config,
    /// `keys/<id>`.
    Key,
    /// `snapshots/<id>`.
    Snapshot,
    /// `index/<id>`.
    Index,
    /// `data/<first 2 hex digits>/<id>`.
    Pack,
    /// `locks/<id>`: who uses the repository now.
    Lock,
}

impl FileType {
    /// Every file type, in listing order.
    pub const ALL: [FileType; 6] = [
        FileType::Config,
        FileType::Key,
        FileType::Snapshot,
        FileType::Index,
        FileType::Pack,
        FileType::Lock,
    ];

    /// Directory of this type inside the repository (empty for `config`).
    pub fn dir(self) -> &'static str {
        match self {
            FileType::Config => "",
            FileType::Key => "keys",
            FileType::Snapshot => "snapshots",
            FileType::Index => "index",
            FileType::Pack => "data",
            FileType::Lock => "locks",
        }
    }

    /// Path of a file relative to the repository root.
    pub fn path(self, name: &str) -> String {
        match self {
            FileType::Config => "config".to_string(),
            FileType::Pack => {
                let shard = name.get(..2).unwrap_or("00");
                format!("data/{shard}/{name}")
            }
            t => format!("{}/{name}", t.dir()),
        }
    }
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileType::Config => "config",
            FileType::Key => "key",
            FileType::Snapshot => "snapshot",
            FileType::Index => "index",
            FileType::Pack => "pack",
            FileType::Lock => "lock",
        })
    }
}

/// A listed file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileInfo {
    /// File name (a 64-digit hex id, or `config`).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
}

/// Broad class of a backend failure, for messages, exit codes and retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file or repository does not exist.
    NotFound,
    /// The file already exists (creating a repository).
    AlreadyExists,
    /// Access denied.
    PermissionDenied,
    /// No space left on the device holding the repository.
    NoSpace,
    /// The file is shorter than the requested range.
    ShortRead,
    /// A failure that may pass (timeouts, interrupted connections).
    Transient,
    /// Anything else.
    Other,
}

/// What is at a repository's location, as [`Backend::root_kind`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootKind {
    /// Nothing: no folder (or, on an object store, no object under the prefix).
    Nothing,
    /// A file (or a device, ...) where the folder should be, or above it: why, said as "it is
    /// a file, not a folder" or "F is a device, not a folder" ([`file_in_the_way`]).
    FileInTheWay(String),
    /// A folder (or a prefix holding objects): something is there, a repository or not.
    Folder,
    /// The backend cannot tell (the default), or asking failed.
    Unknown,
}

/// A backend operation failed.
#[derive(Debug, thiserror::Error)]
#[error("{op} {location}: {source}")]
pub struct BackendError {
    /// The operation (`read`, `write`, ...).
    pub op: &'static str,
    /// Full path or URL of the file.
    pub location: String,
    /// Class of the failure.
    pub kind: ErrorKind,
    /// Underlying error.
    #[source]
    pub source: io::Error,
}

impl BackendError {
    /// Builds an error, classifying the I/O error.
    pub fn io(op: &'static str, location: impl Into<String>, source: io::Error) -> Self {
        let kind = classify(&source);
        Self {
            op,
            location: location.into(),
            kind,
            source,
        }
    }
    /// Builds an error of an explicit kind.
    pub fn new(
        op: &'static str,
        location: impl Into<String>,
        kind: ErrorKind,
        msg: String,
    ) -> Self {
        Self {
            op,
            location: location.into(),
            kind,
            source: io::Error::other(msg),
        }
    }
    /// Whether the file was missing.
    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::NotFound
    }
    /// Whether retrying may help.
    pub fn is_transient(&self) -> bool {
        self.kind == ErrorKind::Transient
    }
}

/// Classifies an I/O error.
pub fn classify(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::NotFound => ErrorKind::NotFound,
        io::ErrorKind::AlreadyExists => ErrorKind::AlreadyExists,
        io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
        io::ErrorKind::UnexpectedEof => ErrorKind::ShortRead,
        io::ErrorKind::TimedOut
        | io::ErrorKind::Interrupted
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::WouldBlock => ErrorKind::Transient,
        _ if e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EDQUOT) => {
            ErrorKind::NoSpace
        }
        _ => ErrorKind::Other,
    }
}

/// Whether `name` is a repository file's name: 64 lowercase hex digits (other files, such as
/// `.tmp-*` leftovers, are not listed).
pub fn is_file_id(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// [`Backend::list`] of [`FileType::Config`] for backends that find it by `stat`: one entry, or
/// none when there is no config.
pub fn list_config(b: &(impl Backend + ?Sized)) -> Result<Vec<FileInfo>> {
    match b.stat(FileType::Config, "config") {
        Ok(i) => Ok(vec![i]),
        Err(e) if e.is_not_found() => Ok(vec![]),
        Err(e) => Err(e),
    }
}

/// Result of backend operations.
pub type Result<T, E = BackendError> = std::result::Result<T, E>;

/// What a backend is like, so callers can choose how many requests to keep in flight and
/// how far apart two ranges may be before reading the gap between them costs more than a
/// second request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackendHints {
    /// A local file system: requests are cheap, there is no round trip to hide.
    pub local: bool,
    /// Typical time of one request before data flows, when known.
    pub latency: Option<Duration>,
    /// Transfer rate in bytes per second, when known.
    pub bandwidth: Option<u64>,
    /// Requests the backend serves at once (`--connections`), when it bounds them.
    pub connections: Option<usize>,
}

/// A repository file written in pieces ([`Backend::sink`]) under a temporary name, so that
/// a large file (a pack) never has to be held in memory whole. [`FileSink::commit`] gives it
/// its final name atomically; a sink dropped without a commit removes what it wrote.
pub trait FileSink: Send + fmt::Debug {
    /// Appends `data`.
    fn write(&mut self, data: &[u8]) -> Result<()>;
    /// Bytes written so far.
    fn len(&self) -> u64;
    /// Whether nothing was written yet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Makes the file durable and names it `name` (replacing a file of that name), at once:
    /// readers see all of it or nothing, as with [`Backend::write`].
    fn commit(self: Box<Self>, name: &str) -> Result<()>;
}

/// Storage for repository files. Implementations must make `write` atomic: a reader sees the
/// whole file or none of it, and a crash never leaves a partial file under the final name.
pub trait Backend: Send + Sync + fmt::Debug {
    /// Where the repository is, for messages.
    fn location(&self) -> String;
    /// Creates an empty repository layout. Fails if a repository already exists there.
    fn create(&self) -> Result<()>;
    /// Lists the files of one type with their sizes.
    fn list(&self, t: FileType) -> Result<Vec<FileInfo>>;
    /// Reads a whole file.
    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>>;
    /// Reads `len` bytes at `offset`; fails with [`ErrorKind::ShortRead`] if the file ends
    /// first.
    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> Result<Vec<u8>>;
    /// As [`Backend::read_range`], into `buf` (replacing its contents), so callers can reuse
    /// one allocation for many reads.
    fn read_range_into(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        *buf = self.read_range(t, name, offset, len)?;
        Ok(())
    }
    /// As [`Backend::read_range_into`], for bulk reads (packs read by restore, prune and
    /// copy), which a backend may serve differently (the local one asks the kernel for
    /// sequential read-ahead). The bytes may land at an offset in `buf` (returned), so an
    /// implementation can read into an aligned window without moving them afterwards.
    fn read_range_bulk(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<usize> {
        self.read_range_into(t, name, offset, len, buf)?;
        Ok(0)
    }
    /// Reads a whole file from where the repository keeps it, past any local copy: a caching
    /// layer answers [`Backend::read`] from the copy it made when the file was written, so a
    /// file damaged on its way to the repository (a key `key passwd` relies on before it
    /// removes the old one, a snapshot that replaces another) would read back whole from
    /// there. The default is [`Backend::read`]; a caching layer reads from the layer below,
    /// and `Arc` passes it on (the cache is the outermost layer: decorators below it need
    /// nothing).
    fn read_stored(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        self.read(t, name)
    }
    /// What this backend is like (defaults: remote, nothing known).
    fn hints(&self) -> BackendHints {
        BackendHints::default()
    }
    /// Asks the backend to start fetching the files of these types, which are about to be
    /// read, into a faster place, without waiting (a local folder asks the kernel to read
    /// them into the page cache while the password's key is derived). A hint: others ignore
    /// it (the default); decorators pass it on.
    fn warm(&self, types: &[FileType]) {
        let _ = types;
    }
    /// The repository's folder when it lies on this machine's file system (a restore must
    /// never write into it, nor delete it); none for remote backends (the default).
    /// Decorators pass it on.
    fn local_folder(&self) -> Option<std::path::PathBuf> {
        None
    }
    /// What is at the repository's location. Asked only when its config could not be read
    /// (an error path: a working repository never pays for it), to tell nothing there from a
    /// file in the way or from a folder that is not a repository. [`RootKind::Unknown`], the
    /// default, when the backend cannot tell; decorators pass it on.
    fn root_kind(&self) -> RootKind {
        RootKind::Unknown
    }
    /// Tells the backend that these packs hold tree blobs (directory listings), read again by
    /// every backup and listing: a caching layer may keep whole local copies of them. Other
    /// backends ignore it (the default); decorators pass it on.
    fn note_tree_packs(&self, names: &[String]) {
        let _ = names;
    }
    /// Tells the backend that `len` bytes at `offset` of a file will be read soon, so it can
    /// start fetching them without the caller waiting (a local folder asks the kernel to read
    /// them into the page cache). A hint: others ignore it (the default); decorators pass it
    /// on.
    fn prefetch(&self, t: FileType, name: &str, offset: u64, len: u64) {
        let _ = (t, name, offset, len);
    }
    /// Writes a file atomically. Writing an existing file replaces it.
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()>;
    /// A new file of type `t` to write in pieces and name when complete, where the backend
    /// takes one without holding it in memory (a local folder); `None`, the default: write
    /// whole files with [`Backend::write`]. Decorators that must see every byte written
    /// (injecting faults, simulating a link) keep the default.
    fn sink(&self, t: FileType) -> Result<Option<Box<dyn FileSink>>> {
        let _ = t;
        Ok(None)
    }
    /// Deletes a file.
    fn delete(&self, t: FileType, name: &str) -> Result<()>;
    /// Deletes a file if it is there: [`Backend::delete`] without the not-found error, for
    /// callers that do not care (releasing a lock). A backend whose delete needs a request
    /// of its own to tell "not there" (S3 deletes a missing key without complaint) saves that
    /// request here; decorators pass it on.
    fn remove(&self, t: FileType, name: &str) -> Result<()> {
        match self.delete(t, name) {
            Err(e) if e.is_not_found() => Ok(()),
            r => r,
        }
    }
    /// Size of one file.
    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo>;
    /// Removes the temporary files (`.tmp-*`) that writes interrupted by a crash left in the
    /// repository's folders, when last modified more than `older_than` ago (younger ones may
    /// belong to a write in progress); returns how many were removed (without `remove`: how
    /// many would be, for a dry run). Backends whose writes
    /// leave no temporary files (S3, memory) have nothing to do (the default); decorators
    /// pass it on.
    fn remove_stale_temp(&self, older_than: Duration, remove: bool) -> Result<u64> {
        let _ = (older_than, remove);
        Ok(0)
    }
    /// Makes the deletions done so far durable: a power cut after it cannot bring the files
    /// back. Called between deletions whose order matters (a forgotten snapshot must not
    /// come back once the packs only it used are gone) and after those that must hold (a key
    /// removed because its password leaked). A local folder fsyncs the folders it deleted
    /// from; object stores acknowledge a deletion once it is durable (the default); decorators
    /// pass it on.
    fn sync_removals(&self) -> Result<()> {
        Ok(())
    }
}

impl<B: Backend + ?Sized> Backend for Arc<B> {
    fn location(&self) -> String {
        (**self).location()
    }
    fn create(&self) -> Result<()> {
        (**self).create()
    }
    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        (**self).list(t)
    }
    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        (**self).read(t, name)
    }
    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        (**self).read_range(t, name, offset, len)
    }
    fn read_range_into(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        (**self).read_range_into(t, name, offset, len, buf)
    }
    fn read_range_bulk(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<usize> {
        (**self).read_range_bulk(t, name, offset, len, buf)
    }
    fn read_stored(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        (**self).read_stored(t, name)
    }
    fn hints(&self) -> BackendHints {
        (**self).hints()
    }
    fn note_tree_packs(&self, names: &[String]) {
        (**self).note_tree_packs(names)
    }
    fn warm(&self, types: &[FileType]) {
        (**self).warm(types)
    }
    fn local_folder(&self) -> Option<std::path::PathBuf> {
        (**self).local_folder()
    }
    fn root_kind(&self) -> RootKind {
        (**self).root_kind()
    }
    fn prefetch(&self, t: FileType, name: &str, offset: u64, len: u64) {
        (**self).prefetch(t, name, offset, len)
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        (**self).write(t, name, data)
    }
    fn sink(&self, t: FileType) -> Result<Option<Box<dyn FileSink>>> {
        (**self).sink(t)
    }
    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        (**self).delete(t, name)
    }
    fn remove(&self, t: FileType, name: &str) -> Result<()> {
        (**self).remove(t, name)
    }
    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        (**self).stat(t, name)
    }
    fn remove_stale_temp(&self, older_than: Duration, remove: bool) -> Result<u64> {
        (**self).remove_stale_temp(older_than, remove)
    }
    fn sync_removals(&self) -> Result<()> {
        (**self).sync_removals()
    }
}

/// A conformance suite every backend must pass (it panics at the first failure); used by this
/// crate's tests and available to future backends (SFTP, S3) through their own tests.
pub fn conformance(b: &dyn Backend) {
    let id = "ab".repeat(32);
    let id2 = "cd".repeat(32);
    for t in FileType::ALL {
        assert!(b.list(t).expect("list").is_empty() || t == FileType::Config);
    }
    b.write(FileType::Pack, &id, b"hello world").expect("write");
    b.write(FileType::Pack, &id2, b"x").expect("write");
    b.write(FileType::Snapshot, &id, b"snap").expect("write");
    assert_eq!(b.read(FileType::Pack, &id).expect("read"), b"hello world");
    assert_eq!(
        b.read_range(FileType::Pack, &id, 6, 5).expect("range"),
        b"world"
    );
    for (off, n) in [(0, 11), (3, 5), (10, 1)] {
        let mut buf = vec![];
        let at = b
            .read_range_bulk(FileType::Pack, &id, off, n, &mut buf)
            .expect("bulk");
        assert_eq!(
            &buf[at..at + n as usize],
            &b"hello world"[off as usize..(off + n) as usize]
        );
    }
    assert_eq!(
        b.read_range_bulk(FileType::Pack, &id, 6, 50, &mut vec![])
            .expect_err("short read must fail")
            .kind,
        ErrorKind::ShortRead
    );
    let mut buf = b"old contents, longer than the range".to_vec();
    b.read_range_into(FileType::Pack, &id, 0, 5, &mut buf)
        .expect("range into");
    assert_eq!(buf, b"hello");
    assert_eq!(
        b.read_range_into(FileType::Pack, &id, 6, 50, &mut buf)
            .expect_err("short read must fail")
            .kind,
        ErrorKind::ShortRead
    );
    let short = b
        .read_range(FileType::Pack, &id, 6, 50)
        .expect_err("short read must fail");
    assert_eq!(short.kind, ErrorKind::ShortRead);
    let mut l = b.list(FileType::Pack).expect("list");
    l.sort();
    assert_eq!(
        l,
        vec![
            FileInfo {
                name: id.clone(),
                size: 11
            },
            FileInfo {
                name: id2.clone(),
                size: 1
            }
        ]
    );
    assert_eq!(b.list(FileType::Snapshot).expect("list").len(), 1);
    assert_eq!(b.stat(FileType::Pack, &id).expect("stat").size, 11);
    b.write(FileType::Pack, &id, b"replaced")
        .expect("overwrite");
    assert_eq!(b.read(FileType::Pack, &id).expect("read"), b"replaced");
    b.delete(FileType::Pack, &id).expect("delete");
    assert!(
        b.read(FileType::Pack, &id)
            .expect_err("deleted")
            .is_not_found()
    );
    assert!(
        b.stat(FileType::Pack, &id)
            .expect_err("deleted")
            .is_not_found()
    );
    assert!(
        b.delete(FileType::Pack, &id)
            .expect_err("deleted")
            .is_not_found()
    );
    // `remove`: deletes what is there, and is content when nothing is.
    b.remove(FileType::Pack, &id)
        .expect("remove a missing file");
    b.write(FileType::Lock, &id, b"lock").expect("write lock");
    b.remove(FileType::Lock, &id).expect("remove");
    assert!(
        b.stat(FileType::Lock, &id)
            .expect_err("removed")
            .is_not_found()
    );
    assert!(b.list(FileType::Lock).expect("list locks").is_empty());
    b.write(FileType::Config, "config", b"cfg").expect("config");
    assert_eq!(b.read(FileType::Config, "config").expect("config"), b"cfg");
    sink_conformance(b);
    assert_eq!(
        b.create().expect_err("exists").kind,
        ErrorKind::AlreadyExists
    );
}

/// The part of [`conformance`] for backends that write in pieces ([`Backend::sink`]): the
/// file appears whole under its name at the commit and not before; a dropped sink leaves
/// nothing a listing shows.
fn sink_conformance(b: &dyn Backend) {
    let Some(mut s) = b.sink(FileType::Pack).expect("sink") else {
        return;
    };
    let id = "ef".repeat(32);
    // Pieces of awkward sizes, across page boundaries.
    let data: Vec<u8> = (0..3 * 1024 * 1024 + 4321u32)
        .map(|i| (i.wrapping_mul(31) >> 3) as u8)
        .collect();
    let before = b.list(FileType::Pack).expect("list").len();
    let sizes = [1usize, 4095, 4097, 1 << 20, 12_345];
    let mut at = 0;
    for n in sizes.iter().cycle() {
        if at == data.len() {
            break;
        }
        let n = (*n).min(data.len() - at);
        s.write(&data[at..at + n]).expect("sink write");
        at += n;
    }
    assert_eq!(s.len(), data.len() as u64);
    assert_eq!(
        b.list(FileType::Pack).expect("list").len(),
        before,
        "nothing is listed before the commit"
    );
    s.commit(&id).expect("commit");
    assert_eq!(b.read(FileType::Pack, &id).expect("read"), data);
    assert_eq!(
        b.stat(FileType::Pack, &id).expect("stat").size,
        data.len() as u64
    );
    // A dropped sink leaves nothing behind.
    let mut s = b.sink(FileType::Pack).expect("sink").expect("sink again");
    s.write(b"abandoned").expect("sink write");
    drop(s);
    assert_eq!(b.list(FileType::Pack).expect("list").len(), before + 1);
    // An empty file commits too.
    let empty = "0e".repeat(32);
    b.sink(FileType::Pack)
        .expect("sink")
        .expect("sink again")
        .commit(&empty)
        .expect("commit empty");
    assert!(b.read(FileType::Pack, &empty).expect("read").is_empty());
    b.delete(FileType::Pack, &empty).expect("delete");
    b.delete(FileType::Pack, &id).expect("delete");
}

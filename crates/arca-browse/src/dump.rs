//! `dump`: one file of a snapshot streamed as it is, or a folder (or the whole snapshot) as a
//! tar or zip archive, with memory bounded whatever the sizes.
//!
//! Three threads in a line, joined by bounded channels: the walker ([`walk`]) loads one
//! listing at a time, depth first in name order, and sends entries; the fetcher ([`fetch`])
//! turns each file's content list into ranged pack reads (consecutive blobs of a pack merged
//! into one read, across files, a few reads in flight, blobs opened on the reading threads) and
//! passes entries and plaintext on in order; the writer (the calling thread) feeds a sink:
//! the raw bytes of one file, [`tar`] or [`zip`].

mod fetch;
mod sparse;
mod tar;
#[cfg(test)]
mod tests;
mod walk;
mod zip;

use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::sync_channel;

use arca_format::{Id, Node, NodeKind};
use arca_repo::{Index, RepoError, Repository};

/// The archive format of a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archive {
    /// POSIX pax (ustar with extended headers), as GNU tar `--format=pax` writes it.
    Tar,
    /// Zip, streamed (sizes and checksums in data descriptors after each entry).
    Zip,
}

impl Archive {
    /// Lower-case name (`tar`, `zip`).
    pub fn name(self) -> &'static str {
        match self {
            Archive::Tar => "tar",
            Archive::Zip => "zip",
        }
    }
}

/// A dump that could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DumpError {
    /// The path is not in the snapshot.
    #[error("{} is not in the snapshot", arca_format::text::shown(path))]
    NotFound {
        /// The path asked for.
        path: PathBuf,
    },
    /// A component of the path is not a folder.
    #[error("{} is not a folder in the snapshot", arca_format::text::shown(path))]
    NotAFolder {
        /// The component's path.
        path: PathBuf,
    },
    /// The path names something that has no bytes to stream without an archive.
    #[error(
        "{} is a {kind}, not a file: dump it with --archive tar or zip",
        arca_format::text::shown(path)
    )]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// Its kind.
        kind: &'static str,
    },
    /// The entry asked for alone is of a kind the archive cannot hold (a FIFO or device in
    /// a zip, a socket in either): refused before anything is written, as the archive would
    /// be empty.
    #[error("{} is a {kind}: {why}", arca_format::text::shown(path))]
    CannotHold {
        /// The path.
        path: PathBuf,
        /// Its kind.
        kind: &'static str,
        /// Why.
        why: &'static str,
        /// A tar archive can hold it.
        tar_can: bool,
    },
    /// The path has `..` in it.
    #[error(
        "{}: invalid path in a snapshot ({why})",
        arca_format::text::shown(path)
    )]
    InvalidPath {
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Reading a listing or a blob failed.
    #[error("{}: {source}", arca_format::text::shown(path))]
    Repo {
        /// The folder or file being read.
        path: PathBuf,
        /// What failed.
        source: RepoError,
    },
    /// An entry cannot be written to the archive.
    #[error("{}: {detail}", arca_format::text::shown(path))]
    Entry {
        /// The entry.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// Writing the output failed.
    #[error("writing the {what}: {source}")]
    Write {
        /// What was being written (`tar archive`, `zip archive`, `file`).
        what: &'static str,
        /// The error.
        source: io::Error,
    },
    /// A bug: a thread of the dump failed.
    #[error("internal error: {0}")]
    Internal(String),
}

/// What `path` resolved to in a snapshot.
#[derive(Debug, Clone)]
pub enum Target {
    /// The snapshot's root (`/`): every top-level entry and everything below.
    Root(Id),
    /// One entry (with everything below it when it is a folder).
    Entry {
        /// Its absolute path in the snapshot.
        path: PathBuf,
        /// Its node.
        node: Box<Node>,
    },
}

impl Target {
    /// Whether the target is a folder (or the root).
    pub fn is_folder(&self) -> bool {
        match self {
            Target::Root(_) => true,
            Target::Entry { node, .. } => node.is_dir(),
        }
    }

    /// Refuses an entry asked for alone that `archive` cannot hold: its archive would be
    /// empty (with a warning, and success).
    pub fn check_archive(&self, archive: Archive) -> Result<(), DumpError> {
        let Target::Entry { path, node } = self else {
            return Ok(());
        };
        let (why, tar_can) = match (archive, node.kind()) {
            (_, NodeKind::Socket) => ("it has no content or archive entry", false),
            (Archive::Zip, NodeKind::Fifo | NodeKind::CharDev | NodeKind::BlockDev) => {
                ("a zip archive cannot hold it", true)
            }
            _ => return Ok(()),
        };
        Err(DumpError::CannotHold {
            path: path.clone(),
            kind: node.kind().name(),
            why,
            tar_can,
        })
    }
}

/// An entry not written because the archive format cannot hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Path in the snapshot.
    pub path: PathBuf,
    /// Why.
    pub reason: &'static str,
}

/// What a dump wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpReport {
    /// Entries written (folders, files, links, special files).
    pub entries: u64,
    /// Regular files written with their content.
    pub files: u64,
    /// Hard links written as links to an earlier entry.
    pub hardlinks: u64,
    /// File content bytes written (before any archive framing or compression; the holes of
    /// a sparse file count, though a tar stores them as a map).
    pub bytes: u64,
    /// Ranged pack reads made for file content.
    pub reads: u64,
    /// Entries left out.
    pub skipped: Vec<Skipped>,
}

/// Streams files and folders of snapshots.
#[derive(Debug, Clone, Copy)]
pub struct Dump<'a> {
    /// The repository.
    pub repo: &'a Repository,
    /// Its index.
    pub index: &'a Index,
    /// Two blobs of a pack closer than this are read as one range.
    pub read_gap: u64,
    /// Largest ranged read (and most plaintext one read yields, unless one blob is larger).
    pub max_read: u64,
    /// Ranged reads in flight at once.
    pub reads_in_flight: usize,
    /// How long the fetcher waits for the walker's next entry (while the walker loads a
    /// listing) before issuing the read it is gathering.
    pub gather: std::time::Duration,
}

/// An entry on its way from the walker to the writer.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Path in the archive: the snapshot path without its leading `/`.
    pub path: Vec<u8>,
    /// The node (with its content list for files).
    pub node: Node,
    /// Content bytes (the sum of the content list's lengths), for files.
    pub size: u64,
    /// For a hard link to an earlier entry: that entry's archive path.
    pub link: Option<Vec<u8>>,
}

impl Entry {
    /// The snapshot path, for messages.
    pub fn snapshot_path(&self) -> PathBuf {
        snapshot_path(&self.path)
    }
}

/// The absolute snapshot path of an archive path.
pub(crate) fn snapshot_path(archive: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    Path::new("/").join(std::ffi::OsStr::from_bytes(archive))
}

/// What the fetcher hands the writer.
#[derive(Debug)]
pub(crate) enum Msg {
    /// The next entry; its content follows.
    Entry(Box<Entry>),
    /// Plaintext of the current file's next block.
    Data(Vec<u8>),
    /// A block of zeros of this length (a hole: never read).
    Zeros(u64),
    /// Ranged reads made so far (sent once, at the end).
    Reads(u64),
    /// The dump cannot go on.
    Failed(DumpError),
}

/// What a sink did with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Started {
    /// Written: its content, if any, follows.
    Written,
    /// Left out because the format cannot hold it (no content follows), and why.
    Skipped(&'static str),
}

/// Zeros to write holes from.
pub(crate) static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// Hands `n` zeros to `put`, a slice of [`ZEROS`] at a time.
pub(crate) fn put_zeros(
    mut n: u64,
    mut put: impl FnMut(&[u8]) -> Result<(), DumpError>,
) -> Result<(), DumpError> {
    while n > 0 {
        let k = n.min(ZEROS.len() as u64);
        put(&ZEROS[..k as usize])?;
        n -= k;
    }
    Ok(())
}

/// The id and length of an all-zero blob of the chunker's largest size: how a sparse file's
/// holes are stored (restore leaves them as holes; a dump never reads them).
pub(crate) fn hole_blob(repo: &Repository) -> (Id, u32) {
    (repo.hole_blob_id(), repo.config().chunker.max)
}

/// Where a dump's entries go.
pub(crate) trait Sink {
    /// Starts an entry, or says why the format cannot hold it.
    fn entry(&mut self, e: &Entry) -> Result<Started, DumpError>;
    /// Appends content to the current entry.
    fn data(&mut self, bytes: &[u8]) -> Result<(), DumpError>;
    /// Appends `n` zeros of a hole (a hole blob) to the current entry: written as zeros
    /// unless the format keeps holes.
    fn zeros(&mut self, n: u64) -> Result<(), DumpError> {
        put_zeros(n, |z| self.data(z))
    }
    /// Ends the output (archive trailer, flush).
    fn finish(&mut self) -> Result<(), DumpError>;
}

/// The bytes of one file, as they are.
struct Raw<W: Write> {
    out: W,
}

impl<W: Write> Sink for Raw<W> {
    fn entry(&mut self, _: &Entry) -> Result<Started, DumpError> {
        Ok(Started::Written)
    }
    fn data(&mut self, bytes: &[u8]) -> Result<(), DumpError> {
        self.out
            .write_all(bytes)
            .map_err(|source| DumpError::Write {
                what: "file",
                source,
            })
    }
    fn finish(&mut self) -> Result<(), DumpError> {
        self.out.flush().map_err(|source| DumpError::Write {
            what: "file",
            source,
        })
    }
}

impl<'a> Dump<'a> {
    /// A dump with read sizes chosen for the repository's backend (as restore's listing
    /// loader chooses them) and four reads in flight (eight behind a network).
    pub fn new(repo: &'a Repository, index: &'a Index) -> Self {
        let stop = AtomicBool::new(false);
        let l = arca_repo::trees::TreeLoader::new(repo, index, &stop);
        let local = repo.backend().hints().local;
        Dump {
            repo,
            index,
            read_gap: l.read_gap,
            max_read: l.max_read.max(1 << 20),
            reads_in_flight: if local { 4 } else { 8 },
            gather: std::time::Duration::from_millis(1),
        }
    }

    /// Finds `path` (absolute or relative to the root; `/` is the root) below the root
    /// listing `root`, loading one listing per component.
    pub fn resolve(&self, root: Id, path: &Path) -> Result<Target, DumpError> {
        use std::os::unix::ffi::OsStrExt;
        let mut names = vec![];
        for c in path.components() {
            match c {
                Component::Normal(n) => names.push(n),
                Component::RootDir | Component::CurDir => {}
                Component::ParentDir | Component::Prefix(_) => {
                    return Err(DumpError::InvalidPath {
                        path: path.to_path_buf(),
                        why: "`..` is not allowed",
                    });
                }
            }
        }
        let Some((last, dirs)) = names.split_last() else {
            return Ok(Target::Root(root));
        };
        let mut tree = root;
        let mut here = PathBuf::from("/");
        for name in dirs {
            let t = self
                .repo
                .load_tree(self.index, &tree)
                .map_err(|source| DumpError::Repo {
                    path: here.clone(),
                    source,
                })?;
            here.push(name);
            let Some(n) = t.find(name.as_bytes()) else {
                return Err(DumpError::NotFound {
                    path: path.to_path_buf(),
                });
            };
            match n.subtree {
                Some(s) if n.is_dir() => tree = s,
                _ => return Err(DumpError::NotAFolder { path: here }),
            }
        }
        let t = self
            .repo
            .load_tree(self.index, &tree)
            .map_err(|source| DumpError::Repo {
                path: here.clone(),
                source,
            })?;
        here.push(last);
        // `file/` and `file/.` name a folder (path components drop the `.`, which took
        // `file/.` for the file).
        let raw = path.as_os_str().as_bytes();
        let folder_asked = raw.ends_with(b"/") || raw.ends_with(b"/.");
        match t.nodes.into_iter().find(|n| n.name == last.as_bytes()) {
            Some(node) if folder_asked && !node.is_dir() => {
                Err(DumpError::NotAFolder { path: here })
            }
            Some(node) => Ok(Target::Entry {
                path: here,
                node: Box::new(node),
            }),
            None => Err(DumpError::NotFound {
                path: path.to_path_buf(),
            }),
        }
    }

    /// Writes `target` to `out`: a file's bytes when `archive` is `None` (a folder or
    /// anything but a regular file is refused then), else an archive of the target and
    /// everything below it. `out` is flushed at the end; memory stays bounded whatever the
    /// sizes (about `reads_in_flight` × 2 × `max_read`, the listings of one path from the
    /// root, and, in a zip, the archive's central directory).
    pub fn write<W: Write>(
        &self,
        target: &Target,
        archive: Option<Archive>,
        out: W,
    ) -> Result<DumpReport, DumpError> {
        match (archive, target) {
            (Some(Archive::Tar), _) => {
                let sink = tar::TarSink::new(out, hole_blob(self.repo));
                self.run(target, true, sink)
            }
            (Some(Archive::Zip), _) => self.run(target, false, zip::ZipSink::new(out)),
            (None, Target::Entry { node, .. }) if node.kind() == NodeKind::File => {
                self.run(target, false, Raw { out })
            }
            (None, Target::Root(_)) => Err(DumpError::NotAFile {
                path: PathBuf::from("/"),
                kind: "folder",
            }),
            (None, Target::Entry { path, node }) => Err(DumpError::NotAFile {
                path: path.clone(),
                kind: match node.kind() {
                    NodeKind::Dir => "folder",
                    k => k.name(),
                },
            }),
        }
    }

    fn run<S: Sink>(
        &self,
        target: &Target,
        hardlinks: bool,
        mut sink: S,
    ) -> Result<DumpReport, DumpError> {
        let mut report = DumpReport::default();
        std::thread::scope(|s| {
            let (items_tx, items_rx) = sync_channel(256);
            let (msgs_tx, msgs_rx) = sync_channel(8);
            let walker = s.spawn(move || {
                walk::Walker {
                    repo: self.repo,
                    index: self.index,
                    hardlinks,
                    out: items_tx,
                }
                .run(target)
            });
            let fetcher = s.spawn(move || fetch::Fetcher::new(self, s, msgs_tx).run(items_rx));
            let result = drain(&mut sink, msgs_rx, &mut report);
            // A failed writer dropped its receiver: the fetcher's next send fails, it drops
            // its receiver, and the walker's next send fails; both return.
            let joined = [walker.join(), fetcher.join()];
            result?;
            if joined.iter().any(Result::is_err) {
                return Err(DumpError::Internal("a dump thread panicked".into()));
            }
            sink.finish()
        })?;
        Ok(report)
    }
}

/// Feeds the writer's sink until the fetcher is done or something fails.
fn drain<S: Sink>(
    sink: &mut S,
    msgs: std::sync::mpsc::Receiver<Msg>,
    report: &mut DumpReport,
) -> Result<(), DumpError> {
    let mut expected = 0u64;
    let mut current: Option<Box<Entry>> = None;
    let mut written = 0u64;
    // The current entry was left out: its content (a file's, when its name does not fit)
    // is read all the same but not written, or it would land in the entry before.
    let mut dropping = false;
    let short = |e: &Entry, written: u64| DumpError::Entry {
        path: e.snapshot_path(),
        detail: format!("content ended after {written} of {} bytes", e.size),
    };
    for m in msgs {
        match m {
            Msg::Entry(e) => {
                if let Some(prev) = &current
                    && written != expected
                {
                    return Err(short(prev, written));
                }
                written = 0;
                expected = if e.link.is_none() && e.node.kind() == NodeKind::File {
                    e.size
                } else {
                    0
                };
                let started = sink.entry(&e)?;
                dropping = started != Started::Written;
                match started {
                    Started::Written => {
                        report.entries += 1;
                        match (&e.link, e.node.kind()) {
                            (Some(_), _) => report.hardlinks += 1,
                            (None, NodeKind::File) => report.files += 1,
                            _ => {}
                        }
                    }
                    Started::Skipped(reason) => {
                        report.skipped.push(Skipped {
                            path: e.snapshot_path(),
                            reason,
                        });
                    }
                }
                current = Some(e);
            }
            Msg::Data(d) => {
                written += d.len() as u64;
                if !dropping {
                    report.bytes += d.len() as u64;
                    sink.data(&d)?;
                }
            }
            Msg::Zeros(n) => {
                written += n;
                if !dropping {
                    report.bytes += n;
                    sink.zeros(n)?;
                }
            }
            Msg::Reads(n) => report.reads = n,
            Msg::Failed(e) => return Err(e),
        }
    }
    if let Some(prev) = &current
        && written != expected
    {
        return Err(short(prev, written));
    }
    Ok(())
}

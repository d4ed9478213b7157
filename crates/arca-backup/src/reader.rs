//! The readers: several threads take the files the walk found changed, read each front to
//! back (one large file streamed at a time, small ones side by side), cut it into chunks,
//! hash them, and queue the chunks no one has stored yet.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arca_chunker::{Chunker, KnownZeros, Next, StreamChunker};
use arca_format::{BlobKind, ContentRef, Id, Node, SnapshotSummary};
use arca_fs::DirHandle;
use arca_repo::profile::StageProfile;
use crossbeam_channel::{Receiver, Sender};

use crate::WarningKind;
use crate::assemble::{Content, DirId, Msg};
use crate::holes::HoleSkippingReader;
use crate::links::LinkKey;
use crate::pipeline::Ctx;

/// Files at least this large are streamed one at a time, so that the disk reads them in
/// order instead of seeking between several, through one buffer of twice the largest chunk;
/// smaller files fit whole in their reader's buffer.
pub(crate) const LARGE_FILE: u64 = 4 << 20;

/// Files below this size are read through their reader's own buffer, which stays this small;
/// bigger ones take one of the few medium buffers (they grow to twice the largest chunk), so
/// that many readers can wait on small files' reads without holding much memory.
pub(crate) const SMALL_FILE: u64 = 32 << 10;

/// A changed file for a reader.
pub(crate) struct FileJob {
    pub dir: DirId,
    pub slot: u32,
    pub path: PathBuf,
    pub node: Node,
    /// The parent snapshot has this entry (the file changed rather than appeared).
    pub changed: bool,
    /// A hard-linked file whose other names wait for its content.
    pub link: Option<LinkKey>,
    /// The (device, inode) of the directory the walk listed it in, when it did.
    pub folder: Option<(u64, u64)>,
    /// That directory moved while the walk looked at its entries (by path): the file is
    /// read only if its path still leads into it.
    pub strict: bool,
    /// That directory, held open: the file is opened in it by name (it is then the file
    /// listed, or one put in its place in that directory), else by its path.
    pub at: Option<Arc<DirHandle>>,
}

/// Where one reader's time went.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ReadTimes {
    pub read: Duration,
    pub chunk: Duration,
    pub hash: Duration,
    pub wait_in: Duration,
    pub wait_out: Duration,
}

impl ReadTimes {
    /// The reading, chunking and hashing stages of `threads` readers.
    pub(crate) fn stages(all: &[ReadTimes]) -> Vec<StageProfile> {
        let sum = |f: fn(&ReadTimes) -> Duration| -> f64 {
            all.iter().map(f).sum::<Duration>().as_secs_f64()
        };
        let st = |name, busy, wait_in, wait_out| StageProfile {
            name,
            threads: all.len(),
            busy,
            wait_in,
            wait_out,
        };
        vec![
            st(
                "read",
                sum(|t| t.read),
                sum(|t| t.wait_in),
                sum(|t| t.wait_out),
            ),
            st("chunk", sum(|t| t.chunk), 0.0, 0.0),
            st("hash", sum(|t| t.hash), 0.0, 0.0),
        ]
    }
}

/// A reader wrapper that adds the time spent in `read` to a counter.
struct Timed<'t, R> {
    inner: R,
    spent: &'t mut Duration,
}

impl<R: Read> Read for Timed<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let t = Instant::now();
        let r = self.inner.read(buf);
        *self.spent += t.elapsed();
        r
    }
}

impl<R: KnownZeros> KnownZeros for Timed<'_, R> {
    fn zeros_ahead(&mut self) -> u64 {
        self.inner.zeros_ahead()
    }
    fn skip_zeros(&mut self, n: u64) {
        self.inner.skip_zeros(n);
    }
}

/// A reader that knows of no zeros ahead (standard input).
pub(crate) struct Plain<R>(pub R);

impl<R: Read> Read for Plain<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R: Read> KnownZeros for Plain<R> {
    fn zeros_ahead(&mut self) -> u64 {
        0
    }
    fn skip_zeros(&mut self, _: u64) {}
}

/// One reader's state, reused from file to file.
pub(crate) struct FileReader<'c, 'a, 's> {
    ctx: &'c Ctx<'a, 's>,
    chunker: Chunker,
    buf: Vec<u8>,
    zero_ids: HashMap<usize, Id>,
    pub summary: SnapshotSummary,
    pub times: ReadTimes,
    /// Blobs (and their bytes) stored again because their pack was beyond the cap.
    pub copied: (u64, u64),
    /// Files skipped (vanished, replaced, unreadable: counted as processed by the walk), and
    /// the listed bytes to take back (of every file read too, whose read size is counted
    /// instead).
    pub skipped: (u64, u64),
    /// Reading another name of a hard-linked file ([`Self::read_other_name`]): a failure is
    /// not warned here, and the ctime to check the read against is taken at the open (taking
    /// away the first name changed it).
    other_name: bool,
}

/// Whether `path`'s folder, as its path leads now, is the directory `folder` (device, inode).
fn in_folder(path: &Path, folder: (u64, u64)) -> bool {
    path.parent()
        .and_then(|p| arca_fs::lstat(p).ok())
        .is_some_and(|m| (m.dev(), m.ino()) == folder)
}

/// Whether `file` is on a file system whose files list a size that is not their content's
/// (/proc's 0, /sys's page), which are read to their end whatever it says.
fn sizes_are_not_contents(file: &File) -> bool {
    use nix::sys::statfs as fs;
    const PSEUDO: [fs::FsType; 9] = [
        fs::PROC_SUPER_MAGIC,
        fs::SYSFS_MAGIC,
        fs::DEBUGFS_MAGIC,
        fs::TRACEFS_MAGIC,
        fs::SECURITYFS_MAGIC,
        fs::CGROUP_SUPER_MAGIC,
        fs::CGROUP2_SUPER_MAGIC,
        fs::SELINUX_MAGIC,
        fs::SMACK_MAGIC,
    ];
    fs::fstatfs(file).is_ok_and(|st| PSEUDO.contains(&st.filesystem_type()))
}

/// A reader stopped early: the saver stopped (its error is reported by the pipeline) or the
/// backup was cancelled.
pub(crate) struct Halt;

impl<'c, 'a, 's> FileReader<'c, 'a, 's> {
    pub(crate) fn new(ctx: &'c Ctx<'a, 's>) -> Self {
        Self {
            ctx,
            chunker: ctx.repo.chunker(),
            buf: Vec::new(),
            zero_ids: HashMap::new(),
            summary: SnapshotSummary::default(),
            times: ReadTimes::default(),
            copied: (0, 0),
            skipped: (0, 0),
            other_name: false,
        }
    }

    /// Takes jobs until the walk is done; sends each file's node (or `None` when it was
    /// skipped) to the assembler.
    pub(crate) fn run(mut self, jobs: Receiver<FileJob>, out: Sender<Msg>) -> Self {
        let mut mark = Instant::now();
        for job in jobs.iter() {
            self.times.wait_in += mark.elapsed();
            if self.ctx.cancelled() {
                mark = Instant::now();
                continue;
            }
            let FileJob {
                dir,
                slot,
                path,
                mut node,
                changed,
                link,
                folder,
                strict,
                at,
            } = job;
            let listed = node.size;
            // Kept for reading another name of a hard-linked file when this one fails.
            let spare = link.map(|_| node.clone());
            let within = folder.filter(|_| strict);
            let done = match self.read_file(&path, &mut node, at.as_deref(), folder, within) {
                Ok(true) => {
                    // The walk counted the size listed; what counts is what was read (a file
                    // cut or grown while read).
                    self.summary.total_bytes_processed += node.size;
                    self.skipped.1 += listed;
                    // Told once it is read (`-v`): one that cannot be read is not in the
                    // snapshot, and was listed as new.
                    let change = crate::archiver::count_name(&mut self.summary, changed);
                    self.ctx.report.file(&path, change);
                    Some(Box::new(node))
                }
                Ok(false) => {
                    self.skipped.0 += 1;
                    self.skipped.1 += listed;
                    None
                }
                // Cancelled: keep taking (and dropping) jobs until the walk stops.
                Err(Halt) if self.ctx.cancelled() => {
                    mark = Instant::now();
                    continue;
                }
                Err(Halt) => break,
            };
            let link = match (link, spare) {
                (Some(key), Some(spare)) => match &done {
                    Some(n) => Some((key, Some((n.content.clone(), n.size)))),
                    None => match self.read_other_name(key, spare) {
                        Ok(read) => Some((key, read)),
                        Err(Halt) if self.ctx.cancelled() => Some((key, None)),
                        Err(Halt) => break,
                    },
                },
                _ => None,
            };
            if let Some((key, Some(_))) = &link {
                self.ctx.links.read(*key);
            }
            let t = Instant::now();
            let sent = out.send(Msg::File {
                dir,
                slot,
                node: done,
                link,
            });
            self.times.wait_out += t.elapsed();
            if sent.is_err() {
                break;
            }
            mark = Instant::now();
        }
        self
    }

    /// The first name of a hard-linked file could not be read (deleted or renamed over since
    /// the walk listed it): reads the file by one of its other names, so that they are not
    /// lost with it. Their failures are not warned here: each such name is warned as
    /// skipped when its content is not found.
    fn read_other_name(&mut self, key: LinkKey, listed: Node) -> Result<Option<Content>, Halt> {
        while let Some(other) = self.ctx.links.next_other(key) {
            let mut node = listed.clone();
            self.other_name = true;
            let r = self.read_file(&other, &mut node, None, None, None);
            self.other_name = false;
            if r? {
                return Ok(Some((node.content, node.size)));
            }
        }
        Ok(None)
    }

    fn open(path: &Path) -> io::Result<File> {
        arca_fs::io_on_long_path(path, Self::open_short)
    }

    /// Opens with O_NONBLOCK: a file replaced by a FIFO since it was listed would block the
    /// open until a writer came (the backup hung for ever); the fstat that follows skips it.
    /// O_NONBLOCK does nothing to reads of regular files.
    fn open_short(path: &Path) -> io::Result<File> {
        let open = |flags| {
            fs::OpenOptions::new()
                .read(true)
                .custom_flags(flags | libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(path)
        };
        match open(libc::O_NOATIME) {
            // O_NOATIME is refused on files we do not own.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(0),
            r => r,
        }
    }

    /// Reads and chunks a file into `node.content`; false when it was skipped with a
    /// warning. `at`: the directory the walk listed it in, held open, to open it in by name;
    /// else it is opened by path, and `folder`, the (device, inode) of that directory, is
    /// what a file found replaced must be in to be stored; `within`: the same, which the file
    /// must be in whatever it is.
    fn read_file(
        &mut self,
        path: &Path,
        node: &mut Node,
        at: Option<&DirHandle>,
        folder: Option<(u64, u64)>,
        within: Option<(u64, u64)>,
    ) -> Result<bool, Halt> {
        let (folder, within) = match at {
            Some(_) => (None, None),
            None => (folder, within),
        };
        if let Some(h) = &self.ctx.opts.hooks.before_read {
            h(path);
        }
        let report = &self.ctx.report;
        // Why a file is skipped; not told for another name of a hard-linked file
        // ([`Self::other_name`]).
        let quiet = self.other_name;
        let skip = |kind, msg| {
            if !quiet {
                report.warn(path, kind, msg);
            }
        };
        let skip_io = |what, e: &io::Error| {
            if !quiet {
                report.warn_io(path, what, e);
            }
        };
        let opened = match at {
            Some(dir) => dir.open_noatime(&node.name),
            None => Self::open(path),
        };
        let file = match opened {
            Ok(f) => f,
            Err(e) => {
                skip_io("open", &e);
                return Ok(false);
            }
        };
        // One fstat: the entry is still the file we listed, and whether it has holes.
        let sparse = match file.metadata() {
            Ok(m)
                if m.is_file()
                    && m.ino() == node.inode
                    && within.is_none_or(|f| in_folder(path, f)) =>
            {
                if quiet {
                    node.ctime = arca_format::Timespec {
                        sec: m.ctime(),
                        nsec: u32::try_from(m.ctime_nsec()).unwrap_or(0),
                    };
                }
                m.blocks() * 512 < m.len()
            }
            // Replaced by another file since it was listed (a program saving by writing a new
            // file and renaming it over the old one): the file now there is stored, with its
            // own metadata, as restic does. Not for hard links, whose names are grouped by
            // inode; nor when the path no longer leads into the folder listed (a folder on
            // the way renamed away and replaced, by a symlink to a folder outside the tree:
            // a file from there was stored under this name without a word).
            Ok(m)
                if m.is_file()
                    && node.nlink <= 1
                    && m.nlink() == 1
                    && folder.is_none_or(|f| in_folder(path, f)) =>
            {
                let mut names = arca_fs::NameCache::new();
                let stat = arca_fs::Stat::from(&m);
                match arca_fs::read_node_at(at, path, &node.name, &stat, &mut names, None) {
                    Ok(now) => *node = now,
                    Err(e) => {
                        skip(WarningKind::Vanished, e.to_string());
                        return Ok(false);
                    }
                }
                m.blocks() * 512 < m.len()
            }
            Ok(_) => {
                let msg = format!(
                    "{}: replaced during backup, skipped",
                    arca_format::text::shown(path)
                );
                skip(WarningKind::Vanished, msg);
                return Ok(false);
            }
            Err(e) => {
                skip_io("stat", &e);
                return Ok(false);
            }
        };
        let reader = HoleSkippingReader::new(&file, node.size, sparse);
        // One large file at a time, in the one large buffer (the disk reads it in order), and
        // a few medium ones in theirs: the readers' own buffers stay the size of small files.
        let lender = if node.size >= LARGE_FILE {
            Some(&self.ctx.large)
        } else if node.size >= SMALL_FILE {
            Some(&self.ctx.medium)
        } else {
            None
        };
        let chunked = if let Some(lender) = lender {
            let mut lent = lender.take();
            std::mem::swap(&mut self.buf, &mut lent.buf);
            let r = self.chunk(path, reader);
            std::mem::swap(&mut self.buf, &mut lent.buf);
            r
        } else {
            let r = self.chunk(path, reader);
            // A file that grew while it was read may have grown the small buffer too.
            if self.buf.len() > 2 * SMALL_FILE as usize {
                self.buf = Vec::new();
            }
            r
        };
        let Some((content, total)) = chunked? else {
            return Ok(false);
        };
        if let Ok(after) = file.metadata() {
            // ctime too: a writer that puts the old mtime back (`touch -r`, `rsync -t`,
            // `cp -p`) left a mix of two versions stored without a word.
            let times = (
                (after.mtime(), after.mtime_nsec()),
                (after.ctime(), after.ctime_nsec()),
            );
            let before = (
                (node.mtime.sec, i64::from(node.mtime.nsec)),
                (node.ctime.sec, i64::from(node.ctime.nsec)),
            );
            // On a file system whose sizes are not its files' contents (/proc, /sys) neither
            // the size nor the times say anything about a change: the times are those of the
            // inode's last instantiation, new whenever the kernel dropped it between the walk's
            // lstat and this read (CI saw /sys/kernel/mm/transparent_hugepage/enabled warned
            // so). Such a file is stored as read, without a word, as restic stores it.
            // A ctime moved with the link count, mode or owner is explained by them: a file
            // renamed over this one (how editors save and logs rotate) or a link made to it
            // leaves its content as read, and was warned of with exit 3.
            let relinked = after.nlink() != node.nlink
                || after.mode() & 0o7777 != node.mode & 0o7777
                || after.uid() != node.uid
                || after.gid() != node.gid;
            let times_moved = if relinked {
                times.0 != before.0
            } else {
                times != before
            };
            let moved = after.len() != node.size || times_moved || total != node.size;
            if moved && !sizes_are_not_contents(&file) {
                let msg = format!(
                    "{}: changed while it was read; stored as read ({total} bytes)",
                    arca_format::text::shown(path)
                );
                report.warn(path, WarningKind::ChangedWhileRead, msg);
            }
        }
        node.size = total;
        node.content = content;
        Ok(true)
    }

    /// The blob id of a chunk; all-zero chunks (holes, zero-filled images) are hashed once per
    /// length.
    fn chunk_id(&mut self, chunk: &[u8]) -> Id {
        if chunk.first() == Some(&0) && arca_fs::is_zero(chunk) {
            return self.zeros_id(chunk.len());
        }
        self.ctx.repo.key().blob_id(chunk)
    }

    /// The blob id of `len` zero bytes, hashed once per length.
    fn zeros_id(&mut self, len: usize) -> Id {
        let key = self.ctx.repo.key();
        *self
            .zero_ids
            .entry(len)
            .or_insert_with(|| key.blob_id(&vec![0u8; len]))
    }

    /// Whether a block already stored must be stored again: with `--cap N`, the blocks of a
    /// segment of the read stream (all readers together, [`crate::dedup::SEGMENT`] bytes) reference at
    /// most N packs written before this backup (the first N met); a block in any other old
    /// pack is copied into this backup's packs, so restoring the new snapshot reads fewer,
    /// fuller packs (FAST'13's capping).
    fn beyond_cap(&mut self, id: &Id, len: u32) -> bool {
        let cap = self.ctx.opts.cap;
        if cap == 0 {
            return false;
        }
        let known = &self.ctx.known;
        if !known.beyond_cap(id, cap) || !known.claim_copy(id) {
            return false;
        }
        self.copied.0 += 1;
        self.copied.1 += u64::from(len);
        true
    }

    /// Chunks everything `reader` yields and queues the new blobs; `None` when reading failed
    /// (warned, naming `path`).
    pub(crate) fn chunk<R: KnownZeros>(
        &mut self,
        path: &Path,
        reader: R,
    ) -> Result<Option<(Vec<ContentRef>, u64)>, Halt> {
        let buf = std::mem::take(&mut self.buf);
        let chunker = self.chunker.clone();
        let mut read_time = Duration::ZERO;
        let timed = Timed {
            inner: reader,
            spent: &mut read_time,
        };
        let mut sc = StreamChunker::with_buffer(&chunker, timed, buf);
        let mut content = vec![];
        let mut total = 0u64;
        let ctx = self.ctx;
        let quiet = self.other_name;
        let mut cut_time = Duration::ZERO;
        let mut chunk = ctx.saver.buffer();
        let result = loop {
            if ctx.cancelled() {
                break Err(Halt);
            }
            let t = Instant::now();
            let next = sc.next_chunk_or_zeros(&mut chunk);
            cut_time += t.elapsed();
            match next {
                Ok(next @ (Next::Chunk | Next::Zeros(_))) => {
                    let t = Instant::now();
                    let (id, len) = match next {
                        // A run of a hole, passed over: its bytes are made only if the
                        // repository lacks them (below).
                        Next::Zeros(n) => (self.zeros_id(n), n as u32),
                        _ => (self.chunk_id(&chunk), chunk.len() as u32),
                    };
                    self.times.hash += t.elapsed();
                    total += u64::from(len);
                    ctx.progress.add(0, u64::from(len), u64::from(len));
                    content.push(ContentRef { id, len });
                    if ctx.opts.cap > 0 {
                        ctx.known.advance(u64::from(len));
                    }
                    let store = if ctx.known.claim(BlobKind::Data, &id) {
                        self.summary.data_blobs += 1;
                        self.summary.data_added += u64::from(len);
                        true
                    } else {
                        self.beyond_cap(&id, len)
                    };
                    if store {
                        if let Next::Zeros(n) = next {
                            chunk.resize(n, 0);
                        }
                        let data = std::mem::replace(&mut chunk, ctx.saver.buffer());
                        let t = Instant::now();
                        let sent = ctx.saver.save(BlobKind::Data, id, data);
                        self.times.wait_out += t.elapsed();
                        if sent.is_err() {
                            break Err(Halt);
                        }
                    }
                }
                Ok(Next::End) => break Ok(true),
                Err(e) => {
                    if !quiet {
                        ctx.report.warn_io(path, "read", &e);
                    }
                    break Ok(false);
                }
            }
        };
        ctx.saver.recycle(chunk);
        self.buf = sc.into_buffer();
        self.times.read += read_time;
        self.times.chunk += cut_time.saturating_sub(read_time);
        ctx.progress.add(1, 0, 0);
        Ok(result?.then_some((content, total)))
    }
}

//! Metadata read-ahead for the walk: a few threads list directories and stat their entries
//! ahead of the (ordered, single-threaded) walk, so a cold tree's inode and directory
//! blocks are read many at a time instead of one after another. Nothing they learn is used
//! directly: they only warm the kernel's caches, so the snapshot does not depend on them.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use nix::dir::Dir;
use nix::fcntl::AtFlags;
use nix::sys::stat::{SFlag, fstatat};

use crate::filter::Filter;
use crate::sources::join;

/// An open directory, shared by the jobs of its entries.
struct Handle {
    fd: OwnedFd,
}

impl Handle {
    /// Opens directory `name` relative to `at` (an absolute path with `at` = None), without
    /// following a symlink and without touching its access time where permitted, and lists it
    /// when `list` is set.
    fn open(at: Option<BorrowedFd<'_>>, name: &[u8], list: bool) -> Option<(Self, Vec<Vec<u8>>)> {
        let fd = arca_fs::open_dir_fd_noatime(at, Path::new(OsStr::from_bytes(name))).ok()?;
        let names = match list {
            // The listing reads through a descriptor of its own, closed with it.
            true => {
                let mut dir = Dir::from_fd(fd.try_clone().ok()?).ok()?;
                arca_fs::dir_entries(&mut dir).ok()?
            }
            false => vec![],
        };
        Some((Self { fd }, names.into_iter().map(|(n, _)| n).collect()))
    }

    /// Whether entry `name` is a directory on device `dev` (not following symlinks).
    fn is_dir_on(&self, name: &[u8], dev: u64) -> bool {
        fstatat(
            &self.fd,
            OsStr::from_bytes(name),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .is_ok_and(|st| {
            SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
                && st.st_dev == dev
        })
    }
}

/// Entries stat'ed per job: a directory's entries are spread over several threads.
const BATCH: usize = 16;
/// Levels below a directory the walk has reached that are read ahead: each directory is
/// then read ahead at most this many times over, once per ancestor the walk lists.
const DEPTH: u8 = 4;
/// Levels read ahead below the backed-up directories before the walk starts.
const WARM_DEPTH: u8 = 8;
/// Jobs waiting at most; more hints are dropped (the walk then reads those itself).
const CAPACITY: usize = 2048;

struct Job {
    dir: Arc<Path>,
    /// The directory, once opened.
    handle: Option<Arc<Handle>>,
    dev: u64,
    names: Vec<Vec<u8>>,
    /// Levels of subdirectories still to read ahead below this one.
    depth: u8,
}

#[derive(Default)]
struct Queue {
    /// Newest first: the walk is depth first, so the newest hints are nearest to it.
    jobs: VecDeque<Job>,
    closed: bool,
}

struct Shared {
    /// The last job's stats came from the disk.
    disk_bound: AtomicBool,
    queue: Mutex<Queue>,
    ready: Condvar,
    filter: Arc<Filter>,
}

impl Shared {
    fn push(
        &self,
        dir: Arc<Path>,
        handle: Option<Arc<Handle>>,
        dev: u64,
        names: &[Vec<u8>],
        depth: u8,
    ) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let mut pushed = 0;
        // Later batches of the directory are needed later: queued so the first comes out first.
        for chunk in names.chunks(BATCH).rev() {
            if q.jobs.len() >= CAPACITY {
                q.jobs.pop_back();
            }
            q.jobs.push_front(Job {
                dir: Arc::clone(&dir),
                handle: handle.clone(),
                dev,
                names: chunk.to_vec(),
                depth,
            });
            pushed += 1;
        }
        drop(q);
        // One waiter per job: waking them all for each would cost more than the stats.
        for _ in 0..pushed {
            self.ready.notify_one();
        }
    }

    fn next(&self) -> Option<Job> {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if q.closed {
                return None;
            }
            if let Some(j) = q.jobs.pop_front() {
                return Some(j);
            }
            q = self.ready.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Stats the job's entries; lists the subdirectories found (on the same file system, not
    /// excluded) and queues their entries in turn.
    fn run(&self, job: Job) {
        let dir = match job.handle {
            Some(h) => h,
            None => match Handle::open(None, job.dir.as_os_str().as_bytes(), false) {
                Some((h, _)) => Arc::new(h),
                None => return,
            },
        };
        let mut subdirs = vec![];
        let mut stat_time = std::time::Duration::ZERO;
        for name in &job.names {
            let path = join(&job.dir, name);
            if self.filter.excludes_path(&path) {
                continue;
            }
            let t = Instant::now();
            let is_dir = dir.is_dir_on(name, job.dev);
            stat_time += t.elapsed();
            if !is_dir || job.depth == 0 {
                continue;
            }
            if let Some((sub, mut names)) = Handle::open(Some(dir.fd.as_fd()), name, true) {
                names.sort();
                subdirs.push((path, sub, names));
            }
        }
        let avg_ns = stat_time.as_nanos() as f64 / job.names.len().max(1) as f64;
        self.disk_bound
            .store(avg_ns > crate::archiver::COLD_STAT_NS, Ordering::Relaxed);
        for (dir, sub, names) in subdirs.into_iter().rev() {
            self.push(
                Arc::from(dir),
                Some(Arc::new(sub)),
                job.dev,
                &names,
                job.depth - 1,
            );
        }
    }
}

/// The read-ahead threads; stopped when dropped.
pub(crate) struct Prefetcher {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Prefetcher {
    /// Starts `threads` threads (none when 0).
    pub(crate) fn start(threads: usize, filter: Arc<Filter>) -> Self {
        let shared = Arc::new(Shared {
            disk_bound: AtomicBool::new(true),
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            filter,
        });
        let threads = (0..threads)
            .filter_map(|i| {
                let s = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("arca-prefetch-{i}"))
                    .spawn(move || {
                        while let Some(job) = s.next() {
                            s.run(job);
                        }
                    })
                    .ok()
            })
            .collect();
        Self { shared, threads }
    }

    /// Whether the read-ahead's last stats waited for the disk.
    pub(crate) fn disk_bound(&self) -> bool {
        !self.threads.is_empty() && self.shared.disk_bound.load(Ordering::Relaxed)
    }

    /// Before the walk starts (while the repository's index and the parent's trees load),
    /// reads ahead below the backed-up directories, deeper than a hint goes, when their
    /// metadata is not cached.
    pub(crate) fn warm(&self, dirs: &[PathBuf]) {
        for dir in dirs {
            let Ok(meta) = std::fs::symlink_metadata(dir) else {
                continue;
            };
            if !meta.is_dir() || self.threads.is_empty() {
                continue;
            }
            if let Ok(mut names) = arca_fs::list_dir_names(dir) {
                names.sort();
                // Only when the metadata comes from the disk: on a warm cache reading ahead
                // only doubles the stats. A few entries' stat times tell.
                let sample = &names[..names.len().min(8)];
                let t = Instant::now();
                for n in sample {
                    let _ = std::fs::symlink_metadata(join(dir, n));
                }
                let avg = t.elapsed().as_nanos() as f64 / sample.len().max(1) as f64;
                if avg <= crate::archiver::COLD_STAT_NS {
                    continue;
                }
                let dev = std::os::unix::fs::MetadataExt::dev(&meta);
                self.shared
                    .push(Arc::from(dir.as_path()), None, dev, &names, WARM_DEPTH);
            }
        }
    }

    /// The walk has listed `dir` (on device `dev`): stat its entries ahead of it.
    pub(crate) fn hint(&self, dir: &Path, dev: u64, names: &[Vec<u8>]) {
        if !self.threads.is_empty() && !names.is_empty() {
            self.shared.push(Arc::from(dir), None, dev, names, DEPTH);
        }
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        self.shared
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .closed = true;
        self.shared.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

//! What a restore does (target, filters, overwrite policy, modes) and how hard it works (the
//! tuning knobs), with automatic defaults drawn from the cores, the memory and the backend.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use arca_backend::BackendHints;
use arca_fs::MetadataOptions;

/// What to do with a file that already exists in the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overwrite {
    /// Trust a file whose size and mtime match the snapshot; hash any other block by block
    /// and replace only the wrong blocks.
    #[default]
    IfChanged,
    /// Hash every existing file block by block, whatever its size and mtime.
    Always,
    /// Replace a file only when the snapshot's copy is newer (by mtime); otherwise leave it.
    IfNewer,
    /// Never touch an existing entry; restore only what is missing.
    Never,
}

impl std::fmt::Display for Overwrite {
    /// The option's value as `--overwrite` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Overwrite::IfChanged => "if-changed",
            Overwrite::Always => "always",
            Overwrite::IfNewer => "if-newer",
            Overwrite::Never => "never",
        })
    }
}

impl std::str::FromStr for Overwrite {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "if-changed" => Ok(Overwrite::IfChanged),
            "always" => Ok(Overwrite::Always),
            "if-newer" => Ok(Overwrite::IfNewer),
            "never" => Ok(Overwrite::Never),
            _ => Err(format!(
                "invalid overwrite mode {s:?} (if-changed, always, if-newer, never)"
            )),
        }
    }
}

impl Overwrite {
    /// The command-line spelling.
    pub fn name(self) -> &'static str {
        match self {
            Overwrite::IfChanged => "if-changed",
            Overwrite::Always => "always",
            Overwrite::IfNewer => "if-newer",
            Overwrite::Never => "never",
        }
    }
}

/// When the page-aligned middles of large blocks of new files are written with `O_DIRECT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DirectIo {
    /// When the restore writes more than the kernel lets dirty pages pile up before it
    /// throttles writers ([`dirty_allowance`]). Below that, writes into the page cache cost a
    /// copy and the disk writes them after the restore returns; above it, the restore would
    /// wait for writeback anyway, and direct writes spare the copy and the cache.
    #[default]
    Auto,
    /// For every large block of a new file.
    Always,
    /// Never: everything through the page cache.
    Never,
}

impl std::str::FromStr for DirectIo {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DirectIo::Auto),
            "always" => Ok(DirectIo::Always),
            "never" => Ok(DirectIo::Never),
            _ => Err(format!(
                "invalid direct I/O mode {s:?} (auto, always, never)"
            )),
        }
    }
}

impl DirectIo {
    /// The command-line spelling.
    pub fn name(self) -> &'static str {
        match self {
            DirectIo::Auto => "auto",
            DirectIo::Always => "always",
            DirectIo::Never => "never",
        }
    }
}

/// Bytes a writer can leave dirty in the page cache before the kernel throttles it: half way
/// between the background writeback threshold and the dirty limit (the kernel's "freerun"
/// point), from `/proc/sys/vm/dirty_*` and the memory available; a tenth of the physical
/// memory where those cannot be read.
pub fn dirty_allowance() -> u64 {
    let read = |name: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/proc/sys/vm/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
    });
    let threshold = |bytes: &str, ratio: &str| -> Option<u64> {
        match read(bytes) {
            Some(b) if b > 0 => Some(b),
            _ => Some(available? / 100 * read(ratio)?),
        }
    };
    match (
        threshold("dirty_background_bytes", "dirty_background_ratio"),
        threshold("dirty_bytes", "dirty_ratio"),
    ) {
        (Some(bg), Some(limit)) => bg / 2 + limit / 2,
        _ => physical_memory() / 10,
    }
}

/// Knobs of the restore network. Zero (or `None`) means "choose automatically".
#[derive(Debug, Clone, Default)]
pub struct Tuning {
    /// Ranged reads in flight.
    pub fetchers: usize,
    /// Threads that decrypt, decompress, verify and write.
    pub workers: usize,
    /// Bytes of block data held at once: reads in flight plus cached blocks.
    pub memory: u64,
    /// Two blob ranges of a pack closer than this are read as one range.
    pub read_gap: Option<u64>,
    /// Largest single ranged read.
    pub max_read: u64,
    /// Capacity of every channel between stages.
    pub queue: usize,
    /// Bytes of file content admitted ahead of completion (the assembly window).
    pub window: u64,
    /// Report a stall when nothing progressed for this long.
    pub stall_after: Option<Duration>,
    /// Do not reserve disk space for files before writing them.
    pub no_preallocate: bool,
    /// When large blocks go to the disk with `O_DIRECT`.
    pub direct_io: DirectIo,
    /// Bytes of pack ranges hinted to a local repository ahead of the fetchers (`None`:
    /// automatic; `Some(0)`: no hints).
    pub prefetch: Option<u64>,
}

/// The knobs with every automatic choice made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// Ranged reads in flight.
    pub fetchers: usize,
    /// Worker threads.
    pub workers: usize,
    /// Memory budget for block data.
    pub memory: u64,
    /// Gap merged into one read.
    pub read_gap: u64,
    /// Largest read.
    pub max_read: u64,
    /// Channel capacity.
    pub queue: usize,
    /// Assembly window in bytes.
    pub window: u64,
    /// Stall report threshold.
    pub stall_after: Duration,
    /// Reserve disk space before writing.
    pub preallocate: bool,
    /// Direct (`O_DIRECT`) writes of the aligned middle of large blocks of new files allowed
    /// at once; 0 writes everything through the page cache. With [`DirectIo::Auto`] the
    /// restore sets it to 0 once it knows it writes less than the [`dirty_allowance`].
    pub direct_writes: usize,
    /// Bytes of pack ranges hinted to the backend ahead of what the fetchers have read; 0
    /// gives no hints.
    pub prefetch: u64,
}

/// Total physical memory, or 4 GiB when unknown.
fn physical_memory() -> u64 {
    use nix::unistd::{SysconfVar, sysconf};
    match (
        sysconf(SysconfVar::_PHYS_PAGES),
        sysconf(SysconfVar::PAGE_SIZE),
    ) {
        (Ok(Some(p)), Ok(Some(s))) if p > 0 && s > 0 => (p as u64).saturating_mul(s as u64),
        _ => 4 << 30,
    }
}

impl Tuning {
    /// Makes every automatic choice for a backend like `hints` and packs of `pack_size`.
    pub fn resolve(&self, hints: BackendHints) -> Resolved {
        const MIB: u64 = 1 << 20;
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        let latency = hints.latency.unwrap_or(if hints.local {
            Duration::ZERO
        } else {
            Duration::from_millis(30)
        });
        // Bandwidth-delay product: what one round trip leaves unread on the link.
        let bdp = hints
            .bandwidth
            .map(|b| (b as f64 * latency.as_secs_f64()) as u64);
        let remote = !hints.local;
        let fetchers = match self.fetchers {
            // A backend that bounds its requests gets as many fetchers as it serves.
            0 if let Some(c) = hints.connections.filter(|_| remote) => c.max(1),
            0 if remote && latency >= Duration::from_millis(5) => 16,
            0 if remote => 8,
            // Local reads go through the page cache with read-ahead (LocalBackend). Medians
            // of interleaved cold restores of 1 GiB: 1.2 s with four waiting threads,
            // 1.06-1.14 s with eight; sixteen were no faster beyond the noise and hold twice
            // the read buffers.
            0 => 8,
            n => n,
        };
        // Direct writes wait for the disk on threads of their own, several per core so that
        // the disk has a queue; the workers decode on meanwhile (one more than the cores
        // covers their own waits for reads of the target and page-cache writes).
        let direct_writes = match self.direct_io {
            DirectIo::Never => 0,
            DirectIo::Auto | DirectIo::Always => 2 * cores.max(1),
        };
        let workers = match self.workers {
            0 => cores.max(1) + 1,
            n => n,
        };
        let memory = match self.memory {
            0 => (physical_memory() / 64).clamp(32 * MIB, 256 * MIB),
            n => n,
        };
        let read_gap = self.read_gap.unwrap_or(match bdp {
            Some(b) if remote => b.clamp(256 << 10, 8 * MIB),
            _ if remote => MIB,
            _ => 256 << 10,
        });
        let max_read = match self.max_read {
            // Enough to make a request's latency small next to its transfer, no more: reads in
            // flight hold memory, and the link is shared.
            0 if remote => (4 * MIB).max(read_gap * 2),
            0 => 2 * MIB,
            n => n,
        };
        let queue = match self.queue {
            0 => (2 * workers).max(2),
            n => n,
        };
        let window = match self.window {
            0 => (memory * 16).max(1 << 30),
            n => n,
        };
        // A local repository is told which ranges come next, two rounds of reads ahead of
        // the fetchers: the disk then keeps 10-30 requests queued instead of the 3-8 that the
        // kernel's read-ahead behind eight fetchers keeps on two busy cores (newest of 20
        // generations, medians of 5 interleaved cold restores: 0.655 s without hints, 0.61 s
        // with 16 MiB ahead, 0.58 s with 32 or 64 MiB). Other backends ignore the hints.
        let prefetch = match self.prefetch {
            None if remote => 0,
            None => 2 * fetchers as u64 * max_read,
            Some(n) => n,
        };
        let stall_after = self
            .stall_after
            .unwrap_or_else(|| Duration::from_secs(60).max(latency.saturating_mul(100)));
        Resolved {
            fetchers,
            workers,
            memory,
            read_gap,
            max_read,
            queue,
            window,
            stall_after,
            preallocate: !self.no_preallocate,
            direct_writes,
            prefetch,
        }
    }
}

/// What to restore and how.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Directory under which the snapshot's absolute paths are created.
    pub target: PathBuf,
    /// Restore only paths matching these patterns (and what is inside them).
    pub includes: Vec<String>,
    /// Skip paths matching these patterns (and what is inside them).
    pub excludes: Vec<String>,
    /// [`RestoreOptions::includes`] matched regardless of case (`--iinclude`).
    pub iincludes: Vec<String>,
    /// [`RestoreOptions::excludes`] matched regardless of case (`--iexclude`).
    pub iexcludes: Vec<String>,
    /// Restore only these entries (their paths in the snapshot, `/a/b`; what they hold when
    /// they are folders) and the folders leading to them, whatever bytes their names hold.
    pub only: Vec<PathBuf>,
    /// Metadata to apply.
    pub metadata: MetadataOptions,
    /// What to do with entries that exist in the target.
    pub overwrite: Overwrite,
    /// Remove entries of restored directories that the snapshot does not have.
    pub delete: bool,
    /// The backed-up paths as the trees spell them, when the caller knows them better than
    /// the snapshot's `paths` (a restore of one folder of it, `ID:FOLDER`): `--delete` acts
    /// inside them only. `None`: found from the snapshot's `paths` ([`crate::roots`]).
    pub roots: Option<Vec<PathBuf>>,
    /// Plan and report only: nothing is fetched, written or deleted.
    pub dry_run: bool,
    /// Local trees whose files (same relative path) may supply blocks, verified before use.
    pub reuse_from: Vec<PathBuf>,
    /// Re-read every restored file afterwards and check it against the snapshot.
    pub verify: bool,
    /// Folder of the markers of restores whose writes may not be on the disk yet (under the
    /// cache folder; `None`: none are kept, and files are trusted by size and mtime even after
    /// a power cut; the module `durable` says why).
    pub state_dir: Option<PathBuf>,
    /// Knobs of the network.
    pub tuning: Tuning,
    /// Set to stop the restore (Ctrl-C): every stage stops and the restore returns
    /// [`crate::RestoreError::Interrupted`].
    pub cancel: Option<Arc<AtomicBool>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_defaults_follow_the_backend() {
        let local = Tuning::default().resolve(BackendHints {
            local: true,
            ..Default::default()
        });
        assert_eq!(local.fetchers, 8);
        assert_eq!(local.read_gap, 256 << 10);
        assert!(local.memory >= 32 << 20 && local.memory <= 256 << 20);
        assert!(local.preallocate && local.direct_writes > 0);
        assert!(local.workers > 1 && local.direct_writes >= local.workers / 2);
        // Two rounds of reads hinted ahead to a local repository, none to a remote one.
        assert_eq!(local.prefetch, 2 * 8 * local.max_read);
        let remote = Tuning::default().resolve(BackendHints {
            local: false,
            latency: Some(Duration::from_millis(20)),
            bandwidth: Some(100_000_000),
            connections: None,
        });
        assert_eq!(remote.fetchers, 16);
        assert_eq!(remote.read_gap, 2_000_000);
        assert!(remote.max_read >= 2 * remote.read_gap);
        assert_eq!(remote.prefetch, 0);
        let fixed = Tuning {
            fetchers: 1,
            workers: 1,
            memory: 1,
            read_gap: Some(0),
            max_read: 1,
            queue: 1,
            window: 1,
            stall_after: Some(Duration::from_millis(5)),
            no_preallocate: true,
            direct_io: DirectIo::Never,
            prefetch: Some(0),
        }
        .resolve(BackendHints {
            local: true,
            ..Default::default()
        });
        assert_eq!(
            (
                fixed.fetchers,
                fixed.workers,
                fixed.memory,
                fixed.queue,
                fixed.direct_writes,
                fixed.prefetch
            ),
            (1, 1, 1, 1, 0, 0)
        );
        // Some room for dirty pages, and no more than the machine has.
        let allowance = dirty_allowance();
        assert!(
            allowance > 0 && allowance <= physical_memory(),
            "{allowance}"
        );
        for d in [DirectIo::Auto, DirectIo::Always, DirectIo::Never] {
            assert_eq!(d.name().parse::<DirectIo>().unwrap(), d);
        }
        assert!("sometimes".parse::<Overwrite>().is_err());
        for o in [
            Overwrite::IfChanged,
            Overwrite::Always,
            Overwrite::IfNewer,
            Overwrite::Never,
        ] {
            assert_eq!(o.name().parse::<Overwrite>().unwrap(), o);
        }
    }
}

//! `stats`: restic's four counting modes over chosen snapshots (restore size, files by
//! contents, raw data with compression figures, blobs per file), dedup ratio, and what no peer
//! prints: each snapshot's restore fragmentation (FAST'13: packs read per MiB restored, speed
//! factor, how much of those packs the snapshot uses) and its restore plan's size, made by
//! the restore planner itself.

mod walk;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use arca_backend::FileType;
use arca_format::{BlobKind, Id, Snapshot};
use arca_repo::{Index, RepoError, Repository};
use arca_restore::PlanFootprint;

/// restic's counting modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Bytes a restore writes (files; hard links once per snapshot) and entries, every
    /// snapshot counted in full.
    RestoreSize,
    /// Files with distinct contents (the same list of blobs) and their bytes, once each.
    FilesByContents,
    /// Distinct blobs (data and trees) the snapshots use: stored and plaintext bytes,
    /// compression.
    RawData,
    /// Distinct (path, blob) pairs of files with distinct contents, and their plaintext bytes.
    BlobsPerFile,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 4] = [
        Mode::RestoreSize,
        Mode::FilesByContents,
        Mode::RawData,
        Mode::BlobsPerFile,
    ];

    /// restic's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            Mode::RestoreSize => "restore-size",
            Mode::FilesByContents => "files-by-contents",
            Mode::RawData => "raw-data",
            Mode::BlobsPerFile => "blobs-per-file",
        }
    }

    /// The mode of a name.
    pub fn parse(s: &str) -> Option<Self> {
        Mode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// Stats that could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatsError {
    /// A directory listing of a snapshot could not be read.
    #[error(
        "snapshot {snapshot}: listing of {}: {detail}",
        arca_format::text::shown(path)
    )]
    Listing {
        /// Short id of the snapshot.
        snapshot: String,
        /// The folder.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// The repository failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// restic's figures for the chosen mode (JSON names as restic prints them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Snapshots counted.
    pub snapshots_count: u64,
    /// Bytes: restored (restore-size), of distinct files (files-by-contents), stored
    /// (raw-data), plaintext of distinct (path, blob) pairs (blobs-per-file).
    pub total_size: u64,
    /// Entries (restore-size: every file, folder, link and special file, as restic counts
    /// them), distinct files, or paths with content (blobs-per-file).
    pub total_file_count: u64,
    /// Distinct blobs (raw-data) or distinct (path, blob) pairs (blobs-per-file).
    pub total_blob_count: u64,
    /// raw-data: what the blobs would take stored without compression (plaintext and the
    /// sealing overhead), as restic's `total_uncompressed_size`.
    pub total_uncompressed_size: u64,
    /// raw-data: plaintext bytes of the distinct blobs.
    pub total_plaintext_size: u64,
    /// raw-data: uncompressed ÷ stored size of the compressed blobs.
    pub compression_ratio: f64,
    /// raw-data: percentage of the uncompressed size held by compressed blobs.
    pub compression_progress: f64,
    /// raw-data: percentage of the uncompressed size saved.
    pub compression_space_saving: f64,
}

/// How scattered a restore's data is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fragmentation {
    /// File bytes restored.
    pub restore_bytes: u64,
    /// Distinct packs holding the data blobs to read.
    pub packs: u64,
    /// Their sizes.
    pub pack_bytes: u64,
    /// Sealed bytes of the distinct data blobs to read.
    pub blob_bytes: u64,
}

const MIB: f64 = 1024.0 * 1024.0;

impl Fragmentation {
    /// Packs read per MiB restored (0 for an empty restore).
    pub fn packs_per_mib(&self) -> f64 {
        if self.restore_bytes == 0 {
            0.0
        } else {
            self.packs as f64 / (self.restore_bytes as f64 / MIB)
        }
    }

    /// FAST'13's speed factor: MiB restored per pack read (0 when nothing is read).
    pub fn speed_factor(&self) -> f64 {
        if self.packs == 0 {
            0.0
        } else {
            (self.restore_bytes as f64 / MIB) / self.packs as f64
        }
    }

    /// Mean container utilisation: the share of the read packs' bytes the restore uses.
    pub fn utilisation(&self) -> f64 {
        if self.pack_bytes == 0 {
            0.0
        } else {
            self.blob_bytes as f64 / self.pack_bytes as f64
        }
    }
}

/// One snapshot's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotStats {
    /// The snapshot.
    pub id: Id,
    /// Bytes a restore writes (hard links once).
    pub restore_size: u64,
    /// Entries below the root (restic's restore-size file count).
    pub entries: u64,
    /// Fragmentation of restoring it, after the planner chose among copies of blobs.
    pub fragmentation: Fragmentation,
    /// Its restore plan.
    pub plan: PlanFootprint,
}

/// Figures over the union of the chosen snapshots.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// Fragmentation of restoring every chosen snapshot: the packs holding the union of
    /// their data blobs, per MiB of their summed restore sizes.
    pub fragmentation: Fragmentation,
    /// Distinct data blobs.
    pub data_blobs: u64,
    /// Distinct tree blobs.
    pub tree_blobs: u64,
    /// Plaintext bytes of the distinct data blobs.
    pub data_plaintext: u64,
    /// Summed restore size ÷ plaintext of the distinct data blobs (how much dedup saves).
    pub dedup_ratio: f64,
    /// References to blobs the index does not have (a blob missing twice counts twice).
    pub missing_blobs: u64,
}

/// The repository as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoTotals {
    /// Pack files (listed).
    pub packs: u64,
    /// Their bytes.
    pub pack_bytes: u64,
    /// Packs in the index holding data blobs, and tree blobs.
    pub data_packs: u64,
    /// Packs in the index holding tree blobs.
    pub tree_packs: u64,
    /// Index files and their bytes.
    pub index_files: u64,
    /// Bytes of the index files.
    pub index_bytes: u64,
    /// Snapshot files.
    pub snapshot_files: u64,
    /// Bytes of the repository's files (config, keys, snapshots, index, packs; not locks).
    pub total_bytes: u64,
    /// Blob locations in the index (a blob stored twice counts twice).
    pub index_blobs: u64,
    /// Locations of data blobs.
    pub index_data_blobs: u64,
    /// Locations of tree blobs.
    pub index_tree_blobs: u64,
    /// Bytes of the in-memory index.
    pub index_memory_bytes: u64,
}

/// Counts over snapshots added one at a time.
pub struct Stats<'a> {
    repo: &'a Repository,
    index: &'a Index,
    mode: Mode,
    /// Id of an all-zero block of the largest chunk size (holes: never read by a restore).
    zero: Id,
    totals: Totals,
    /// Index positions of the distinct blobs used so far, one bit each.
    used: Vec<u64>,
    /// Packs holding distinct data blobs used so far.
    used_packs: Vec<u64>,
    selection: Selection,
    /// Raw-data sums: stored and uncompressed bytes of the compressed blobs.
    compressed: (u64, u64),
    /// Files with contents seen (files-by-contents, blobs-per-file).
    contents: HashSet<Id>,
    /// Blobs seen per path (blobs-per-file).
    path_blobs: HashMap<Vec<u8>, HashSet<Id>>,
}

impl std::fmt::Debug for Stats<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stats")
            .field("mode", &self.mode)
            .field("totals", &self.totals)
            .finish_non_exhaustive()
    }
}

fn set(bits: &mut [u64], i: usize) -> bool {
    let (w, b) = (i / 64, 1u64 << (i % 64));
    let new = bits[w] & b == 0;
    bits[w] |= b;
    new
}

impl<'a> Stats<'a> {
    /// Empty counts for `mode`.
    pub fn new(repo: &'a Repository, index: &'a Index, mode: Mode) -> Self {
        let zero = repo.hole_blob_id();
        Stats {
            repo,
            index,
            mode,
            zero,
            totals: Totals::default(),
            used: vec![0; index.len().div_ceil(64)],
            used_packs: vec![0; index.packs().len().div_ceil(64)],
            selection: Selection::default(),
            compressed: (0, 0),
            contents: HashSet::new(),
            path_blobs: HashMap::new(),
        }
    }

    /// Counts one snapshot: walks all its listings (loaded in bulk, as a restore loads
    /// them), then plans its restore.
    pub fn add(&mut self, id: Id, snapshot: &Snapshot) -> Result<SnapshotStats, StatsError> {
        let stop = AtomicBool::new(false);
        let loader = arca_repo::trees::TreeLoader::new(self.repo, self.index, &stop);
        let listings = loader.load(snapshot.tree, &|_, _, _| Some(true));
        let walked = walk::walk(self, &id, snapshot.tree, &listings)?;
        self.totals.snapshots_count += 1;
        let plan = arca_restore::plan_footprint(self.repo, self.index, listings, snapshot.tree);
        self.selection.fragmentation.restore_bytes += plan.file_bytes;
        Ok(SnapshotStats {
            id,
            restore_size: walked.restore_size,
            entries: walked.entries,
            fragmentation: Fragmentation {
                restore_bytes: plan.file_bytes,
                packs: plan.packs,
                pack_bytes: plan.pack_bytes,
                blob_bytes: plan.fetch_bytes,
            },
            plan,
        })
    }

    /// restic's figures so far.
    pub fn totals(&self) -> Totals {
        let mut t = self.totals.clone();
        if self.mode == Mode::RawData {
            let (stored, uncompressed) = self.compressed;
            if stored > 0 {
                t.compression_ratio = uncompressed as f64 / stored as f64;
            }
            if t.total_uncompressed_size > 0 {
                let u = t.total_uncompressed_size as f64;
                t.compression_progress = uncompressed as f64 / u * 100.0;
                t.compression_space_saving = (1.0 - t.total_size as f64 / u) * 100.0;
            }
        } else {
            t.total_uncompressed_size = 0;
            t.total_plaintext_size = 0;
            if self.mode != Mode::BlobsPerFile {
                t.total_blob_count = 0;
            }
        }
        t
    }

    /// Figures over the union of the snapshots so far.
    pub fn selection(&self) -> Selection {
        let mut s = self.selection.clone();
        if s.data_plaintext > 0 {
            s.dedup_ratio = s.fragmentation.restore_bytes as f64 / s.data_plaintext as f64;
        }
        s
    }

    /// Marks a blob as used; counts it the first time.
    fn use_blob(&mut self, kind: BlobKind, id: &Id) {
        let Some((pos, loc)) = self.index.positions(kind, id).next() else {
            if !(kind == BlobKind::Data && *id == self.zero) {
                self.selection.missing_blobs += 1;
            }
            return;
        };
        if !set(&mut self.used, pos) {
            return;
        }
        let (length, raw) = (u64::from(loc.length), u64::from(loc.raw_length));
        let uncompressed = raw + arca_repo::blob::BLOB_OVERHEAD as u64;
        let t = &mut self.totals;
        if self.mode == Mode::RawData {
            t.total_blob_count += 1;
            t.total_size += length;
        }
        t.total_uncompressed_size += uncompressed;
        t.total_plaintext_size += raw;
        if length < uncompressed {
            self.compressed.0 += length;
            self.compressed.1 += uncompressed;
        }
        match kind {
            BlobKind::Tree => self.selection.tree_blobs += 1,
            BlobKind::Data => {
                self.selection.data_blobs += 1;
                self.selection.data_plaintext += raw;
                if *id != self.zero {
                    let f = &mut self.selection.fragmentation;
                    f.blob_bytes += length;
                    if set(&mut self.used_packs, loc.pack_index as usize) {
                        f.packs += 1;
                        f.pack_bytes += loc.pack.size;
                    }
                }
            }
        }
    }
}

/// Sizes of the repository's files and of its index.
pub fn repository(repo: &Repository, index: &Index) -> Result<RepoTotals, StatsError> {
    let mut r = RepoTotals {
        index_blobs: index.len() as u64,
        index_memory_bytes: index.memory_bytes() as u64,
        ..RepoTotals::default()
    };
    for t in FileType::ALL.into_iter().filter(|&t| t != FileType::Lock) {
        let files = repo.backend().list(t).map_err(RepoError::from)?;
        let bytes: u64 = files.iter().map(|f| f.size).sum();
        r.total_bytes += bytes;
        match t {
            FileType::Pack => (r.packs, r.pack_bytes) = (files.len() as u64, bytes),
            FileType::Index => (r.index_files, r.index_bytes) = (files.len() as u64, bytes),
            FileType::Snapshot => r.snapshot_files = files.len() as u64,
            _ => {}
        }
    }
    for p in index.packs() {
        match p.kind {
            BlobKind::Data => r.data_packs += 1,
            BlobKind::Tree => r.tree_packs += 1,
        }
    }
    for pos in 0..index.len() {
        match index.at(pos).map(|(_, loc)| loc.pack.kind) {
            Some(BlobKind::Data) => r.index_data_blobs += 1,
            Some(BlobKind::Tree) => r.index_tree_blobs += 1,
            None => {}
        }
    }
    Ok(r)
}

//! What `check` is asked to do and what it hands back: its options, the report, the damaged
//! packs and snapshots it names, and the repair commands it proposes.

use std::path::PathBuf;

use arca_format::Id;

/// What to check.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    /// Read, decrypt and verify every blob of every pack.
    pub read_data: bool,
    /// Threads reading packs (0 = one per core).
    pub workers: usize,
}

/// A command that repairs a kind of problem `check` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Repair {
    /// `arca repair index`: damaged index files, indexed packs that are missing, packs no
    /// index names, intact packs whose header does not match their index entries (with
    /// `--read-all-packs`).
    Index,
    /// `arca repair packs ID...`: packs whose bytes are damaged (a damaged header or blob,
    /// cut short): the blobs that verify are copied into new packs, the rest leave the index.
    Packs,
    /// `arca repair snapshots --forget`: snapshots that reference lost trees or blobs, and
    /// snapshot files that are damaged.
    Snapshots,
    /// `arca prune`: data no snapshot uses.
    Prune,
}

impl Repair {
    /// The command to run (without the arguments a [`Proposal`] adds).
    pub fn command(self) -> &'static str {
        match self {
            Repair::Index => "arca repair index",
            Repair::Packs => "arca repair packs",
            Repair::Snapshots => "arca repair snapshots --forget",
            Repair::Prune => "arca prune",
        }
    }
}

/// A repair `check` proposes, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// What to run.
    pub repair: Repair,
    /// Its arguments (the packs for [`Repair::Packs`]).
    pub args: Vec<String>,
    /// What it repairs.
    pub reason: String,
}

impl Proposal {
    /// The whole command line to run.
    pub fn command_line(&self) -> String {
        std::iter::once(self.repair.command())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A pack with problems.
#[derive(Debug, Clone)]
pub struct DamagedPack {
    /// Pack id.
    pub id: Id,
    /// What is wrong with it.
    pub problems: Vec<String>,
    /// Blobs that cannot be read from it.
    pub bad_blobs: Vec<Id>,
}

/// A snapshot whose content is damaged.
#[derive(Debug, Clone)]
pub struct Affected {
    /// Snapshot id.
    pub snapshot: Id,
    /// Paths in the snapshot that cannot be restored intact.
    pub paths: Vec<PathBuf>,
}

/// The result of a check.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// Errors: damage or inconsistencies.
    pub errors: Vec<String>,
    /// Notes that are not damage (e.g. packs no index names yet).
    pub notes: Vec<String>,
    /// Snapshots checked.
    pub snapshots: usize,
    /// Distinct trees checked.
    pub trees: usize,
    /// Packs checked.
    pub packs: usize,
    /// Blobs verified by reading (with `read_data`).
    pub blobs_read: u64,
    /// Bytes read from packs (with `read_data`).
    pub bytes_read: u64,
    /// Damaged or missing packs.
    pub damaged_packs: Vec<DamagedPack>,
    /// Snapshots and paths hit by damage.
    pub affected: Vec<Affected>,
    /// Packs read in full (with `read_data` or a [`DataSubset`](super::DataSubset)).
    pub packs_read: usize,
    /// The repairs to run, in order (at most one of each kind).
    pub repairs: Vec<Proposal>,
}

impl CheckReport {
    /// Whether no damage was found.
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

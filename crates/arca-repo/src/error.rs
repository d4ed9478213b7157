//! Errors of repository operations. Each variant names the file, blob or value involved so
//! that the message alone tells the user what failed.
//!
//! Policy: library functions return [`RepoError`]; nothing here panics on bad input or I/O.

use arca_backend::{BackendError, ErrorKind, FileType};
use arca_crypto::CryptoError;
use arca_format::{BlobKind, FormatError, Id};

/// A repository operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RepoError {
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// Nothing exists at the repository location.
    #[error("repository {location} does not exist{why}")]
    NoRepository {
        /// Where we looked.
        location: String,
        /// Empty, or `: ` and what a remote backend said of it (a missing S3 bucket).
        why: String,
    },
    /// Something exists but it is not an arca repository.
    #[error("{location} is not an arca repository (no config file)")]
    NotARepository {
        /// Where we looked.
        location: String,
    },
    /// A config file is there, but not arca's (another tool's repository, such as restic's).
    #[error(
        "{location} is not an arca repository: its config file is not arca's (another tool's \
         repository, such as restic's?)"
    )]
    ForeignRepository {
        /// Where we looked.
        location: String,
    },
    /// Another process holds a lock that conflicts with the one asked for.
    #[error("repository {location} is locked {holder}")]
    Locked {
        /// Repository.
        location: String,
        /// Who holds the conflicting lock and since when, and what to do.
        holder: String,
    },
    /// A lock this process holds could not be refreshed for so long that others may take it
    /// for stale: the command stopped before committing anything.
    #[error(
        "the lock on repository {location} could not be refreshed for {minutes} minutes: other \
         processes may already take it for stale (a prune could remove data this command \
         needs), so nothing more was committed; run the command again"
    )]
    LockLost {
        /// Repository.
        location: String,
        /// Minutes since the lock was last written.
        minutes: i64,
    },
    /// A lock this process holds was removed by another process, which took it for stale
    /// (this one was stopped, or its clock runs behind theirs): the command stopped before
    /// committing anything more.
    #[error(
        "the lock on repository {location} was removed by another process (`arca unlock \
         --remove-all`, or one that took it for stale: this process was stopped for a while, \
         or the clocks of the machines differ): a prune may have removed data this command \
         needs, so nothing more was committed; run the command again"
    )]
    LockRemoved {
        /// Repository.
        location: String,
    },
    /// A lock this process held was released as the process is about to end (on a signal):
    /// the command stopped before committing anything more.
    #[error(
        "the lock on repository {location} was released, as the command is being stopped: \
         nothing more was committed"
    )]
    LockReleased {
        /// Repository.
        location: String,
    },
    /// A lock was found lost once a snapshot or index file was written under it, and the
    /// file could not be removed again: it is still in the repository.
    #[error(
        "{lost}, seen only once {file} was written; removing it again failed ({removal}): it is \
         still there and {advice}, then run the command again"
    )]
    CommitLeft {
        /// How the lock was lost (without "nothing more was committed").
        lost: String,
        /// "snapshot ID" or "index file ID".
        file: String,
        /// Why it could not be removed.
        #[source]
        removal: Box<BackendError>,
        /// What the file may harm, and what to do.
        advice: String,
    },
    /// A snapshot just written did not read back, and removing it again failed: it is still
    /// in the repository.
    #[error(
        "snapshot {id} did not read back once written ({read}); removing it again failed \
         ({removal}): it is still there, perhaps damaged: remove it with `arca forget {id}`, \
         then run the command again"
    )]
    SnapshotLeft {
        /// The snapshot.
        id: Id,
        /// Why it did not read back.
        read: Box<RepoError>,
        /// Why it could not be removed.
        #[source]
        removal: Box<BackendError>,
    },
    /// No key file opens with the given password.
    #[error("wrong password or no key found for repository {location}{skipped}")]
    WrongPassword {
        /// Repository.
        location: String,
        /// Empty, or a note naming the key files skipped because they cannot be decoded.
        skipped: String,
    },
    /// No key file the password was tried on opens with it, and others could not be tried:
    /// their derivation needs more memory than could be had. Not known to be a wrong password.
    #[error(
        "wrong password for the {tried} key file{s} tried of repository {location}; {untried}{skipped}",
        s = if *tried == 1 { "" } else { "s" }
    )]
    KeysNotTried {
        /// Repository.
        location: String,
        /// Key files the password was tried on.
        tried: usize,
        /// The key files not tried, and what they need.
        untried: String,
        /// Empty, or a note naming the key files skipped because they cannot be decoded.
        skipped: String,
    },
    /// No key file can be used by this build (none decodes, or all ask for parameters it
    /// refuses), so the password could not be tried: not a wrong password.
    #[error(
        "no key file of repository {location} can be read by this arca, so the password was not \
         tried: {reasons}{advice}"
    )]
    UnusableKeys {
        /// Repository.
        location: String,
        /// Each key file (the first few) and why it cannot be used.
        reasons: String,
        /// What to do.
        advice: &'static str,
    },
    /// No key file opens with the given password, and some key files are damaged.
    #[error(
        "no key of repository {location} opens with this password, and key file {files} is \
         damaged (content does not match its id): if it held this password's key, open the \
         repository with another key's password or put back a copy of that file"
    )]
    DamagedKey {
        /// Repository.
        location: String,
        /// The damaged key files' names.
        files: String,
    },
    /// The password opened a key, but the config file does not open with it, nor with any
    /// other key.
    #[error(
        "{location}/config is damaged: key {key}, which this password opens, cannot open it \
         ({detail}); put back a copy of that file (unless the key file was copied in from \
         another repository)"
    )]
    DamagedConfig {
        /// Repository.
        location: String,
        /// The key file the password opened.
        key: String,
        /// Why the config did not open.
        detail: String,
    },
    /// A repository file did not decode.
    #[error("{file}: {source}")]
    Format {
        /// File or object that was being decoded.
        file: String,
        /// What was wrong.
        source: FormatError,
    },
    /// Decryption or key derivation failed.
    #[error("{file}: {source}")]
    Crypto {
        /// File or object involved.
        file: String,
        /// What failed.
        source: CryptoError,
    },
    /// A file's content does not hash to its name.
    #[error("{file}: content does not match its id (corrupted)")]
    IdMismatch {
        /// The file.
        file: String,
    },
    /// Decompression failed.
    #[error("{file}: decompression failed: {detail}")]
    Decompress {
        /// File or blob.
        file: String,
        /// Why.
        detail: String,
    },
    /// A blob is not in the index.
    #[error("{kind} blob {id} is not in the index")]
    BlobNotFound {
        /// Kind looked for.
        kind: BlobKind,
        /// Blob id.
        id: Id,
    },
    /// A blob was read but is damaged.
    #[error("{kind} blob {id} in pack {pack} is damaged: {detail}")]
    BlobCorrupt {
        /// Kind of the blob.
        kind: BlobKind,
        /// Blob id.
        id: Id,
        /// Pack holding it.
        pack: Id,
        /// What is wrong.
        detail: String,
    },
    /// No snapshot matches a name.
    #[error("no snapshot matches {0:?}")]
    NoSuchSnapshot(String),
    /// A snapshot and a folder in it (`ID:FOLDER`), given to a command that takes snapshots.
    #[error(
        "{spec:?} names a folder in a snapshot (ID:FOLDER), which this command does not take: \
         give the snapshot alone ({snapshot:?})"
    )]
    SnapshotWithFolder {
        /// What was given.
        spec: String,
        /// The snapshot part of it.
        snapshot: String,
    },
    /// A long operation (check) was stopped on request before it finished.
    #[error("{0} cancelled before it finished")]
    Cancelled(&'static str),
    /// No snapshot passes the filters `latest` was asked with.
    #[error("no snapshot matches {spec:?} with {filter}")]
    NoSnapshotPasses {
        /// What was asked for.
        spec: String,
        /// The filter's options.
        filter: String,
    },
    /// Several snapshots match an id prefix.
    #[error("snapshot prefix {prefix:?} is ambiguous: {count} snapshots match")]
    AmbiguousSnapshot {
        /// The prefix.
        prefix: String,
        /// How many matched.
        count: usize,
    },
    /// A key operation that would lock the user out.
    #[error("{0}")]
    KeyRefused(String),
    /// An operation refused to start, before it changed anything: the text names what is in
    /// the way, why, and what to do about it.
    #[error("{0}")]
    Refused(String),
    /// A parameter is out of range.
    #[error("invalid {what}: {detail}")]
    Invalid {
        /// Which parameter.
        what: &'static str,
        /// Why.
        detail: String,
    },
}

impl RepoError {
    /// Wraps a format error with the file it came from.
    pub fn format(file: impl Into<String>, source: FormatError) -> Self {
        RepoError::Format {
            file: file.into(),
            source,
        }
    }
    /// Wraps a crypto error with the file it came from.
    pub fn crypto(file: impl Into<String>, source: CryptoError) -> Self {
        RepoError::Crypto {
            file: file.into(),
            source,
        }
    }
    /// What went wrong, without the file or object the message starts with (for callers
    /// that name it themselves).
    pub fn cause(&self) -> String {
        match self {
            RepoError::Format { source, .. } => source.to_string(),
            RepoError::Crypto { source, .. } => source.to_string(),
            RepoError::IdMismatch { .. } => "content does not match its id (corrupted)".into(),
            RepoError::Decompress { detail, .. } => format!("decompression failed: {detail}"),
            RepoError::BlobCorrupt {
                kind, id, detail, ..
            } => format!("{kind} blob {id} is damaged: {detail}"),
            other => other.to_string(),
        }
    }
    /// As [`Self::cause`], and without the blob either (for callers that name the blob and
    /// its pack themselves).
    pub fn blob_cause(&self) -> String {
        match self {
            RepoError::BlobCorrupt { detail, .. } => format!("damaged: {detail}"),
            RepoError::BlobNotFound { .. } => "not in the index".into(),
            other => other.cause(),
        }
    }
    /// [`RepoError::CommitLeft`]: `lost` (a lock error) came once file `id` of type `t` was
    /// written, and removing it failed with `removal`.
    pub fn commit_left(lost: &RepoError, t: FileType, id: &Id, removal: BackendError) -> Self {
        let lost = match lost {
            RepoError::LockLost { location, minutes } => format!(
                "the lock on repository {location} could not be refreshed for {minutes} \
                 minutes (other processes may already take it for stale)"
            ),
            RepoError::LockRemoved { location } => format!(
                "the lock on repository {location} was removed by another process, which took \
                 it for stale (this process was stopped for a while, or the clocks of the \
                 machines differ)"
            ),
            RepoError::LockReleased { location } => format!(
                "the lock on repository {location} was released, as the command is being \
                 stopped"
            ),
            other => other.to_string(),
        };
        let (file, advice) = match t {
            FileType::Snapshot => (
                format!("snapshot {id}"),
                format!("may reference data a prune removed: remove it with `arca forget {id}`"),
            ),
            _ => (
                format!("{t} file {id}"),
                "may name packs a prune removed, which a backup would take for stored: run \
                 `arca repair index` before the next backup"
                    .to_string(),
            ),
        };
        RepoError::CommitLeft {
            lost,
            file,
            removal: Box::new(removal),
            advice,
        }
    }
    /// Whether the disk holding the repository is full.
    pub fn is_no_space(&self) -> bool {
        matches!(self, RepoError::Backend(e) if e.kind == ErrorKind::NoSpace)
    }
    /// Whether the error means a file was made by a newer arca (a format version, code or
    /// flag this build does not know): it is refused, but it is not damage, and no repair
    /// may delete or rewrite it.
    pub fn is_newer_format(&self) -> bool {
        matches!(self, RepoError::Format { source, .. } if source.is_newer())
    }
    /// Whether the error means data in the repository is damaged (as opposed to the
    /// repository being unreachable, or a file made by a newer arca: see
    /// [`Self::is_newer_format`]).
    pub fn is_corruption(&self) -> bool {
        if self.is_newer_format() {
            return false;
        }
        matches!(
            self,
            RepoError::Format { .. }
                | RepoError::IdMismatch { .. }
                | RepoError::Decompress { .. }
                | RepoError::BlobCorrupt { .. }
                | RepoError::Crypto {
                    source: CryptoError::Auth { .. } | CryptoError::Truncated { .. },
                    ..
                }
        ) || matches!(self, RepoError::Backend(e) if e.kind == ErrorKind::ShortRead)
    }
    /// Whether the file cannot be used by this build, damaged or made by a newer arca: what
    /// listings leave out (with a warning) instead of failing.
    pub fn is_unusable(&self) -> bool {
        self.is_corruption() || self.is_newer_format()
    }
}

/// Result of repository operations.
pub type Result<T, E = RepoError> = std::result::Result<T, E>;

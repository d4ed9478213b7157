//! arca's repository format: every structure that is written to a repository, with its
//! byte-exact encoding and decoding. docs/FORMAT.md describes the same layouts in prose.
//!
//! This crate does no I/O and no cryptography: it turns structures into plaintext bytes and
//! back, checking magic, version and bounds so that corrupt input is an error, never a panic.

pub mod codec;
pub mod config;
pub mod envelope;
pub mod id;
pub mod index;
pub mod key;
pub mod lock;
pub mod pack;
pub mod snapshot;
pub mod text;
pub mod tree;

pub use config::{ChunkerParams, Cipher, Config};
pub use envelope::{EnvelopeHeader, EnvelopeKind};
pub use id::Id;
pub use index::{IndexFile, IndexPack};
pub use key::{KdfParams, KeyFile};
pub use lock::LockInfo;
pub use pack::{PackEntry, PackHeader, PackTrailer};
pub use snapshot::{Snapshot, SnapshotSummary};
pub use tree::{ContentRef, Node, NodeKind, NodeRef, Timespec, Tree, Xattrs};

/// The kind of a blob. Data and tree blobs never share a pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BlobKind {
    /// A chunk of file content.
    Data,
    /// One encoded directory listing ([`Tree`]).
    Tree,
}

impl BlobKind {
    /// The on-disk code: 0 data, 1 tree.
    pub fn code(self) -> u8 {
        match self {
            BlobKind::Data => 0,
            BlobKind::Tree => 1,
        }
    }
    /// Parses the on-disk code.
    pub fn from_code(c: u8) -> Result<Self, FormatError> {
        match c {
            0 => Ok(BlobKind::Data),
            1 => Ok(BlobKind::Tree),
            _ => Err(FormatError::Newer {
                what: "blob list",
                detail: format!("unknown blob kind {c}"),
            }),
        }
    }
    /// "data" or "tree".
    pub fn name(self) -> &'static str {
        match self {
            BlobKind::Data => "data",
            BlobKind::Tree => "tree",
        }
    }
}

impl std::fmt::Display for BlobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why bytes could not be decoded as a repository structure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The input ended before the structure did.
    #[error("{what} is truncated: needed {wanted} bytes at offset {offset}")]
    Truncated {
        /// Structure being decoded.
        what: &'static str,
        /// Offset of the failed read.
        offset: u64,
        /// Bytes the read needed.
        wanted: u64,
    },
    /// The structure does not start with its magic.
    #[error("{what} has bad magic {found:02x?} (expected {expected:02x?})")]
    BadMagic {
        /// Structure being decoded.
        what: &'static str,
        /// Expected magic.
        expected: [u8; 4],
        /// Bytes found instead.
        found: [u8; 4],
    },
    /// A version above the ones this build knows: the structure was made by a newer arca
    /// (see [`FormatError::is_newer`]). Version 0 is never written and is [`FormatError::Corrupt`].
    #[error("{what} was made by a newer arca (format version {version}): upgrade arca to read it")]
    UnsupportedVersion {
        /// Structure being decoded.
        what: &'static str,
        /// Version found.
        version: u16,
    },
    /// A code or flag this build does not know in an otherwise valid (authenticated)
    /// structure: a newer arca wrote it (see [`FormatError::is_newer`]).
    #[error("{what} was made by a newer arca ({detail}): upgrade arca to read it")]
    Newer {
        /// Structure being decoded.
        what: &'static str,
        /// The unknown code or flag, e.g. `unknown node kind 8`.
        detail: String,
    },
    /// The bytes are structurally invalid.
    #[error("{what} is corrupt: {detail}")]
    Corrupt {
        /// Structure being decoded.
        what: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A value is too large for its on-disk field.
    #[error("{what} {value} is too large for the repository format")]
    TooLarge {
        /// Field.
        what: &'static str,
        /// Value that did not fit.
        value: u64,
    },
    /// A JSON structure (snapshot) did not parse.
    #[error("{what} is corrupt: {source}")]
    Json {
        /// Structure being decoded.
        what: &'static str,
        /// Parser error.
        source: serde_json::Error,
    },
}

impl FormatError {
    /// Whether the structure was made by a newer arca (a version above the ones this build
    /// knows, or a code or flag it does not know) rather than damaged: a reader refuses it,
    /// and nothing may repair (delete or rewrite) it.
    pub fn is_newer(&self) -> bool {
        matches!(
            self,
            FormatError::UnsupportedVersion { .. } | FormatError::Newer { .. }
        )
    }
}

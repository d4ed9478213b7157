//! An arca repository on any [`Backend`]: creating and opening it, its keys, sealed
//! repository files, blobs, packs, the in-memory index and snapshots.
//!
//! Write order makes crashes harmless: packs, then the index files naming them, then the
//! snapshot naming the trees. Every file is written atomically by the backend.

pub mod alloc;
pub mod blob;
pub mod cache;
pub mod carve;
mod error;
pub mod host;
pub mod index;
pub mod lock;
pub mod pack;
mod par;
pub mod profile;
pub mod recover;
mod remove;
mod repository;
mod snapshots;
#[cfg(test)]
mod testing;
pub mod trees;

pub use cache::CacheMode;
pub use error::{RepoError, Result};
pub use index::{BlobLocation, Index, IndexBuilder, PackRef};
pub use lock::{Lock, LockKind, release_held};
pub use repository::{InitOptions, KeyInfo, KeyOwner, Repository};
pub use snapshots::{SnapshotFilter, damaged_snapshot_message, split_tags};

pub use arca_backend::Backend;
pub use arca_crypto::preferred_cipher;

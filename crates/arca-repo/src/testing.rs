//! Unit-test helpers: a repository with a cheap key derivation and small chunks.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use arca_backend::Backend;
use arca_format::{ChunkerParams, KdfParams};

use crate::{InitOptions, Repository};

/// A new repository on `backend`, password `pw`, 64 KiB Argon2, 16 KiB average chunks.
pub(crate) fn repo(backend: Arc<dyn Backend>) -> Repository {
    Repository::init(backend, b"pw", &options()).unwrap()
}

/// The options [`repo`] creates its repository with.
pub(crate) fn options() -> InitOptions {
    InitOptions {
        kdf: KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        },
        chunker: ChunkerParams {
            min: 4096,
            avg: 16384,
            max: 65536,
        },
        ..InitOptions::default()
    }
}

//! The [`Repository`] handle: init, open, keys, sealed files, blob and tree reads.

mod files;
mod keys;
mod open;

pub use keys::{KeyInfo, KeyOwner};

use std::sync::Arc;

use arca_backend::{Backend, FileType};
use arca_chunker::Chunker;
use arca_crypto::{MasterKey, Sealer};
use arca_format::config::ContentKeys;
use arca_format::envelope::EnvelopeKind;
use arca_format::{BlobKind, ChunkerParams, Cipher, Config, Id, KdfParams, Tree};

use crate::blob::open_blob;
use crate::index::Index;
use crate::{RepoError, Result, host};

/// Parameters fixed when a repository is created.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// Chunk sizes.
    pub chunker: ChunkerParams,
    /// Default zstd level (0 = off).
    pub compression: i32,
    /// Target pack size in bytes.
    pub pack_size: u32,
    /// Password hashing cost of the first key.
    pub kdf: KdfParams,
    /// The cipher sealing everything but the config and key files.
    pub cipher: Cipher,
}

impl Default for InitOptions {
    fn default() -> Self {
        Self {
            chunker: ChunkerParams::default(),
            compression: 3,
            pack_size: 16 << 20,
            kdf: KdfParams::default(),
            cipher: arca_crypto::preferred_cipher(),
        }
    }
}

/// An open repository (cloning shares the backend and copies the keys).
#[derive(Clone)]
pub struct Repository {
    backend: Arc<dyn Backend>,
    key: MasterKey,
    sealer: Sealer,
    config: Config,
    key_id: Id,
    /// The key file that opened it was found under a name that is not its content's hash
    /// (renamed), as opposed to damaged since.
    key_misnamed: bool,
    /// The version of the config body as stored (a version 2 body without keys reads as
    /// [`Config::version`] 1).
    config_version: u16,
}

impl std::fmt::Debug for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Repository({})", self.backend.location())
    }
}

fn file_id(bytes: &[u8]) -> Id {
    Id(*blake3::hash(bytes).as_bytes())
}

impl Repository {
    /// Creates a repository with one key protected by `password`.
    pub fn init(backend: Arc<dyn Backend>, password: &[u8], opts: &InitOptions) -> Result<Self> {
        Self::init_with_content_keys(backend, password, opts, None)
    }

    /// Creates a repository as [`Repository::init`] does; with `content_keys` (another
    /// repository's blob-id and chunker keys, see `init --copy-chunker-params`) the config
    /// keeps them (config version 2) and the repository identifies and chunks data with them.
    pub fn init_with_content_keys(
        backend: Arc<dyn Backend>,
        password: &[u8],
        opts: &InitOptions,
        content_keys: Option<ContentKeys>,
    ) -> Result<Self> {
        opts.chunker
            .validate()
            .map_err(|detail| RepoError::Invalid {
                what: "chunker parameters",
                detail,
            })?;
        let mut repo_id = [0u8; 32];
        arca_crypto::random_bytes(&mut repo_id).map_err(|e| RepoError::crypto("init", e))?;
        let config = Config {
            repo_id,
            chunker: opts.chunker,
            compression: opts.compression,
            pack_size: opts.pack_size,
            created_ns: host::now_ns(),
            content_keys,
            cipher: opts.cipher,
        };
        config.validate().map_err(|detail| RepoError::Invalid {
            what: "configuration",
            detail,
        })?;
        backend.create()?;
        let key = with_config_keys(
            MasterKey::generate().map_err(|e| RepoError::crypto("init", e))?,
            &config,
        );
        let sealer = key.sealer(config.cipher);
        let mut repo = Self {
            backend,
            key,
            sealer,
            config: config.clone(),
            key_id: Id::default(),
            key_misnamed: false,
            config_version: config.version(),
        };
        repo.key_id = repo.write_key(password, opts.kdf, &KeyOwner::default())?;
        // The config is written last: its presence marks a complete repository.
        let bytes = repo.seal_file(EnvelopeKind::Config, &config.encode(), false)?;
        if let Err(e) = repo.backend.write(FileType::Config, "config", &bytes) {
            if e.kind == arca_backend::ErrorKind::AlreadyExists {
                // Another init got there first: our key opens nothing of its repository.
                let _ = repo.backend.delete(FileType::Key, &repo.key_id.to_hex());
                return Err(arca_backend::BackendError::new(
                    "create repository",
                    repo.backend.location(),
                    arca_backend::ErrorKind::AlreadyExists,
                    "a repository was created here meanwhile (by another init)".into(),
                )
                .into());
            }
            // A full disk (SFTP says it "Failure", of kind Other): our key, left alone, made
            // the next init refuse the folder for a minute as another init's, the disk freed
            // or not. Any other failure is left as an interrupted init leaves it: a write that
            // timed out may still land on a remote, and a config without its key would open
            // with no password.
            if matches!(
                e.kind,
                arca_backend::ErrorKind::NoSpace | arca_backend::ErrorKind::Other
            ) && repo
                .backend
                .stat(FileType::Config, "config")
                .is_err_and(|e| e.is_not_found())
            {
                let _ = repo.backend.delete(FileType::Key, &repo.key_id.to_hex());
            }
            return Err(e.into());
        }
        // A racing init may have taken our key for an interrupted init's leftover and removed
        // it before our config was written: written again, the repository opens.
        if repo
            .backend
            .stat(FileType::Key, &repo.key_id.to_hex())
            .is_err_and(|e| e.is_not_found())
        {
            repo.key_id = repo.write_key(password, opts.kdf, &KeyOwner::default())?;
        }
        Ok(repo)
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }
    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// The master key (ids and chunker key).
    pub fn key(&self) -> &MasterKey {
        &self.key
    }
    /// The id of an all-zero blob of the chunker's largest size: how a sparse file's holes
    /// are stored (restore leaves them as holes, dump and mount count them as such).
    pub fn hole_blob_id(&self) -> Id {
        self.key
            .blob_id(&vec![0u8; self.config.chunker.max as usize])
    }
    /// The sealing cipher.
    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }
    /// Id of the key file that opened the repository.
    pub fn key_id(&self) -> Id {
        self.key_id
    }

    /// The version of the config body as stored (`cat config`), which may differ from the
    /// one [`Config::version`] would write (a version 2 body without content keys).
    pub fn config_version(&self) -> u16 {
        self.config_version
    }

    /// Whether the key file that opened the repository was, when read, intact under a name
    /// that is not its hash (a renamed file).
    pub fn key_misnamed(&self) -> bool {
        self.key_misnamed
    }

    /// A chunker keyed for this repository.
    pub fn chunker(&self) -> Chunker {
        Chunker::new(self.key.chunker_key(), self.config.chunker)
    }

    /// Reads and verifies one blob, from the first of its copies that can be had.
    pub fn read_blob(&self, index: &Index, kind: BlobKind, id: &Id) -> Result<Vec<u8>> {
        let mut first_error = None;
        // A copy that cannot be had (damaged, its pack gone) gives way to the next one.
        for loc in index.locations(kind, id) {
            let opened = self
                .backend
                .read_range(
                    FileType::Pack,
                    &loc.pack.id.to_hex(),
                    u64::from(loc.offset),
                    u64::from(loc.length),
                )
                .map_err(RepoError::from)
                .and_then(|sealed| {
                    open_blob(
                        &self.key,
                        &self.sealer,
                        kind,
                        *id,
                        loc.pack.id,
                        &sealed,
                        loc.raw_length,
                    )
                });
            match opened {
                Ok(plain) => return Ok(plain),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or(RepoError::BlobNotFound { kind, id: *id }))
    }

    /// Opens a blob whose sealed bytes the caller already read.
    pub fn open_blob(
        &self,
        kind: BlobKind,
        id: &Id,
        pack: &Id,
        sealed: &[u8],
        raw_len: u32,
    ) -> Result<Vec<u8>> {
        open_blob(&self.key, &self.sealer, kind, *id, *pack, sealed, raw_len)
    }

    /// Reads and decodes a tree blob.
    pub fn load_tree(&self, index: &Index, id: &Id) -> Result<Tree> {
        let b = self.read_blob(index, BlobKind::Tree, id)?;
        Tree::decode(&b).map_err(|e| RepoError::format(format!("tree {id}"), e))
    }
}

/// The key with the config's copied blob-id and chunker keys, when it has them.
fn with_config_keys(key: MasterKey, config: &Config) -> MasterKey {
    match &config.content_keys {
        Some(k) => key.with_content_keys(k.id_key(), k.chunker_key()),
        None => key,
    }
}

//! The [`Repository`] handle: init, open, keys, sealed files, blob and tree reads.

use std::sync::Arc;

use arca_backend::cache::{CachedBackend, find_in_root, prepare_root};
use arca_backend::{Backend, ErrorKind, FileInfo, FileType};
use arca_chunker::Chunker;
use arca_crypto::{MasterKey, Sealer};
use arca_format::config::ContentKeys;
use arca_format::envelope::{EnvelopeHeader, EnvelopeKind, FLAG_ZSTD, HEADER_LEN};
use arca_format::{
    BlobKind, ChunkerParams, Cipher, Config, Id, IndexFile, KdfParams, KeyFile, Tree,
};

use crate::blob::open_blob;
use crate::index::{Index, IndexBuilder};
use crate::{CacheMode, RepoError, Result, host};

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

/// A key file as listed by `key list`.
#[derive(Debug, Clone)]
pub struct KeyInfo {
    /// Key file id.
    pub id: Id,
    /// The decoded file.
    pub file: KeyFile,
    /// Whether this key opened the repository.
    pub current: bool,
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

/// A key file's name and bytes.
type KeyBytes = (String, Vec<u8>);

/// Threads reading key files when a repository is opened.
const KEY_READ_THREADS: usize = 8;

/// Key files named by the wrong-password error as skipped; the rest are counted.
const SKIPPED_NAMED: usize = 3;

/// The Argon2 work a key file asks for (memory × passes), read from its header: key files
/// are tried in ascending order of it.
fn kdf_cost(kdf: &KdfParams) -> u64 {
    u64::from(kdf.memory_kib) * u64::from(kdf.iterations)
}

/// The wrong-password error's mention of key files that could not be decoded: empty when
/// there are none, else the first few named and the others counted.
fn skipped_note(undecodable: &[String]) -> String {
    if undecodable.is_empty() {
        return String::new();
    }
    let mut named = undecodable[..undecodable.len().min(SKIPPED_NAMED)].join(", ");
    if undecodable.len() > SKIPPED_NAMED {
        named.push_str(&format!(" and {} more", undecodable.len() - SKIPPED_NAMED));
    }
    let s = if undecodable.len() == 1 { "" } else { "s" };
    format!(" (skipped key file{s} that cannot be decoded: {named})")
}

#[cfg(test)]
thread_local! {
    /// The key files whose key this thread derived (tried), in order.
    static DERIVED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
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

    /// Opens a repository with `password`, trying every key file.
    pub fn open(backend: Arc<dyn Backend>, password: &[u8]) -> Result<Self> {
        Ok(Self::open_keyed(backend, password, &|_| None)?.0)
    }

    /// Opens a repository as [`Repository::open`] does, then, unless `cache` is off or the
    /// backend is a local folder, reads it through a local cache in the folder named by the
    /// repository id under the cache root (see `arca_backend::CachedBackend`): key, index and
    /// snapshot files and tree packs are read remotely once, then from the cache.
    ///
    /// The key file is looked for in the cache before the repository is known (a verified
    /// copy is the file, whichever folder holds it). Without a usable cache root (none known,
    /// or it cannot be created) the repository is opened uncached, with one warning on stderr.
    pub fn open_cached(
        backend: Arc<dyn Backend>,
        password: &[u8],
        cache: &CacheMode,
    ) -> Result<Self> {
        if *cache == CacheMode::Off || backend.hints().local {
            return Self::open(backend, password);
        }
        let Some(root) = cache.root() else {
            cache_warning("no cache folder is known (neither XDG_CACHE_HOME nor HOME is set)");
            return Self::open(backend, password);
        };
        let (mut repo, fetched, keys) = Self::open_keyed(backend, password, &|name| {
            find_in_root(&root, FileType::Key, name)
        })?;
        if let Err(e) = prepare_root(&root) {
            cache_warning(&format!(
                "cannot create the cache folder {}: {e}",
                root.display()
            ));
            return Ok(repo);
        }
        let dir = root.join(Id(repo.config.repo_id).to_hex());
        crate::cache::mark_used(&dir);
        let cached = CachedBackend::new(Arc::clone(&repo.backend), dir);
        cached.refresh(FileType::Key, &keys);
        for (name, bytes) in &fetched {
            cached.store(FileType::Key, name, bytes);
        }
        repo.backend = Arc::new(cached);
        Ok(repo)
    }

    /// Opens a repository, taking a key file's bytes from `cached_key` when it has them;
    /// returns the repository, the key files read from the backend (names and bytes) and the
    /// key listing.
    fn open_keyed(
        backend: Arc<dyn Backend>,
        password: &[u8],
        cached_key: &(dyn Fn(&str) -> Option<Vec<u8>> + Sync),
    ) -> Result<(Self, Vec<KeyBytes>, Vec<FileInfo>)> {
        let location = backend.location();
        // The key listing does not depend on the config: on a remote repository both
        // requests share one round trip. The config's error, if any, is the one reported.
        let (config_read, keys_listed) = std::thread::scope(|s| {
            let keys = s.spawn(|| backend.list(FileType::Key));
            let config = backend.read(FileType::Config, "config");
            (config, keys.join())
        });
        let raw_config = match config_read {
            Ok(b) => b,
            Err(e) if e.is_not_found() => {
                // For a local folder, tell a missing directory from one that is not a
                // repository; other backends have no directory to look at.
                return Err(if std::path::Path::new(&location).is_dir() {
                    RepoError::NotARepository { location }
                } else {
                    RepoError::NoRepository { location }
                });
            }
            Err(e) => return Err(e.into()),
        };
        let header = EnvelopeHeader::decode(&raw_config, EnvelopeKind::Config).map_err(|e| {
            if matches!(e, arca_format::FormatError::BadMagic { .. }) {
                RepoError::ForeignRepository {
                    location: location.clone(),
                }
            } else {
                RepoError::format(format!("{location}/config"), e)
            }
        })?;
        let mut keys = keys_listed.unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        keys.sort();
        // Every key file is read first (they are small, and read concurrently), so that they
        // can be tried cheapest first: a key file with a huge Argon2 cost, planted under a
        // name that sorts first, is then derived only after the keys that cost less, and
        // never when one of those opens.
        let read = crate::par::map_ordered(
            &keys,
            KEY_READ_THREADS,
            || (),
            |_, k| match cached_key(&k.name) {
                Some(b) => Ok((b, false)),
                None => backend
                    .read(FileType::Key, &k.name)
                    .map(|b| (b, true))
                    .map_err(RepoError::from),
            },
        );
        let mut fetched = vec![];
        // Key files whose content does not hash to their name: tried all the same, and
        // named when no key opens (a damaged key reads as a wrong password otherwise).
        let mut damaged = vec![];
        // Key files that cannot be decoded (garbage, truncated, an unknown KDF, parameters
        // out of range): skipped, as restic skips them, and named in the wrong-password
        // error, which they must not replace.
        let mut undecodable = vec![];
        // Why each of them was skipped, and whether a newer arca made it.
        let mut reasons: Vec<(String, bool)> = vec![];
        // Key files the password was tried on.
        let mut tried = 0usize;
        // One key file that cannot be read (permissions, an I/O error) must not lock out the
        // passwords of the others: skipped, its error is the one given when no key opens.
        let mut unreadable: Option<RepoError> = None;
        let mut candidates = vec![];
        for (k, r) in keys.iter().zip(read) {
            let (bytes, fetched_now) = match r {
                Some(Ok(read)) => read,
                Some(Err(e)) => {
                    unreadable.get_or_insert(e);
                    continue;
                }
                None => {
                    unreadable.get_or_insert(RepoError::Invalid {
                        what: "key file",
                        detail: format!("{}: the reader thread failed", k.name),
                    });
                    continue;
                }
            };
            let content_id = file_id(&bytes);
            let decoded = KeyFile::decode(&bytes);
            if fetched_now {
                fetched.push((k.name.clone(), bytes));
            }
            let file = match decoded {
                Ok(f) => f,
                Err(e) => {
                    reasons.push((format!("{}: {e}", k.name), e.is_newer()));
                    undecodable.push(k.name.clone());
                    continue;
                }
            };
            let misnamed = content_id.to_hex() != k.name;
            if misnamed {
                damaged.push(k.name.clone());
            }
            candidates.push((k.name.as_str(), file, content_id, misnamed));
        }
        // Cheapest first; a stable sort keeps name order among equal costs.
        candidates.sort_by_key(|(_, file, _, _)| kdf_cost(&file.kdf));
        let mut last_err = None;
        for (name, file, content_id, misnamed) in candidates {
            #[cfg(test)]
            DERIVED.with(|d| d.borrow_mut().push(name.to_string()));
            // Deriving the key takes both cores for a tenth of a second; the files every
            // command reads next start loading meanwhile.
            let unwrapped = std::thread::scope(|s| {
                s.spawn(|| backend.warm(&[FileType::Lock, FileType::Snapshot, FileType::Index]));
                MasterKey::unwrap(&file, password)
            });
            match unwrapped {
                Ok(key) => {
                    // The config is always XChaCha20-Poly1305; it names the cipher of the rest.
                    // A key that the password opens but the config does not (one copied in
                    // from another repository) must not hide the repository's own key.
                    let body = match open_sealed(
                        &key.cipher(),
                        &header,
                        &raw_config,
                        &format!("{location}/config"),
                    ) {
                        Ok(b) => b,
                        // The key opened: what fails is the config file.
                        Err(RepoError::Crypto { source, .. }) => {
                            last_err = Some(RepoError::DamagedConfig {
                                location: location.clone(),
                                key: name.to_string(),
                                detail: match source {
                                    arca_crypto::CryptoError::Auth { .. } => {
                                        "authentication failed".into()
                                    }
                                    other => other.to_string(),
                                },
                            });
                            continue;
                        }
                        Err(e) => {
                            last_err = Some(e);
                            continue;
                        }
                    };
                    let config = Config::decode(&body)
                        .map_err(|e| RepoError::format(format!("{location}/config"), e))?;
                    // Decoded, so it starts with the magic and the version.
                    let config_version = u16::from_le_bytes([body[4], body[5]]);
                    let sealer = key.sealer(config.cipher);
                    let key = with_config_keys(key, &config);
                    let repo = Self {
                        backend,
                        key,
                        sealer,
                        config,
                        // Named as `key list` and `key remove` name it, also when the name
                        // is not its hash (a renamed file): the key in use must be known.
                        key_id: Id::from_hex(name).unwrap_or(content_id),
                        key_misnamed: misnamed,
                        config_version,
                    };
                    return Ok((repo, fetched, keys));
                }
                Err(arca_crypto::CryptoError::Auth { .. }) => {}
                // Parameters refused before any work (cost above the accepted maximum, lanes
                // out of range): a key file this version cannot use, skipped like one that
                // does not decode.
                Err(arca_crypto::CryptoError::Kdf { .. }) => {
                    reasons.push((
                        format!("{name}: key derivation parameters this arca refuses"),
                        false,
                    ));
                    undecodable.push(name.to_string());
                    continue;
                }
                Err(e) => last_err = Some(RepoError::crypto(format!("key {name}"), e)),
            }
            tried += 1;
        }
        if !damaged.is_empty() {
            return Err(RepoError::DamagedKey {
                location,
                files: damaged.join(", "),
            });
        }
        undecodable.sort();
        // The password was tried on no key at all: it is not known to be wrong.
        if tried == 0 && unreadable.is_none() && last_err.is_none() && !reasons.is_empty() {
            reasons.sort();
            let newer = reasons.iter().all(|(_, n)| *n);
            return Err(RepoError::UnusableKeys {
                location,
                reasons: reasons
                    .iter()
                    .take(SKIPPED_NAMED)
                    .map(|(r, _)| r.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
                // Each newer one says to upgrade already.
                advice: if newer {
                    ""
                } else {
                    " (damaged, or made by a newer arca: put back a copy of a key file, or \
                     upgrade arca)"
                },
            });
        }
        Err(unreadable
            .or(last_err)
            .unwrap_or_else(|| RepoError::WrongPassword {
                location,
                skipped: skipped_note(&undecodable),
            }))
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

    fn seal_file(&self, kind: EnvelopeKind, body: &[u8], compress: bool) -> Result<Vec<u8>> {
        let compressed;
        let (flags, payload) = if compress {
            compressed = zstd::bulk::compress(body, 3).map_err(|e| RepoError::Invalid {
                what: "compression",
                detail: e.to_string(),
            })?;
            (FLAG_ZSTD, compressed.as_slice())
        } else {
            (0, body)
        };
        let header = EnvelopeHeader::new(kind, flags).encode();
        let mut out = header.to_vec();
        // The config is sealed with XChaCha20-Poly1305 whatever the repository's cipher: it
        // must open before the cipher is known.
        let config_sealer;
        let sealer = if kind == EnvelopeKind::Config {
            config_sealer = self.key.cipher();
            &config_sealer
        } else {
            &self.sealer
        };
        sealer
            .seal_into(&header, payload, &mut out)
            .map_err(|e| RepoError::crypto(kind.name(), e))?;
        Ok(out)
    }

    /// Seals `body` as a file of type `t`, writes it and returns its id.
    pub fn save_file(&self, t: FileType, body: &[u8]) -> Result<Id> {
        let (kind, compress) = match t {
            FileType::Snapshot => (EnvelopeKind::Snapshot, false),
            FileType::Index => (EnvelopeKind::Index, true),
            FileType::Lock => (EnvelopeKind::Lock, false),
            other => {
                return Err(RepoError::Invalid {
                    what: "file type",
                    detail: format!("{other} files are not saved with save_file"),
                });
            }
        };
        let bytes = self.seal_file(kind, body, compress)?;
        let id = file_id(&bytes);
        self.backend.write(t, &id.to_hex(), &bytes)?;
        Ok(id)
    }

    /// Reads, verifies and opens a sealed file, returning its body.
    pub fn load_file(&self, t: FileType, id: &Id) -> Result<Vec<u8>> {
        let name = id.to_hex();
        let bytes = self.backend.read(t, &name)?;
        let what = format!("{t} {name}");
        if file_id(&bytes) != *id {
            return Err(RepoError::IdMismatch { file: what });
        }
        let kind = match t {
            FileType::Snapshot => EnvelopeKind::Snapshot,
            FileType::Index => EnvelopeKind::Index,
            FileType::Config => EnvelopeKind::Config,
            FileType::Key => EnvelopeKind::Key,
            FileType::Pack => EnvelopeKind::Pack,
            FileType::Lock => EnvelopeKind::Lock,
        };
        let header = match EnvelopeHeader::decode(&bytes, kind) {
            Ok(h) => h,
            // A newer envelope is only believed when its header authenticates (it is the
            // associated data): else a damaged header byte would read as a newer arca's.
            Err(e) if e.is_newer() => {
                self.sealer
                    .open(&bytes[..HEADER_LEN], &bytes[HEADER_LEN..], &|| what.clone())
                    .map_err(|c| RepoError::crypto(&what, c))?;
                return Err(RepoError::format(&what, e));
            }
            Err(e) => return Err(RepoError::format(&what, e)),
        };
        open_sealed(&self.sealer, &header, &bytes, &what)
    }

    /// Writes an index file.
    pub fn save_index(&self, f: &IndexFile) -> Result<Id> {
        // An index file is a commit too: written by a command whose lock was lost, it named
        // packs a prune had deleted meanwhile, and the rerun took them for stored.
        crate::lock::check_held()?;
        let body = f.encode().map_err(|e| RepoError::format("index", e))?;
        self.save_file(FileType::Index, &body)
    }

    /// Loads one index file.
    pub fn load_index_file(&self, id: &Id) -> Result<IndexFile> {
        let body = self.load_file(FileType::Index, id)?;
        IndexFile::decode(&body).map_err(|e| RepoError::format(format!("index {id}"), e))
    }

    /// Lists the ids of the files of one type, skipping names that are not ids, each id once
    /// (a listing may name a file twice: an S3 server's glitch).
    pub fn list_ids(&self, t: FileType) -> Result<Vec<(Id, u64)>> {
        let mut v: Vec<(Id, u64)> = self
            .backend
            .list(t)?
            .into_iter()
            .filter_map(|f| Id::from_hex(&f.name).ok().map(|id| (id, f.size)))
            .collect();
        v.sort();
        v.dedup_by_key(|(id, _)| *id);
        Ok(v)
    }

    /// Loads every index file, reading several at once, and returns them with their ids.
    /// The first failure is returned as the error.
    pub fn load_index_files(&self) -> Result<Vec<(Id, Result<IndexFile>)>> {
        let ids = self.list_ids(FileType::Index)?;
        let loaded = crate::par::load_ordered(&ids, 4, "index file", |id| self.load_index_file(id));
        Ok(ids.iter().map(|(id, _)| *id).zip(loaded).collect())
    }

    /// Loads all index files into an [`Index`], as [`Repository::load_index_report`] does, and
    /// warns on stderr about each damaged index file (naming it and `arca repair index`): the
    /// command goes on without the blobs that file listed, which then count as missing.
    pub fn load_index(&self) -> Result<Index> {
        let (index, damaged) = self.load_index_report()?;
        for (_, e) in &damaged {
            damaged_index_warning(e);
        }
        Ok(index)
    }

    /// Loads all index files into an [`Index`], leaving out the damaged ones (a file that
    /// does not hash to its name, does not open with the key, or does not decode), which are
    /// returned with the reason. Any other failure (the backend cannot list or read) is an
    /// error: a partial index is only ever the result of damage, never of a bad connection.
    /// Tells the backend which packs hold trees ([`Backend::note_tree_packs`]), so a cache
    /// keeps them.
    pub fn load_index_report(&self) -> Result<(Index, Vec<(Id, RepoError)>)> {
        let ids = self.list_ids(FileType::Index)?;
        let mut b = IndexBuilder::new();
        let mut damaged = vec![];
        let mut failed = None;
        // Each file goes into the builder as soon as it is read, then is dropped: the decoded
        // files never all sit in memory beside the index being built.
        crate::par::for_each_ordered(
            &ids,
            4,
            |(id, _)| self.load_index_file(id),
            |i, f| {
                let id = ids[i].0;
                match f {
                    _ if failed.is_some() => {}
                    Some(Ok(f)) => b.add(&f),
                    Some(Err(e)) if e.is_unusable() => damaged.push((id, e)),
                    Some(Err(e)) => failed = Some(e),
                    None => {
                        failed = Some(RepoError::Invalid {
                            what: "index file",
                            detail: format!("{id}: the reader thread failed"),
                        })
                    }
                }
            },
        );
        if let Some(e) = failed {
            return Err(e);
        }
        let index = b.finish();
        let trees: Vec<String> = index
            .packs()
            .iter()
            .filter(|p| p.kind == BlobKind::Tree)
            .map(|p| p.id.to_hex())
            .collect();
        if !trees.is_empty() {
            self.backend.note_tree_packs(&trees);
        }
        Ok((index, damaged))
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

    fn write_key(&self, password: &[u8], kdf: KdfParams, owner: &KeyOwner) -> Result<Id> {
        let kf = self
            .key
            .wrap(
                password,
                kdf,
                owner.hostname.clone().unwrap_or_else(host::hostname),
                owner.username.clone().unwrap_or_else(host::username),
                host::now_ns(),
            )
            .map_err(|e| RepoError::crypto("new key", e))?;
        let bytes = kf.encode().map_err(|e| RepoError::format("new key", e))?;
        let id = file_id(&bytes);
        self.backend.write(FileType::Key, &id.to_hex(), &bytes)?;
        // Read back before anything relies on it (`key passwd` then removes the old key): a
        // key damaged on the way would open nothing, and with the old one gone, nothing would.
        let read = self.backend.read(FileType::Key, &id.to_hex());
        if read.as_ref().is_ok_and(|back| *back == bytes) {
            return Ok(id);
        }
        let _ = self.backend.delete(FileType::Key, &id.to_hex());
        Err(match read {
            Err(e) => e.into(),
            Ok(_) => RepoError::Invalid {
                what: "new key file",
                detail: format!(
                    "{id} did not read back as it was written (damaged on the way); it was \
                     removed and no key was changed"
                ),
            },
        })
    }

    /// Adds a key file for another password, made by this user on this host.
    pub fn add_key(&self, password: &[u8], kdf: KdfParams) -> Result<Id> {
        self.write_key(password, kdf, &KeyOwner::default())
    }

    /// Adds a key file for another password, with the user and host names it records set
    /// where `owner` gives them (restic's `key add --user --host`).
    pub fn add_key_for(&self, password: &[u8], kdf: KdfParams, owner: &KeyOwner) -> Result<Id> {
        self.write_key(password, kdf, owner)
    }

    /// Lists the key files; the first that cannot be read or decoded is an error.
    pub fn list_keys(&self) -> Result<Vec<KeyInfo>> {
        self.read_keys()?.into_iter().map(|(_, k)| k).collect()
    }

    /// Reads every key file, each with its id and its content or why it could not be read or
    /// decoded: one damaged key file leaves the others listed (as restic's `key list`).
    pub fn read_keys(&self) -> Result<Vec<(Id, Result<KeyInfo>)>> {
        let read = |id: Id| -> Result<KeyInfo> {
            let bytes = self.backend.read(FileType::Key, &id.to_hex())?;
            let file =
                KeyFile::decode(&bytes).map_err(|e| RepoError::format(format!("key {id}"), e))?;
            Ok(KeyInfo {
                id,
                file,
                current: id == self.key_id,
            })
        };
        let ids = self.list_ids(FileType::Key)?;
        Ok(ids.into_iter().map(|(id, _)| (id, read(id))).collect())
    }

    /// Finds a key by id prefix.
    pub fn find_key(&self, prefix: &str) -> Result<Id> {
        if prefix.is_empty() {
            return Err(RepoError::KeyRefused(
                "no key id given (see `arca key list`)".into(),
            ));
        }
        let keys = self.list_ids(FileType::Key)?;
        // Hex in either case, as the other ids are taken.
        let lower = prefix.to_ascii_lowercase();
        let m: Vec<_> = keys
            .iter()
            .filter(|(id, _)| id.to_hex().starts_with(&lower))
            .collect();
        match m.as_slice() {
            [(id, _)] => Ok(*id),
            [] => Err(RepoError::KeyRefused(format!("no key matches {prefix:?}"))),
            _ => Err(RepoError::KeyRefused(format!(
                "key prefix {prefix:?} is ambiguous"
            ))),
        }
    }

    /// Removes a key; refuses the key in use and the last key.
    pub fn remove_key(&self, id: &Id) -> Result<()> {
        if *id == self.key_id {
            return Err(RepoError::KeyRefused(format!(
                "refusing to remove key {} that opened the repository; open with another key first",
                id.short()
            )));
        }
        let keys = self.list_ids(FileType::Key)?;
        if !keys.iter().any(|(k, _)| k == id) {
            return Err(RepoError::KeyRefused(format!("no key {id}")));
        }
        if keys.len() < 2 {
            return Err(RepoError::KeyRefused(
                "refusing to remove the last key".into(),
            ));
        }
        self.backend.delete(FileType::Key, &id.to_hex())?;
        // A key is removed because its password leaked: a power cut must not bring it back.
        self.backend.sync_removals()?;
        Ok(())
    }

    /// Replaces the current key with one for `new_password`; returns the new key id.
    pub fn change_password(&mut self, new_password: &[u8], kdf: KdfParams) -> Result<Id> {
        self.change_password_for(new_password, kdf, &KeyOwner::default())
    }

    /// As [`Repository::change_password`], the new key recording the names `owner` gives.
    pub fn change_password_for(
        &mut self,
        new_password: &[u8],
        kdf: KdfParams,
        owner: &KeyOwner,
    ) -> Result<Id> {
        let old = self.key_id;
        let new = self.write_key(new_password, kdf, owner)?;
        self.key_id = new;
        self.key_misnamed = false;
        match self.backend.delete(FileType::Key, &old.to_hex()) {
            // The old password must not open the repository again after a power cut.
            Ok(()) => self
                .backend
                .sync_removals()
                .map(|()| new)
                .map_err(Into::into),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(new),
            Err(e) => Err(e.into()),
        }
    }
}

/// The user and host names a new key file records; this process's own where `None`.
#[derive(Debug, Clone, Default)]
pub struct KeyOwner {
    /// The user name.
    pub username: Option<String>,
    /// The host name.
    pub hostname: Option<String>,
}

/// The key with the config's copied blob-id and chunker keys, when it has them.
fn with_config_keys(key: MasterKey, config: &Config) -> MasterKey {
    match &config.content_keys {
        Some(k) => key.with_content_keys(k.id_key(), k.chunker_key()),
        None => key,
    }
}

/// Reports on stderr that an index file is damaged and left out of the index.
fn damaged_index_warning(e: &RepoError) {
    #[allow(clippy::print_stderr)]
    {
        if e.is_newer_format() {
            // Not damage: `repair index` would delete a newer arca's index file.
            eprintln!("arca: warning: {e}; the blobs it lists are treated as missing");
        } else {
            eprintln!(
                "arca: warning: damaged index file ({e}); run `arca repair index` (the blobs \
                 it lists are treated as missing until then)"
            );
        }
    }
}

/// Reports on stderr that the repository is read without a local cache.
fn cache_warning(why: &str) {
    #[allow(clippy::print_stderr)]
    {
        eprintln!("arca: warning: {why}; carrying on without a local cache");
    }
}

fn open_sealed(
    sealer: &Sealer,
    header: &EnvelopeHeader,
    bytes: &[u8],
    what: &str,
) -> Result<Vec<u8>> {
    let payload = sealer
        .open(&bytes[..HEADER_LEN], &bytes[HEADER_LEN..], &|| {
            what.to_string()
        })
        .map_err(|e| RepoError::crypto(what, e))?;
    if header.compressed() {
        let mut out = Vec::new();
        zstd::stream::copy_decode(payload.as_slice(), &mut out).map_err(|e| {
            RepoError::Decompress {
                file: what.to_string(),
                detail: e.to_string(),
            }
        })?;
        Ok(out)
    } else {
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use arca_backend::MemoryBackend;

    use super::*;

    /// The key files this thread derived since the last call.
    fn derived() -> Vec<String> {
        DERIVED.with(|d| std::mem::take(&mut *d.borrow_mut()))
    }

    /// A key file with a higher Argon2 cost than the real key, under a name that sorts
    /// first, is not derived when the real key opens the repository: key files are tried
    /// cheapest first, not in name order.
    #[test]
    fn key_files_are_tried_cheapest_first() {
        let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        let r = crate::testing::repo(Arc::clone(&b)); // 64 KiB, 1 pass
        let real = r.key_id().to_hex();
        let costly = KdfParams {
            memory_kib: 128,
            iterations: 2,
            parallelism: 1,
        };
        // A name is the file's hash, which the random salt decides: one in two sorts first.
        let planted = loop {
            let id = r.add_key(b"planted", costly).unwrap();
            if id.to_hex() < real {
                break id.to_hex();
            }
            r.remove_key(&id).unwrap();
        };
        derived();
        let opened = Repository::open(Arc::clone(&b), b"pw").unwrap();
        assert_eq!(opened.key_id().to_hex(), real);
        assert_eq!(
            derived(),
            std::slice::from_ref(&real),
            "the costly key was derived"
        );
        // The costly key still opens with its own password, after the cheaper one.
        let opened = Repository::open(Arc::clone(&b), b"planted").unwrap();
        assert_eq!(opened.key_id().to_hex(), planted);
        assert_eq!(derived(), [real.clone(), planted.clone()]);
        // A wrong password tries both, cheapest first.
        assert!(matches!(
            Repository::open(b, b"wrong"),
            Err(RepoError::WrongPassword { .. })
        ));
        assert_eq!(derived(), [real, planted]);
    }

    #[test]
    fn skipped_key_files_are_named_briefly() {
        assert_eq!(skipped_note(&[]), "");
        let one = ["a".to_string()];
        assert_eq!(
            skipped_note(&one),
            " (skipped key file that cannot be decoded: a)"
        );
        let five: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).into();
        assert_eq!(
            skipped_note(&five),
            " (skipped key files that cannot be decoded: a, b, c and 2 more)"
        );
    }
}

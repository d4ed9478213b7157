//! Opening a repository: every key file is read, then tried cheapest first with the password,
//! and the one that opens the config gives the repository, read through a local cache if asked.

use std::io::Write as _;
use std::sync::Arc;

use arca_backend::cache::{CachedBackend, find_in_root, prepare_root};
use arca_backend::{Backend, BackendError, ErrorKind, FileInfo, FileType, RootKind};
use arca_crypto::MasterKey;
use arca_format::envelope::{EnvelopeHeader, EnvelopeKind};
use arca_format::{Config, Id, KdfParams, KeyFile};

use super::files::open_sealed;
use super::{Repository, file_id, with_config_keys};
use crate::{CacheMode, RepoError, Result};

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

impl Repository {
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
            Err(e) => return Err(no_config(&*backend, location, e)),
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
        // Key files not tried: their derivation needs more memory than could be had (a
        // `ulimit -v`), and the MiB it needs.
        let mut short_of_memory: Vec<(String, u32)> = vec![];
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
                // Its bytes do not hash to its name: a damaged key file (a byte flipped in its
                // header), not one of a newer version. Named as damaged, as one that decodes
                // is: it was reported as a wrong password (exit 12) when it held the
                // password's key.
                Err(_) if content_id.to_hex() != k.name => {
                    damaged.push(k.name.clone());
                    continue;
                }
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
                Err(arca_crypto::CryptoError::KdfMemory { mib }) => {
                    short_of_memory.push((name.to_string(), mib));
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
        if tried == 0
            && unreadable.is_none()
            && last_err.is_none()
            && short_of_memory.is_empty()
            && !reasons.is_empty()
        {
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
        if let (None, None, Some((first, _))) = (&unreadable, &last_err, short_of_memory.first()) {
            let mib = short_of_memory.iter().map(|&(_, m)| m).max().unwrap_or(0);
            let need = arca_crypto::CryptoError::KdfMemory { mib };
            // No key was tried: the memory is all there is to say.
            if tried == 0 {
                return Err(RepoError::crypto(format!("key {first}"), need));
            }
            let names: Vec<&str> = short_of_memory.iter().map(|(n, _)| n.as_str()).collect();
            let s = if names.len() == 1 { "" } else { "s" };
            return Err(RepoError::KeysNotTried {
                location,
                tried,
                untried: format!(
                    "key file{s} {} could not be tried: {need}",
                    names.join(", ")
                ),
                skipped: skipped_note(&undecodable),
            });
        }
        Err(unreadable
            .or(last_err)
            .unwrap_or_else(|| RepoError::WrongPassword {
                location,
                skipped: skipped_note(&undecodable),
            }))
    }
}

/// Reports on stderr that the repository is read without a local cache.
fn cache_warning(why: &str) {
    #[allow(clippy::print_stderr)]
    {
        let _ = writeln!(
            std::io::stderr(),
            "arca: warning: {why}; carrying on without a local cache"
        );
    }
}

/// The error of a repository whose config could not be read (`e`): none there, or the
/// backend's error. What is at the location (asked of the backend only here, on the way to an
/// error) tells a missing repository from a file in the way and from a folder that is not a
/// repository; a backend that cannot tell keeps what it said of it (an S3 server names the
/// bucket that is missing).
fn no_config(backend: &dyn Backend, location: String, e: BackendError) -> RepoError {
    // A transient failure, a permission refused: not about what is there.
    let there = match e.kind {
        ErrorKind::NotFound | ErrorKind::Other => backend.root_kind(),
        _ => RootKind::Unknown,
    };
    match there {
        // A file where the folder should be, or above it ("Not a directory").
        RootKind::FileInTheWay(why) => {
            let why = format!(": {why}");
            return RepoError::NoRepository { location, why };
        }
        _ if !e.is_not_found() => return e.into(),
        RootKind::Folder => return RepoError::NotARepository { location },
        RootKind::Nothing | RootKind::Unknown => {}
    }
    let why = match e.source.to_string() {
        said if backend.local_folder().is_some() || said.eq_ignore_ascii_case("not found") => {
            String::new()
        }
        said => format!(": {said}"),
    };
    RepoError::NoRepository { location, why }
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

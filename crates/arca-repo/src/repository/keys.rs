//! A repository's key files: adding one (for another password, or a new one in place of the
//! key in use), listing them, finding one by id prefix and removing one.

use arca_backend::{ErrorKind, FileType};
use arca_format::{Id, KdfParams, KeyFile};

use super::{Repository, file_id};
use crate::{RepoError, Result, host};

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

impl Repository {
    pub(super) fn write_key(
        &self,
        password: &[u8],
        kdf: KdfParams,
        owner: &KeyOwner,
    ) -> Result<Id> {
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
        // From the repository itself, not from the cache's copy of what was sent.
        let read = self.backend.read_stored(FileType::Key, &id.to_hex());
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
            // A key file is named by its content's hash, as `check` and opening verify: one
            // damaged in its sealed part still decodes, and was listed as a good key. The key
            // in use opened the repository, so it is intact under another name (renamed):
            // listed (see [`Repository::key_misnamed`]).
            if file_id(&bytes) != id && !(id == self.key_id && self.key_misnamed) {
                return Err(RepoError::IdMismatch {
                    file: format!("key {id}"),
                });
            }
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

//! arca's cryptography: a random master secret, wrapped per password with Argon2id, from
//! which independent subkeys are derived for sealing (XChaCha20-Poly1305 or XAES-256-GCM),
//! blob ids (keyed BLAKE3) and the chunker's gear table.
//!
//! Sealed bytes are always `nonce (24) ‖ ciphertext ‖ tag (16)` with random nonces, which is
//! safe for any number of writers because 192-bit nonces do not collide.

mod kdf_memory;
mod xaes;
mod xchacha;

use arca_format::Id;
use arca_format::config::Cipher;
use arca_format::key::{KdfParams, KeyFile, NONCE_LEN, WRAPPED_LEN};
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::xaes::Xaes;
use crate::xchacha::XChaCha;

/// Bytes added by sealing: nonce and tag.
pub const SEAL_OVERHEAD: usize = NONCE_LEN + TAG_LEN;
/// AEAD tag length.
pub const TAG_LEN: usize = 16;

/// Largest Argon2 memory cost accepted from a key file (4 GiB), so a hostile key file
/// cannot make `open` allocate without bound.
pub const MAX_KDF_MEMORY_KIB: u32 = 4 * 1024 * 1024;
/// Largest Argon2 pass count accepted from a key file.
pub const MAX_KDF_ITERATIONS: u32 = 64;

/// Why a cryptographic operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoError {
    /// Authentication failed: wrong key or password, or the bytes were altered.
    // `what` is for callers, which name the object in their own messages.
    #[error("authentication failed (wrong key or corrupted data)")]
    Auth {
        /// What was being opened.
        what: String,
    },
    /// The sealed input is shorter than nonce and tag.
    #[error("sealed data is truncated ({len} bytes)")]
    Truncated {
        /// What was being opened.
        what: String,
        /// Length found.
        len: usize,
    },
    /// Argon2 refused the parameters.
    #[error("invalid key derivation parameters {params:?}: {detail}")]
    Kdf {
        /// Parameters given.
        params: KdfParams,
        /// Why.
        detail: String,
    },
    /// The memory the key derivation needs could not be had (a memory or address-space
    /// limit): the key file is fine.
    #[error(
        "deriving the key from the password needs {mib} MiB of memory, which could not be had (is `ulimit -v` too low?)"
    )]
    KdfMemory {
        /// MiB the derivation needs.
        mib: u32,
    },
    /// The operating system's random generator failed.
    #[error("random number generator failed: {0}")]
    Random(String),
}

/// Fills `buf` with random bytes from the operating system.
pub fn random_bytes(buf: &mut [u8]) -> Result<(), CryptoError> {
    getrandom::getrandom(buf).map_err(|e| CryptoError::Random(e.to_string()))
}

/// The repository master secret and the subkeys derived from it.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct MasterKey {
    secret: [u8; 32],
    seal: [u8; 32],
    id: [u8; 32],
    chunker: [u8; 32],
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

impl MasterKey {
    /// A new random master key.
    pub fn generate() -> Result<Self, CryptoError> {
        let mut secret = [0u8; 32];
        random_bytes(&mut secret)?;
        Ok(Self::from_secret(secret))
    }

    /// Derives the subkeys of a master secret.
    pub fn from_secret(secret: [u8; 32]) -> Self {
        Self {
            seal: blake3::derive_key("arca 2026 v1 sealing key", &secret),
            id: blake3::derive_key("arca 2026 v1 blob id key", &secret),
            chunker: blake3::derive_key("arca 2026 v1 chunker gear key", &secret),
            secret,
        }
    }

    /// This key with the blob-id and chunker subkeys replaced by `id_key` and `chunker_key`
    /// (copied from another repository by `init --copy-chunker-params`, kept in its config),
    /// so that both repositories give the same data the same ids and chunk boundaries. The
    /// sealing key stays derived from this master secret.
    pub fn with_content_keys(mut self, id_key: &[u8; 32], chunker_key: &[u8; 32]) -> Self {
        self.id.copy_from_slice(id_key);
        self.chunker.copy_from_slice(chunker_key);
        self
    }

    /// The master secret itself, which every subkey derives from (for `cat masterkey`: with
    /// it and docs/FORMAT.md the repository can be read without a password).
    pub fn secret(&self) -> &[u8; 32] {
        &self.secret
    }

    /// The sealing subkey (the AEAD's key).
    pub fn sealing_key(&self) -> &[u8; 32] {
        &self.seal
    }

    /// The key for the chunker's gear table.
    pub fn chunker_key(&self) -> &[u8; 32] {
        &self.chunker
    }

    /// The key of blob ids (keyed BLAKE3), to copy into another repository's config.
    pub fn id_key(&self) -> &[u8; 32] {
        &self.id
    }

    /// The id of a blob: BLAKE3 keyed with the id subkey, so ids reveal nothing about
    /// content to anyone without the key.
    pub fn blob_id(&self, plaintext: &[u8]) -> Id {
        Id(*blake3::keyed_hash(&self.id, plaintext).as_bytes())
    }

    /// [`Self::blob_id`] of a plaintext given in pieces (a block read from a file a window at
    /// a time, so no buffer as large as the block is needed).
    pub fn blob_id_hasher(&self) -> BlobIdHasher {
        BlobIdHasher(blake3::Hasher::new_keyed(&self.id))
    }

    /// The XChaCha20-Poly1305 sealer, which seals the config of every repository (and
    /// everything else in repositories before config version 3).
    pub fn cipher(&self) -> Sealer {
        self.sealer(Cipher::XChaCha20Poly1305)
    }

    /// A sealer for `cipher` with the sealing subkey.
    pub fn sealer(&self, cipher: Cipher) -> Sealer {
        Sealer {
            aead: match cipher {
                Cipher::XChaCha20Poly1305 => Aead::XChaCha(XChaCha::new(&self.seal)),
                Cipher::Xaes256Gcm => Aead::Xaes(Box::new(Xaes::new(&self.seal))),
            },
        }
    }

    /// Wraps the master secret for a new key file protected by `password`.
    pub fn wrap(
        &self,
        password: &[u8],
        kdf: KdfParams,
        hostname: String,
        username: String,
        created_ns: i64,
    ) -> Result<KeyFile, CryptoError> {
        let mut salt = [0u8; 32];
        random_bytes(&mut salt)?;
        let mut nonce = [0u8; NONCE_LEN];
        random_bytes(&mut nonce)?;
        let mut kf = KeyFile {
            kdf,
            salt,
            created_ns,
            hostname,
            username,
            nonce,
            wrapped: [0u8; WRAPPED_LEN],
        };
        let mut kek = derive_kek(password, &kdf, &salt)?;
        let aad = kf.aad_prefix().map_err(|e| CryptoError::Kdf {
            params: kdf,
            detail: e.to_string(),
        })?;
        let aead = XChaCha::new(&kek);
        let mut buf = self.secret;
        let tag = aead
            .seal(&nonce, &aad, &mut buf)
            .map_err(|_| CryptoError::Auth {
                what: "key wrapping".into(),
            })?;
        kf.wrapped[..32].copy_from_slice(&buf);
        kf.wrapped[32..].copy_from_slice(&tag);
        buf.zeroize();
        kek.zeroize();
        Ok(kf)
    }

    /// Unwraps the master secret of a key file with `password`.
    pub fn unwrap(kf: &KeyFile, password: &[u8]) -> Result<Self, CryptoError> {
        let mut kek = derive_kek(password, &kf.kdf, &kf.salt)?;
        let aad = kf.aad_prefix().map_err(|e| CryptoError::Kdf {
            params: kf.kdf,
            detail: e.to_string(),
        })?;
        let aead = XChaCha::new(&kek);
        kek.zeroize();
        let mut buf = kf.wrapped;
        let r = aead.open(&kf.nonce, &aad, &mut buf).map(|p| {
            let mut secret = [0u8; 32];
            secret.copy_from_slice(p);
            secret
        });
        buf.zeroize();
        match r {
            Ok(secret) => Ok(Self::from_secret(secret)),
            Err(_) => Err(CryptoError::Auth {
                what: "key file".into(),
            }),
        }
    }
}

fn derive_kek(password: &[u8], kdf: &KdfParams, salt: &[u8; 32]) -> Result<[u8; 32], CryptoError> {
    let bad = |detail: String| CryptoError::Kdf {
        params: *kdf,
        detail,
    };
    if kdf.memory_kib > MAX_KDF_MEMORY_KIB || kdf.iterations > MAX_KDF_ITERATIONS {
        return Err(bad("cost above the accepted maximum".into()));
    }
    let params = argon2::Params::new(kdf.memory_kib, kdf.iterations, kdf.parallelism, Some(32))
        .map_err(|e| bad(e.to_string()))?;
    let blocks = params.block_count();
    let a = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
    let mut out = [0u8; 32];
    // Lanes run on all cores (argon2's `parallel`); the matrix lives in a mapping of its own
    // with huge pages asked for (kdf_memory.rs), or, if that cannot be had, where argon2
    // allocates it.
    match kdf_memory::KdfMemory::new(blocks) {
        Some(mut m) => a.hash_password_into_with_memory(password, salt, &mut out, m.blocks()),
        None => a.hash_password_into(password, salt, &mut out),
    }
    .map_err(|e| match e {
        argon2::Error::OutOfMemory => CryptoError::KdfMemory {
            mib: kdf.memory_kib.div_ceil(1024),
        },
        e => bad(e.to_string()),
    })?;
    Ok(out)
}

/// The cipher a repository chooses at `init` when asked for none: XAES-256-GCM where the
/// processor has AES and carry-less multiply instructions (several times faster than
/// XChaCha20-Poly1305 there), else XChaCha20-Poly1305 (faster than software AES).
pub fn preferred_cipher() -> Cipher {
    #[cfg(target_arch = "x86_64")]
    let hardware_aes = is_x86_feature_detected!("aes") && is_x86_feature_detected!("pclmulqdq");
    #[cfg(target_arch = "aarch64")]
    let hardware_aes = std::arch::is_aarch64_feature_detected!("aes")
        && std::arch::is_aarch64_feature_detected!("pmull");
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let hardware_aes = false;
    if hardware_aes {
        Cipher::Xaes256Gcm
    } else {
        Cipher::XChaCha20Poly1305
    }
}

/// A blob id computed piece by piece ([`MasterKey::blob_id_hasher`]).
pub struct BlobIdHasher(blake3::Hasher);

impl BlobIdHasher {
    /// Adds the next piece of the plaintext.
    pub fn update(&mut self, piece: &[u8]) -> &mut Self {
        self.0.update(piece);
        self
    }

    /// The id of the pieces given so far, in order.
    pub fn finish(&self) -> Id {
        Id(*self.0.finalize().as_bytes())
    }
}

#[derive(Clone)]
enum Aead {
    XChaCha(XChaCha),
    Xaes(Box<Xaes>),
}

impl Aead {
    fn seal(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; 16], xchacha::Failed> {
        match self {
            Aead::XChaCha(a) => a.seal(nonce, aad, buf),
            Aead::Xaes(a) => a.seal(nonce, aad, buf),
        }
    }
    fn open<'b>(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &'b mut [u8],
    ) -> Result<&'b mut [u8], xchacha::Failed> {
        match self {
            Aead::XChaCha(a) => a.open(nonce, aad, buf),
            Aead::Xaes(a) => a.open(nonce, aad, buf),
        }
    }
    fn verify(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &[u8],
    ) -> Result<(), xchacha::Failed> {
        match self {
            Aead::XChaCha(a) => a.verify(nonce, aad, buf),
            Aead::Xaes(a) => a.verify(nonce, aad, buf),
        }
    }
    fn keystream(&self, nonce: &[u8; NONCE_LEN], offset: u64, buf: &mut [u8]) {
        match self {
            Aead::XChaCha(a) => a.keystream(nonce, offset, buf),
            Aead::Xaes(a) => a.keystream(nonce, offset, buf),
        }
    }
}

/// Seals and opens with the repository's sealing subkey and cipher.
#[derive(Clone)]
pub struct Sealer {
    aead: Aead,
}

impl Sealer {
    /// Appends `nonce ‖ ciphertext ‖ tag` of `plaintext` to `out`.
    pub fn seal_into(
        &self,
        aad: &[u8],
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), CryptoError> {
        let mut nonce = [0u8; NONCE_LEN];
        random_bytes(&mut nonce)?;
        out.reserve(plaintext.len() + SEAL_OVERHEAD);
        out.extend_from_slice(&nonce);
        let start = out.len();
        out.extend_from_slice(plaintext);
        self.seal_tail(aad, &nonce, out, start)
    }

    /// Seals, in place, the bytes of `buf` from `start` on, which must be preceded by the
    /// 24-byte nonce; appends the tag. Lets callers build plaintext directly in the output
    /// buffer without a copy.
    pub fn seal_tail(
        &self,
        aad: &[u8],
        nonce: &[u8; NONCE_LEN],
        buf: &mut Vec<u8>,
        start: usize,
    ) -> Result<(), CryptoError> {
        let tag = self
            .aead
            .seal(nonce, aad, &mut buf[start..])
            .map_err(|_| CryptoError::Auth {
                what: "sealing".into(),
            })?;
        buf.extend_from_slice(&tag);
        Ok(())
    }

    /// `nonce ‖ ciphertext ‖ tag` of `plaintext`.
    pub fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let mut out = Vec::new();
        self.seal_into(aad, plaintext, &mut out)?;
        Ok(out)
    }

    /// Opens `nonce ‖ ciphertext ‖ tag`; `what` names the object in errors.
    pub fn open(
        &self,
        aad: &[u8],
        sealed: &[u8],
        what: &dyn Fn() -> String,
    ) -> Result<Vec<u8>, CryptoError> {
        let mut buf = sealed.to_vec();
        let len = self.open_in_place(aad, &mut buf, what)?.len();
        buf.drain(..NONCE_LEN);
        buf.truncate(len);
        Ok(buf)
    }

    /// Checks that `nonce ‖ ciphertext ‖ tag` is what this key sealed with `aad`, leaving
    /// the bytes as they are (Poly1305 alone, or AES-GCM on a copy): for copying sealed bytes
    /// elsewhere unchanged.
    pub fn authenticate(
        &self,
        aad: &[u8],
        sealed: &[u8],
        what: &dyn Fn() -> String,
    ) -> Result<(), CryptoError> {
        let n = nonce_of(sealed, what)?;
        self.aead
            .verify(&n, aad, &sealed[NONCE_LEN..])
            .map_err(|_| CryptoError::Auth { what: what() })
    }

    /// Decrypts `buf`, ciphertext bytes from `offset` on of what was sealed with `nonce`,
    /// where it lies, WITHOUT authenticating it: only for finding where a sealed object ends
    /// in a file whose index of them is lost (`repair packs`). Whatever is learnt this way
    /// must be authenticated ([`Sealer::authenticate`]) before anything is kept.
    pub fn decrypt_unauthenticated(&self, nonce: &[u8; NONCE_LEN], offset: u64, buf: &mut [u8]) {
        self.aead.keystream(nonce, offset, buf);
    }

    /// Opens `nonce ‖ ciphertext ‖ tag` where it lies, without copying: on success the
    /// plaintext is `sealed[NONCE_LEN..sealed.len() - TAG_LEN]`, which is returned. On failure
    /// the bytes are left unspecified.
    pub fn open_in_place<'b>(
        &self,
        aad: &[u8],
        sealed: &'b mut [u8],
        what: &dyn Fn() -> String,
    ) -> Result<&'b mut [u8], CryptoError> {
        let n = nonce_of(sealed, what)?;
        self.aead
            .open(&n, aad, &mut sealed[NONCE_LEN..])
            .map_err(|_| CryptoError::Auth { what: what() })
    }
}

/// The nonce of `nonce ‖ ciphertext ‖ tag`, once `sealed` is known to be long enough for
/// one (`what` names the object in the error).
fn nonce_of(sealed: &[u8], what: &dyn Fn() -> String) -> Result<[u8; NONCE_LEN], CryptoError> {
    if sealed.len() < SEAL_OVERHEAD {
        return Err(CryptoError::Truncated {
            what: what(),
            len: sealed.len(),
        });
    }
    let mut n = [0u8; NONCE_LEN];
    n.copy_from_slice(&sealed[..NONCE_LEN]);
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fast_kdf() -> KdfParams {
        KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        }
    }

    /// Keys made before the move to argon2 0.6 (lanes in parallel, the matrix in a mapping
    /// of its own) must still open: the derived key equals what argon2 0.5 computed then.
    #[test]
    fn derived_keys_match_the_earlier_implementation() {
        let salt: [u8; 32] = std::array::from_fn(|i| i as u8);
        for (memory_kib, iterations, parallelism, expected) in [
            (
                256,
                2,
                1,
                "fe24b0b059dfc686e550e65b8b475fdfbb0e7d82a15e2b1dd16e4d92b7c9c351",
            ),
            (
                1024,
                1,
                4,
                "e7ebb7da960ecb68ba4eb2d252b3109e469d2167d52029a9bf486c9f1a493cca",
            ),
        ] {
            let kdf = KdfParams {
                memory_kib,
                iterations,
                parallelism,
            };
            let kek = derive_kek(b"correct horse", &kdf, &salt).unwrap();
            assert_eq!(hex::encode(kek), expected, "{kdf:?}");
        }
    }

    #[test]
    fn wrap_unwrap_and_wrong_password() {
        let mk = MasterKey::generate().unwrap();
        let kf = mk
            .wrap(b"secret", fast_kdf(), "host".into(), "me".into(), 5)
            .unwrap();
        let kf = KeyFile::decode(&kf.encode().unwrap()).unwrap();
        let back = MasterKey::unwrap(&kf, b"secret").unwrap();
        assert_eq!(back.blob_id(b"x"), mk.blob_id(b"x"));
        assert!(matches!(
            MasterKey::unwrap(&kf, b"wrong"),
            Err(CryptoError::Auth { .. })
        ));
        // Weakening the parameters in the file is detected, not obeyed.
        let mut tampered = kf.clone();
        tampered.kdf.iterations = 2;
        assert!(MasterKey::unwrap(&tampered, b"secret").is_err());
        let mut huge = kf;
        huge.kdf.memory_kib = u32::MAX;
        assert!(matches!(
            MasterKey::unwrap(&huge, b"secret"),
            Err(CryptoError::Kdf { .. })
        ));
    }

    #[test]
    fn a_blob_id_in_pieces_is_the_blob_id() {
        let k = MasterKey::from_secret([3; 32]);
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut h = k.blob_id_hasher();
        for piece in data.chunks(65_537) {
            h.update(piece);
        }
        assert_eq!(h.finish(), k.blob_id(&data));
        h.update(b"x");
        assert_ne!(h.finish(), k.blob_id(&data));
        assert_eq!(k.blob_id_hasher().finish(), k.blob_id(b""));
    }

    #[test]
    fn subkeys_are_independent_and_ids_keyed() {
        let a = MasterKey::from_secret([1; 32]);
        let b = MasterKey::from_secret([2; 32]);
        assert_ne!(a.blob_id(b"data"), b.blob_id(b"data"));
        assert_ne!(a.chunker_key(), b.chunker_key());
        assert_ne!(a.blob_id(b"data").0, *blake3::hash(b"data").as_bytes());
    }

    #[test]
    fn content_keys_override_ids_and_chunker_but_not_sealing() {
        let source = MasterKey::from_secret([1; 32]);
        let target = MasterKey::from_secret([2; 32]);
        let before = target.blob_id(b"probe");
        let copied = target
            .clone()
            .with_content_keys(source.id_key(), source.chunker_key());
        assert_eq!(copied.blob_id(b"probe"), source.blob_id(b"probe"));
        assert_ne!(copied.blob_id(b"probe"), before);
        assert_eq!(copied.chunker_key(), source.chunker_key());
        assert_eq!(copied.id_key(), source.id_key());
        // Sealing still uses the target's own key: the source cannot open it.
        let sealed = copied.cipher().seal(b"aad", b"secret").unwrap();
        assert!(
            source
                .cipher()
                .open(b"aad", &sealed, &|| "t".into())
                .is_err()
        );
        assert_eq!(
            target
                .cipher()
                .open(b"aad", &sealed, &|| "t".into())
                .unwrap(),
            b"secret"
        );
        // Wrapping keeps the master secret, not the copied keys: unwrapped, the key derives
        // its own subkeys again (the config carries the copied ones).
        let kdf = fast_kdf();
        let kf = copied.wrap(b"pw", kdf, "h".into(), "u".into(), 1).unwrap();
        assert_eq!(
            MasterKey::unwrap(&kf, b"pw").unwrap().blob_id(b"probe"),
            before
        );
    }

    proptest! {
        #[test]
        fn seal_open_round_trip(data in proptest::collection::vec(any::<u8>(), 0..2000), aad in proptest::collection::vec(any::<u8>(), 0..40), flip in any::<usize>()) {
            let mk = MasterKey::from_secret([7; 32]);
            let c = mk.cipher();
            let sealed = c.seal(&aad, &data).unwrap();
            prop_assert_eq!(sealed.len(), data.len() + SEAL_OVERHEAD);
            prop_assert_eq!(c.open(&aad, &sealed, &|| "t".into()).unwrap(), data.clone());
            let mut bad = sealed.clone();
            let i = flip % bad.len();
            bad[i] ^= 1;
            prop_assert!(c.open(&aad, &bad, &|| "t".into()).is_err());
            let mut other_aad = aad.clone();
            other_aad.push(0);
            prop_assert!(c.open(&other_aad, &sealed, &|| "t".into()).is_err());
            prop_assert!(c.open(&aad, &sealed[..sealed.len() - 1], &|| "t".into()).is_err());
            let mut in_place = sealed.clone();
            prop_assert_eq!(&*c.open_in_place(&aad, &mut in_place, &|| "t".into()).unwrap(), &data[..]);
            let mut bad = sealed.clone();
            bad[i] ^= 1;
            prop_assert!(c.open_in_place(&aad, &mut bad, &|| "t".into()).is_err());
            prop_assert!(c.open_in_place(&aad, &mut [0u8; SEAL_OVERHEAD - 1], &|| "t".into()).is_err());
        }

        /// Decrypting a slice of the ciphertext from any offset, unauthenticated, gives that
        /// slice of the plaintext, with both ciphers (AES-CTR's counter crossing blocks
        /// mid-slice, ChaCha20's seeking).
        #[test]
        fn unauthenticated_decryption_from_any_offset(data in proptest::collection::vec(any::<u8>(), 1..3000), aad in proptest::collection::vec(any::<u8>(), 0..40), a in any::<usize>(), b in any::<usize>()) {
            let mk = MasterKey::from_secret([9; 32]);
            for cipher in [Cipher::XChaCha20Poly1305, Cipher::Xaes256Gcm] {
                let c = mk.sealer(cipher);
                let sealed = c.seal(&aad, &data).unwrap();
                let mut nonce = [0u8; NONCE_LEN];
                nonce.copy_from_slice(&sealed[..NONCE_LEN]);
                let (from, to) = { let (x, y) = (a % data.len(), b % data.len() + 1); (x.min(y), x.max(y)) };
                let mut part = sealed[NONCE_LEN + from..NONCE_LEN + to].to_vec();
                c.decrypt_unauthenticated(&nonce, from as u64, &mut part);
                prop_assert_eq!(&part[..], &data[from..to], "{:?}", cipher);
            }
        }
    }
}

//! Key files (`keys/<id>`): the master key wrapped by a key derived with Argon2id from a
//! password. Stored unencrypted apart from the wrapped key, which is sealed with the header
//! and parameters as associated data.

use crate::FormatError;
use crate::codec::{Reader, Writer};
use crate::envelope::{EnvelopeHeader, EnvelopeKind, HEADER_LEN};

/// Structure magic of the key body.
pub const MAGIC: [u8; 4] = *b"AKEY";
/// Current key file version.
pub const VERSION: u16 = 1;
/// KDF code for Argon2id (version 0x13).
pub const KDF_ARGON2ID: u8 = 1;
/// Nonce length of the wrapping AEAD (XChaCha20-Poly1305).
pub const NONCE_LEN: usize = 24;
/// Length of the wrapped master secret: 32 bytes plus a 16-byte tag.
pub const WRAPPED_LEN: usize = 48;

/// Argon2id cost parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KdfParams {
    /// Memory in KiB.
    pub memory_kib: u32,
    /// Passes.
    pub iterations: u32,
    /// Lanes.
    pub parallelism: u32,
}

impl KdfParams {
    /// Default memory: 48 MiB.
    pub const DEFAULT_MEMORY_KIB: u32 = 48 * 1024;
    /// Default passes.
    pub const DEFAULT_ITERATIONS: u32 = 4;
    /// Default lanes.
    pub const DEFAULT_PARALLELISM: u32 = 4;
}

impl Default for KdfParams {
    /// 48 MiB, 4 passes, 4 lanes: the same memory-time product as RFC 9106's second
    /// recommended option (64 MiB, 3 passes), so the same work per guess for an attacker and
    /// the same time to open (about 0.07 s on two cores of this decade, 0.14 s on one), with
    /// a quarter less memory at the peak of every command. The lanes are computed on as many
    /// cores as there are; an attacker's cost per guess is the same as with one lane.
    fn default() -> Self {
        Self {
            memory_kib: Self::DEFAULT_MEMORY_KIB,
            iterations: Self::DEFAULT_ITERATIONS,
            parallelism: Self::DEFAULT_PARALLELISM,
        }
    }
}

/// A decoded key file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFile {
    /// Argon2id parameters.
    pub kdf: KdfParams,
    /// Random salt.
    pub salt: [u8; 32],
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_ns: i64,
    /// Host the key was made on.
    pub hostname: String,
    /// User who made the key.
    pub username: String,
    /// Nonce of the wrapping AEAD.
    pub nonce: [u8; NONCE_LEN],
    /// The sealed master secret.
    pub wrapped: [u8; WRAPPED_LEN],
}

impl KeyFile {
    /// The bytes before the nonce: envelope header and parameters. They are the associated
    /// data of the wrapping AEAD, so parameters cannot be altered without detection.
    pub fn aad_prefix(&self) -> Result<Vec<u8>, FormatError> {
        let mut w = Writer::with_capacity(128);
        w.bytes(&EnvelopeHeader::new(EnvelopeKind::Key, 0).encode());
        w.magic(&MAGIC, VERSION);
        w.u8(KDF_ARGON2ID);
        w.u32(self.kdf.memory_kib);
        w.u32(self.kdf.iterations);
        w.u32(self.kdf.parallelism);
        w.bytes(&self.salt);
        w.i64(self.created_ns);
        w.var_bytes(self.hostname.as_bytes())?;
        w.var_bytes(self.username.as_bytes())?;
        Ok(w.finish())
    }

    /// The complete file.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut b = self.aad_prefix()?;
        b.extend_from_slice(&self.nonce);
        b.extend_from_slice(&self.wrapped);
        Ok(b)
    }

    /// Parses a complete file.
    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let h = EnvelopeHeader::decode(b, EnvelopeKind::Key)?;
        // Key files are never compressed: their header is fixed (and authenticated).
        if h.flags != 0 {
            return Err(FormatError::Corrupt {
                what: "key file",
                detail: format!("envelope flags {:#04x} (must be 0)", h.flags),
            });
        }
        let mut r = Reader::new(&b[HEADER_LEN..], "key file");
        r.magic(&MAGIC, VERSION)?;
        let kdf_code = r.u8()?;
        if kdf_code != KDF_ARGON2ID {
            return Err(FormatError::Newer {
                what: "key file",
                detail: format!("unknown KDF {kdf_code}"),
            });
        }
        let kdf = KdfParams {
            memory_kib: r.u32()?,
            iterations: r.u32()?,
            parallelism: r.u32()?,
        };
        let salt = r.array()?;
        let created_ns = r.i64()?;
        let hostname = String::from_utf8_lossy(r.var_bytes()?).into_owned();
        let username = String::from_utf8_lossy(r.var_bytes()?).into_owned();
        let nonce = r.array()?;
        let wrapped = r.array()?;
        r.finish()?;
        Ok(Self {
            kdf,
            salt,
            created_ns,
            hostname,
            username,
            nonce,
            wrapped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_cost_is_rfc_9106s_memory_time_product_in_less_memory() {
        let d = KdfParams::default();
        // RFC 9106's second recommended option: 64 MiB and 3 passes.
        assert_eq!(
            u64::from(d.memory_kib) * u64::from(d.iterations),
            64 * 1024 * 3
        );
        assert!(d.memory_kib <= 48 * 1024 && d.iterations >= 3 && d.parallelism == 4);
    }

    proptest! {
        #[test]
        fn round_trip(m in any::<u32>(), t in any::<u32>(), p in any::<u32>(), salt in any::<[u8; 32]>(),
                      created in any::<i64>(), host in ".{0,20}", user in ".{0,20}",
                      nonce in any::<[u8; 24]>(), w1 in any::<[u8; 32]>(), w2 in any::<[u8; 16]>()) {
            let mut wrapped = [0u8; WRAPPED_LEN];
            wrapped[..32].copy_from_slice(&w1);
            wrapped[32..].copy_from_slice(&w2);
            let k = KeyFile {
                kdf: KdfParams { memory_kib: m, iterations: t, parallelism: p },
                salt, created_ns: created, hostname: host, username: user, nonce, wrapped,
            };
            let b = k.encode().unwrap();
            prop_assert_eq!(KeyFile::decode(&b).unwrap(), k);
            for cut in [0, 5, b.len() / 2, b.len() - 1] {
                prop_assert!(KeyFile::decode(&b[..cut]).is_err());
            }
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = KeyFile::decode(&b);
        }
    }
}

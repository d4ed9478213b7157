//! The repository configuration: format version, chunker parameters, compression, pack size,
//! (version 2) content keys copied from another repository and (version 3) the sealing
//! cipher. Stored encrypted in `config`.

use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::FormatError;
use crate::codec::{Reader, Writer};

/// Structure magic of the config body.
pub const MAGIC: [u8; 4] = *b"ACFG";
/// Newest config version this code reads. The oldest version that can hold a config is
/// written, so older readers open every repository they can read: version 1 without copied
/// content keys and with XChaCha20-Poly1305, version 2 with content keys, version 3 with
/// another cipher.
pub const VERSION: u16 = 3;
/// The version without content keys.
pub const VERSION_1: u16 = 1;
/// The version with content keys and XChaCha20-Poly1305.
pub const VERSION_2: u16 = 2;
/// Version 2 flag bit: the body ends with copied content keys.
pub const FLAG_CONTENT_KEYS: u8 = 1;

/// Smallest chunk size the format accepts.
pub const MIN_CHUNK: u32 = 1024;
/// Largest chunk size the format accepts (64 MiB).
pub const MAX_CHUNK: u32 = 64 << 20;
/// Smallest pack size target (1 MiB).
pub const MIN_PACK: u32 = 1 << 20;
/// Largest pack size target (1 GiB).
pub const MAX_PACK: u32 = 1 << 30;

/// The AEAD that seals every repository file but the config and the key files (which are
/// always XChaCha20-Poly1305, so they open before the config is known).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cipher {
    /// XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha): every repository before version 3.
    #[default]
    XChaCha20Poly1305,
    /// XAES-256-GCM (c2sp.org/XAES-256-GCM): AES-256-GCM with a 192-bit nonce, several times
    /// faster where the processor has AES and carry-less multiply instructions.
    Xaes256Gcm,
}

impl Cipher {
    /// The config byte.
    pub fn code(self) -> u8 {
        match self {
            Cipher::XChaCha20Poly1305 => 1,
            Cipher::Xaes256Gcm => 2,
        }
    }
    /// The cipher of a config byte.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Cipher::XChaCha20Poly1305),
            2 => Some(Cipher::Xaes256Gcm),
            _ => None,
        }
    }
    /// The name `init --cipher` takes and `cat config` shows.
    pub fn name(self) -> &'static str {
        match self {
            Cipher::XChaCha20Poly1305 => "xchacha20-poly1305",
            Cipher::Xaes256Gcm => "xaes-256-gcm",
        }
    }
}

/// FastCDC sizes in bytes. `avg` is a power of two; `min <= avg <= max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkerParams {
    /// No chunk is shorter, except the last of a file.
    pub min: u32,
    /// Target average (a power of two).
    pub avg: u32,
    /// No chunk is longer.
    pub max: u32,
}

impl Default for ChunkerParams {
    /// 256 KiB / 1 MiB / 4 MiB.
    fn default() -> Self {
        Self {
            min: 256 << 10,
            avg: 1 << 20,
            max: 4 << 20,
        }
    }
}

impl ChunkerParams {
    /// Checks the constraints, naming the offending value.
    pub fn validate(&self) -> Result<(), String> {
        if !self.avg.is_power_of_two() {
            return Err(format!(
                "average chunk size {} is not a power of two",
                self.avg
            ));
        }
        if self.min < MIN_CHUNK || self.max > MAX_CHUNK {
            return Err(format!(
                "chunk sizes {}..{} outside the allowed {MIN_CHUNK}..{MAX_CHUNK}",
                self.min, self.max
            ));
        }
        if !(self.min <= self.avg && self.avg <= self.max) {
            return Err(format!(
                "chunk sizes must satisfy min <= avg <= max (got {}/{}/{})",
                self.min, self.avg, self.max
            ));
        }
        Ok(())
    }
}

/// The blob-id key and the chunker key of another repository, copied by
/// `init --copy-chunker-params` so that both repositories identify and cut data alike. When a
/// config holds them they replace the subkeys derived from the master secret. Zeroed when
/// dropped; never printed.
#[derive(Clone, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct ContentKeys {
    id: [u8; 32],
    chunker: [u8; 32],
}

impl std::fmt::Debug for ContentKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ContentKeys(..)")
    }
}

impl ContentKeys {
    /// Keys from the blob-id key and the chunker key.
    pub fn new(id: &[u8; 32], chunker: &[u8; 32]) -> Self {
        Self {
            id: *id,
            chunker: *chunker,
        }
    }
    /// The key of blob ids (keyed BLAKE3).
    pub fn id_key(&self) -> &[u8; 32] {
        &self.id
    }
    /// The key of the chunker's gear table.
    pub fn chunker_key(&self) -> &[u8; 32] {
        &self.chunker
    }
}

/// The decrypted `config` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Random repository id (names the local cache, tells repositories apart).
    pub repo_id: [u8; 32],
    /// Chunker sizes.
    pub chunker: ChunkerParams,
    /// Default zstd level for blobs; 0 stores blobs uncompressed.
    pub compression: i32,
    /// Target pack size in bytes.
    pub pack_size: u32,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_ns: i64,
    /// Blob-id and chunker keys copied from another repository (version 2), used instead of
    /// the ones derived from the master secret; `None` for the derived ones (version 1).
    pub content_keys: Option<ContentKeys>,
    /// The cipher sealing snapshots, index files, packs and locks (version 3; versions 1
    /// and 2 are XChaCha20-Poly1305).
    pub cipher: Cipher,
}

impl Config {
    /// The version [`Config::encode`] writes: 3 with a cipher other than
    /// XChaCha20-Poly1305, else 2 with content keys, else 1.
    pub fn version(&self) -> u16 {
        if self.cipher != Cipher::XChaCha20Poly1305 {
            VERSION
        } else if self.content_keys.is_some() {
            VERSION_2
        } else {
            VERSION_1
        }
    }

    /// Encodes the body (before sealing): version 1 bytes without content keys, version 2
    /// (the same fields, a flag byte and the two keys) with them, version 3 (version 2's
    /// bytes and a cipher byte) with a cipher other than XChaCha20-Poly1305.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(131);
        w.magic(&MAGIC, self.version());
        w.bytes(&self.repo_id);
        w.u32(self.chunker.min);
        w.u32(self.chunker.avg);
        w.u32(self.chunker.max);
        w.i32(self.compression);
        w.u32(self.pack_size);
        w.i64(self.created_ns);
        let version = self.version();
        match &self.content_keys {
            Some(k) => {
                w.u8(FLAG_CONTENT_KEYS);
                w.bytes(k.id_key());
                w.bytes(k.chunker_key());
            }
            None if version >= VERSION_2 => w.u8(0),
            None => {}
        }
        if version >= 3 {
            w.u8(self.cipher.code());
        }
        w.finish()
    }

    /// Decodes and validates a body of version 1, 2 or 3.
    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b, "config");
        let version = r.magic(&MAGIC, VERSION)?;
        let repo_id = r.array()?;
        let chunker = ChunkerParams {
            min: r.u32()?,
            avg: r.u32()?,
            max: r.u32()?,
        };
        let compression = r.i32()?;
        let pack_size = r.u32()?;
        let created_ns = r.i64()?;
        let mut content_keys = None;
        if version >= 2 {
            let flags = r.u8()?;
            if flags & !FLAG_CONTENT_KEYS != 0 {
                return Err(FormatError::Newer {
                    what: "config",
                    detail: format!("unknown flags {flags:#04x}"),
                });
            }
            if flags & FLAG_CONTENT_KEYS != 0 {
                let mut id: [u8; 32] = r.array()?;
                let mut chunker: [u8; 32] = r.array()?;
                content_keys = Some(ContentKeys::new(&id, &chunker));
                id.zeroize();
                chunker.zeroize();
            }
        }
        let mut cipher = Cipher::XChaCha20Poly1305;
        if version >= 3 {
            let code = r.u8()?;
            // Version 3 exists for the other ciphers; XChaCha20-Poly1305 is written as
            // version 1 or 2, so each config has one encoding.
            cipher = match Cipher::from_code(code) {
                Some(Cipher::XChaCha20Poly1305) => {
                    return Err(FormatError::Corrupt {
                        what: "config",
                        detail: format!("version 3 with cipher {code} (written as version 1 or 2)"),
                    });
                }
                Some(c) => c,
                None => {
                    return Err(FormatError::Newer {
                        what: "config",
                        detail: format!("unknown cipher {code}"),
                    });
                }
            };
        }
        r.finish()?;
        let c = Self {
            repo_id,
            chunker,
            compression,
            pack_size,
            created_ns,
            content_keys,
            cipher,
        };
        c.validate().map_err(|detail| FormatError::Corrupt {
            what: "config",
            detail,
        })?;
        Ok(c)
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), String> {
        self.chunker.validate()?;
        if !(MIN_PACK..=MAX_PACK).contains(&self.pack_size) {
            return Err(format!(
                "pack size {} outside the allowed {MIN_PACK}..{MAX_PACK}",
                self.pack_size
            ));
        }
        if !(-7..=22).contains(&self.compression) {
            return Err(format!(
                "compression level {} outside -7..22",
                self.compression
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(repo_id in any::<[u8; 32]>(), shift in 10u32..26, level in -7i32..=22,
                      pack in MIN_PACK..=MAX_PACK, created in any::<i64>(),
                      keys in proptest::option::of(any::<([u8; 32], [u8; 32])>()), aes in any::<bool>()) {
            let avg = 1u32 << shift;
            let c = Config {
                repo_id,
                chunker: ChunkerParams { min: (avg / 4).max(MIN_CHUNK), avg, max: (avg * 4).min(MAX_CHUNK) },
                compression: level,
                pack_size: pack,
                created_ns: created,
                content_keys: keys.map(|(i, k)| ContentKeys::new(&i, &k)),
                cipher: if aes { Cipher::Xaes256Gcm } else { Cipher::XChaCha20Poly1305 },
            };
            let bytes = c.encode();
            let len = match (c.content_keys.is_some(), aes) {
                (false, false) => 66,
                (true, false) => 131,
                (false, true) => 68,
                (true, true) => 132,
            };
            prop_assert_eq!(bytes.len(), len);
            prop_assert_eq!(Config::decode(&bytes).unwrap(), c);
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..140)) {
            let _ = Config::decode(&b);
        }
    }

    fn sample() -> Config {
        Config {
            repo_id: [1; 32],
            chunker: ChunkerParams::default(),
            compression: 3,
            pack_size: 16 << 20,
            created_ns: 0x0102_0304_0506_0708,
            content_keys: None,
            cipher: Cipher::XChaCha20Poly1305,
        }
    }

    #[test]
    fn rejects_bad_params() {
        let mut c = sample();
        c.chunker.avg = 1000;
        assert!(Config::decode(&c.encode()).is_err());
    }

    /// The exact bytes of both versions: without keys, version 1 as before (older readers
    /// open it); with keys, version 2 = the same fields, flag 1, id key, chunker key.
    #[test]
    fn v1_and_v2_bytes() {
        let mut c = sample();
        let v1 = c.encode();
        let mut expected = b"ACFG".to_vec();
        expected.extend_from_slice(&[1, 0]);
        expected.extend_from_slice(&[1; 32]);
        expected.extend_from_slice(&(256u32 << 10).to_le_bytes());
        expected.extend_from_slice(&(1u32 << 20).to_le_bytes());
        expected.extend_from_slice(&(4u32 << 20).to_le_bytes());
        expected.extend_from_slice(&3i32.to_le_bytes());
        expected.extend_from_slice(&(16u32 << 20).to_le_bytes());
        expected.extend_from_slice(&[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(v1, expected);
        assert_eq!(c.version(), 1);
        assert_eq!(Config::decode(&v1).unwrap(), c);

        c.content_keys = Some(ContentKeys::new(&[0xaa; 32], &[0xbb; 32]));
        let v2 = c.encode();
        assert_eq!(c.version(), 2);
        assert_eq!(&v2[..4], b"ACFG");
        assert_eq!(&v2[4..6], &[2, 0]);
        assert_eq!(&v2[6..66], &expected[6..66]);
        assert_eq!(v2[66], 1);
        assert_eq!(&v2[67..99], &[0xaa; 32]);
        assert_eq!(&v2[99..131], &[0xbb; 32]);
        assert_eq!(v2.len(), 131);
        let back = Config::decode(&v2).unwrap();
        assert_eq!(back, c);
        let keys = back.content_keys.as_ref().unwrap();
        assert_eq!(
            (keys.id_key(), keys.chunker_key()),
            (&[0xaa; 32], &[0xbb; 32])
        );
        // Keys are never printed.
        assert!(!format!("{back:?}").contains("170"));

        // Version 2 without keys (flag 0) decodes; unknown flags, a missing or partial key
        // section, trailing bytes and version 3 are refused.
        let mut no_keys = v1.clone();
        no_keys[4] = 2;
        no_keys.push(0);
        assert_eq!(Config::decode(&no_keys).unwrap().content_keys, None);
        let mut bad_flag = v2.clone();
        bad_flag[66] = 3;
        let err = Config::decode(&bad_flag).unwrap_err();
        assert!(
            err.is_newer() && err.to_string().contains("made by a newer arca"),
            "{err}"
        );
        let mut missing = v1.clone();
        missing[4] = 2;
        assert!(Config::decode(&missing).is_err());
        assert!(Config::decode(&v2[..100]).is_err());
        let mut trailing = v2.clone();
        trailing.push(0);
        assert!(Config::decode(&trailing).is_err());
        let mut v1_trailing = v1.clone();
        v1_trailing.push(0);
        assert!(Config::decode(&v1_trailing).is_err());
        let mut v4 = v2;
        v4[4] = 4;
        assert!(matches!(
            Config::decode(&v4),
            Err(FormatError::UnsupportedVersion { version: 4, .. })
        ));
    }

    /// Version 3: version 2's bytes (flags, keys when flagged) and the cipher byte; written
    /// only for a cipher other than XChaCha20-Poly1305. Unknown ciphers, XChaCha20-Poly1305
    /// (which versions 1 and 2 spell) and a missing cipher byte are refused.
    #[test]
    fn v3_bytes() {
        let mut c = sample();
        let v1 = c.encode();
        c.cipher = Cipher::Xaes256Gcm;
        let v3 = c.encode();
        assert_eq!(c.version(), 3);
        assert_eq!(&v3[4..6], &[3, 0]);
        assert_eq!(&v3[6..66], &v1[6..66]);
        assert_eq!(&v3[66..], &[0, 2]);
        assert_eq!(Config::decode(&v3).unwrap(), c);
        c.content_keys = Some(ContentKeys::new(&[0xaa; 32], &[0xbb; 32]));
        let with_keys = c.encode();
        assert_eq!(with_keys.len(), 132);
        assert_eq!((with_keys[66], with_keys[131]), (1, 2));
        assert_eq!(Config::decode(&with_keys).unwrap(), c);
        for code in [0u8, 3, 0xff] {
            let mut bad = v3.clone();
            bad[67] = code;
            let err = Config::decode(&bad).unwrap_err();
            assert!(err.is_newer(), "{err}");
            let err = err.to_string();
            assert!(err.contains(&format!("unknown cipher {code}")), "{err}");
            assert!(err.contains("made by a newer arca"), "{err}");
        }
        let mut xchacha = v3.clone();
        xchacha[67] = Cipher::XChaCha20Poly1305.code();
        let err = Config::decode(&xchacha).unwrap_err();
        assert!(!err.is_newer(), "{err}");
        assert!(Config::decode(&v3[..67]).is_err());
    }
}

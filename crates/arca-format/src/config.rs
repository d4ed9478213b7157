//! The repository configuration: format version, chunker parameters, compression, pack size.
//! Stored encrypted in the `config` file; chosen at `init` and fixed afterwards.

use crate::FormatError;
use crate::codec::{Reader, Writer};

/// Structure magic of the config body.
pub const MAGIC: [u8; 4] = *b"ACFG";
/// Current config version.
pub const VERSION: u16 = 1;

/// Smallest chunk size the format accepts.
pub const MIN_CHUNK: u32 = 1024;
/// Largest chunk size the format accepts (64 MiB).
pub const MAX_CHUNK: u32 = 64 << 20;
/// Smallest pack size target (1 MiB).
pub const MIN_PACK: u32 = 1 << 20;
/// Largest pack size target (1 GiB).
pub const MAX_PACK: u32 = 1 << 30;

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
}

impl Config {
    /// Encodes the body (before sealing).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(64);
        w.magic(&MAGIC, VERSION);
        w.bytes(&self.repo_id);
        w.u32(self.chunker.min);
        w.u32(self.chunker.avg);
        w.u32(self.chunker.max);
        w.i32(self.compression);
        w.u32(self.pack_size);
        w.i64(self.created_ns);
        w.finish()
    }

    /// Decodes and validates a body.
    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b, "config");
        r.magic(&MAGIC, VERSION)?;
        let repo_id = r.array()?;
        let chunker = ChunkerParams {
            min: r.u32()?,
            avg: r.u32()?,
            max: r.u32()?,
        };
        let compression = r.i32()?;
        let pack_size = r.u32()?;
        let created_ns = r.i64()?;
        r.finish()?;
        let c = Self {
            repo_id,
            chunker,
            compression,
            pack_size,
            created_ns,
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
                      pack in MIN_PACK..=MAX_PACK, created in any::<i64>()) {
            let avg = 1u32 << shift;
            let c = Config {
                repo_id,
                chunker: ChunkerParams { min: (avg / 4).max(MIN_CHUNK), avg, max: (avg * 4).min(MAX_CHUNK) },
                compression: level,
                pack_size: pack,
                created_ns: created,
            };
            prop_assert_eq!(Config::decode(&c.encode()).unwrap(), c);
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Config::decode(&b);
        }
    }

    #[test]
    fn rejects_bad_params() {
        let mut c = Config {
            repo_id: [1; 32],
            chunker: ChunkerParams::default(),
            compression: 3,
            pack_size: 16 << 20,
            created_ns: 0,
        };
        c.chunker.avg = 1000;
        assert!(Config::decode(&c.encode()).is_err());
    }
}

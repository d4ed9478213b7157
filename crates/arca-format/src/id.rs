//! 32-byte identifiers of blobs and repository files, shown as 64 lowercase hex digits.

use std::fmt;
use std::str::FromStr;

use crate::FormatError;

/// A 32-byte id: a keyed BLAKE3 hash for blobs, a plain BLAKE3 hash of the stored bytes for
/// repository files (packs, index files, snapshots, keys).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Id(pub [u8; 32]);

impl Id {
    /// Byte length of an id.
    pub const LEN: usize = 32;

    /// Full lowercase hex form (64 digits).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
    /// The first 8 hex digits, as shown in listings.
    pub fn short(&self) -> String {
        hex::encode(&self.0[..4])
    }
    /// The first 16 bytes, the key of the in-memory index.
    pub fn prefix16(&self) -> [u8; 16] {
        let mut p = [0u8; 16];
        p.copy_from_slice(&self.0[..16]);
        p
    }
    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
    /// Parses 64 hex digits.
    pub fn from_hex(s: &str) -> Result<Self, FormatError> {
        let mut b = [0u8; 32];
        hex::decode_to_slice(s, &mut b).map_err(|e| FormatError::Corrupt {
            what: "id",
            detail: format!("{s:?} is not 64 hex digits: {e}"),
        })?;
        Ok(Id(b))
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({})", self.short())
    }
}

impl FromStr for Id {
    type Err = FormatError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Id::from_hex(s)
    }
}

impl serde::Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> serde::Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Id::from_hex(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_errors() {
        let id = Id([0xab; 32]);
        assert_eq!(Id::from_hex(&id.to_hex()).unwrap(), id);
        assert_eq!(id.short(), "abababab");
        assert!(Id::from_hex("abc").is_err());
        assert!(Id::from_hex(&"zz".repeat(32)).is_err());
    }
}

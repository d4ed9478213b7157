//! The 8-byte header that starts every repository file, and the framing of sealed payloads.
//! The header is authenticated as associated data of the AEAD that seals the payload.

use crate::FormatError;

/// Which repository file an envelope holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvelopeKind {
    /// `config`.
    Config,
    /// `keys/<id>`.
    Key,
    /// `snapshots/<id>`.
    Snapshot,
    /// `index/<id>`.
    Index,
    /// `data/<xx>/<id>`.
    Pack,
    /// `locks/<id>`.
    Lock,
}

impl EnvelopeKind {
    /// The ASCII byte stored at offset 4.
    pub fn code(self) -> u8 {
        match self {
            EnvelopeKind::Config => b'C',
            EnvelopeKind::Key => b'K',
            EnvelopeKind::Snapshot => b'S',
            EnvelopeKind::Index => b'I',
            EnvelopeKind::Pack => b'P',
            EnvelopeKind::Lock => b'L',
        }
    }
    /// Parses the byte at offset 4.
    pub fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            b'C' => EnvelopeKind::Config,
            b'K' => EnvelopeKind::Key,
            b'S' => EnvelopeKind::Snapshot,
            b'I' => EnvelopeKind::Index,
            b'P' => EnvelopeKind::Pack,
            b'L' => EnvelopeKind::Lock,
            _ => return None,
        })
    }
    /// Human name.
    pub fn name(self) -> &'static str {
        match self {
            EnvelopeKind::Config => "config",
            EnvelopeKind::Key => "key file",
            EnvelopeKind::Snapshot => "snapshot",
            EnvelopeKind::Index => "index file",
            EnvelopeKind::Pack => "pack",
            EnvelopeKind::Lock => "lock file",
        }
    }
}

/// File magic, bytes 0..4 of every repository file.
pub const FILE_MAGIC: [u8; 4] = *b"ARCA";
/// Current envelope version.
pub const ENVELOPE_VERSION: u8 = 1;
/// Length of [`EnvelopeHeader`] on disk.
pub const HEADER_LEN: usize = 8;
/// Flag bit 0: the payload was zstd-compressed before sealing.
pub const FLAG_ZSTD: u8 = 1;

/// The first 8 bytes of every repository file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeHeader {
    /// What the file holds.
    pub kind: EnvelopeKind,
    /// Envelope version (1).
    pub version: u8,
    /// Flags ([`FLAG_ZSTD`]).
    pub flags: u8,
}

impl EnvelopeHeader {
    /// A version-1 header.
    pub fn new(kind: EnvelopeKind, flags: u8) -> Self {
        Self {
            kind,
            version: ENVELOPE_VERSION,
            flags,
        }
    }
    /// The 8 bytes: magic, kind, version, flags, reserved zero.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        [
            FILE_MAGIC[0],
            FILE_MAGIC[1],
            FILE_MAGIC[2],
            FILE_MAGIC[3],
            self.kind.code(),
            self.version,
            self.flags,
            0,
        ]
    }
    /// Parses and checks the header of a file expected to be of kind `expect`.
    pub fn decode(b: &[u8], expect: EnvelopeKind) -> Result<Self, FormatError> {
        let what = expect.name();
        if b.len() < HEADER_LEN {
            return Err(FormatError::Truncated {
                what,
                offset: 0,
                wanted: HEADER_LEN as u64,
            });
        }
        if b[0..4] != FILE_MAGIC {
            return Err(FormatError::BadMagic {
                what,
                expected: FILE_MAGIC,
                found: [b[0], b[1], b[2], b[3]],
            });
        }
        let kind = EnvelopeKind::from_code(b[4])
            .filter(|k| *k == expect)
            .ok_or_else(|| FormatError::Corrupt {
                what,
                detail: format!("file kind byte {:#04x}", b[4]),
            })?;
        if b[5] == 0 {
            return Err(FormatError::Corrupt {
                what,
                detail: "envelope version 0".into(),
            });
        }
        // The envelope's own version, not the body's (a config body of version 2 is read).
        if b[5] != ENVELOPE_VERSION {
            return Err(FormatError::Newer {
                what,
                detail: format!("envelope version {}", b[5]),
            });
        }
        if b[6] & !FLAG_ZSTD != 0 || b[7] != 0 {
            return Err(FormatError::Newer {
                what,
                detail: format!("unknown envelope flags {:#04x}/{:#04x}", b[6], b[7]),
            });
        }
        Ok(Self {
            kind,
            version: b[5],
            flags: b[6],
        })
    }
    /// Whether the payload is zstd-compressed.
    pub fn compressed(&self) -> bool {
        self.flags & FLAG_ZSTD != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_checks() {
        for kind in [
            EnvelopeKind::Config,
            EnvelopeKind::Key,
            EnvelopeKind::Snapshot,
            EnvelopeKind::Index,
            EnvelopeKind::Pack,
        ] {
            let h = EnvelopeHeader::new(kind, FLAG_ZSTD);
            let b = h.encode();
            assert_eq!(&b[..4], b"ARCA");
            assert_eq!(EnvelopeHeader::decode(&b, kind).unwrap(), h);
        }
        let b = EnvelopeHeader::new(EnvelopeKind::Index, 0).encode();
        assert!(EnvelopeHeader::decode(&b, EnvelopeKind::Snapshot).is_err());
        let mut bad = b;
        bad[5] = 9;
        assert!(matches!(
            EnvelopeHeader::decode(&bad, EnvelopeKind::Index),
            Err(FormatError::Newer { .. })
        ));
        // Version 0 is never written, and unknown flags are a newer arca's.
        bad[5] = 0;
        assert!(matches!(
            EnvelopeHeader::decode(&bad, EnvelopeKind::Index),
            Err(FormatError::Corrupt { .. })
        ));
        let mut flags = b;
        flags[6] = 0x80;
        let e = EnvelopeHeader::decode(&flags, EnvelopeKind::Index).unwrap_err();
        assert!(e.is_newer(), "{e}");
        assert!(EnvelopeHeader::decode(&b[..5], EnvelopeKind::Index).is_err());
    }
}

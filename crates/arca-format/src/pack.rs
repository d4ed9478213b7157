//! Pack files: sealed blobs of one kind followed by a sealed header listing them and an
//! 8-byte trailer giving the header's length, so that the tail of a pack lists it.

use crate::codec::{Reader, Writer};
use crate::{BlobKind, FormatError, Id};

/// Structure magic of the (decrypted) pack header.
pub const HEADER_MAGIC: [u8; 4] = *b"APHD";
/// Current pack header version.
pub const HEADER_VERSION: u16 = 1;
/// Magic closing every pack.
pub const TRAILER_MAGIC: [u8; 4] = *b"APTR";
/// Trailer length: u32 sealed-header length + magic.
pub const TRAILER_LEN: usize = 8;
/// Encoded size of one [`PackEntry`].
pub const ENTRY_LEN: usize = 44;

/// Where one blob sits in a pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PackEntry {
    /// Blob id.
    pub id: Id,
    /// Offset of the sealed blob from the start of the pack file.
    pub offset: u32,
    /// Length of the sealed blob (nonce + ciphertext + tag).
    pub length: u32,
    /// Length of the blob's plaintext after decompression.
    pub raw_length: u32,
}

impl PackEntry {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.bytes(&self.id.0);
        w.u32(self.offset);
        w.u32(self.length);
        w.u32(self.raw_length);
    }
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        Ok(Self {
            id: Id(r.array()?),
            offset: r.u32()?,
            length: r.u32()?,
            raw_length: r.u32()?,
        })
    }
}

/// The decrypted pack header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackHeader {
    /// Kind of every blob in the pack.
    pub kind: BlobKind,
    /// Blobs in file order.
    pub entries: Vec<PackEntry>,
}

impl PackHeader {
    /// Encodes the plaintext header.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut w = Writer::with_capacity(11 + self.entries.len() * ENTRY_LEN);
        w.magic(&HEADER_MAGIC, HEADER_VERSION);
        w.u8(self.kind.code());
        w.u32(crate::codec::len_u32(self.entries.len())?);
        for e in &self.entries {
            e.encode(&mut w);
        }
        Ok(w.finish())
    }

    /// Decodes a plaintext header and checks that blobs do not overlap and lie inside a pack
    /// of `pack_len` bytes (pass `u64::MAX` when the size is unknown).
    pub fn decode(b: &[u8], pack_len: u64) -> Result<Self, FormatError> {
        let mut r = Reader::new(b, "pack header");
        r.magic(&HEADER_MAGIC, HEADER_VERSION)?;
        let kind = BlobKind::from_code(r.u8()?)?;
        let n = r.count(ENTRY_LEN)?;
        let mut entries = Vec::with_capacity(n);
        let mut end = crate::envelope::HEADER_LEN as u64;
        for _ in 0..n {
            let e = PackEntry::decode(&mut r)?;
            let e_end = u64::from(e.offset) + u64::from(e.length);
            if u64::from(e.offset) < end || e_end > pack_len {
                return Err(FormatError::Corrupt {
                    what: "pack header",
                    detail: format!(
                        "blob {} at {}+{} overlaps or exceeds the pack",
                        e.id, e.offset, e.length
                    ),
                });
            }
            end = e_end;
            entries.push(e);
        }
        r.finish()?;
        Ok(Self { kind, entries })
    }
}

/// The last 8 bytes of a pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackTrailer {
    /// Length of the sealed header just before the trailer.
    pub header_len: u32,
}

impl PackTrailer {
    /// Encodes the trailer.
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut b = [0u8; TRAILER_LEN];
        b[..4].copy_from_slice(&self.header_len.to_le_bytes());
        b[4..].copy_from_slice(&TRAILER_MAGIC);
        b
    }
    /// Decodes the last 8 bytes of `tail`.
    pub fn decode(tail: &[u8]) -> Result<Self, FormatError> {
        if tail.len() < TRAILER_LEN {
            return Err(FormatError::Truncated {
                what: "pack trailer",
                offset: 0,
                wanted: TRAILER_LEN as u64,
            });
        }
        let t = &tail[tail.len() - TRAILER_LEN..];
        if t[4..] != TRAILER_MAGIC {
            return Err(FormatError::BadMagic {
                what: "pack trailer",
                expected: TRAILER_MAGIC,
                found: [t[4], t[5], t[6], t[7]],
            });
        }
        let header_len = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        Ok(Self { header_len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entries_strategy() -> impl Strategy<Value = Vec<PackEntry>> {
        proptest::collection::vec(
            (any::<[u8; 32]>(), 41u32..5000, any::<u32>(), 0u32..100),
            0..50,
        )
        .prop_map(|v| {
            let mut off = 8u32;
            v.into_iter()
                .map(|(id, len, raw, gap)| {
                    let e = PackEntry {
                        id: Id(id),
                        offset: off + gap,
                        length: len,
                        raw_length: raw,
                    };
                    off += gap + len;
                    e
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn header_round_trip(entries in entries_strategy(), tree in any::<bool>()) {
            let h = PackHeader { kind: if tree { BlobKind::Tree } else { BlobKind::Data }, entries };
            let b = h.encode().unwrap();
            prop_assert_eq!(PackHeader::decode(&b, u64::MAX).unwrap(), h.clone());
            if let Some(last) = h.entries.last() {
                let too_small = u64::from(last.offset) + u64::from(last.length) - 1;
                prop_assert!(PackHeader::decode(&b, too_small).is_err());
            }
        }

        #[test]
        fn trailer_round_trip(len in any::<u32>()) {
            let t = PackTrailer { header_len: len };
            prop_assert_eq!(PackTrailer::decode(&t.encode()).unwrap(), t);
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = PackHeader::decode(&b, u64::MAX);
            let _ = PackTrailer::decode(&b);
        }
    }

    #[test]
    fn overlapping_entries_are_rejected() {
        let e = |offset, length| PackEntry {
            id: Id([0; 32]),
            offset,
            length,
            raw_length: 0,
        };
        let h = PackHeader {
            kind: BlobKind::Data,
            entries: vec![e(8, 100), e(50, 10)],
        };
        assert!(PackHeader::decode(&h.encode().unwrap(), u64::MAX).is_err());
    }
}

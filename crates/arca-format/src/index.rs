//! Index files (`index/<id>`): for each pack, its kind, size and the blobs it holds.
//! Together the index files map every blob id to (pack, offset, length, raw length).

use crate::codec::{Reader, Writer, len_u32};
use crate::pack::{ENTRY_LEN, PackEntry};
use crate::{BlobKind, FormatError, Id};

/// Structure magic of the index body.
pub const MAGIC: [u8; 4] = *b"AIDX";
/// Current index version.
pub const VERSION: u16 = 1;

/// One pack as listed in an index file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexPack {
    /// Pack id (BLAKE3 of the pack file).
    pub id: Id,
    /// Kind of all blobs in the pack.
    pub kind: BlobKind,
    /// Size of the pack file in bytes.
    pub size: u64,
    /// The pack's blobs.
    pub blobs: Vec<PackEntry>,
}

/// A decoded index file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexFile {
    /// Index files this one replaces (written by maintenance; empty after a backup).
    pub supersedes: Vec<Id>,
    /// Packs described.
    pub packs: Vec<IndexPack>,
}

impl IndexFile {
    /// Encodes the body (before compression and sealing).
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let blobs: usize = self.packs.iter().map(|p| p.blobs.len()).sum();
        let mut w = Writer::with_capacity(14 + self.packs.len() * 45 + blobs * ENTRY_LEN);
        w.magic(&MAGIC, VERSION);
        w.u32(len_u32(self.supersedes.len())?);
        for id in &self.supersedes {
            w.bytes(&id.0);
        }
        w.u32(len_u32(self.packs.len())?);
        for p in &self.packs {
            w.bytes(&p.id.0);
            w.u8(p.kind.code());
            w.u64(p.size);
            w.u32(len_u32(p.blobs.len())?);
            for b in &p.blobs {
                b.encode(&mut w);
            }
        }
        Ok(w.finish())
    }

    /// Decodes a body.
    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b, "index file");
        r.magic(&MAGIC, VERSION)?;
        let n = r.count(32)?;
        let mut supersedes = Vec::with_capacity(n);
        for _ in 0..n {
            supersedes.push(Id(r.array()?));
        }
        let n = r.count(45)?;
        let mut packs = Vec::with_capacity(n);
        for _ in 0..n {
            let id = Id(r.array()?);
            let kind = BlobKind::from_code(r.u8()?)?;
            let size = r.u64()?;
            let nb = r.count(ENTRY_LEN)?;
            let mut blobs = Vec::with_capacity(nb);
            for _ in 0..nb {
                let e = PackEntry::decode(&mut r)?;
                if u64::from(e.offset) + u64::from(e.length) > size {
                    return Err(FormatError::Corrupt {
                        what: "index file",
                        detail: format!("blob {} lies beyond the end of pack {id}", e.id),
                    });
                }
                blobs.push(e);
            }
            packs.push(IndexPack {
                id,
                kind,
                size,
                blobs,
            });
        }
        r.finish()?;
        Ok(Self { supersedes, packs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pack_strategy() -> impl Strategy<Value = IndexPack> {
        (
            any::<[u8; 32]>(),
            any::<bool>(),
            proptest::collection::vec(
                (
                    any::<[u8; 32]>(),
                    0u32..1 << 20,
                    0u32..1 << 20,
                    any::<u32>(),
                ),
                0..20,
            ),
        )
            .prop_map(|(id, tree, blobs)| {
                let blobs: Vec<PackEntry> = blobs
                    .into_iter()
                    .map(|(id, offset, length, raw_length)| PackEntry {
                        id: Id(id),
                        offset,
                        length,
                        raw_length,
                    })
                    .collect();
                let size = blobs
                    .iter()
                    .map(|b| u64::from(b.offset) + u64::from(b.length))
                    .max()
                    .unwrap_or(0)
                    + 8;
                IndexPack {
                    id: Id(id),
                    kind: if tree { BlobKind::Tree } else { BlobKind::Data },
                    size,
                    blobs,
                }
            })
    }

    proptest! {
        #[test]
        fn round_trip(sup in proptest::collection::vec(any::<[u8; 32]>(), 0..3),
                      packs in proptest::collection::vec(pack_strategy(), 0..8)) {
            let f = IndexFile { supersedes: sup.into_iter().map(Id).collect(), packs };
            let b = f.encode().unwrap();
            prop_assert_eq!(IndexFile::decode(&b).unwrap(), f);
            if b.len() > 10 {
                prop_assert!(IndexFile::decode(&b[..b.len() - 1]).is_err());
            }
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = IndexFile::decode(&b);
        }
    }
}

//! Building packs from sealed blobs and reading a pack's header back from its tail.

use arca_backend::{Backend, FileType};
use arca_crypto::Sealer;
use arca_format::envelope::{EnvelopeHeader, EnvelopeKind, HEADER_LEN};
use arca_format::pack::{PackEntry, PackHeader, PackTrailer, TRAILER_LEN};
use arca_format::{BlobKind, Id, IndexPack};

use crate::blob::SealedBlob;
use crate::{RepoError, Result};

/// How much of a pack's tail is read in the first request; most headers fit.
const TAIL_GUESS: u64 = 64 * 1024;

/// Accumulates sealed blobs of one kind into a pack.
#[derive(Debug)]
pub struct PackWriter {
    kind: BlobKind,
    buf: Vec<u8>,
    entries: Vec<PackEntry>,
    raw_bytes: u64,
}

/// A complete pack, ready to upload, with the index entry describing it.
#[derive(Debug)]
pub struct FinishedPack {
    /// Pack id: BLAKE3 of `bytes`.
    pub id: Id,
    /// The pack file.
    pub bytes: Vec<u8>,
    /// Index entry for the pack.
    pub index: IndexPack,
    /// Plain bytes of the blobs inside.
    pub raw_bytes: u64,
}

impl PackWriter {
    /// An empty pack of `kind`, with room for about `capacity` bytes.
    pub fn new(kind: BlobKind, capacity: usize) -> Self {
        Self::with_buffer(kind, Vec::with_capacity(capacity))
    }

    /// An empty pack of `kind` written into `buf` (cleared first), so that a pipeline can
    /// reuse the buffers of packs it has uploaded.
    pub fn with_buffer(kind: BlobKind, mut buf: Vec<u8>) -> Self {
        buf.clear();
        buf.extend_from_slice(&EnvelopeHeader::new(EnvelopeKind::Pack, 0).encode());
        Self {
            kind,
            buf,
            entries: vec![],
            raw_bytes: 0,
        }
    }

    /// Kind of the blobs in this pack.
    pub fn kind(&self) -> BlobKind {
        self.kind
    }

    /// Appends a blob. Fails if the pack would exceed the 4 GiB offset range.
    pub fn add(&mut self, blob: &SealedBlob) -> Result<()> {
        self.add_sealed(blob.id, blob.raw_len, &blob.bytes)
    }

    /// Appends the sealed bytes of blob `id` (of `raw_len` plain bytes) as they are, e.g.
    /// straight from another pack. Fails if the pack would exceed the 4 GiB offset range.
    pub fn add_sealed(&mut self, id: Id, raw_len: u32, sealed: &[u8]) -> Result<()> {
        let offset = self.offset_for(sealed.len())?;
        self.buf.extend_from_slice(sealed);
        self.entries.push(PackEntry {
            id,
            offset,
            length: sealed.len() as u32,
            raw_length: raw_len,
        });
        self.raw_bytes += u64::from(raw_len);
        Ok(())
    }

    /// Appends every blob of `other` (of the same kind), as if added here one by one.
    pub fn absorb(&mut self, other: PackWriter) -> Result<()> {
        if other.kind != self.kind {
            return Err(RepoError::Invalid {
                what: "pack",
                detail: format!("cannot put {} blobs in a {} pack", other.kind, self.kind),
            });
        }
        let body = other.buf.get(HEADER_LEN..).unwrap_or_default();
        let base = self.offset_for(body.len())?;
        self.buf.extend_from_slice(body);
        self.entries
            .extend(other.entries.into_iter().map(|e| PackEntry {
                offset: e.offset - HEADER_LEN as u32 + base,
                ..e
            }));
        self.raw_bytes += other.raw_bytes;
        Ok(())
    }

    /// The offset `len` more bytes would start at, if the pack stays within 4 GiB.
    fn offset_for(&self, len: usize) -> Result<u32> {
        let too_big = || RepoError::Invalid {
            what: "pack size",
            detail: "pack exceeds 4 GiB".into(),
        };
        let offset = u32::try_from(self.buf.len()).map_err(|_| too_big())?;
        let length = u32::try_from(len).map_err(|_| too_big())?;
        offset.checked_add(length).ok_or_else(too_big)?;
        Ok(offset)
    }

    /// Bytes so far.
    pub fn size(&self) -> usize {
        self.buf.len()
    }

    /// Number of blobs so far.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no blob was added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Seals the header, appends header and trailer, and names the pack.
    pub fn finish(self, sealer: &Sealer) -> Result<FinishedPack> {
        let Self {
            kind,
            mut buf,
            entries,
            raw_bytes,
        } = self;
        let header = PackHeader { kind, entries };
        let plain = header
            .encode()
            .map_err(|e| RepoError::format("pack header", e))?;
        let before = buf.len();
        let aad = EnvelopeHeader::new(EnvelopeKind::Pack, 0).encode();
        sealer
            .seal_into(&aad, &plain, &mut buf)
            .map_err(|e| RepoError::crypto("pack header", e))?;
        let header_len = u32::try_from(buf.len() - before).map_err(|_| RepoError::Invalid {
            what: "pack header",
            detail: "header exceeds 4 GiB".into(),
        })?;
        buf.extend_from_slice(&PackTrailer { header_len }.encode());
        let id = Id(*blake3::hash(&buf).as_bytes());
        let index = IndexPack {
            id,
            kind,
            size: buf.len() as u64,
            blobs: header.entries,
        };
        Ok(FinishedPack {
            id,
            bytes: buf,
            index,
            raw_bytes,
        })
    }
}

/// Where the sealed header of a pack of `size` bytes lies, from the pack's last bytes
/// (`tail`, at least the trailer): `(offset, length)`.
fn header_range(tail: &[u8], size: u64, what: &dyn Fn() -> String) -> Result<(u64, u64)> {
    let min = (HEADER_LEN + TRAILER_LEN + arca_crypto::SEAL_OVERHEAD) as u64;
    if size < min {
        return Err(RepoError::format(
            what(),
            arca_format::FormatError::Truncated {
                what: "pack",
                offset: 0,
                wanted: min,
            },
        ));
    }
    let trailer = PackTrailer::decode(tail).map_err(|e| RepoError::format(what(), e))?;
    let hlen = u64::from(trailer.header_len);
    if hlen + (HEADER_LEN + TRAILER_LEN) as u64 > size {
        return Err(RepoError::format(
            what(),
            arca_format::FormatError::Corrupt {
                what: "pack trailer",
                detail: format!("header length {hlen} exceeds pack size {size}"),
            },
        ));
    }
    Ok((size - TRAILER_LEN as u64 - hlen, hlen))
}

/// Opens and decodes a sealed pack header that starts at `header_start`.
fn open_header(
    sealer: &Sealer,
    name: &str,
    sealed: &[u8],
    header_start: u64,
) -> Result<PackHeader> {
    let what = || format!("pack {name}");
    let aad = EnvelopeHeader::new(EnvelopeKind::Pack, 0).encode();
    let plain = sealer
        .open(&aad, sealed, &|| format!("header of pack {name}"))
        .map_err(|e| RepoError::crypto(what(), e))?;
    PackHeader::decode(&plain, header_start).map_err(|e| RepoError::format(what(), e))
}

/// Reads and opens the header of pack `id`, whose size is `size`, from its tail: one read
/// when the header fits in the first 64 KiB, two otherwise.
pub fn read_pack_header(
    backend: &dyn Backend,
    sealer: &Sealer,
    id: &Id,
    size: u64,
) -> Result<PackHeader> {
    let name = id.to_hex();
    let what = || format!("pack {name}");
    let tail_len = size.min(TAIL_GUESS);
    let tail = if size < (HEADER_LEN + TRAILER_LEN) as u64 {
        vec![]
    } else {
        backend.read_range(FileType::Pack, &name, size - tail_len, tail_len)?
    };
    let (start, hlen) = header_range(&tail, size, &what)?;
    let sealed = if hlen + TRAILER_LEN as u64 <= tail_len {
        let s = (tail_len - TRAILER_LEN as u64 - hlen) as usize;
        tail[s..s + hlen as usize].to_vec()
    } else {
        backend.read_range(FileType::Pack, &name, start, hlen)?
    };
    open_header(sealer, &name, &sealed, start)
}

/// Opens the header of a pack whose bytes are all in memory, checking its envelope too.
pub fn pack_header_from_bytes(sealer: &Sealer, id: &Id, bytes: &[u8]) -> Result<PackHeader> {
    let name = id.to_hex();
    let what = || format!("pack {name}");
    EnvelopeHeader::decode(bytes, EnvelopeKind::Pack).map_err(|e| RepoError::format(what(), e))?;
    let (start, hlen) = header_range(bytes, bytes.len() as u64, &what)?;
    open_header(
        sealer,
        &name,
        &bytes[start as usize..(start + hlen) as usize],
        start,
    )
}

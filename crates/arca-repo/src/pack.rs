//! Building packs from sealed blobs and reading a pack's header back from its tail.

use arca_backend::{Backend, FileSink, FileType};
use arca_crypto::Sealer;
use arca_format::envelope::{EnvelopeHeader, EnvelopeKind, HEADER_LEN};
use arca_format::pack::{PackEntry, PackHeader, PackTrailer, TRAILER_LEN};
use arca_format::{BlobKind, Id, IndexPack};

use crate::blob::SealedBlob;
use crate::{RepoError, Result};

/// A streaming pack goes to its sink in whole pieces of this many bytes (the tail with the
/// header at the end): BLAKE3 hashes large inputs several chunks at a time (SIMD), small
/// blobs one by one would not. Whole pieces, not "what is buffered once a blob passes the
/// mark": a `.tmp-*` file growing at blob ends told anyone watching the repository the
/// exact size of every chunk (hunt 22).
const STREAM_PIECE: usize = 1 << 20;

/// How much of a pack's tail is read in the first request; most headers fit.
const TAIL_GUESS: u64 = 64 * 1024;

/// Accumulates sealed blobs of one kind into a pack: in memory, or written as it grows into
/// a backend's [`FileSink`] ([`PackWriter::streaming`]).
#[derive(Debug)]
pub struct PackWriter {
    kind: BlobKind,
    /// The pack (in memory), or what is not yet in the sink (streaming).
    buf: Vec<u8>,
    entries: Vec<PackEntry>,
    raw_bytes: u64,
    stream: Option<Stream>,
}

/// Where a streaming pack goes, and what went there.
struct Stream {
    sink: Box<dyn FileSink>,
    hash: blake3::Hasher,
    written: u64,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("sink", &self.sink)
            .field("written", &self.written)
            .finish()
    }
}

/// A complete pack, ready to upload, with the index entry describing it.
#[derive(Debug)]
pub struct FinishedPack {
    /// Pack id: BLAKE3 of the pack file.
    pub id: Id,
    /// The pack file; empty when it was streamed into `sink`.
    pub bytes: Vec<u8>,
    /// The written pack, to [`FileSink::commit`] under the id, for a streaming writer.
    pub sink: Option<Box<dyn FileSink>>,
    /// Index entry for the pack.
    pub index: IndexPack,
    /// Plain bytes of the blobs inside.
    pub raw_bytes: u64,
}

impl FinishedPack {
    /// Stores the pack under its id: commits its sink (once), or writes its bytes.
    pub fn store(&mut self, backend: &dyn Backend) -> Result<()> {
        let name = self.id.to_hex();
        match self.sink.take() {
            Some(sink) => sink.commit(&name)?,
            None => backend.write(FileType::Pack, &name, &self.bytes)?,
        }
        Ok(())
    }
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
            stream: None,
        }
    }

    /// An empty pack of `kind` written into `sink` as blobs are added, so that it is never
    /// held in memory whole; [`PackWriter::finish`] hands the sink on, to be committed
    /// under the pack's id.
    pub fn streaming(kind: BlobKind, sink: Box<dyn FileSink>) -> Self {
        let mut w = Self::with_buffer(kind, Vec::new());
        w.stream = Some(Stream {
            sink,
            hash: blake3::Hasher::new(),
            written: 0,
        });
        w
    }

    /// Streaming: moves the whole [`STREAM_PIECE`]s buffered into the sink, keeping the rest
    /// (in memory: nothing to do).
    fn drain(&mut self) -> Result<()> {
        let whole = self.buf.len() - self.buf.len() % STREAM_PIECE;
        if let Some(s) = &mut self.stream
            && whole > 0
        {
            let piece = &self.buf[..whole];
            s.sink.write(piece)?;
            s.hash.update(piece);
            s.written += whole as u64;
            self.buf.drain(..whole);
        }
        Ok(())
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
        if self.buf.len() >= STREAM_PIECE {
            self.drain()?;
        }
        self.entries.push(PackEntry {
            id,
            offset,
            length: sealed.len() as u32,
            raw_length: raw_len,
        });
        self.raw_bytes += u64::from(raw_len);
        Ok(())
    }

    /// The offset `len` more bytes would start at, if the pack stays within 4 GiB.
    fn offset_for(&self, len: usize) -> Result<u32> {
        let too_big = || RepoError::Invalid {
            what: "pack size",
            detail: "pack exceeds 4 GiB".into(),
        };
        let offset = u32::try_from(self.size()).map_err(|_| too_big())?;
        let length = u32::try_from(len).map_err(|_| too_big())?;
        offset.checked_add(length).ok_or_else(too_big)?;
        Ok(offset)
    }

    /// Bytes so far.
    pub fn size(&self) -> usize {
        let written = self.stream.as_ref().map_or(0, |s| s.written);
        usize::try_from(written).unwrap_or(usize::MAX) + self.buf.len()
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
            stream,
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
        let (id, size, bytes, sink) = match stream {
            None => (blake3::hash(&buf), buf.len() as u64, buf, None),
            Some(mut s) => {
                s.sink.write(&buf)?;
                s.hash.update(&buf);
                let size = s.written + buf.len() as u64;
                buf.clear();
                (s.hash.finalize(), size, buf, Some(s.sink))
            }
        };
        let id = Id(*id.as_bytes());
        let index = IndexPack {
            id,
            kind,
            size,
            blobs: header.entries,
        };
        Ok(FinishedPack {
            id,
            bytes,
            sink,
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
    open_header(sealer, &name, &sealed, start).map_err(|e| match e {
        // The header is sealed with the pack's first 8 bytes as associated data, taken to
        // be this version's (the tail alone was read). When it does not open, those bytes
        // tell a newer arca's pack (not damage) from a damaged one.
        RepoError::Crypto { .. } => match backend.read_range(FileType::Pack, &name, 0, 8) {
            Ok(head) => match EnvelopeHeader::decode(&head, EnvelopeKind::Pack) {
                Err(f) if f.is_newer() => RepoError::format(what(), f),
                _ => e,
            },
            Err(_) => e,
        },
        e => e,
    })
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use arca_backend::LocalBackend;

    use super::*;
    use crate::blob::seal_blob;
    use crate::testing::repo;

    /// A header that does not open is damage, unless the pack's first bytes say a newer arca
    /// made it (its header sealed with those bytes): then it is a newer format, which check
    /// and `repair index` leave alone.
    #[test]
    fn a_newer_packs_header_is_not_taken_for_damage() {
        let r = repo(Arc::new(arca_backend::MemoryBackend::new()));
        let b = r.backend();
        let pack = |version: u8| {
            let mut env = EnvelopeHeader::new(EnvelopeKind::Pack, 0);
            env.version = version;
            let mut buf = env.encode().to_vec();
            let plain = PackHeader {
                kind: BlobKind::Data,
                entries: vec![],
            }
            .encode()
            .unwrap();
            let before = buf.len();
            r.sealer()
                .seal_into(&env.encode(), &plain, &mut buf)
                .unwrap();
            let header_len = (buf.len() - before) as u32;
            buf.extend_from_slice(&PackTrailer { header_len }.encode());
            let id = Id(*blake3::hash(&buf).as_bytes());
            b.write(FileType::Pack, &id.to_hex(), &buf).unwrap();
            (id, buf)
        };
        let (id, buf) = pack(1);
        assert!(read_pack_header(b.as_ref(), r.sealer(), &id, buf.len() as u64).is_ok());
        let (id, buf) = pack(2);
        let e = read_pack_header(b.as_ref(), r.sealer(), &id, buf.len() as u64).unwrap_err();
        assert!(e.is_newer_format() && !e.is_corruption(), "{e}");
        assert!(e.to_string().contains(&id.to_hex()), "{e}");
        // A version-1 pack whose header is damaged stays damage.
        let (id, mut buf) = pack(1);
        let at = buf.len() - TRAILER_LEN - 3;
        buf[at] ^= 1;
        b.write(FileType::Pack, &id.to_hex(), &buf).unwrap();
        let e = read_pack_header(b.as_ref(), r.sealer(), &id, buf.len() as u64).unwrap_err();
        assert!(e.is_corruption() && !e.is_newer_format(), "{e}");
    }

    /// A pack streamed into a local file while blobs are added is the pack the index
    /// describes: named by the BLAKE3 of the file, its header read back from the file, every
    /// blob at its offset; and nothing is visible under a pack name before the commit.
    #[test]
    fn a_streamed_pack_is_the_file_its_index_entry_describes() {
        let dir = tempfile::tempdir().unwrap();
        let r = repo(Arc::new(LocalBackend::new(dir.path().join("repo"))));
        let b = r.backend();
        let sink = b
            .sink(FileType::Pack)
            .unwrap()
            .expect("a local folder streams");
        let mut w = PackWriter::streaming(BlobKind::Data, sink);
        let mut sealed = vec![];
        for i in 0..40u32 {
            // Sizes across page boundaries and the 1 MiB pieces the writer hands on.
            let data: Vec<u8> = (0..(i * 37_001 % 300_000 + 1))
                .map(|j| (j * 7 + i) as u8)
                .collect();
            let id = r.key().blob_id(&data);
            let blob = seal_blob(r.sealer(), BlobKind::Data, id, &data, 0).unwrap();
            w.add(&blob).unwrap();
            sealed.push(blob);
            // The file grows by whole pieces only: its size tells no chunk's end (hunt 22).
            let tmp = std::fs::read_dir(dir.path().join("repo/data"))
                .unwrap()
                .map(|e| e.unwrap())
                .find(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
                .unwrap();
            assert_eq!(tmp.metadata().unwrap().len() % STREAM_PIECE as u64, 0);
        }
        assert!(w.size() > 4 << 20, "the pack is written in several pieces");
        let mut p = w.finish(r.sealer()).unwrap();
        assert!(p.bytes.is_empty() && p.sink.is_some());
        assert!(r.list_ids(FileType::Pack).unwrap().is_empty());
        p.store(b.as_ref()).unwrap();
        let file = b.read(FileType::Pack, &p.id.to_hex()).unwrap();
        assert_eq!(file.len() as u64, p.index.size);
        assert_eq!(Id(*blake3::hash(&file).as_bytes()), p.id);
        let header = read_pack_header(b.as_ref(), r.sealer(), &p.id, p.index.size).unwrap();
        assert_eq!(header.entries, p.index.blobs);
        assert_eq!(
            pack_header_from_bytes(r.sealer(), &p.id, &file)
                .unwrap()
                .entries,
            p.index.blobs
        );
        for (e, blob) in p.index.blobs.iter().zip(&sealed) {
            assert_eq!(e.id, blob.id);
            let at = e.offset as usize;
            assert_eq!(&file[at..at + e.length as usize], blob.bytes.as_slice());
        }
        let data = dir.path().join("repo").join("data");
        let leftovers = std::fs::read_dir(&data)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".tmp-")
            })
            .count();
        assert_eq!(leftovers, 0, "the temporary file became the pack");
    }

    /// A streaming writer dropped before its pack is stored (a failed backup) leaves no file.
    #[test]
    fn an_abandoned_streamed_pack_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let r = repo(Arc::new(LocalBackend::new(dir.path().join("repo"))));
        let sink = r.backend().sink(FileType::Pack).unwrap().unwrap();
        let mut w = PackWriter::streaming(BlobKind::Data, sink);
        let id = r.key().blob_id(b"x");
        w.add(&seal_blob(r.sealer(), BlobKind::Data, id, b"x", 0).unwrap())
            .unwrap();
        let data = dir.path().join("repo").join("data");
        let count = || {
            std::fs::read_dir(&data)
                .unwrap()
                .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_file())
                .count()
        };
        assert_eq!(count(), 1, "the temporary file is there from the start");
        let p = w.finish(r.sealer()).unwrap();
        drop(p);
        assert_eq!(count(), 0);
        assert!(r.list_ids(FileType::Pack).unwrap().is_empty());
    }
}

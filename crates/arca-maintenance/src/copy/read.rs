//! Reading the data blobs a copy needs from the source: merged ranged reads of the source
//! packs on several threads, each blob verified, given its target id and sealed for the target.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;

use arca_format::{BlobKind, Id};
use arca_repo::blob::{BlobOpener, SealedBlob, seal_blob};
use arca_repo::trees::TreeLoader;
use arca_repo::trees::ranges::{Read, read_with_retry};
use arca_repo::{Index, Repository};

use super::CopyError;

/// One read of a source pack: blobs with their source id, plain length and order of use.
pub(super) type PackRead = Read<(Id, u32, usize)>;

/// One data blob read from the source.
#[derive(Debug)]
pub(super) struct Got {
    /// Its source id.
    pub source: Id,
    /// Its id in the target.
    pub target: Id,
    /// Plain length.
    pub raw_len: u32,
    /// Whether the target's index lacks it.
    pub new: bool,
    /// Sealed for the target (new blobs, not in a dry run).
    pub sealed: Option<SealedBlob>,
}

/// What the reader threads need.
pub(super) struct ReadCtx<'a> {
    src: &'a Repository,
    src_index: &'a Index,
    dst: &'a Repository,
    dst_index: &'a Index,
    stop: &'a AtomicBool,
    /// Whether both repositories give blobs the same ids.
    pub same_ids: bool,
    /// Whether new blobs are sealed (not in a dry run).
    pub seal: bool,
    /// Reads in flight.
    pub threads: usize,
    /// Blobs of a pack closer than this are read as one range.
    pub read_gap: u64,
    /// Largest single read.
    pub max_read: u64,
}

impl<'a> ReadCtx<'a> {
    /// Gap, read size and threads as restore would choose them for the source's backend.
    pub fn new(
        src: &'a Repository,
        src_index: &'a Index,
        dst: &'a Repository,
        dst_index: &'a Index,
        stop: &'a AtomicBool,
    ) -> Self {
        let l = TreeLoader::new(src, src_index, stop);
        Self {
            src,
            src_index,
            dst,
            dst_index,
            stop,
            same_ids: false,
            seal: true,
            threads: l.threads,
            read_gap: l.read_gap,
            max_read: l.max_read,
        }
    }

    /// Reads one range of a source pack and handles the blobs in it.
    fn one(
        &self,
        r: &PackRead,
        buf: &mut Vec<u8>,
        opener: &mut BlobOpener,
    ) -> Result<Vec<Got>, CopyError> {
        let pack = self.src_index.packs()[r.pack as usize].id;
        let read = match read_with_retry(
            self.src.backend().as_ref(),
            &pack,
            r.offset,
            r.len,
            buf,
            self.stop,
        ) {
            Ok((at, _)) => Ok(at),
            // A pack the index names that is gone: told as the damage it is, naming a blob
            // and the check to run, as a damaged blob is (it was the bare OS error).
            Err(e) if e.is_not_found() => {
                Err(format!("the pack is missing ({} not found)", e.location))
            }
            Err(e) => return Err(e.into()),
        };
        let level = self.dst.config().compression;
        let mut out = Vec::with_capacity(r.items.len());
        for s in &r.items {
            let (id, raw_len, _) = s.item;
            let opened = read.clone().and_then(|at| {
                let start = at + (s.offset - r.offset) as usize;
                let sealed = buf
                    .get_mut(start..start + s.len as usize)
                    .ok_or_else(|| "the read came back short".to_string())?;
                opener
                    .open(
                        self.src.key(),
                        self.src.sealer(),
                        BlobKind::Data,
                        id,
                        pack,
                        sealed,
                        raw_len,
                    )
                    .map_err(|e| e.blob_cause())
            });
            let other;
            let plain: &[u8] = match opened {
                Ok(p) => p,
                // Another copy of the blob, as restore and check use them (hunt 30: one
                // damaged copy stopped the copy of a snapshot that restored whole).
                Err(error) => match self.src.read_blob(self.src_index, BlobKind::Data, &id) {
                    Ok(p) => {
                        other = p;
                        &other
                    }
                    Err(_) => return Err(CopyError::BadBlob { id, pack, error }),
                },
            };
            let (target, new) = if self.same_ids {
                // Only blobs the target lacks are asked for.
                (id, true)
            } else {
                let t = self.dst.key().blob_id(plain);
                (t, !self.dst_index.contains(BlobKind::Data, &t))
            };
            let sealed = if new && self.seal {
                Some(seal_blob(
                    self.dst.sealer(),
                    BlobKind::Data,
                    target,
                    plain,
                    level,
                )?)
            } else {
                None
            };
            out.push(Got {
                source: id,
                target,
                raw_len,
                new,
                sealed,
            });
        }
        Ok(out)
    }
}

/// Runs `reads` on `ctx.threads` threads, handing each read's blobs to `take` on the calling
/// thread (a few reads at most wait in between, so memory stays bounded); returns the bytes
/// read. The first error, of a read or of `take`, stops the readers and is returned.
pub(super) fn read_all(
    ctx: &ReadCtx<'_>,
    reads: &[PackRead],
    mut take: impl FnMut(Vec<Got>) -> Result<(), CopyError>,
) -> Result<u64, CopyError> {
    let threads = ctx.threads.clamp(1, reads.len().max(1));
    let next = AtomicUsize::new(0);
    let (tx, rx) = sync_channel::<Result<(Vec<Got>, u64), CopyError>>(threads);
    std::thread::scope(|s| {
        for _ in 0..threads {
            let tx = tx.clone();
            let next = &next;
            s.spawn(move || {
                let (mut buf, mut opener) = (vec![], BlobOpener::new());
                while !ctx.stop.load(Ordering::Relaxed) {
                    let Some(r) = reads.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        break;
                    };
                    let got = ctx.one(r, &mut buf, &mut opener).map(|g| (g, r.len));
                    if tx.send(got).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut bytes = 0;
        let mut result = Ok(());
        for got in rx.iter() {
            let step = got.and_then(|(g, n)| {
                bytes += n;
                take(g)
            });
            if let Err(e) = step {
                result = Err(e);
                ctx.stop.store(true, Ordering::Relaxed);
                break;
            }
        }
        // Dropping the receiver ends the readers' sends after an error.
        drop(rx);
        result.map(|()| bytes)
    })
}

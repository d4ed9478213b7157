//! Random access to one file of a snapshot: where each content blob starts (prefix sums of
//! the blobs' lengths) and reads of any range that fetch only the blobs the range touches.

use std::sync::Arc;

use arca_format::ContentRef;

use crate::MountError;

/// The blobs of one open file and the offset at which each starts.
#[derive(Debug)]
pub(crate) struct FileMap {
    content: Vec<ContentRef>,
    /// `starts[i]` is the file offset of blob `i`; one more entry holds the end.
    starts: Vec<u64>,
}

impl FileMap {
    /// The map of a file made of `content`, in order.
    pub(crate) fn new(content: &[ContentRef]) -> Self {
        let mut starts = Vec::with_capacity(content.len() + 1);
        let mut at = 0u64;
        starts.push(0);
        for c in content {
            at += u64::from(c.len);
            starts.push(at);
        }
        Self {
            content: content.to_vec(),
            starts,
        }
    }

    /// The file's length: the sum of its blobs' lengths.
    pub(crate) fn len(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// The index of the blob holding byte `offset` (`offset` below [`Self::len`]).
    fn blob_at(&self, offset: u64) -> usize {
        // The last start at or before `offset`; zero-length blobs are stepped over.
        self.starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1)
    }

    /// Up to `size` bytes from `offset` (fewer at the end of the file), taking each blob
    /// from `fetch`; a blob whose plain length differs from the tree's is an error.
    pub(crate) fn read(
        &self,
        offset: u64,
        size: u32,
        mut fetch: impl FnMut(&ContentRef) -> Result<Arc<Vec<u8>>, MountError>,
    ) -> Result<Vec<u8>, MountError> {
        let end = self.len().min(offset.saturating_add(u64::from(size)));
        if offset >= end {
            return Ok(vec![]);
        }
        let mut out = Vec::with_capacity((end - offset) as usize);
        let mut i = self.blob_at(offset);
        let mut at = offset;
        while at < end && i < self.content.len() {
            let c = &self.content[i];
            let (start, stop) = (self.starts[i], self.starts[i + 1]);
            if stop > at {
                let data = fetch(c)?;
                if data.len() as u64 != u64::from(c.len) {
                    return Err(MountError::BlobLength {
                        id: c.id,
                        expected: c.len,
                        actual: data.len() as u64,
                    });
                }
                let from = (at - start) as usize;
                let to = (end.min(stop) - start) as usize;
                out.extend_from_slice(&data[from..to]);
                at = start + to as u64;
            }
            i += 1;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use arca_format::Id;

    fn blob(i: u8, len: u32) -> (ContentRef, Vec<u8>) {
        let data: Vec<u8> = (0..len)
            .map(|j| i.wrapping_mul(31).wrapping_add(j as u8))
            .collect();
        (
            ContentRef {
                id: Id([i; 32]),
                len,
            },
            data,
        )
    }

    #[test]
    fn reads_any_range_fetching_only_touched_blobs() {
        let blobs: Vec<_> = [(1, 10), (2, 0), (3, 7), (4, 1), (5, 20)]
            .into_iter()
            .map(|(i, l)| blob(i, l))
            .collect();
        let whole: Vec<u8> = blobs.iter().flat_map(|b| b.1.clone()).collect();
        let refs: Vec<ContentRef> = blobs.iter().map(|b| b.0).collect();
        let m = FileMap::new(&refs);
        assert_eq!(m.len(), 38);
        for off in 0..40u64 {
            for size in [0u32, 1, 3, 9, 17, 40, 100] {
                let mut fetched = vec![];
                let got = m
                    .read(off, size, |c| {
                        fetched.push(c.id.0[0]);
                        let b = blobs.iter().find(|b| b.0.id == c.id).unwrap();
                        Ok(Arc::new(b.1.clone()))
                    })
                    .unwrap();
                let lo = (off as usize).min(whole.len());
                let hi = (off as usize + size as usize).min(whole.len());
                assert_eq!(got, whole[lo..hi], "offset {off} size {size}");
                // Only blobs overlapping the range are fetched, each once.
                let want: Vec<u8> = blobs
                    .iter()
                    .zip(m.starts.windows(2))
                    .filter(|(_, w)| lo < hi && w[1] > w[0] && w[0] < hi as u64 && w[1] > lo as u64)
                    .map(|(b, _)| b.0.id.0[0])
                    .collect();
                assert_eq!(fetched, want, "offset {off} size {size}");
            }
        }
    }

    #[test]
    fn wrong_blob_length_is_an_error() {
        let (r, _) = blob(1, 10);
        let m = FileMap::new(&[r]);
        let e = m.read(0, 5, |_| Ok(Arc::new(vec![0; 9]))).unwrap_err();
        assert!(matches!(
            e,
            MountError::BlobLength {
                expected: 10,
                actual: 9,
                ..
            }
        ));
        assert!(
            FileMap::new(&[])
                .read(0, 10, |_| unreachable!())
                .unwrap()
                .is_empty()
        );
    }
}

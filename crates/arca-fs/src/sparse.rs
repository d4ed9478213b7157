//! Writing file content so that runs of zeros become holes.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Granularity of holes: zero blocks of this size, aligned in the file, are not written.
pub const HOLE_BLOCK: u64 = 4096;

/// Whether `b` is all zeros.
pub fn is_zero(b: &[u8]) -> bool {
    b.chunks(64).all(|c| c.iter().fold(0u8, |a, &x| a | x) == 0)
}

/// Writes `data` at `offset` of `file`, skipping aligned all-zero blocks so they stay holes.
/// The target range must read as zeros already (a freshly sized file). Returns the bytes
/// actually written.
pub fn write_sparse(file: &File, offset: u64, data: &[u8]) -> io::Result<u64> {
    write_sparse_with(file, offset, data, Punch::No)
}

/// [`write_sparse`] into a file whose space was reserved ([`crate::preallocate`]): the
/// aligned zero blocks skipped are also punched out of the reservation, so that they are holes
/// and not allocated zeros. (Where the file system cannot punch holes they stay reserved
/// zeros, which read the same.)
pub fn write_sparse_reserved(file: &File, offset: u64, data: &[u8]) -> io::Result<u64> {
    write_sparse_with(file, offset, data, Punch::BestEffort)
}

/// [`write_sparse`] over any existing content (a file being repaired in place): the aligned
/// zero blocks are punched out, and written as zeros where the file system cannot punch
/// holes (what was there must not stay). Writing them all as data allocated the zeros of a
/// sparse file's repaired blocks.
pub fn write_sparse_over(file: &File, offset: u64, data: &[u8]) -> io::Result<u64> {
    write_sparse_with(file, offset, data, Punch::OrWrite)
}

/// What becomes of the aligned zero blocks [`write_sparse_with`] skips.
#[derive(Clone, Copy, PartialEq)]
enum Punch {
    /// Nothing: they are holes already.
    No,
    /// Punched out where the file system can; they read as zeros either way.
    BestEffort,
    /// Punched out, or else written as zeros.
    OrWrite,
}

fn write_sparse_with(file: &File, offset: u64, data: &[u8], punch: Punch) -> io::Result<u64> {
    let mut written = 0u64;
    let mut pos = 0usize;
    let mut run_start: Option<usize> = None;
    // The whole aligned zero blocks skipped since the last data, for `punch`.
    let mut hole: Option<(u64, u64)> = None;
    let punch_hole = |h: &mut Option<(u64, u64)>, written: &mut u64| -> io::Result<()> {
        if let Some((from, to)) = h.take() {
            match punch {
                Punch::No => {}
                // A range not punched stays reserved zeros, which read the same.
                Punch::BestEffort => {
                    let _ = crate::punch_hole(file, from, to - from);
                }
                Punch::OrWrite => {
                    if !crate::punch_hole(file, from, to - from) {
                        let s = (from - offset) as usize;
                        let e = (to - offset) as usize;
                        file.write_all_at(&data[s..e], from)?;
                        *written += to - from;
                    }
                }
            }
        }
        Ok(())
    };
    while pos < data.len() {
        let abs = offset + pos as u64;
        let to_boundary = (HOLE_BLOCK - abs % HOLE_BLOCK) as usize;
        let end = (pos + to_boundary).min(data.len());
        let whole = end - pos == HOLE_BLOCK as usize;
        // Over existing content, zeros that cannot be a hole of their own (part of a block, at
        // a chunk's edge or the file's end) are written: skipped, the old bytes under them
        // stayed, in a file then called restored.
        let zero = is_zero(&data[pos..end]) && (whole || punch != Punch::OrWrite);
        if zero && whole {
            let to = offset + end as u64;
            hole = Some(hole.map_or((abs, to), |(from, _)| (from, to)));
        } else if !zero {
            punch_hole(&mut hole, &mut written)?;
        }
        match (zero, run_start) {
            (true, Some(s)) => {
                file.write_all_at(&data[s..pos], offset + s as u64)?;
                written += (pos - s) as u64;
                run_start = None;
            }
            (false, None) => run_start = Some(pos),
            _ => {}
        }
        pos = end;
    }
    punch_hole(&mut hole, &mut written)?;
    if let Some(s) = run_start {
        file.write_all_at(&data[s..], offset + s as u64)?;
        written += (data.len() - s) as u64;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn zero_blocks_become_holes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let f = File::create(&p).unwrap();
        let size = 8u64 << 20;
        f.set_len(size).unwrap();
        let mut data = vec![0u8; 6 << 20];
        data[100] = 1;
        data[(5 << 20) + 7] = 2;
        let w = write_sparse(&f, 1000, &data).unwrap();
        assert!(w <= 3 * HOLE_BLOCK, "{w}");
        f.sync_all().unwrap();
        let back = std::fs::read(&p).unwrap();
        assert_eq!(&back[1000..1000 + data.len()], &data[..]);
        assert!(back[..1000].iter().all(|&b| b == 0));
        let m = std::fs::metadata(&p).unwrap();
        assert!(
            m.blocks() * 512 < 1 << 20,
            "{} blocks allocated",
            m.blocks()
        );
        assert!(is_zero(&[0; 13]) && !is_zero(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 1]));
    }

    /// Over old content, zero blocks are punched out (or written, where holes cannot be
    /// made): nothing of what was there stays, and the zeros take no space.
    #[test]
    fn zero_blocks_written_over_old_content_are_punched() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        let old = vec![0xAAu8; 4 << 20];
        f.write_all_at(&old, 0).unwrap();
        f.sync_all().unwrap();
        let mut data = vec![0u8; 3 << 20];
        data[(1 << 20) + 5] = 7;
        let w = write_sparse_over(&f, 4096 * 10, &data).unwrap();
        f.sync_all().unwrap();
        let back = std::fs::read(&p).unwrap();
        assert_eq!(&back[4096 * 10..4096 * 10 + data.len()], &data[..]);
        assert!(back[..4096 * 10].iter().all(|&b| b == 0xAA));
        let blocks = std::fs::metadata(&p).unwrap().blocks() * 512;
        if w <= HOLE_BLOCK {
            // Punched: about 1 MiB of old content and one block are left allocated.
            assert!(blocks < 2 << 20, "{blocks} bytes allocated");
        }
    }

    /// Repairing in place: zeros in part of a block (a chunk's edge, the file's zero tail)
    /// replace what was there; they were skipped and the old bytes stayed (hunt 12).
    #[test]
    fn partial_zero_blocks_written_over_old_content_replace_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        f.write_all_at(&[0xAA; 6000], 0).unwrap();
        // Data, then zeros to the end: the second block is a partial one of zeros.
        let mut data = vec![7u8; 3000];
        data.resize(6000, 0);
        write_sparse_over(&f, 0, &data).unwrap();
        // A chunk starting mid-block with zeros up to the next boundary.
        f.write_all_at(&[0xAA; 2000], 9000).unwrap();
        write_sparse_over(&f, 9000, &[0u8; 2000]).unwrap();
        let mut back = vec![0u8; 11000];
        f.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back[..6000], &data[..]);
        assert!(back[9000..11000].iter().all(|&b| b == 0));
    }

    #[test]
    fn zero_blocks_of_a_reserved_file_are_punched() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let f = File::create(&p).unwrap();
        let size = 4u64 << 20;
        f.set_len(size).unwrap();
        if crate::preallocate(&f, 0, size).is_err() {
            return; // a file system without reservations: nothing to undo
        }
        // Data, a 3 MiB zero run, data: one write, as a chunk holding both.
        let mut data = vec![0u8; size as usize];
        data[..5000].fill(7);
        data[(size as usize) - 10..].fill(9);
        let w = write_sparse_reserved(&f, 0, &data).unwrap();
        assert!(w <= 4 * HOLE_BLOCK, "{w}");
        f.sync_all().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), data);
        let m = std::fs::metadata(&p).unwrap();
        assert!(
            m.blocks() * 512 < 1 << 20,
            "{} blocks allocated",
            m.blocks()
        );
    }
}

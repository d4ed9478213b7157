//! Reading many small files whole with few system calls: one batch of reads goes to the kernel
//! at once (io_uring), so reads of files that lie side by side on the disk merge into one
//! request; where io_uring is unavailable, each file is read with positioned reads.
//!
//! The only `unsafe` of the crate lives here: io_uring submissions (the kernel writes into our
//! buffer after the call returns). Each use carries its SAFETY argument.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// How many files the process may have open (the soft `RLIMIT_NOFILE`; 1024 when unknown),
/// for readers and writers that hold many files open at once.
pub fn open_files_allowed() -> u64 {
    use nix::sys::resource::{Resource, getrlimit};
    getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft)
}

/// Reads batches of small files whole into one buffer it keeps between batches.
pub struct BatchReader {
    ring: Option<io_uring::IoUring>,
    /// Files per submission (the ring's size).
    depth: usize,
    buf: Vec<u8>,
}

impl BatchReader {
    /// A reader submitting up to `depth` reads at once through io_uring, or reading file by
    /// file when the kernel refuses io_uring (too old, disabled, or forbidden by seccomp).
    pub fn new(depth: usize) -> Self {
        let depth = depth.clamp(1, 4096);
        let ring = u32::try_from(depth.next_power_of_two())
            .ok()
            .and_then(|n| io_uring::IoUring::new(n).ok());
        Self {
            ring,
            depth,
            buf: vec![],
        }
    }

    /// A reader that never uses io_uring.
    pub fn plain() -> Self {
        Self {
            ring: None,
            depth: 1,
            buf: vec![],
        }
    }

    /// Whether batches go to the kernel together.
    pub fn batched(&self) -> bool {
        self.ring.is_some()
    }

    /// Reads the first `len` bytes of each `(file, len)`. Gives, per file, the bytes read
    /// (fewer than `len` when the file is shorter) or the error reading it.
    pub fn read<'a>(&'a mut self, files: &[(&File, usize)]) -> Vec<io::Result<&'a [u8]>> {
        let mut spans = Vec::with_capacity(files.len());
        let mut total = 0usize;
        for &(_, len) in files {
            spans.push(total..total + len);
            total += len;
        }
        if self.buf.len() < total {
            self.buf.resize(total, 0);
        }
        let mut got: Vec<Option<io::Result<usize>>> = (0..files.len()).map(|_| None).collect();
        if self.ring.is_some() {
            let mut start = 0;
            while start < files.len() {
                let end = (start + self.depth).min(files.len());
                if !self.submit(&files[start..end], &spans[start..end], &mut got[start..end]) {
                    break;
                }
                start = end;
            }
        }
        // A ring given up took the buffer with it.
        if self.buf.len() < total {
            self.buf.resize(total, 0);
        }
        // Whatever the ring did not read (no ring, an error, a short read) is read here:
        // a short read is finished, an error is met again and reported.
        for (i, &(f, len)) in files.iter().enumerate() {
            let done = match got[i] {
                Some(Ok(n)) if n == len => continue,
                Some(Ok(n)) if n > 0 => n,
                _ => 0,
            };
            let span = spans[i].clone();
            got[i] = Some(
                read_full_at(f, &mut self.buf[span.start + done..span.end], done as u64)
                    .map(|n| n + done),
            );
        }
        let buf = &self.buf;
        got.into_iter()
            .zip(spans)
            .map(|(g, span)| match g {
                Some(Ok(n)) => Ok(&buf[span.start..span.start + n]),
                Some(Err(e)) => Err(e),
                None => Err(io::Error::other("not read")),
            })
            .collect()
    }

    /// Submits one read per file into its span of the buffer and waits for all of them.
    /// False when the ring failed in a way that leaves reads in flight: the ring and the
    /// buffer are then given up (leaked), never reused or freed under the kernel.
    fn submit(
        &mut self,
        files: &[(&File, usize)],
        spans: &[std::ops::Range<usize>],
        got: &mut [Option<io::Result<usize>>],
    ) -> bool {
        let Some(ring) = self.ring.as_mut() else {
            return false;
        };
        let base = self.buf.as_mut_ptr();
        let mut queued = 0;
        for (i, (&(f, len), span)) in files.iter().zip(spans).enumerate() {
            let Ok(len32) = u32::try_from(len) else {
                continue; // too large for one read: read by the fallback
            };
            if len == 0 {
                got[i] = Some(Ok(0));
                continue;
            }
            // SAFETY (pointer): `span` lies inside `self.buf`, which was sized to hold every
            // span before this call.
            let at = unsafe { base.add(span.start) };
            let sqe = io_uring::opcode::Read::new(io_uring::types::Fd(f.as_raw_fd()), at, len32)
                .offset(0)
                .build()
                .user_data(i as u64);
            // SAFETY (submission): the kernel writes up to `len` bytes at `at` until the read
            // completes. Every queued read is waited for below before this function returns,
            // and if waiting fails the buffer is leaked, so the memory stays valid and is not
            // touched by us meanwhile; `f` stays open for the whole call (borrowed).
            if unsafe { ring.submission().push(&sqe) }.is_err() {
                break; // cannot happen: at most `depth` reads per submission
            }
            queued += 1;
        }
        let mut reaped = 0;
        while reaped < queued {
            match ring.submit_and_wait(queued - reaped) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // The reads may still be running: keep their memory and the ring alive.
                    std::mem::forget(std::mem::take(&mut self.buf));
                    if let Some(r) = self.ring.take() {
                        std::mem::forget(r);
                    }
                    for g in got.iter_mut() {
                        *g = None;
                    }
                    return false;
                }
            }
            for cqe in ring.completion() {
                let i = cqe.user_data() as usize;
                let r = cqe.result();
                if let Some(slot) = got.get_mut(i) {
                    *slot = Some(if r >= 0 {
                        Ok(r as usize)
                    } else {
                        Err(io::Error::from_raw_os_error(-r))
                    });
                }
                reaped += 1;
            }
        }
        true
    }
}

/// Reads from `offset` until `buf` is full or the file ends; the number of bytes read.
fn read_full_at(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &std::path::Path) -> Vec<(File, Vec<u8>)> {
        [0usize, 1, 4095, 4096, 100_003, 1 << 20]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let data: Vec<u8> = (0..n).map(|k| (k * 7 + i) as u8).collect();
                let p = dir.join(format!("f{i}"));
                std::fs::write(&p, &data).unwrap();
                (File::open(&p).unwrap(), data)
            })
            .collect()
    }

    fn check(reader: &mut BatchReader) {
        let d = tempfile::tempdir().unwrap();
        let fs = files(d.path());
        // Asked for each file's size, then for more than there is, then for less.
        for extra in [0usize, 10] {
            let req: Vec<(&File, usize)> = fs.iter().map(|(f, d)| (f, d.len() + extra)).collect();
            let got = reader.read(&req);
            for ((_, want), got) in fs.iter().zip(got) {
                assert_eq!(got.unwrap(), &want[..]);
            }
        }
        let req: Vec<(&File, usize)> = fs.iter().map(|(f, d)| (f, d.len() / 2)).collect();
        for ((_, want), got) in fs.iter().zip(reader.read(&req)) {
            assert_eq!(got.unwrap(), &want[..want.len() / 2]);
        }
        // A directory cannot be read: its error comes back, the others are read.
        let dir = File::open(d.path()).unwrap();
        let req = vec![(&fs[4].0, 100_003), (&dir, 10), (&fs[2].0, 4095)];
        let got = reader.read(&req);
        assert_eq!(*got[0].as_ref().unwrap(), &fs[4].1[..]);
        assert_eq!(
            got[1].as_ref().unwrap_err().raw_os_error(),
            Some(libc::EISDIR)
        );
        assert_eq!(*got[2].as_ref().unwrap(), &fs[2].1[..]);
    }

    #[test]
    fn reads_whole_files_batched_and_plain() {
        // More files than one submission holds, so a batch spans several submissions.
        let mut r = BatchReader::new(4);
        check(&mut r);
        check(&mut BatchReader::plain());
        assert!(!BatchReader::plain().batched());
    }
}

//! Ranged reads of packs: merging the byte ranges wanted into few reads (two ranges of one
//! pack closer than the gap become one read, the gap read and thrown away, up to a largest
//! read size), and reading a range with a bounded retry of transient backend failures.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arca_backend::{Backend, BackendError, ErrorKind, FileType};
use arca_format::Id;

/// One wanted range of a pack, carrying what the caller needs to know about it.
#[derive(Debug, Clone)]
pub struct Span<T> {
    /// Pack position in the index.
    pub pack: u32,
    /// Offset in the pack.
    pub offset: u64,
    /// Length.
    pub len: u64,
    /// The caller's payload.
    pub item: T,
}

/// One read covering one or more spans of a pack.
#[derive(Debug, Clone)]
pub struct Read<T> {
    /// Pack position in the index.
    pub pack: u32,
    /// First byte read.
    pub offset: u64,
    /// Bytes read.
    pub len: u64,
    /// The spans inside, by offset.
    pub items: Vec<Span<T>>,
}

/// Sorts `spans` by pack and offset and merges neighbours whose distance is at most `gap`,
/// as long as the merged read stays within `max` bytes (a span longer than `max` is read
/// alone).
pub fn coalesce<T>(mut spans: Vec<Span<T>>, gap: u64, max: u64) -> Vec<Read<T>> {
    spans.sort_by_key(|s| (s.pack, s.offset));
    let mut out: Vec<Read<T>> = vec![];
    for s in spans {
        if let Some(r) = out.last_mut() {
            let end = r.offset + r.len;
            let new_end = end.max(s.offset + s.len);
            if r.pack == s.pack && s.offset <= end.saturating_add(gap) && new_end - r.offset <= max
            {
                r.len = new_end - r.offset;
                r.items.push(s);
                continue;
            }
        }
        out.push(Read {
            pack: s.pack,
            offset: s.offset,
            len: s.len,
            items: vec![s],
        });
    }
    out
}

/// Attempts of one read, the first included.
const ATTEMPTS: u32 = 6;
/// First backoff; doubled after every failure.
const BACKOFF: Duration = Duration::from_millis(100);
/// Longest single backoff.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// No retry starts after this long.
const RETRY_WINDOW: Duration = Duration::from_secs(60);

/// A pseudo-random factor in [0.5, 1.5) for backoff jitter.
fn jitter(seed: u64) -> f64 {
    let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    0.5 + (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Reads `len` bytes of pack `pack` at `offset` into `buf`, retrying transient failures with
/// exponential backoff and jitter (at most 6 attempts, none started after a minute; `stop`
/// cuts a backoff short). Returns where the bytes start in `buf` and the number of retries it
/// took. A read that comes back short fails with [`ErrorKind::ShortRead`].
pub fn read_with_retry(
    backend: &dyn Backend,
    pack: &Id,
    offset: u64,
    len: u64,
    buf: &mut Vec<u8>,
    stop: &AtomicBool,
) -> Result<(usize, u32), BackendError> {
    let name = pack.to_hex();
    let started = Instant::now();
    let mut delay = BACKOFF;
    let mut attempt = 0;
    loop {
        let res = backend
            .read_range_bulk(FileType::Pack, &name, offset, len, buf)
            .and_then(|at| {
                if buf.len().saturating_sub(at) as u64 >= len {
                    Ok(at)
                } else {
                    Err(BackendError::new(
                        "read",
                        format!("{}/{}", backend.location(), FileType::Pack.path(&name)),
                        ErrorKind::ShortRead,
                        format!("got {} bytes, wanted {len} at offset {offset}", buf.len()),
                    ))
                }
            });
        match res {
            Ok(at) => return Ok((at, attempt)),
            Err(e) if e.is_transient() && attempt + 1 < ATTEMPTS => {
                if started.elapsed() > RETRY_WINDOW {
                    return Err(e);
                }
                let seed = started.elapsed().as_nanos() as u64 ^ offset ^ u64::from(attempt);
                let wait = delay.mul_f64(jitter(seed));
                arca_backend::notify_retry(&arca_backend::RetryNotice {
                    error: &e,
                    attempt: attempt + 2,
                    attempts: ATTEMPTS,
                    delay: wait,
                });
                let until = Instant::now() + wait;
                while Instant::now() < until {
                    if stop.load(Ordering::Relaxed) {
                        return Err(e);
                    }
                    std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
                }
                delay = (delay * 2).min(BACKOFF_MAX);
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn span(pack: u32, offset: u64, len: u64) -> Span<u64> {
        Span {
            pack,
            offset,
            len,
            item: offset,
        }
    }

    #[test]
    fn merges_within_gap_and_size() {
        let r = coalesce(
            vec![
                span(1, 100, 10),
                span(0, 0, 10),
                span(0, 15, 10),
                span(0, 100, 10),
                span(0, 112, 500),
            ],
            5,
            100,
        );
        let shape: Vec<_> = r
            .iter()
            .map(|r| (r.pack, r.offset, r.len, r.items.len()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (0, 0, 25, 2),
                (0, 100, 10, 1),
                (0, 112, 500, 1),
                (1, 100, 10, 1)
            ]
        );
    }

    proptest! {
        #[test]
        fn every_span_is_read_once_and_reads_respect_limits(
            raw in proptest::collection::vec((0u32..3, 0u64..10_000, 1u64..500), 0..60),
            gap in 0u64..2000,
            max in 1u64..5000,
        ) {
            // Non-overlapping spans, as blobs in a pack are.
            let mut spans: Vec<Span<u64>> = vec![];
            for (p, o, l) in raw {
                let off = o * 1000;
                if !spans.iter().any(|s| s.pack == p && s.offset == off) {
                    spans.push(span(p, off, l));
                }
            }
            let n = spans.len();
            let reads = coalesce(spans, gap, max);
            prop_assert_eq!(reads.iter().map(|r| r.items.len()).sum::<usize>(), n);
            for r in &reads {
                prop_assert!(r.len <= max || r.items.len() == 1);
                for (i, s) in r.items.iter().enumerate() {
                    prop_assert_eq!(s.pack, r.pack);
                    prop_assert!(s.offset >= r.offset && s.offset + s.len <= r.offset + r.len);
                    if i > 0 {
                        let prev = &r.items[i - 1];
                        prop_assert!(s.offset <= prev.offset + prev.len + gap);
                    }
                }
            }
        }
    }
}

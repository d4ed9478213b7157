//! Waiting out a full file-descriptor table: a backup or restore under a low `ulimit -n` ran
//! out of descriptors for a moment (its readers, listings and batches all hold some) and
//! skipped files, or failed to create them, where a short wait would have freed one.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set when a wait did not help: the limit is too low for this process at all, and later
/// calls try once more only, briefly, instead of waiting each time (a run of thousands of
/// files would crawl). Cleared by the next wait that helps.
static HOPELESS: AtomicBool = AtomicBool::new(false);

/// Whether `e` says the process (or the system) has no file descriptor left.
fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Runs `op`, and again after short pauses (up to about a second in all) while it fails
/// because no file descriptor is left: other threads of the process close theirs soon.
/// Operations that fail so have done nothing, so trying again is safe.
pub fn patiently<T>(mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut pause = Duration::from_millis(2);
    let limit = if HOPELESS.load(Ordering::Relaxed) {
        Duration::from_millis(10)
    } else {
        Duration::from_millis(1024)
    };
    let mut waited = Duration::ZERO;
    loop {
        match op() {
            Err(e) if out_of_descriptors(&e) && waited < limit => {
                std::thread::sleep(pause);
                waited += pause;
                pause = (pause * 2).min(Duration::from_millis(256));
            }
            Err(e) => {
                if out_of_descriptors(&e) {
                    HOPELESS.store(true, Ordering::Relaxed);
                }
                return Err(e);
            }
            Ok(v) => {
                if waited > Duration::ZERO {
                    HOPELESS.store(false, Ordering::Relaxed);
                }
                return Ok(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_full_table_is_waited_out_and_other_errors_are_not() {
        let mut calls = 0;
        let r = patiently(|| {
            calls += 1;
            if calls < 3 {
                Err(io::Error::from_raw_os_error(libc::EMFILE))
            } else {
                Ok(calls)
            }
        });
        assert_eq!(r.unwrap(), 3);
        let mut calls = 0;
        let r: io::Result<()> = patiently(|| {
            calls += 1;
            Err(io::Error::from_raw_os_error(libc::ENOENT))
        });
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }
}

//! Locks removed on Ctrl-C and SIGTERM: a command that does not stop gently on a signal (all
//! but backup, restore and mount, which do) removes the locks it holds and ends at once, so
//! that no other host waits half an hour for them to go stale.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use arca_repo::{Lock, LockReleaser};
use signal_hook::consts::{SIGINT, SIGTERM};

/// The locks this process holds, for the signal thread.
static HELD: Mutex<Vec<LockReleaser>> = Mutex::new(Vec::new());
/// Set by a command that handles the signals itself (and releases its locks as it stops).
static OWN: AtomicBool = AtomicBool::new(false);
static INSTALLED: Once = Once::new();

/// This command stops on a signal itself: locks it takes are left to its own unwinding.
pub fn handled_by_command() {
    OWN.store(true, Ordering::SeqCst);
}

/// Takes a lock with `take`, so that SIGINT or SIGTERM ends the process (exit code `code`)
/// without leaving its file behind, also when the signal comes while the lock is being taken.
pub fn take(code: u8, take: impl FnOnce() -> arca_repo::Result<Lock>) -> arca_repo::Result<Lock> {
    if OWN.load(Ordering::SeqCst) {
        return take();
    }
    INSTALLED.call_once(|| install(code));
    ACQUIRING.fetch_add(1, Ordering::SeqCst);
    let taken = take();
    if let Some(r) = taken.as_ref().ok().and_then(Lock::releaser) {
        HELD.lock().unwrap_or_else(|p| p.into_inner()).push(r);
    }
    ACQUIRING.fetch_sub(1, Ordering::SeqCst);
    taken
}

/// Locks being taken now: their files may be written and not yet in [`HELD`].
static ACQUIRING: AtomicUsize = AtomicUsize::new(0);
/// How long the signal thread waits for a lock being taken (a slow remote) before it ends
/// the process anyway; a second signal ends it at once.
const ACQUIRE_PATIENCE: Duration = Duration::from_secs(60);

fn install(code: u8) {
    let ending = Arc::new(AtomicBool::new(false));
    // Registered before the iterator: a signal's actions run in that order, so the first
    // signal finds the flag still down even when the thread that raises it wakes at once.
    for sig in [SIGINT, SIGTERM] {
        // A second signal while the locks are being removed (a slow remote) ends it at once.
        let registered = signal_hook::flag::register_conditional_shutdown(
            sig,
            i32::from(code),
            Arc::clone(&ending),
        );
        if registered.is_err() {
            // Handled now, the signal no longer ends the process by itself: let it.
            ending.store(true, Ordering::SeqCst);
            return;
        }
    }
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        ending.store(true, Ordering::SeqCst);
        return;
    };
    let flag = Arc::clone(&ending);
    let spawned = std::thread::Builder::new()
        .name("arca-signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                flag.store(true, Ordering::SeqCst);
                let since = Instant::now();
                while ACQUIRING.load(Ordering::SeqCst) > 0 && since.elapsed() < ACQUIRE_PATIENCE {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let held = HELD.lock().unwrap_or_else(|p| p.into_inner());
                for r in held.iter() {
                    r.release();
                }
                if held.is_empty() {
                    eprintln!("interrupted");
                } else {
                    eprintln!("interrupted; the repository lock is removed");
                }
                std::process::exit(i32::from(code));
            }
        });
    if spawned.is_err() {
        // Nobody would end the process on a signal: let the next one do it.
        ending.store(true, Ordering::SeqCst);
    }
}

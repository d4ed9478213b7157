//! Locks removed on Ctrl-C, SIGTERM and SIGHUP: a command that does not stop gently on a signal (all
//! but backup, restore and mount, which do) removes the locks it holds and ends at once, so
//! that no other host waits half an hour for them to go stale.

use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// The signals that stop a command: Ctrl-C, SIGTERM, and the hang-up of its terminal (an ssh
/// session dropped: the command ended without removing its locks, and a mount stayed
/// behind) unless the command was started to ignore it (`nohup`), which it keeps doing.
pub fn stop_signals() -> Vec<i32> {
    let mut sigs = vec![SIGINT, SIGTERM];
    if !ignored_at_start(SIGHUP) {
        sigs.push(SIGHUP);
    }
    sigs
}

/// Whether signal `sig` is ignored by this process (as `nohup` leaves SIGHUP), read from
/// `/proc/self/status` (no unsafe `sigaction` query); not when that cannot be read.
fn ignored_at_start(sig: i32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| sig >= 1 && mask & (1 << (sig - 1)) != 0)
}

/// Set by a command that handles the signals itself (and releases its locks as it stops):
/// before arming, nothing is installed; after (`mount`, once mounted), the signal thread lets
/// every signal pass.
static OWN: AtomicBool = AtomicBool::new(false);
static INSTALLED: Once = Once::new();

/// How long the signal thread waits for a lock being taken (a slow remote) before it ends
/// the process anyway; a second signal ends it at once.
const TAKING_PATIENCE: Duration = Duration::from_secs(60);

/// Partial output files (`dump --target`'s) that a signal ending the process removes.
static PARTIAL: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// From now on, until [`keep_on_signal`], a signal that ends the process removes `path` (a
/// partial output file: `exit` runs no destructors, and Ctrl-C left it behind); arms the
/// signals with exit code `code`.
pub fn remove_on_signal(path: &Path, code: u8) {
    PARTIAL
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(path.to_path_buf());
    arm(code);
}

/// `path` is complete, or removed already: a signal leaves it.
pub fn keep_on_signal(path: &Path) {
    PARTIAL
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|p| p != path);
}

fn remove_partial() {
    for p in PARTIAL.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        let _ = std::fs::remove_file(p);
    }
}

/// This command stops on a signal itself from now on: locks it takes are left to its own
/// unwinding (`mount` calls it once mounted, having been armed for the time before).
pub fn handled_by_command() {
    OWN.store(true, Ordering::SeqCst);
}

/// From now on SIGINT or SIGTERM ends the process (exit code `code`) after removing the files
/// of the locks it holds or is taking (see [`arca_repo::release_held`]); unless the command
/// handles the signals itself.
pub fn arm(code: u8) {
    if !OWN.load(Ordering::SeqCst) {
        INSTALLED.call_once(|| install(code));
    }
}

fn install(code: u8) {
    let ending = Arc::new(AtomicBool::new(false));
    // Registered before the iterator: a signal's actions run in that order, so the first
    // signal finds the flag still down even when the thread that raises it wakes at once.
    let sigs = stop_signals();
    for &sig in &sigs {
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
    let Ok(mut signals) = signal_hook::iterator::Signals::new(&sigs) else {
        ending.store(true, Ordering::SeqCst);
        return;
    };
    let flag = Arc::clone(&ending);
    let spawned = std::thread::Builder::new()
        .name("arca-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                if OWN.load(Ordering::SeqCst) {
                    continue;
                }
                flag.store(true, Ordering::SeqCst);
                remove_partial();
                if arca_repo::release_held(TAKING_PATIENCE) == 0 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hang_up_stops_a_command_unless_it_was_started_to_ignore_it() {
        use nix::sys::signal::{SigHandler, Signal, signal};
        // Both ways, whatever the test runner was started with (`nohup` passes SIGHUP on
        // ignored). SAFETY: setting a disposition to SIG_IGN or SIG_DFL installs no handler.
        #[allow(unsafe_code)]
        let set = |h| unsafe { signal(Signal::SIGHUP, h) };
        let before = set(SigHandler::SigIgn).unwrap();
        assert!(ignored_at_start(SIGHUP));
        assert!(!stop_signals().contains(&SIGHUP));
        set(SigHandler::SigDfl).unwrap();
        assert!(!ignored_at_start(SIGHUP));
        assert!(stop_signals().contains(&SIGHUP));
        set(before).unwrap();
    }
}

//! `arca mount`: the repository's snapshots as a read-only file system (FUSE), in the
//! foreground until Ctrl-C, SIGTERM or `fusermount3 -u` unmounts it.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use arca_mount::{MountOptions, Report, Unmounted};
use clap::Args;

use crate::cli::{FilterArgs, Global};
use crate::util;

/// Options of `arca mount`.
#[derive(Debug, Args)]
pub struct MountArgs {
    /// Empty folder to mount at
    #[arg(value_name = "MOUNTPOINT")]
    pub mountpoint: PathBuf,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Let other users use the mount; the stored permissions apply to them (non-root users
    /// need user_allow_other in /etc/fuse.conf)
    #[arg(long)]
    pub allow_other: bool,
    /// Stay in the foreground until unmounted (always so: arca does not daemonize)
    #[arg(long)]
    pub foreground: bool,
    /// Memory for decrypted file data and trees (a quarter, at least 4 MiB, for trees)
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = crate::util::size_arg)]
    pub cache_size: String,
    /// Least time between two readings of the snapshot list (taken when a folder above
    /// the snapshots is used), so new snapshots appear
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::util::duration_arg)]
    pub refresh_interval: String,
}

pub fn run(g: &Global, a: &MountArgs) -> Result<u8> {
    let opts = MountOptions {
        allow_other: a.allow_other,
        cache_size: util::parse_size(&a.cache_size)?,
        refresh_interval: util::parse_duration(&a.refresh_interval)?,
        ..MountOptions::default()
    };
    // Cheap checks before asking for the password.
    arca_mount::check_mountpoint(&a.mountpoint)?;
    // The folder the kernel mounts on: `fusermount3 -u` and the mount table name it, not a
    // symlink leading to it.
    let mountpoint = std::fs::canonicalize(&a.mountpoint).unwrap_or_else(|_| a.mountpoint.clone());
    arca_mount::check_fuse()?;
    // Until the mount's own handling begins (below), a signal ends the process removing the
    // lock (armed by taking it).
    let opened = util::open(g)?;
    let _lock = util::lock(g, &opened.repo, arca_repo::LockKind::Shared, "mount")?;
    let report: Report = Arc::new(|line: &str| say(&format!("arca mount: {line}")));
    let mounted = arca_mount::mount(
        opened.repo.clone(),
        super::filter(&a.filter),
        &mountpoint,
        &opts,
        report,
    )?;
    let unmounter = mounted.unmounter();
    let mp = arca_format::text::shown(&mountpoint).to_string();
    let helper = unmounter.helper_name();
    say(&format!(
        "mounted {} at {mp}; press Ctrl-C or run `{helper} -u {mp}` to unmount",
        util::count(mounted.snapshots(), "snapshot")
    ));

    // The first SIGINT/SIGTERM/SIGHUP unmounts (the session then ends and we exit 0); another
    // one while a busy mount waits for its last user ends the process at once.
    let mut signals = signal_hook::iterator::Signals::new(crate::lock_signals::stop_signals())
        .context("cannot handle signals")?;
    crate::lock_signals::handled_by_command();
    let signal_handle = signals.handle();
    let watcher = std::thread::spawn(move || {
        let mut asked = false;
        for _ in signals.forever() {
            if asked {
                // `exit` runs no destructors: the lock is removed first.
                arca_repo::release_held(std::time::Duration::from_secs(10));
                std::process::exit(i32::from(super::INTERRUPTED));
            }
            asked = true;
            match unmounter.unmount() {
                Ok(Unmounted::Now) => {}
                Ok(Unmounted::Lazily(why)) => say(&format!(
                    "arca mount: {mp} is busy ({why}); detached: it ends when its last open \
                     file or folder is closed (Ctrl-C again to quit now)"
                )),
                Err(e) => say(&format!("arca mount: {e}")),
            }
        }
    });
    let served = mounted.wait();
    signal_handle.close();
    let _ = watcher.join();
    served?;
    Ok(0)
}

/// Writes `line` to stderr, ignoring failures: `eprintln!` panics when stderr is gone (a
/// closed pipe), which would end the process and leave a dead mount behind.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

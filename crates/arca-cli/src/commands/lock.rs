//! `arca unlock`: remove stale locks (those not refreshed for 30 minutes, or held by a process
//! of this host that is gone); `--remove-all` removes every lock.

use anyhow::Result;
use clap::Args;

use crate::cli::Global;
use crate::util;

/// Options of `unlock`.
#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// Remove every lock, also those of live processes
    #[arg(long)]
    pub remove_all: bool,
}

/// Runs `unlock`.
pub fn run(g: &Global, a: &UnlockArgs) -> Result<u8> {
    let opened = util::open_uncached(g)?;
    let locks = opened.repo.list_locks()?;
    let removed = opened.repo.unlock(a.remove_all)?;
    if !g.quiet {
        let kept: Vec<String> = locks
            .iter()
            .filter(|l| !(a.remove_all || l.stale))
            .map(|l| format!("  kept lock {} {}", &l.id.to_hex()[..10], l.describe()))
            .collect();
        super::out(&format!("removed {removed} lock(s)"))?;
        for k in kept {
            super::out(&k)?;
        }
    }
    Ok(0)
}

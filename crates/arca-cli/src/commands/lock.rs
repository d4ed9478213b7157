//! `arca unlock`: remove stale locks (those not refreshed for 30 minutes, or held by a process
//! of this host that is gone) and lock files that are junk; `--remove-all` removes every lock.

use anyhow::Result;
use clap::Args;
use serde_json::json;

use crate::cli::Global;
use crate::util;

/// Options of `unlock`.
#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// Remove every lock, also those of live processes
    #[arg(long)]
    pub remove_all: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

/// Runs `unlock`.
pub fn run(g: &Global, a: &UnlockArgs) -> Result<u8> {
    let opened = util::open_uncached(g)?;
    let locks = opened.repo.list_locks()?;
    let removed = opened.repo.unlock(a.remove_all)?;
    let kept = locks.iter().filter(|l| !l.removed_by_unlock(a.remove_all));
    if a.json {
        // One summary line, as the other commands' `--json` (with `-q` too: a script asked
        // for it); `unlock --json` printed the text form.
        let v = json!({
            "message_type": "summary",
            "removed_locks": removed,
            "kept_locks": kept.map(|l| json!({
                "id": l.id.to_hex(), "description": l.describe(),
            })).collect::<Vec<_>>(),
        });
        super::out(&v.to_string())?;
    } else if !g.quiet {
        super::out(&format!("removed {}", util::count(removed, "lock")))?;
        for l in kept {
            // The description names the file when it cannot be read: then not here too.
            let text = l.describe();
            if text.contains(&l.id.to_hex()) {
                super::out(&format!("  kept a lock {text}"))?;
            } else {
                super::out(&format!("  kept lock {} {text}", &l.id.to_hex()[..10]))?;
            }
        }
    }
    Ok(0)
}

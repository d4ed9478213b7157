//! Taking the repository lock for a command: at once, or trying again for as long as
//! `--retry-lock` allows, with errors that say what to do about a lock that cannot be taken.

use std::time::Duration;

use anyhow::{Result, anyhow};
use arca_repo::Repository;

use super::{JSON_ERRORS, parse_duration};
use crate::cli::Global;

/// Takes a lock of `kind` for `command` unless `--no-lock` was given.
pub fn lock(
    g: &Global,
    repo: &Repository,
    kind: arca_repo::LockKind,
    command: &str,
) -> Result<Option<arca_repo::Lock>> {
    if g.no_lock {
        return Ok(None);
    }
    take_lock(g, repo, kind, command).map(Some)
}

/// Takes a lock of `kind` for `command` whatever `--no-lock` says (prune, forget and repair
/// always lock), trying again for as long as `--retry-lock` allows while another process
/// holds a conflicting one.
pub fn take_lock(
    g: &Global,
    repo: &Repository,
    kind: arca_repo::LockKind,
    command: &str,
) -> Result<arca_repo::Lock> {
    let patience = g.retry_lock.as_deref().map(parse_duration).transpose()?;
    let started = std::time::Instant::now();
    let mut pause = Duration::from_secs(1);
    // The holder the waiting line named, if it was printed.
    let mut said: Option<String> = None;
    loop {
        crate::lock_signals::arm(crate::commands::INTERRUPTED);
        match repo.lock_for(kind, command) {
            Err(arca_repo::RepoError::Locked { location, holder })
                if patience.is_some_and(|p| started.elapsed() < p) =>
            {
                let left = patience
                    .unwrap_or_default()
                    .saturating_sub(started.elapsed());
                if said.is_none() && !g.quiet {
                    eprintln!(
                        "repository {location} is locked {holder}; trying again for up to {} \
                         (--retry-lock)",
                        g.retry_lock.as_deref().unwrap_or_default()
                    );
                    said = Some(holder);
                }
                // Ctrl-C to a backup or restore waiting here stops it (they handle signals
                // themselves, and waited out the whole --retry-lock).
                let signalled =
                    || crate::commands::SIGNALLED.load(std::sync::atomic::Ordering::SeqCst);
                if !arca_repo::lock::wait_to_retry(&mut pause, left, &signalled) {
                    return Err(crate::commands::Interrupted("waiting for the lock").into());
                }
            }
            Err(arca_repo::RepoError::Locked { location, holder }) if patience.is_some() => {
                // The holder the waiting line named (and what to do about it) is not said
                // again; a new one is. Under --json the error line is all a reader parses:
                // it names the holder.
                let who = match &said {
                    Some(first)
                        if same_holder(first, &holder)
                            && !JSON_ERRORS.load(std::sync::atomic::Ordering::Relaxed) =>
                    {
                        "by the holder named above".to_string()
                    }
                    _ => holder,
                };
                // `--retry-lock 0` waited not at all: nothing to add.
                let holder = if patience.is_some_and(|p| p.is_zero()) {
                    who
                } else {
                    format!(
                        "{who}, still after trying again for {} (--retry-lock)",
                        g.retry_lock.as_deref().unwrap_or_default()
                    )
                };
                return Err(arca_repo::RepoError::Locked { location, holder }.into());
            }
            other => return lock_outcome(other, kind, command),
        }
    }
}

/// Whether two descriptions of the lock in the way name the same holder: they differ in the
/// time it was last refreshed, which a live holder renews while others wait.
fn same_holder(a: &str, b: &str) -> bool {
    let who = |h: &str| h.split(", refreshed ").next().unwrap_or(h).to_string();
    who(a) == who(b)
}

/// What [`take_lock`] makes of one attempt: a read-only repository's refusal names
/// `--no-lock`.
fn lock_outcome(
    taken: arca_repo::Result<arca_repo::Lock>,
    kind: arca_repo::LockKind,
    command: &str,
) -> Result<arca_repo::Lock> {
    // Commands that write the repository need it writable, lock or not.
    let writes = matches!(
        command,
        "backup" | "copy" | "tag" | "rewrite" | "recover" | "key"
    );
    match taken {
        Ok(l) => Ok(l),
        // A repository this process cannot write (a read-only mount, another user's files)
        // can still be read without a lock.
        Err(arca_repo::RepoError::Backend(b))
            if b.op == "write"
                && (b.kind == arca_backend::ErrorKind::PermissionDenied
                    || b.source.raw_os_error() == Some(libc::EROFS)) =>
        {
            // An exclusive lock is for a command that changes the repository (forget,
            // prune, repair): it said only "Read-only file system".
            Err(if writes || kind == arca_repo::LockKind::Exclusive {
                anyhow!("{b} (the repository cannot be written, and {command} writes to it)")
            } else {
                anyhow!("{b} (cannot take a lock: to only read the repository, run with --no-lock)")
            })
        }
        // A full disk: reading still works without a lock; writing needs room first.
        Err(arca_repo::RepoError::Backend(b))
            if b.op == "write" && b.kind == arca_backend::ErrorKind::NoSpace =>
        {
            Err(if writes || kind == arca_repo::LockKind::Exclusive {
                anyhow!("{b} (the repository's disk is full: free some space first)")
            } else {
                anyhow!(
                    "{b} (the repository's disk is full: free some space, or run with \
                     --no-lock to only read the repository)"
                )
            })
        }
        Err(e) => Err(e.into()),
    }
}

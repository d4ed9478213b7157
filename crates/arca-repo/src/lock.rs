//! Repository locks, as restic has them: shared for backup, restore and check, exclusive for
//! forget, prune and repair. A lock is a sealed file under `locks/`, refreshed while held.
//!
//! Taking a lock: write ours, then list the locks and back out if a live conflicting one is
//! there (two processes racing both see the other and at most one goes on). Checking before
//! writing as well would only cost a round trip to a remote repository: the check after the
//! write is the one that decides. A lock is stale when it was not refreshed for [`STALE_AFTER`], or
//! when it names this host and a process id that no longer exists; stale locks are ignored and
//! `arca unlock` removes them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use arca_backend::{Backend, FileType};
use arca_format::{Id, LockInfo};

use crate::host::{hostname, now_ns, username};
use crate::{RepoError, Repository, Result};

/// A lock not refreshed for this long belongs to a process that is gone.
pub const STALE_AFTER: Duration = Duration::from_secs(30 * 60);
/// How often a held lock is refreshed.
pub const REFRESH_EVERY: Duration = Duration::from_secs(5 * 60);

/// What a lock allows others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// Backups, restores, checks: any number at once, but no exclusive lock.
    Shared,
    /// Forget, prune, repair: alone.
    Exclusive,
}

/// A lock found in the repository.
#[derive(Debug, Clone)]
pub struct FoundLock {
    /// Its file id.
    pub id: Id,
    /// Its content, or why it could not be read.
    pub info: std::result::Result<LockInfo, String>,
    /// Whether it is stale (see the module documentation).
    pub stale: bool,
    /// Its bytes are not a lock as arca writes one (its content does not hash to its name,
    /// or does not open or decode): junk, or a damaged copy. Not stale (a live holder's lock
    /// damaged on disk is replaced at its next refresh), but plain `unlock` removes it.
    pub damaged: bool,
}

impl FoundLock {
    /// "exclusive lock of prune (pid 123 on host h, user u) since 2026-...".
    pub fn describe(&self) -> String {
        match &self.info {
            Ok(l) => {
                let since = chrono::DateTime::from_timestamp_nanos(l.time_ns)
                    .format("%Y-%m-%d %H:%M:%S UTC");
                // A time ahead of ours: the clocks differ, and the lock blocks until 30 minutes
                // after it, which reads as a wait of 30 minutes unless said (hunt 29).
                let ahead_min = (l.time_ns - now_ns()) / 60_000_000_000;
                let ahead = if ahead_min >= 1 {
                    format!(", {ahead_min} minutes ahead of this machine's clock")
                } else {
                    String::new()
                };
                format!(
                    "by {} ({} lock, pid {} on host {}, user {}, refreshed {since}{ahead}{})",
                    if l.command.is_empty() {
                        "a process"
                    } else {
                        &l.command
                    },
                    if l.exclusive { "exclusive" } else { "shared" },
                    l.pid,
                    l.hostname,
                    l.username,
                    if self.stale { ", stale" } else { "" }
                )
            }
            Err(why) => {
                // Named once: the reason may name the lock file already.
                let which = if why.contains(&self.id.to_hex()) {
                    "its lock file".to_string()
                } else {
                    format!("lock file {}", self.id)
                };
                if self.damaged {
                    format!(
                        "by no known process: {which} is damaged ({why}), so no arca wrote it \
                         as it is; `arca unlock` removes it"
                    )
                } else {
                    // `unlock --remove-all` removes it at once, live or not: the advice must
                    // not read as if it waited for the holder.
                    format!(
                        "by an unknown holder: {which} cannot be read ({why}), and it may be \
                         live; once you are sure no process holds it, `arca unlock \
                         --remove-all` removes it"
                    )
                }
            }
        }
    }

    /// Whether `unlock` removes it: stale or damaged, or any lock with `all`
    /// (`--remove-all`).
    pub fn removed_by_unlock(&self, all: bool) -> bool {
        all || self.stale || self.damaged
    }

    /// [`Self::describe`] and what to do about it (a lock that cannot be read already says).
    pub fn describe_with_advice(&self) -> String {
        match &self.info {
            // `unlock` removes only what is stale: a lock of another host (or container) it
            // cannot tell dead until it expires.
            Ok(l)
                if l.hostname != crate::host::hostname()
                    || split_start(&l.process_space).0 != crate::host::process_space() =>
            {
                format!(
                    "{}; wait for it to finish; if that process is gone, the lock is stale 30 \
                     minutes after its last refresh, or `arca unlock --remove-all` removes it \
                     now (make sure nothing else uses the repository)",
                    self.describe()
                )
            }
            Ok(_) => format!(
                "{}; wait for it to finish, or run `arca unlock` if that process is gone",
                self.describe()
            ),
            Err(_) => self.describe(),
        }
    }
}

/// A held lock; dropping it stops the refreshing and removes the lock file.
#[derive(Debug)]
pub struct Lock {
    shared: Option<Arc<Held>>,
    refresher: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Held {
    backend: Arc<dyn Backend>,
    current: Mutex<Id>,
    stop: AtomicBool,
    wake: Condvar,
    /// When the lock file was last written, on [`held_clock_ns`]'s clock.
    written_ns: std::sync::atomic::AtomicI64,
    /// The longest time between two writes of the lock file that went over the lost limit
    /// (ns; 0: none): the process was stopped, or the refresher starved. A lock once lost
    /// stays lost, whatever later refreshes write.
    lost_ns: std::sync::atomic::AtomicI64,
    /// The lock file was found removed by another process (which took it for stale).
    removed: AtomicBool,
    /// The lock is being released for a process about to end ([`release_held`]): set before
    /// its file is deleted, so that nothing more is committed under it.
    released: AtomicBool,
    /// When the lock file was last found there, on [`held_clock_ns`]'s clock, taken as the
    /// look was sent (0: not since it was last rewritten).
    seen_ns: std::sync::atomic::AtomicI64,
}

/// The refresh period and how long after the last successful write a held lock counts as
/// lost, for tests (`None`: [`REFRESH_EVERY`] and [`LOST_AFTER`]).
static TIMING: Mutex<Option<(Duration, Duration)>> = Mutex::new(None);

/// A held lock not written for this long may already look stale to others (at
/// [`STALE_AFTER`]; five minutes are left for clocks that differ and for the work between the
/// check and the commit): a command then stops before it commits anything.
pub const LOST_AFTER: Duration = Duration::from_secs(25 * 60);

/// While a refresh fails, it is tried again this often.
const RETRY_REFRESH: Duration = Duration::from_secs(30);

/// Before a commit is written, a lock file found there less than this long ago is not looked
/// for again ([`check_held_before_write`]): the look after the index file written just before
/// the snapshot stands for the one before the snapshot.
const SEEN_FRESH: Duration = Duration::from_secs(2);

/// Waits before the next attempt at a lock another process holds (`--retry-lock`), for at
/// most `left`: `pause` spread at random, in short naps; then doubles `pause`, up to 30 s.
/// False when `stop` said so during the wait (Ctrl-C, a cancelled job).
pub fn wait_to_retry(pause: &mut Duration, left: Duration, stop: &dyn Fn() -> bool) -> bool {
    let until = std::time::Instant::now() + spread(*pause).min(left);
    loop {
        if stop() {
            return false;
        }
        let now = std::time::Instant::now();
        if now >= until {
            break;
        }
        std::thread::sleep(Duration::from_millis(50).min(until - now));
    }
    *pause = (*pause * 2).min(Duration::from_secs(30));
    true
}

/// `pause` spread at random over [pause/2, 3 pause/2): two processes that took their locks
/// at the same moment (each saw the other's and backed out) try again at different times,
/// instead of in step, colliding again at every attempt until both gave up.
fn spread(pause: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    // A new RandomState is seeded at random per process (the standard library's source).
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    pause / 2 + pause.mul_f64((r >> 11) as f64 / (1u64 << 53) as f64)
}

/// Sets the refresh period and the time after which a held lock is lost (tests).
pub fn set_timing(refresh_every: Duration, lost_after: Duration) {
    *TIMING.lock().unwrap_or_else(|p| p.into_inner()) = Some((refresh_every, lost_after));
}

fn timing() -> (Duration, Duration) {
    TIMING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .unwrap_or((REFRESH_EVERY, LOST_AFTER))
}

/// Fails when a lock this process holds could not be refreshed for [`LOST_AFTER`]: other
/// processes may soon take it for stale (a prune could delete what this command is about to
/// reference). Commands call it before they commit: a snapshot saved, files deleted.
///
/// Also fails, for good, when the lock was once not rewritten for that long (a process
/// stopped with SIGSTOP, or suspended, resumed and refreshed its lock: others had taken it
/// for stale meanwhile), and when its file is gone (another process removed it as stale: a
/// clock ahead of ours, or the same pause); the file is looked for each time (one request).
pub fn check_held() -> Result<()> {
    check_all(0)
}

/// [`check_held`] before a commit (a snapshot, an index file) is written, which is checked
/// again once written ([`Repository::save_commit`](crate::Repository)): a lock file found
/// there less than [`SEEN_FRESH`] ago (by the check after the index file written just
/// before) is not looked for again. The rest is checked as ever (lost, released, found
/// removed), and the check after the write looks for the file whatever this one did, so a
/// lock lost before the write still fails the commit: a backup writing its last index file
/// and then its snapshot looks three times, not four.
pub(crate) fn check_held_before_write() -> Result<()> {
    check_all(i64::try_from(SEEN_FRESH.as_nanos()).unwrap_or(0))
}

/// [`check_held`] trusting a sighting of the file younger than `fresh` ns (0: none).
fn check_all(fresh: i64) -> Result<()> {
    let lost_after = i64::try_from(timing().1.as_nanos()).unwrap_or(i64::MAX);
    let held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    for h in held.iter().filter_map(Weak::upgrade) {
        h.check_trusting(lost_after, held_clock_ns(), fresh)?;
    }
    Ok(())
}

impl Held {
    fn new(backend: Arc<dyn Backend>, id: Id) -> Self {
        Self {
            backend,
            current: Mutex::new(id),
            stop: AtomicBool::new(false),
            wake: Condvar::new(),
            written_ns: std::sync::atomic::AtomicI64::new(held_clock_ns()),
            lost_ns: std::sync::atomic::AtomicI64::new(0),
            removed: AtomicBool::new(false),
            released: AtomicBool::new(false),
            seen_ns: std::sync::atomic::AtomicI64::new(0),
        }
    }

    /// [`check_held`] for this lock: `lost_after` in ns, `now` on [`held_clock_ns`]'s clock.
    #[cfg(test)]
    fn check(&self, lost_after: i64, now: i64) -> Result<()> {
        self.check_trusting(lost_after, now, 0)
    }

    /// [`Self::check`], the file not looked for when it was found there less than `fresh` ns
    /// before `now`.
    fn check_trusting(&self, lost_after: i64, now: i64, fresh: i64) -> Result<()> {
        if self.released.load(Ordering::SeqCst) {
            return Err(RepoError::LockReleased {
                location: self.backend.location(),
            });
        }
        if self.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let removed = || RepoError::LockRemoved {
            location: self.backend.location(),
        };
        if self.removed.load(Ordering::SeqCst) {
            return Err(removed());
        }
        let age = now.saturating_sub(self.written_ns.load(Ordering::SeqCst));
        let age = age.max(self.lost_ns.load(Ordering::SeqCst));
        if age > lost_after {
            return Err(RepoError::LockLost {
                location: self.backend.location(),
                minutes: age / 60_000_000_000,
            });
        }
        // Under the refresher's mutex: the file named is the one on the backend.
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let seen = self.seen_ns.load(Ordering::SeqCst);
        if seen != 0 && now.saturating_sub(seen) < fresh {
            return Ok(());
        }
        let sent = held_clock_ns();
        match self.backend.stat(FileType::Lock, &current.to_hex()) {
            Err(e) if e.is_not_found() => {
                self.removed.store(true, Ordering::SeqCst);
                return Err(removed());
            }
            Ok(_) => self.seen_ns.store(sent, Ordering::SeqCst),
            Err(_) => {}
        }
        Ok(())
    }
}

/// Whether process `pid` exists on this host.
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        // It exists but belongs to someone else.
        Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    }
}

/// How many times [`Repository::locks_but`] lists the locks while some vanish under it.
const RELIST_TRIES: u32 = 5;

/// Whether lock `l` is stale: not refreshed for [`STALE_AFTER`], or taken in this very
/// process-id space (same host, machine boot and pid namespace) by a process that is gone.
/// The host name alone was taken for the space, so a prune in one container (or on another
/// machine of the same name) took a live backup's lock in another for stale, and deleted the
/// packs it was writing.
///
/// In this space a lock that names its process's start time is judged by the process alone:
/// alive and started then, it is live however old its time looks (the wall clock stepped
/// forward by more than the stale time made a prune take a running backup's lock for stale,
/// and delete what it referenced; hunt 29); gone, or another process under a reused pid, it
/// is stale.
fn is_stale(l: &LockInfo, now_ns: i64, host: &str, space: &str) -> bool {
    let (their_space, started) = split_start(&l.process_space);
    if l.hostname == host && !space.is_empty() && their_space == space {
        // A zombie (killed, its parent not reaping it: a container's first process that
        // does not, or `timeout -s KILL`) answers `kill(pid, 0)` and kept its lock live
        // forever, however old.
        let stat = crate::host::ProcStat::read(l.pid);
        if !process_alive(l.pid) || stat.is_some_and(|s| s.ended) {
            return true;
        }
        // A start time unknown on either side (another user's process under `hidepid`):
        // judged by age, as before.
        if let (Some(t), Some(now_t)) = (started, stat.and_then(|s| s.start)) {
            return t != now_t;
        }
    }
    now_ns.saturating_sub(l.time_ns) > STALE_AFTER.as_nanos() as i64
}

/// A lock's process space without its holder's start time, and the start time
/// (`BOOT_ID pid:[INODE] start:TICKS`; older locks have none).
fn split_start(space: &str) -> (&str, Option<u64>) {
    match space.rsplit_once(" start:") {
        Some((s, t)) => match t.parse() {
            Ok(t) => (s, Some(t)),
            Err(_) => (space, None),
        },
        None => (space, None),
    }
}

/// The process space written in this process's locks: with its start time, so that a lock
/// is told from another process's under a reused pid. Readers that do not know the suffix
/// see another space and judge the lock by its age, the safe way.
fn own_space() -> String {
    let space = crate::host::process_space();
    match crate::host::process_start(std::process::id()) {
        Some(t) if !space.is_empty() => format!("{space} start:{t}"),
        _ => space.to_string(),
    }
}

impl Repository {
    /// Every lock in the repository, with its staleness.
    pub fn list_locks(&self) -> Result<Vec<FoundLock>> {
        self.locks_but(None)
    }

    /// Every lock but `ours` (which is not read: it is known). A lock removed between the
    /// listing and its read may have been refreshed (a refresh writes the new file, then
    /// removes the old one), so the locks are listed again until none vanishes (a few
    /// times at most): taking it for released let a prune take its exclusive lock beside a
    /// running backup and delete the packs the backup was writing.
    fn locks_but(&self, ours: Option<&Id>) -> Result<Vec<FoundLock>> {
        let mut tries = 0;
        loop {
            let (mut found, vanished) = self.locks_once(ours)?;
            tries += 1;
            let Some(id) = vanished else {
                return Ok(found);
            };
            // Still vanishing under every listing (refreshed faster than the backend answers):
            // a lock that lives, as far as anyone can tell.
            if tries >= RELIST_TRIES {
                found.push(FoundLock {
                    id,
                    info: Err(
                        "it was replaced whenever it was read (a lock being refreshed)".into(),
                    ),
                    stale: false,
                    damaged: false,
                });
                return Ok(found);
            }
        }
    }

    /// One listing of [`Self::locks_but`], and a listed lock that was gone when read.
    fn locks_once(&self, ours: Option<&Id>) -> Result<(Vec<FoundLock>, Option<Id>)> {
        let now = now_ns();
        let host = hostname();
        let space = crate::host::process_space();
        let mut out = vec![];
        let mut vanished = None;
        for (id, _) in self.list_ids(FileType::Lock)? {
            if Some(&id) == ours {
                continue;
            }
            let mut damaged = false;
            let info = match self.load_file(FileType::Lock, &id) {
                Ok(body) => LockInfo::decode(&body).map_err(|e| {
                    damaged = !e.is_newer();
                    e.to_string()
                }),
                // Removed between the listing and the read: released, or refreshed.
                Err(RepoError::Backend(e)) if e.is_not_found() => {
                    vanished = Some(id);
                    continue;
                }
                // The server failing says nothing of the lock: the command stops.
                Err(RepoError::Backend(e)) if e.is_transient() => return Err(e.into()),
                Err(e) => {
                    damaged = e.is_corruption();
                    Err(e.to_string())
                }
            };
            // A lock that cannot be read (another user's, unreadable to this one; or damaged)
            // may be live, and exclusive: it is never taken for stale, so that no backup runs
            // under a prune it cannot see; `unlock --remove-all` removes it.
            let stale = info.as_ref().is_ok_and(|l| is_stale(l, now, &host, space));
            out.push(FoundLock {
                id,
                info,
                stale,
                damaged,
            });
        }
        Ok((out, vanished))
    }

    /// The first live lock conflicting with `kind`, ignoring `ours`, and the stale locks.
    fn conflict(&self, kind: LockKind, ours: &Id) -> Result<(Option<FoundLock>, Vec<Id>)> {
        let (stale, live): (Vec<FoundLock>, Vec<FoundLock>) = self
            .locks_but(Some(ours))?
            .into_iter()
            .partition(|l| l.stale);
        let conflict = live.into_iter().find(|l| match (&l.info, kind) {
            (Ok(_), LockKind::Exclusive) => true,
            (Ok(info), LockKind::Shared) => info.exclusive,
            (Err(_), _) => true,
        });
        Ok((conflict, stale.into_iter().map(|l| l.id).collect()))
    }

    fn write_lock(&self, kind: LockKind, command: &str) -> Result<Id> {
        let info = LockInfo {
            time_ns: now_ns(),
            exclusive: kind == LockKind::Exclusive,
            pid: std::process::id(),
            hostname: hostname(),
            username: username(),
            command: command.to_string(),
            process_space: own_space(),
        };
        let body = info
            .encode()
            .map_err(|e| RepoError::format("lock file", e))?;
        self.save_file(FileType::Lock, &body)
    }

    /// Takes a lock of `kind` without naming the command (see [`Repository::lock_for`]).
    pub fn lock(&self, kind: LockKind) -> Result<Lock> {
        self.lock_for(kind, "")
    }

    /// Takes a lock of `kind` for `command` (named in conflicts), failing with
    /// [`RepoError::Locked`] when a live conflicting lock exists. The lock is refreshed in the
    /// background until dropped.
    pub fn lock_for(&self, kind: LockKind, command: &str) -> Result<Lock> {
        let _taking = Taking::new();
        let location = self.backend().location();
        let locked = |l: FoundLock| RepoError::Locked {
            location: location.clone(),
            holder: l.describe_with_advice(),
        };
        let id = self.write_lock(kind, command)?;
        // Ours is written: from now on a process that looks sees it. Of two racing processes,
        // each sees the other and both back out, which is safe; the user runs the command
        // again.
        match self.conflict(kind, &id) {
            // An exclusive lock deletes the stale ones: their holder may still run (its clock
            // behind ours made its lock look old, or it was paused), and with its file gone it
            // stops at its next commit (`check_held`) instead of saving a snapshot that
            // references what this command deletes (hunt 29: nothing deleted them, so a
            // holder never noticed).
            Ok((None, stale)) if kind == LockKind::Exclusive => {
                for s in stale {
                    let _ = self.backend().remove(FileType::Lock, &s.to_hex());
                }
            }
            Ok((None, _)) => {}
            Ok((Some(l), _)) => {
                let _ = self.backend().remove(FileType::Lock, &id.to_hex());
                return Err(locked(l));
            }
            Err(e) => {
                let _ = self.backend().remove(FileType::Lock, &id.to_hex());
                return Err(e);
            }
        }
        let held = Arc::new(Held::new(Arc::clone(self.backend()), id));
        {
            let mut all = HELD.lock().unwrap_or_else(|p| p.into_inner());
            all.retain(|w| w.strong_count() > 0);
            all.push(Arc::downgrade(&held));
        }
        let repo = self.clone();
        let h = Arc::clone(&held);
        let command = command.to_string();
        let refresher = std::thread::Builder::new()
            .name("arca-lock".into())
            .spawn(move || refresh(&repo, &h, kind, &command))
            .ok();
        Ok(Lock {
            shared: Some(held),
            refresher,
        })
    }

    /// Removes stale locks (all locks with `all`); returns how many were removed.
    pub fn unlock(&self, all: bool) -> Result<usize> {
        let mut removed = 0;
        for l in self.list_locks()? {
            if l.removed_by_unlock(all) {
                match self.backend().delete(FileType::Lock, &l.id.to_hex()) {
                    Ok(()) => removed += 1,
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(removed)
    }
}

/// Now, in ns, on the clock a held lock's age is measured by: time since boot, which counts
/// the time the process was stopped and the machine suspended, and which setting the wall
/// clock does not move (a wall clock stepped forward by half an hour made a running backup
/// refuse its snapshot, its lock "not refreshed for 60 minutes"). Other processes judge a
/// lock file by the wall-clock time written in it; that is unchanged.
pub(crate) fn held_clock_ns() -> i64 {
    use nix::time::{ClockId, clock_gettime};
    clock_gettime(ClockId::CLOCK_BOOTTIME)
        .or_else(|_| clock_gettime(ClockId::CLOCK_MONOTONIC))
        .map_or_else(
            |_| now_ns(),
            |t| t.tv_sec().saturating_mul(1_000_000_000) + t.tv_nsec(),
        )
}

/// Rewrites the lock every [`REFRESH_EVERY`] (new file first, then the old one removed, so the
/// repository always shows the lock).
fn refresh(repo: &Repository, held: &Held, kind: LockKind, command: &str) {
    let mut current = held.current.lock().unwrap_or_else(|p| p.into_inner());
    let mut wait = timing().0;
    loop {
        // Checked under the mutex before waiting, so a stop signalled before the wait began
        // is not missed.
        if held.stop.load(Ordering::SeqCst) {
            return;
        }
        let (guard, _) = held
            .wake
            .wait_timeout(current, wait)
            .unwrap_or_else(|p| p.into_inner());
        current = guard;
        if held.stop.load(Ordering::SeqCst) {
            return;
        }
        // A failed refresh is tried again soon; after LOST_AFTER without one the command
        // stops before it commits (check_held), as others may take the lock for stale.
        let written = held_clock_ns();
        // Resumed after a pause longer than the lost limit (SIGSTOP, a suspended machine):
        // others may have taken the lock for stale meanwhile; a new file does not undo that.
        let gap = written.saturating_sub(held.written_ns.load(Ordering::SeqCst));
        if gap > i64::try_from(timing().1.as_nanos()).unwrap_or(i64::MAX) {
            held.lost_ns.fetch_max(gap, Ordering::SeqCst);
        }
        match repo.write_lock(kind, command) {
            Ok(new) => {
                held.written_ns.store(written, Ordering::SeqCst);
                // Gone already: another process removed it, taking it for stale.
                if held
                    .backend
                    .delete(FileType::Lock, &current.to_hex())
                    .is_err_and(|e| e.is_not_found())
                {
                    held.removed.store(true, Ordering::SeqCst);
                }
                *current = new;
                // The file seen was the one just replaced.
                held.seen_ns.store(0, Ordering::SeqCst);
                wait = timing().0;
            }
            Err(_) => wait = timing().0.min(RETRY_REFRESH),
        }
    }
}

/// The locks this process holds (dropped ones fail to upgrade), for [`release_held`].
static HELD: Mutex<Vec<Weak<Held>>> = Mutex::new(Vec::new());
/// Locks being taken now: their files may be written and not yet in [`HELD`].
static TAKING: AtomicUsize = AtomicUsize::new(0);

/// Counts a lock being taken while it lives.
struct Taking;

impl Taking {
    fn new() -> Self {
        TAKING.fetch_add(1, Ordering::SeqCst);
        Self
    }
}

impl Drop for Taking {
    fn drop(&mut self) {
        TAKING.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Held {
    /// Stops the refreshing and removes the lock file (a no-op when it is gone).
    fn release(&self) {
        // First: a commit checking the lock from now on fails (it passed while the file was
        // being deleted, and after, until the process ended).
        self.released.store(true, Ordering::SeqCst);
        self.stop.store(true, Ordering::SeqCst);
        // Under the mutex: a refresh in progress ends first, and none starts after (the
        // refresher looks at `stop` under it before writing a new file).
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        self.wake.notify_all();
        let _ = self.backend.remove(FileType::Lock, &current.to_hex());
    }
}

/// Removes the file of every lock this process holds, for a process about to end at once (on
/// a signal): a lock being taken is waited for, up to `patience`. The locks are no longer
/// refreshed. Returns how many were removed.
pub fn release_held(patience: Duration) -> usize {
    let since = std::time::Instant::now();
    while TAKING.load(Ordering::SeqCst) > 0 && since.elapsed() < patience {
        std::thread::sleep(Duration::from_millis(5));
    }
    let held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    let live: Vec<Arc<Held>> = held.iter().filter_map(Weak::upgrade).collect();
    for h in &live {
        h.release();
    }
    live.len()
}

impl Lock {
    /// The id of the lock file now.
    pub fn id(&self) -> Option<Id> {
        self.shared
            .as_ref()
            .map(|h| *h.current.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if let Some(h) = self.shared.take() {
            h.stop.store(true, Ordering::SeqCst);
            {
                let _g = h.current.lock().unwrap_or_else(|p| p.into_inner());
                h.wake.notify_all();
            }
            if let Some(t) = self.refresher.take() {
                let _ = t.join();
            }
            let id = *h.current.lock().unwrap_or_else(|p| p.into_inner());
            let _ = h.backend.remove(FileType::Lock, &id.to_hex());
        }
    }
}

#[cfg(test)]
mod tests;

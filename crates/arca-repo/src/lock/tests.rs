use std::sync::Arc;

use arca_backend::{Backend, FileType, MemoryBackend};
use arca_format::LockInfo;

use super::*;
use crate::testing;

fn locks(repo: &Repository) -> usize {
    repo.backend().list(FileType::Lock).unwrap().len()
}

#[test]
fn shared_locks_coexist_and_exclude_an_exclusive_one() {
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    let a = repo.lock_for(LockKind::Shared, "backup").unwrap();
    let b = repo.lock_for(LockKind::Shared, "restore").unwrap();
    assert_eq!(locks(&repo), 2);
    let e = repo.lock_for(LockKind::Exclusive, "prune").unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, RepoError::Locked { .. }), "{msg}");
    assert!(
        msg.contains("shared lock") && msg.contains("arca unlock"),
        "{msg}"
    );
    // The refused attempt left nothing behind.
    assert_eq!(locks(&repo), 2);
    drop(a);
    drop(b);
    assert_eq!(locks(&repo), 0);
    let x = repo.lock_for(LockKind::Exclusive, "prune").unwrap();
    let e = repo.lock_for(LockKind::Shared, "backup").unwrap_err();
    assert!(e.to_string().contains("by prune (exclusive lock"), "{e}");
    assert!(repo.lock_for(LockKind::Exclusive, "forget").is_err());
    drop(x);
    assert_eq!(locks(&repo), 0);
    repo.lock(LockKind::Exclusive).unwrap();
}

/// Writes a lock as another process would have.
fn foreign(repo: &Repository, time_ns: i64, pid: u32, host: &str, exclusive: bool) -> Id {
    foreign_in(
        repo,
        time_ns,
        pid,
        host,
        exclusive,
        crate::host::process_space(),
    )
}

/// [`foreign`] from the process-id space `space`.
fn foreign_in(
    repo: &Repository,
    time_ns: i64,
    pid: u32,
    host: &str,
    exclusive: bool,
    space: &str,
) -> Id {
    let l = LockInfo {
        time_ns,
        exclusive,
        pid,
        hostname: host.into(),
        username: "someone".into(),
        command: "backup".into(),
        process_space: space.into(),
    };
    repo.save_file(FileType::Lock, &l.encode().unwrap())
        .unwrap()
}

#[test]
fn stale_locks_are_ignored_and_unlock_removes_them() {
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    let now = now_ns();
    // Refreshed long ago, on another host.
    foreign(
        &repo,
        now - 2 * STALE_AFTER.as_nanos() as i64,
        1,
        "elsewhere",
        true,
    );
    // On this host, by a process that does not exist (pids are below 2^22 on Linux).
    foreign(&repo, now, (1 << 22) + 17, &hostname(), true);
    let found = repo.list_locks().unwrap();
    assert_eq!(found.len(), 2);
    assert!(found.iter().all(|l| l.stale), "{found:?}");
    let held = repo.lock_for(LockKind::Exclusive, "prune").unwrap();
    // An exclusive lock deletes the stale ones: a holder still running (its clock behind)
    // then finds its file gone before it commits.
    assert_eq!(locks(&repo), 1);
    drop(held);
    foreign(
        &repo,
        now - 2 * STALE_AFTER.as_nanos() as i64,
        1,
        "elsewhere",
        true,
    );
    foreign(&repo, now, (1 << 22) + 17, &hostname(), true);
    // A shared one leaves them.
    drop(repo.lock_for(LockKind::Shared, "backup").unwrap());
    assert_eq!(locks(&repo), 2);
    // A lock file whose bytes are not a lock as arca writes one (junk, an empty file): not
    // stale, it blocks even a shared lock, and plain `unlock` removes it (only
    // `--remove-all` did, which removes live locks too).
    let junk = "ee".repeat(32);
    repo.backend()
        .write(FileType::Lock, &junk, b"garbage")
        .unwrap();
    let found = repo.list_locks().unwrap();
    assert!(
        found
            .iter()
            .any(|l| l.info.is_err() && !l.stale && l.damaged),
        "{found:?}"
    );
    let e = repo.lock_for(LockKind::Shared, "backup").unwrap_err();
    assert!(
        e.to_string()
            .contains("by no known process: its lock file is damaged")
            && e.to_string().contains("`arca unlock` removes it"),
        "{e}"
    );
    assert_eq!(repo.unlock(false).unwrap(), 3);
    assert_eq!(locks(&repo), 0);
    // A live lock of another host stays; the stale ones go.
    foreign(&repo, now, 1, "elsewhere", false);
    assert_eq!(repo.unlock(false).unwrap(), 0);
    assert_eq!(locks(&repo), 1);
    assert!(repo.lock_for(LockKind::Exclusive, "prune").is_err());
    assert!(repo.lock_for(LockKind::Shared, "backup").is_ok());
    assert_eq!(repo.unlock(true).unwrap(), 1);
    assert_eq!(locks(&repo), 0);
}

/// In its own process space, a lock naming its holder's start time is judged by the process
/// alone: a wall clock stepped forward by more than the stale time made a prune take a
/// running backup's lock for stale (hunt 29). Another process under the same pid (another
/// start time) does not keep a dead lock alive.
#[test]
fn a_lock_with_its_start_time_is_judged_by_its_process() {
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    let space = crate::host::process_space();
    let me = std::process::id();
    let Some(started) = crate::host::process_start(me) else {
        return;
    };
    let long_ago = now_ns() - 2 * STALE_AFTER.as_nanos() as i64;
    let id = foreign_in(
        &repo,
        long_ago,
        me,
        &hostname(),
        false,
        &format!("{space} start:{started}"),
    );
    assert!(!repo.list_locks().unwrap()[0].stale);
    assert!(repo.lock_for(LockKind::Exclusive, "prune").is_err());
    repo.backend().delete(FileType::Lock, &id.to_hex()).unwrap();
    // Fresh, but its pid is another process now.
    foreign_in(
        &repo,
        now_ns(),
        me,
        &hostname(),
        true,
        &format!("{space} start:{}", started + 1),
    );
    assert!(repo.list_locks().unwrap()[0].stale);
    drop(repo.lock_for(LockKind::Exclusive, "prune").unwrap());
    assert_eq!(locks(&repo), 0);
    // Ours names the start time; its space is still ours.
    let held = repo.lock_for(LockKind::Shared, "backup").unwrap();
    let (id, _) = repo.list_ids(FileType::Lock).unwrap()[0];
    let body = repo.load_file(FileType::Lock, &id).unwrap();
    let info = LockInfo::decode(&body).unwrap();
    assert_eq!(info.process_space, format!("{space} start:{started}"));
    drop(held);
}

/// A process killed and not reaped (a zombie: its parent does not wait for it) exists for
/// `kill(pid, 0)` and kept its start time: its lock stayed live forever, and `unlock` kept
/// it. It is stale.
#[test]
fn the_lock_of_a_process_that_ended_unreaped_is_stale() {
    let ended = |pid| crate::host::ProcStat::read(pid).is_some_and(|s| s.ended);
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    let space = crate::host::process_space();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let Some(started) = crate::host::process_start(pid) else {
        let _ = child.wait();
        return;
    };
    // Ended, not yet reaped (`wait` below reaps it).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !ended(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ended(pid));
    assert!(process_alive(pid), "a zombie answers kill(pid, 0)");
    foreign_in(
        &repo,
        now_ns(),
        pid,
        &hostname(),
        true,
        &format!("{space} start:{started}"),
    );
    assert!(repo.list_locks().unwrap()[0].stale);
    drop(repo.lock_for(LockKind::Exclusive, "prune").unwrap());
    assert!(!ended(std::process::id()));
    child.wait().unwrap();
}

#[test]
fn a_live_process_on_this_host_holds_its_lock() {
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    foreign(&repo, now_ns(), std::process::id(), &hostname(), false);
    assert!(!repo.list_locks().unwrap()[0].stale);
    assert!(repo.lock_for(LockKind::Exclusive, "prune").is_err());
}

#[test]
fn refreshing_replaces_the_file_and_keeps_one() {
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    let lock = repo.lock_for(LockKind::Shared, "backup").unwrap();
    let first = lock.id().unwrap();
    let held = lock.shared.as_ref().unwrap();
    // What the refresher does each period, under the mutex (as check_held looks).
    let mut current = held.current.lock().unwrap();
    let new = repo.write_lock(LockKind::Shared, "backup").unwrap();
    held.backend
        .delete(FileType::Lock, &first.to_hex())
        .unwrap();
    *current = new;
    drop(current);
    assert_eq!(locks(&repo), 1);
    drop(lock);
    assert_eq!(locks(&repo), 0);
}

/// A lock costs a remote repository three requests: write it, list the locks (ours is not
/// read back), delete it; and it still sees a conflicting lock written before it.
#[test]
fn a_lock_costs_three_requests() {
    use arca_backend::{MeteredBackend, Throttle};
    let metered = Arc::new(MeteredBackend::new(
        MemoryBackend::new(),
        Throttle::default(),
    ));
    let stats = metered.stats();
    let repo = testing::repo(metered);
    let before = stats.snapshot().requests;
    drop(repo.lock_for(LockKind::Shared, "backup").unwrap());
    assert_eq!(stats.snapshot().requests - before, 3);
    assert_eq!(locks(&repo), 0);
    let x = repo.lock_for(LockKind::Exclusive, "prune").unwrap();
    assert!(repo.lock_for(LockKind::Shared, "backup").is_err());
    // The refused lock was taken back.
    assert_eq!(locks(&repo), 1);
    drop(x);
}

/// What `release_held` does to each lock of the process (not called here: it would take the
/// locks of the other tests running in this process).
#[test]
fn a_held_lock_is_registered_and_released_from_another_thread() {
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    let lock = repo.lock_for(LockKind::Exclusive, "prune").unwrap();
    let held = Arc::clone(lock.shared.as_ref().unwrap());
    assert!(
        HELD.lock()
            .unwrap()
            .iter()
            .any(|w| w.upgrade().is_some_and(|h| Arc::ptr_eq(&h, &held))),
        "not registered"
    );
    assert_eq!(locks(&repo), 1);
    // Out of the process's list before it is released: a released lock in that list fails
    // every commit of the process (as after a signal), those of the tests running beside
    // this one too (a cache test failed "lock released" in CI's order).
    HELD.lock()
        .unwrap()
        .retain(|w| !w.upgrade().is_some_and(|h| Arc::ptr_eq(&h, &held)));
    std::thread::spawn(move || held.release()).join().unwrap();
    assert_eq!(locks(&repo), 0);
    // Stopped: the refresher ends, and dropping the lock later is a no-op.
    let start = std::time::Instant::now();
    while !lock.refresher.as_ref().unwrap().is_finished() {
        assert!(start.elapsed() < Duration::from_secs(5), "still refreshing");
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(lock);
    assert_eq!(locks(&repo), 0);
    repo.lock_for(LockKind::Exclusive, "forget").unwrap();
}

/// A lock of this host name but another process-id space (another container, or another
/// machine of the same name), or of an unknown one (version 1), is not judged by whether its
/// process exists here: a prune took a live backup's lock in another container for stale and
/// deleted the packs it was writing. It goes stale when not refreshed for 30 minutes.
#[test]
fn a_lock_of_another_process_space_is_not_judged_by_its_pid() {
    if crate::host::process_space().is_empty() {
        return;
    }
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    let now = now_ns();
    let gone = (1 << 22) + 17;
    foreign_in(
        &repo,
        now,
        gone,
        &hostname(),
        false,
        "another-boot pid:[4026531836]",
    );
    foreign_in(&repo, now, gone, &hostname(), false, "");
    let found = repo.list_locks().unwrap();
    assert!(found.iter().all(|l| !l.stale), "{found:?}");
    let e = repo.lock_for(LockKind::Exclusive, "prune").unwrap_err();
    assert!(e.to_string().contains("--remove-all"), "{e}");
    let old = now - 2 * STALE_AFTER.as_nanos() as i64;
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    foreign_in(&repo, old, gone, &hostname(), false, "another-boot pid:[1]");
    assert!(repo.list_locks().unwrap()[0].stale);
}

/// A backend over memory on which the first read of lock `from` finds it refreshed at that
/// very moment: `to` is written (with `body`), `from` removed, and the read misses.
/// With `ghost`, lock `ghost` is listed but never found when read (refreshed under every
/// read).
#[derive(Debug)]
struct RefreshedOnRead {
    inner: Arc<MemoryBackend>,
    armed: std::sync::Mutex<Option<(String, String, Vec<u8>)>>,
    ghost: Option<String>,
}

impl Backend for RefreshedOnRead {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> arca_backend::Result<()> {
        self.inner.create()
    }
    fn list(&self, t: FileType) -> arca_backend::Result<Vec<arca_backend::FileInfo>> {
        self.inner.list(t)
    }
    fn read(&self, t: FileType, name: &str) -> arca_backend::Result<Vec<u8>> {
        if t == FileType::Lock {
            let mut armed = self.armed.lock().unwrap();
            if armed.as_ref().is_some_and(|(from, _, _)| from == name) {
                let (from, to, body) = armed.take().unwrap();
                self.inner.write(FileType::Lock, &to, &body)?;
                self.inner.delete(FileType::Lock, &from)?;
            }
            if self.ghost.as_deref() == Some(name) {
                return self.inner.read(t, &"0".repeat(64));
            }
        }
        self.inner.read(t, name)
    }
    fn read_range(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
    ) -> arca_backend::Result<Vec<u8>> {
        self.inner.read_range(t, name, offset, len)
    }
    fn write(&self, t: FileType, name: &str, data: &[u8]) -> arca_backend::Result<()> {
        self.inner.write(t, name, data)
    }
    fn delete(&self, t: FileType, name: &str) -> arca_backend::Result<()> {
        self.inner.delete(t, name)
    }
    fn stat(&self, t: FileType, name: &str) -> arca_backend::Result<arca_backend::FileInfo> {
        self.inner.stat(t, name)
    }
}

/// A backup's lock refreshed between a prune's listing of the locks and its read of that lock
/// still holds the prune off: the vanished lock was taken for released, the prune took its
/// exclusive lock, and deleted the packs the backup was writing (hunt 8's soak).
#[test]
fn a_lock_refreshed_while_it_is_read_still_counts() {
    let backend = Arc::new(RefreshedOnRead {
        inner: Arc::new(MemoryBackend::new()),
        armed: std::sync::Mutex::new(None),
        ghost: None,
    });
    let repo = testing::repo(backend.clone());
    // The backup's lock file, written as `lock_for` writes it but not registered as held by
    // this process: the armed read below deletes it, and a held lock whose file is gone
    // fails every commit of the process (`check_held` looks at them all), those of the
    // tests running beside this one too.
    let from = repo
        .write_lock(LockKind::Shared, "backup")
        .unwrap()
        .to_hex();
    // The file the refresh will write, made now and set aside.
    let next = repo
        .write_lock(LockKind::Shared, "backup")
        .unwrap()
        .to_hex();
    let body = backend.inner.read(FileType::Lock, &next).unwrap();
    backend.inner.delete(FileType::Lock, &next).unwrap();
    *backend.armed.lock().unwrap() = Some((from, next, body));
    let e = repo.lock_for(LockKind::Exclusive, "prune").unwrap_err();
    assert!(matches!(e, RepoError::Locked { .. }), "{e}");
    assert!(
        backend.armed.lock().unwrap().is_none(),
        "the refresh happened"
    );
}

/// A lock that vanishes under every read (refreshed faster than the backend answers) is a
/// live lock: after a few listings the prune gives up, locked (with a 10 ms refresh and
/// 300 ms requests, the listings ran out and the prune went ahead).
#[test]
fn a_lock_that_always_vanishes_counts_as_held() {
    let inner = Arc::new(MemoryBackend::new());
    let repo = testing::repo(inner.clone());
    let held = repo
        .write_lock(LockKind::Shared, "backup")
        .unwrap()
        .to_hex();
    let backend = Arc::new(RefreshedOnRead {
        inner,
        armed: std::sync::Mutex::new(None),
        ghost: Some(held),
    });
    let repo = Repository::open(backend, b"pw").unwrap();
    let e = repo.lock_for(LockKind::Exclusive, "prune").unwrap_err();
    assert!(matches!(e, RepoError::Locked { .. }), "{e}");
    assert!(e.to_string().contains("being refreshed"), "{e}");
}

/// A held lock whose file another process removed (taking it for stale: this process was
/// stopped, or its clock runs behind) commits nothing more; nor one that was once not
/// rewritten for longer than the lost limit, whatever it wrote since (a process resumed after
/// SIGSTOP refreshed its lock and saved a snapshot whose packs a prune had deleted). Checked
/// on the lock itself: `check_held` looks at every lock of the process, other tests' too.
#[test]
fn a_lock_removed_or_paused_too_long_is_lost_for_good() {
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    let lost_after = 60_000_000_000;
    // Not registered (lock_for would): the lock removed below would fail the commits of the
    // other tests of this process.
    let held = |id| Held::new(Arc::clone(repo.backend()), id);
    let id = repo.write_lock(LockKind::Shared, "backup").unwrap();
    let h = held(id);
    assert!(h.check(lost_after, held_clock_ns()).is_ok());
    // Another host's prune removes it as stale.
    repo.backend().delete(FileType::Lock, &id.to_hex()).unwrap();
    let e = h.check(lost_after, held_clock_ns()).unwrap_err();
    assert!(matches!(e, RepoError::LockRemoved { .. }), "{e}");
    assert!(e.to_string().contains("removed by another process"), "{e}");

    let h = held(repo.write_lock(LockKind::Shared, "backup").unwrap());
    // A refresh after a pause of two minutes (what the refresher records), then a fresh
    // write: still lost.
    h.lost_ns.fetch_max(2 * lost_after, Ordering::SeqCst);
    h.written_ns.store(held_clock_ns(), Ordering::SeqCst);
    let e = h.check(lost_after, held_clock_ns()).unwrap_err();
    assert!(matches!(e, RepoError::LockLost { minutes: 2, .. }), "{e}");
    h.release();
    assert_eq!(locks(&repo), 0);
}

/// A lock released for a process ending on a signal commits nothing more: its check passed
/// (a stopped lock was taken for one being dropped by its owner) while the file was deleted
/// and after, until the process ended, so a snapshot could be saved under no lock.
#[test]
fn a_released_lock_fails_its_check() {
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    let h = Held::new(
        Arc::clone(repo.backend()),
        repo.write_lock(LockKind::Shared, "backup").unwrap(),
    );
    assert!(h.check(60_000_000_000, held_clock_ns()).is_ok());
    h.release();
    assert_eq!(locks(&repo), 0);
    let e = h.check(60_000_000_000, held_clock_ns()).unwrap_err();
    assert!(matches!(e, RepoError::LockReleased { .. }), "{e}");
}

/// A held lock's age is measured since boot, not on the wall clock, which an administrator or
/// NTP may step by hours while a backup runs.
#[test]
fn a_held_locks_age_is_not_measured_on_the_wall_clock() {
    let boot = held_clock_ns();
    let wall = now_ns();
    // Since boot: far less than the 56 years since the epoch the wall clock counts.
    assert!(boot > 0 && boot < wall / 2, "{boot} {wall}");
    assert!(held_clock_ns() >= boot);
}

/// A lock dated ahead of this machine's clock blocks until 30 minutes after that time: the
/// message says how far ahead it is (it read as a wait of 30 minutes; hunt 29).
#[test]
fn a_lock_from_the_future_says_the_clocks_differ() {
    let repo = testing::repo(Arc::new(MemoryBackend::new()));
    let two_hours = 2 * 3600 * 1_000_000_000_i64;
    foreign(&repo, now_ns() + two_hours, 1, "elsewhere", true);
    let e = repo.lock_for(LockKind::Shared, "backup").unwrap_err();
    assert!(
        e.to_string()
            .contains("minutes ahead of this machine's clock"),
        "{e}"
    );
    repo.unlock(true).unwrap();
    foreign(&repo, now_ns(), 1, "elsewhere", true);
    let e = repo.lock_for(LockKind::Shared, "backup").unwrap_err();
    assert!(!e.to_string().contains("ahead"), "{e}");
}

/// A lock that cannot be read but is not damaged (another user's file, unreadable to this
/// one) may be live: it says so, and that only `--remove-all` removes it; a damaged one says
/// plain `unlock` does.
#[test]
fn an_unreadable_lock_and_a_damaged_one_are_told_apart() {
    let id = Id([7; 32]);
    let unreadable = FoundLock {
        id,
        info: Err("Permission denied (os error 13)".into()),
        stale: false,
        damaged: false,
    };
    let d = unreadable.describe_with_advice();
    assert!(
        d.contains("by an unknown holder: lock file")
            && d.contains("cannot be read")
            && d.contains("once you are sure no process holds it, `arca unlock --remove-all`"),
        "{d}"
    );
    let damaged = FoundLock {
        damaged: true,
        ..unreadable
    };
    let d = damaged.describe_with_advice();
    assert!(
        d.contains("is damaged") && d.contains("`arca unlock` removes it"),
        "{d}"
    );
    assert!(!d.contains("--remove-all"), "{d}");
}

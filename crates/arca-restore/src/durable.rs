//! Restores whose data may not be on the disk yet: a marker per target, kept outside it, names
//! the boot and the time the last restore into it began, so that after a power cut the files it
//! wrote are hashed rather than trusted by their size and mtime.
//!
//! A restore does not wait for its writes to reach the disk (the page cache takes them; one
//! `sync` at the end cost a third of the restore's time). Cut off by a power failure before the
//! kernel wrote them back, files come back with the snapshot's size and mtime but zero-filled,
//! and `--overwrite if-changed` trusted them (hunt 30). So: when the marker was left in another
//! boot, every file changed since that restore began (its ctime) is hashed. In the same boot the
//! page cache holds what was written, so nothing is hashed, and the marker moves on to this
//! restore only once the last one ended long enough ago for the kernel to have written it back
//! (its dirty-expiry and writeback intervals, with a margin); else it keeps the earlier time.
//! The end is noted in a second file, without a sync: lost or torn, the earlier time is kept,
//! which is the safe side. (A `syncfs` at each restore's start cost 20 ms, waiting on the
//! journal.)

use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// From when the files in the target cannot be trusted by size
/// and mtime (`None`: all can).
#[derive(Debug, Default)]
pub(crate) struct Durability {
    /// Files whose ctime is at or after this (seconds, nanoseconds) are hashed.
    pub distrust_since: Option<(i64, i64)>,
    /// Where to note this restore's end, with the boot and start time its marker names
    /// (`None`: no marker was written).
    end: Option<(std::path::PathBuf, String, (i64, i64))>,
}

/// Slack for clocks: a file changed this little before the marker's time counts as after.
const SLACK_SECS: i64 = 2;

/// A temporary marker older than this is a killed restore's: no live one takes so long.
const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the temporary markers of restores killed while writing theirs (best effort).
fn remove_stale_temps(state: &Path) {
    let Ok(entries) = fs::read_dir(state) else {
        return;
    };
    for entry in entries.flatten() {
        if arca_fs::is_stale_temp(&entry, STALE_TEMP) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// This boot's id (`ARCA_TEST_BOOT_ID` stands in for a reboot in tests).
fn boot_id() -> Option<String> {
    if let Some(id) = std::env::var_os("ARCA_TEST_BOOT_ID") {
        return Some(id.to_string_lossy().into_owned());
    }
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn now() -> (i64, i64) {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        i64::from(d.subsec_nanos()),
    )
}

/// The marker's text: `ARCA-RESTORE 1`, the target, the boot id, the time in seconds and
/// nanoseconds, one per line.
fn encode(target: &Path, boot: &str, since: (i64, i64)) -> Vec<u8> {
    let mut b = b"ARCA-RESTORE 1\n".to_vec();
    b.extend_from_slice(target.as_os_str().as_bytes());
    b.push(b'\n');
    b.extend_from_slice(format!("{boot}\n{} {}\n", since.0, since.1).as_bytes());
    b
}

/// The boot and time a marker names, if it is one of this target's.
fn decode(bytes: &[u8], target: &Path) -> Option<(String, (i64, i64))> {
    let mut lines = bytes.split(|b| *b == b'\n');
    if lines.next()? != b"ARCA-RESTORE 1" || lines.next()? != target.as_os_str().as_bytes() {
        return None;
    }
    let boot = std::str::from_utf8(lines.next()?).ok()?.to_string();
    let time = std::str::from_utf8(lines.next()?).ok()?;
    let (s, n) = time.split_once(' ')?;
    Some((boot, (s.parse().ok()?, n.parse().ok()?)))
}

/// The end file of a marker: the boot and start it belongs to, and when that restore ended.
fn encode_end(boot: &str, since: (i64, i64), ended: (i64, i64)) -> Vec<u8> {
    format!(
        "ARCA-RESTORE-END 1\n{boot}\n{} {}\n{} {}\n",
        since.0, since.1, ended.0, ended.1
    )
    .into_bytes()
}

/// When the restore of marker (`boot`, `since`) ended, if its end file says so.
fn decode_end(bytes: &[u8], boot: &str, since: (i64, i64)) -> Option<(i64, i64)> {
    // Whole, not torn by a crash.
    let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
    let mut lines = text.split('\n');
    let time = |l: &str| -> Option<(i64, i64)> {
        let (s, n) = l.split_once(' ')?;
        Some((s.parse().ok()?, n.parse().ok()?))
    };
    if lines.next()? != "ARCA-RESTORE-END 1" || lines.next()? != boot {
        return None;
    }
    if time(lines.next()?)? != since {
        return None;
    }
    time(lines.next()?)
}

/// How long after a write the kernel has surely tried to write it back, in seconds: its
/// dirty-expiry time, twice its writeback interval, and a margin (70 s with the defaults).
fn writeback_secs() -> i64 {
    let centisecs = |name: &str, default: i64| {
        fs::read_to_string(format!("/proc/sys/vm/{name}"))
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(default)
    };
    let expire = centisecs("dirty_expire_centisecs", 3000);
    let writeback = centisecs("dirty_writeback_centisecs", 500);
    (expire + 2 * writeback) / 100 + 30
}

impl Durability {
    /// Reads the marker of `target` (an existing folder) under `state` (the folder of such
    /// markers; `None`: none is kept) and, unless `dry_run`, writes this restore's.
    pub(crate) fn begin(state: Option<&Path>, target: &Path, dry_run: bool) -> Self {
        let (Some(state), Some(boot)) = (state, boot_id()) else {
            return Self::default();
        };
        let Ok(target) = fs::canonicalize(target) else {
            return Self::default();
        };
        let name = blake3::hash(target.as_os_str().as_bytes()).to_hex();
        let marker = state.join(&name[..32]);
        let mut since = now();
        let mut distrust_since = None;
        let end = marker.with_extension("end");
        if let Some((was, at)) = fs::read(&marker).ok().and_then(|b| decode(&b, &target)) {
            if was != boot {
                distrust_since = Some((at.0.saturating_sub(SLACK_SECS), at.1));
                // Kept until a restore in this boot has been written back: cut off again,
                // the next one still distrusts what the first wrote.
                since = since.min(at);
            } else {
                // In this boot what the last restore wrote is in the page cache; on the disk
                // only once the kernel has had the time to write it back after its end.
                let ended = fs::read(&end).ok().and_then(|b| decode_end(&b, &was, at));
                if ended.is_none_or(|e| since.0.saturating_sub(e.0) <= writeback_secs()) {
                    since = since.min(at);
                }
            }
        }
        if dry_run {
            return Self {
                distrust_since,
                end: None,
            };
        }
        let tmp = state.join(format!("{}{}", arca_fs::TEMP_PREFIX, std::process::id()));
        let written = fs::create_dir_all(state).and_then(|()| {
            remove_stale_temps(state);
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&encode(&target, &boot, since))?;
            f.sync_all()?;
            fs::rename(&tmp, &marker)?;
            // On the disk before anything is written into the target.
            fs::File::open(state)?.sync_all()
        });
        if written.is_err() {
            // A full disk (or any failure) must not leave the half-written marker behind:
            // named by the process id, it would stay there forever.
            let _ = fs::remove_file(&tmp);
        }
        // Without its marker, a restore cut off now would go unnoticed: nothing to do about
        // it but what restores did before (the folder may be read-only).
        Self {
            distrust_since,
            end: written.is_ok().then_some((end, boot, since)),
        }
    }

    /// Notes that the restore ended (after its last write into the target), without a sync:
    /// a note lost or torn by a crash keeps the earlier start time, the safe side.
    pub(crate) fn finish(&self) {
        if let Some((end, boot, since)) = &self.end {
            let _ = fs::write(end, encode_end(boot, *since, now()));
        }
    }

    /// Whether a file whose ctime is `ctime` must be hashed, whatever its size and mtime.
    pub(crate) fn distrusts(&self, ctime: (i64, i64)) -> bool {
        self.distrust_since.is_some_and(|t| ctime >= t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_names_its_target() {
        let t = Path::new("/srv/restore");
        let b = encode(t, "boot-1", (1_700_000_000, 5));
        assert_eq!(
            decode(&b, t),
            Some(("boot-1".to_string(), (1_700_000_000, 5)))
        );
        assert_eq!(decode(&b, Path::new("/srv/other")), None);
        assert_eq!(decode(b"ARCA-RESTORE 2\n/srv/restore\nb\n1 2\n", t), None);
        assert_eq!(decode(b"", t), None);
    }

    /// A marker that cannot be written (a full disk; here its name is taken by a folder)
    /// leaves no temporary file behind: named by the process id, it stayed forever, one
    /// more after each such restore. One left by a restore killed long ago is removed.
    #[test]
    fn a_marker_that_cannot_be_written_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let (state, target) = (dir.path().join("state"), dir.path().join("target"));
        fs::create_dir_all(&target).unwrap();
        let canonical = fs::canonicalize(&target).unwrap();
        let name = blake3::hash(canonical.as_os_str().as_bytes()).to_hex();
        fs::create_dir_all(state.join(&name[..32]).join("in-the-way")).unwrap();
        let killed = state.join(".tmp-1");
        let f = fs::File::create(&killed).unwrap();
        let long_ago = std::time::SystemTime::now() - 2 * STALE_TEMP;
        f.set_modified(long_ago).unwrap();
        let fresh = state.join(".tmp-2");
        fs::write(&fresh, b"being written").unwrap();
        let d = Durability::begin(Some(&state), &target, false);
        assert!(d.end.is_none());
        let mut left: Vec<_> = fs::read_dir(&state)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [".tmp-2".to_string(), name[..32].to_string()]);
    }

    #[test]
    fn an_end_belongs_to_one_marker() {
        let b = encode_end("boot-1", (10, 5), (20, 7));
        assert_eq!(decode_end(&b, "boot-1", (10, 5)), Some((20, 7)));
        assert_eq!(decode_end(&b, "boot-2", (10, 5)), None);
        assert_eq!(decode_end(&b, "boot-1", (11, 5)), None);
        // Torn by a crash: no end, so the earlier start is kept.
        assert_eq!(decode_end(&b[..b.len() - 3], "boot-1", (10, 5)), None);
        assert!(writeback_secs() >= 30);
    }
}

//! Restores whose data may not be on the disk yet: a marker per target, kept outside it, names
//! the boot and the time the last restore into it began, so that after a power cut the files it
//! wrote are hashed rather than trusted by their size and mtime.
//!
//! A restore does not wait for its writes to reach the disk (the page cache takes them; one
//! `sync` at the end cost a third of the restore's time). Cut off by a power failure before the
//! kernel wrote them back, files come back with the snapshot's size and mtime but zero-filled,
//! and `--overwrite if-changed` trusted them (hunt 30). So: when the marker was left in another
//! boot, every file changed since that restore began (its ctime) is hashed; in the same boot,
//! the page cache holds what was written, the target's file system is synced (cheap once the
//! kernel has written back) and the marker starts afresh.

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
}

/// Slack for clocks: a file changed this little before the marker's time counts as after.
const SLACK_SECS: i64 = 2;

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

/// Syncs the file system holding `dir`.
fn sync_fs(dir: &Path) -> bool {
    fs::File::open(dir).is_ok_and(|f| nix::unistd::syncfs(f).is_ok())
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
        if let Some((was, at)) = fs::read(&marker).ok().and_then(|b| decode(&b, &target)) {
            // In this boot, what the last restore wrote is in the page cache: once synced, it
            // is on the disk too. Else, or when the sync fails, it may not be.
            if was != boot || (!dry_run && !sync_fs(&target)) {
                distrust_since = Some((at.0.saturating_sub(SLACK_SECS), at.1));
                // Kept until a restore ends in this boot: cut off again, the next one still
                // distrusts what the first wrote.
                since = since.min(at);
            }
        }
        if dry_run {
            return Self { distrust_since };
        }
        let written = fs::create_dir_all(state).and_then(|()| {
            let tmp = state.join(format!(".tmp-{}", std::process::id()));
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&encode(&target, &boot, since))?;
            f.sync_all()?;
            fs::rename(&tmp, &marker)?;
            // On the disk before anything is written into the target.
            fs::File::open(state)?.sync_all()
        });
        // Without its marker, a restore cut off now would go unnoticed: nothing to do about
        // it but what restores did before (the folder may be read-only).
        let _ = written;
        Self { distrust_since }
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
}

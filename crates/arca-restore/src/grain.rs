//! How finely the target's file system keeps modification times: exFAT keeps 10 ms (exfat-fuse
//! whole seconds), FAT 2 s. A file restored there has its snapshot's mtime cut to that, so a
//! rerun that compared mtimes exactly hashed every file again, and `if-newer` rewrote them.
//!
//! Found once per restore, and only when an existing file of the right size has an mtime a
//! little before the snapshot's: a temporary file in the target is given a time with every
//! digit set and read back. A dry run writes nothing and compares exactly.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::sys::stat::futimens;
use nix::sys::time::TimeSpec;

/// The probe's time: an odd second (FAT keeps even ones) and nanoseconds with every digit set.
const PROBE: (i64, i64) = (1_000_000_001, 123_456_789);

/// What a file system keeping times to `grain` nanoseconds makes of the probe's time.
fn cut((sec, nsec): (i64, i64), grain: i64) -> (i64, i64) {
    if grain >= 1_000_000_000 {
        let s = grain / 1_000_000_000;
        (sec - sec.rem_euclid(s), 0)
    } else {
        (sec, nsec - nsec.rem_euclid(grain))
    }
}

/// The grains file systems keep times to, finest first.
const GRAINS: [i64; 11] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    2_000_000_000,
];

/// The grain that turns the probe's time into `kept`; 1 (exact comparisons) when none does
/// (a file system that rounds, or did not keep it at all).
fn grain_of(kept: (i64, i64)) -> i64 {
    GRAINS
        .into_iter()
        .find(|&g| cut(PROBE, g) == kept)
        .unwrap_or(1)
}

/// The grain of the file system holding folder `dir`, by a temporary file there; 1 when it
/// cannot be told (the file cannot be made, given a time or read back).
fn probe(dir: &Path) -> i64 {
    let name = dir.join(format!(".arca-time-probe-{}", std::process::id()));
    let Ok(f) = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&name)
    else {
        return 1;
    };
    let t = TimeSpec::new(PROBE.0, PROBE.1);
    let grain = match futimens(&f, &t, &t).and_then(|()| nix::sys::stat::fstat(&f)) {
        Ok(st) => grain_of((st.st_mtime, st.st_mtime_nsec)),
        Err(_) => 1,
    };
    drop(f);
    let _ = std::fs::remove_file(&name);
    grain
}

/// The target's time grain, found when first needed.
#[derive(Debug)]
pub(crate) struct Grain {
    /// The target folder, where the probe is made.
    root: PathBuf,
    /// Its device: files on others (mounted inside the target) compare exactly.
    dev: Option<u64>,
    /// Whether the probe may be written (not in a dry run).
    probe: bool,
    nanos: OnceLock<i64>,
}

impl Grain {
    /// For the target folder `root` (it may not exist yet); `probe` is false in a dry run.
    pub fn new(root: &Path, probe: bool) -> Self {
        Self {
            root: root.to_path_buf(),
            dev: arca_fs::lstat(root)
                .ok()
                .map(|m| std::os::unix::fs::MetadataExt::dev(&m)),
            probe,
            nanos: OnceLock::new(),
        }
    }

    /// Whether `kept`, the mtime of a file on device `dev`, is snapshot time `t` as the
    /// target's file system keeps it: equal, or equal once `t` is cut to its grain.
    pub fn same(&self, dev: u64, kept: (i64, i64), t: (i64, i64)) -> bool {
        if kept == t {
            return true;
        }
        // Only a time a little before the snapshot's can be it, cut; anything else is not
        // worth a probe.
        if !self.probe || self.dev != Some(dev) || t.0 < 0 || kept > t || t.0 - kept.0 > 2 {
            return false;
        }
        let grain = *self.nanos.get_or_init(|| probe(&self.root));
        grain > 1 && cut(t, grain) == kept
    }

    /// Whether `kept` is at or after snapshot time `t` as the target's file system keeps it
    /// (`--overwrite if-newer`).
    pub fn not_older(&self, dev: u64, kept: (i64, i64), t: (i64, i64)) -> bool {
        kept >= t || self.same(dev, kept, t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_time_tells_the_grain() {
        assert_eq!(grain_of(PROBE), 1);
        assert_eq!(grain_of((1_000_000_001, 123_456_700)), 100);
        assert_eq!(grain_of((1_000_000_001, 120_000_000)), 10_000_000);
        assert_eq!(grain_of((1_000_000_001, 0)), 1_000_000_000);
        assert_eq!(grain_of((1_000_000_000, 0)), 2_000_000_000);
        // Rounded up, or not kept: compared exactly.
        assert_eq!(grain_of((1_000_000_001, 123_456_790)), 1);
        assert_eq!(grain_of((5, 0)), 1);
    }

    #[test]
    fn times_are_cut_down_to_the_grain() {
        assert_eq!(cut((7, 999_999_999), 10_000_000), (7, 990_000_000));
        assert_eq!(cut((7, 999_999_999), 2_000_000_000), (6, 0));
        assert_eq!(cut((8, 5), 2_000_000_000), (8, 0));
    }

    /// On a file system keeping nanoseconds (the test's folder), a time cut to the second is
    /// not the snapshot's; without the probe (a dry run), nothing but equality is.
    #[test]
    fn a_fine_file_system_compares_exactly() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = std::os::unix::fs::MetadataExt::dev(&arca_fs::lstat(tmp.path()).unwrap());
        let g = Grain::new(tmp.path(), true);
        assert!(g.same(dev, (10, 5), (10, 5)));
        assert!(!g.same(dev, (10, 0), (10, 5)));
        assert!(g.not_older(dev, (11, 0), (10, 5)));
        assert!(!g.not_older(dev, (10, 0), (10, 5)));
        // The probe is gone.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
        assert_eq!(*g.nanos.get().unwrap(), 1);
        let dry = Grain::new(tmp.path(), false);
        assert!(!dry.same(dev, (10, 0), (10, 5)));
        assert!(dry.nanos.get().is_none());
    }
}

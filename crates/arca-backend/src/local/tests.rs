//! Unit tests of the local-folder backend: conformance, permissions, missing folders, bulk
//! reads, hints and the removal of stale temporary files.

use super::*;

#[test]
fn conformance() {
    let d = tempfile::tempdir().unwrap();
    let b = LocalBackend::new(d.path().join("repo"));
    b.create().unwrap();
    crate::conformance(&b);
    // No temporary files are left behind.
    for e in walk(d.path()) {
        assert!(!e.contains(".tmp-"), "{e}");
    }
}

/// Deletions remember their folders until synced (not a lock's or a pack's); a folder
/// removed since is no error. (That the fsync makes them durable is the kernel's part.)
#[test]
fn sync_removals_syncs_the_folders_deleted_from_once() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("repo");
    let b = LocalBackend::new(&root);
    b.create().unwrap();
    let pack = "ab".repeat(32);
    b.write(FileType::Pack, &pack, b"p").unwrap();
    b.write(FileType::Snapshot, "aa", b"s").unwrap();
    b.write(FileType::Lock, "bb", b"l").unwrap();
    b.delete(FileType::Pack, &pack).unwrap();
    b.delete(FileType::Snapshot, "aa").unwrap();
    b.delete(FileType::Lock, "bb").unwrap();
    let dirs = |b: &LocalBackend| b.removed_from.lock().unwrap().clone();
    let expected: std::collections::BTreeSet<PathBuf> = [root.join("snapshots")].into();
    assert_eq!(dirs(&b), expected);
    fs::remove_dir(root.join("snapshots")).unwrap();
    b.sync_removals().unwrap();
    assert!(dirs(&b).is_empty());
}

/// A new repository is private (as restic's: nobody else can copy its key files to try
/// passwords); one whose config its group may read stays open to the group.
#[test]
fn folders_and_files_are_private_unless_the_group_shares_the_repository() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("repo");
    let b = LocalBackend::new(&root);
    b.create().unwrap();
    b.write(FileType::Config, "", b"c").unwrap();
    b.write(FileType::Key, "aa", b"k").unwrap();
    let mut sink = b.sink(FileType::Pack).unwrap().unwrap();
    sink.write(b"pack").unwrap();
    sink.commit(&"ab".repeat(32)).unwrap();
    for dir in ["", "keys", "data", "data/ab", "index", "snapshots", "locks"] {
        assert_eq!(mode(&root.join(dir)) & 0o077, 0, "{dir}");
    }
    assert_eq!(mode(&root.join("config")), 0o600);
    assert_eq!(mode(&root.join("keys/aa")), 0o600);
    assert_eq!(mode(&root.join("data/ab").join("ab".repeat(32))) & 0o077, 0);
    // Shared with a group: new folders and files are too, whatever the umask of the
    // member writing them (077 locked the group out).
    fs::set_permissions(root.join("config"), fs::Permissions::from_mode(0o640)).unwrap();
    let b = LocalBackend::new(&root);
    fs::remove_dir(root.join("locks")).unwrap();
    let umask = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let written = (
        b.write(FileType::Snapshot, "bb", b"s"),
        b.write(FileType::Lock, "cc", b"l"),
    );
    nix::sys::stat::umask(umask);
    written.0.unwrap();
    written.1.unwrap();
    assert_eq!(mode(&root.join("snapshots/bb")), 0o660);
    assert_eq!(mode(&root.join("locks")), 0o770);
    assert_eq!(mode(&root.join("locks/cc")), 0o660);
}

#[test]
fn bulk_reads_at_any_offset() {
    let d = tempfile::tempdir().unwrap();
    let b = LocalBackend::new(d.path().join("repo"));
    b.create().unwrap();
    let id = "ab".repeat(32);
    let data: Vec<u8> = (0..1_000_003u32).map(|i| (i * 7 % 251) as u8).collect();
    b.write(FileType::Pack, &id, &data).unwrap();
    let mut buf = vec![];
    for (off, len) in [
        (0, 200_000),
        (12_345, 300_001),
        (4096, 131_072),
        (700_000, 300_003),
    ] {
        let at = b
            .read_range_bulk(FileType::Pack, &id, off, len, &mut buf)
            .unwrap();
        assert_eq!(
            &buf[at..at + len as usize],
            &data[off as usize..(off + len) as usize],
            "{off} {len}"
        );
    }
    let e = b
        .read_range_bulk(FileType::Pack, &id, 900_000, 200_000, &mut buf)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::ShortRead, "{e}");
    assert!(
        b.read_range_bulk(FileType::Pack, &"cd".repeat(32), 0, 200_000, &mut buf)
            .unwrap_err()
            .is_not_found()
    );
}

#[test]
fn stale_temporary_files_are_removed_and_fresh_ones_kept() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("repo");
    let b = LocalBackend::new(&root);
    b.create().unwrap();
    let hour_ago = SystemTime::now() - Duration::from_secs(2 * 3600);
    let mut stale = vec![];
    for dir in [
        "",
        "keys",
        "snapshots",
        "index",
        "locks",
        "data/00",
        "data/ab",
    ] {
        let old = root.join(dir).join(".tmp-0123456789abcdef");
        fs::write(&old, b"partial").unwrap();
        File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        stale.push(old);
    }
    let fresh = root.join("data/ab/.tmp-fedcba9876543210");
    fs::write(&fresh, b"being written").unwrap();
    // An old file that is not temporary stays.
    let other = root.join("index/notes");
    fs::write(&other, b"x").unwrap();
    File::options()
        .write(true)
        .open(&other)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    // Counted without removing, then removed.
    assert_eq!(
        b.remove_stale_temp(Duration::from_secs(3600), false)
            .unwrap(),
        7
    );
    assert_eq!(
        b.remove_stale_temp(Duration::from_secs(3600), true)
            .unwrap(),
        7
    );
    assert!(stale.iter().all(|p| !p.exists()));
    assert!(fresh.exists() && other.exists());
    assert_eq!(
        b.remove_stale_temp(Duration::from_secs(3600), true)
            .unwrap(),
        0
    );
    assert_eq!(b.remove_stale_temp(Duration::ZERO, true).unwrap(), 1);
    assert!(!fresh.exists());
    // Nothing to do in a folder that is not a repository.
    let none = LocalBackend::new(d.path().join("nope"));
    assert_eq!(none.remove_stale_temp(Duration::ZERO, true).unwrap(), 0);
}

#[test]
fn warming_is_a_hint_that_never_fails() {
    let tmp = tempfile::tempdir().unwrap();
    // No repository at all, then one without `locks/`, then a full one.
    let missing = LocalBackend::new(tmp.path().join("nothing"));
    missing.warm(&[FileType::Lock, FileType::Snapshot, FileType::Index]);
    let b = LocalBackend::new(tmp.path().join("repo"));
    b.create().unwrap();
    b.write(FileType::Snapshot, &"ab".repeat(32), b"snap")
        .unwrap();
    fs::remove_dir(tmp.path().join("repo/locks")).unwrap();
    b.warm(&[
        FileType::Lock,
        FileType::Snapshot,
        FileType::Index,
        FileType::Pack,
    ]);
    assert_eq!(
        b.read(FileType::Snapshot, &"ab".repeat(32)).unwrap(),
        b"snap"
    );
}

#[test]
fn prefetching_is_a_hint_that_never_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let b = LocalBackend::new(tmp.path().join("repo"));
    b.create().unwrap();
    let name = "cd".repeat(32);
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    b.write(FileType::Pack, &name, &data).unwrap();
    // A missing file, ranges past the end and beyond what the kernel takes: no effect.
    b.prefetch(FileType::Pack, &"ef".repeat(32), 0, 1 << 20);
    b.prefetch(FileType::Pack, &name, 1 << 40, 4096);
    b.prefetch(FileType::Pack, &name, u64::MAX, u64::MAX);
    b.prefetch(FileType::Pack, &name, 0, 100_000);
    let mut buf = vec![];
    let at = b
        .read_range_bulk(FileType::Pack, &name, 1000, 5000, &mut buf)
        .unwrap();
    assert_eq!(&buf[at..at + 5000], &data[1000..6000]);
}

#[test]
fn refuses_non_empty_dir_and_reports_missing_repo() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("x"), b"x").unwrap();
    assert_eq!(
        LocalBackend::new(d.path()).create().unwrap_err().kind,
        ErrorKind::AlreadyExists
    );
    let missing = LocalBackend::new(d.path().join("nope"));
    let e = missing.list(FileType::Key).unwrap_err();
    assert!(e.is_not_found());
    assert!(e.to_string().contains("nope"), "{e}");
}

#[test]
fn missing_folders_of_a_repository_are_empty_and_made_again() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("repo");
    let b = LocalBackend::new(&root);
    b.create().unwrap();
    b.write(FileType::Config, "config", b"c").unwrap();
    // As a copy tool that drops empty folders leaves it.
    for t in ["index", "snapshots", "locks", "data"] {
        fs::remove_dir_all(root.join(t)).unwrap();
    }
    for t in [
        FileType::Index,
        FileType::Snapshot,
        FileType::Lock,
        FileType::Pack,
    ] {
        assert_eq!(b.list(t).unwrap(), vec![], "{t:?}");
    }
    let id = "ab".repeat(32);
    b.write(FileType::Index, &id, b"i").unwrap();
    b.write(FileType::Pack, &id, b"p").unwrap();
    let mut sink = b.sink(FileType::Pack).unwrap().unwrap();
    sink.write(b"q").unwrap();
    let other = "cd".repeat(32);
    sink.commit(&other).unwrap();
    assert_eq!(b.read(FileType::Index, &id).unwrap(), b"i");
    assert_eq!(b.read(FileType::Pack, &id).unwrap(), b"p");
    assert_eq!(b.read(FileType::Pack, &other).unwrap(), b"q");
    // A shard folder missing under an existing data/.
    fs::remove_dir_all(root.join("data/cd")).unwrap();
    let mut sink = b.sink(FileType::Pack).unwrap().unwrap();
    sink.write(b"r").unwrap();
    sink.commit(&other).unwrap();
    assert_eq!(b.read(FileType::Pack, &other).unwrap(), b"r");
    // Without its config the folder is no repository: nothing is made there.
    fs::remove_file(root.join("config")).unwrap();
    fs::remove_dir_all(root.join("index")).unwrap();
    assert!(b.list(FileType::Index).unwrap_err().is_not_found());
    assert!(b.write(FileType::Index, &id, b"i").is_err());
    assert!(!root.join("index").exists());
}

fn walk(p: &Path) -> Vec<String> {
    let mut out = vec![];
    for e in fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        out.push(e.path().display().to_string());
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        }
    }
    out
}

/// A repository folder whose name is not UTF-8 is named with its odd bytes escaped, so that
/// two such folders are told apart (it was shown with U+FFFD).
#[test]
fn odd_bytes_in_the_location_are_escaped() {
    use std::os::unix::ffi::OsStrExt;
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join(std::ffi::OsStr::from_bytes(b"repo\xff"));
    let b = LocalBackend::new(root);
    assert!(b.location().ends_with("repo\\xff"), "{}", b.location());
    let err = b.read(FileType::Config, "config").unwrap_err().to_string();
    assert!(
        err.contains("repo\\xff/config") && !err.contains('\u{fffd}'),
        "{err}"
    );
}

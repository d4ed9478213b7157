//! Unit tests of the caching decorator, over the metered memory backend: what is served
//! locally, what is verified, refreshed and refetched, and that a broken cache never fails.

use std::sync::Barrier;

use super::*;
use crate::{MemoryBackend, MeteredBackend, Throttle, conformance};

type Inner = Arc<MeteredBackend<MemoryBackend>>;

/// A metered memory backend, and a cache over it in a fresh folder.
fn setup() -> (tempfile::TempDir, Inner, CachedBackend) {
    let tmp = tempfile::tempdir().unwrap();
    let inner = Arc::new(MeteredBackend::new(
        MemoryBackend::new(),
        Throttle::default(),
    ));
    let c = CachedBackend::new(inner.clone(), tmp.path().join("repo"));
    (tmp, inner, c)
}

fn requests(inner: &Inner) -> u64 {
    inner.stats().snapshot().requests
}

/// Some bytes and the name a repository gives them.
fn file(seed: u8, len: usize) -> (String, Vec<u8>) {
    let data: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    (hash_hex(&data), data)
}

fn flip_byte(p: &Path, at: usize) {
    let mut d = fs::read(p).unwrap();
    d[at] ^= 0x40;
    fs::write(p, d).unwrap();
}

#[test]
fn passes_conformance() {
    let tmp = tempfile::tempdir().unwrap();
    conformance(&CachedBackend::new(
        Arc::new(MemoryBackend::new()),
        tmp.path().join("plain"),
    ));
    // Also with the conformance suite's packs noted (their bytes do not match their names, so
    // they are never cached and every range goes to the inner backend).
    let c = CachedBackend::new(Arc::new(MemoryBackend::new()), tmp.path().join("noted"));
    c.note_tree_packs(&["ab".repeat(32), "cd".repeat(32)]);
    conformance(&c);
}

#[test]
fn second_read_of_index_and_snapshot_files_is_local() {
    let (_tmp, inner, c) = setup();
    let (idx, idx_data) = file(1, 5000);
    let (snap, snap_data) = file(2, 300);
    let (key, key_data) = file(3, 200);
    inner.write(FileType::Index, &idx, &idx_data).unwrap();
    inner.write(FileType::Snapshot, &snap, &snap_data).unwrap();
    inner.write(FileType::Key, &key, &key_data).unwrap();
    let before = requests(&inner);
    assert_eq!(c.read(FileType::Index, &idx).unwrap(), idx_data);
    assert_eq!(c.read(FileType::Snapshot, &snap).unwrap(), snap_data);
    assert_eq!(c.read(FileType::Key, &key).unwrap(), key_data);
    assert_eq!(requests(&inner), before + 3);
    assert!(c.dir().join("index").join(&idx).is_file());
    assert!(c.dir().join("snapshots").join(&snap).is_file());
    assert!(c.dir().join("keys").join(&key).is_file());
    for _ in 0..3 {
        assert_eq!(c.read(FileType::Index, &idx).unwrap(), idx_data);
        assert_eq!(c.read(FileType::Snapshot, &snap).unwrap(), snap_data);
        assert_eq!(c.read(FileType::Key, &key).unwrap(), key_data);
    }
    assert_eq!(requests(&inner), before + 3, "served from the cache");
    // Another process over the same folder finds the copies too.
    let again = CachedBackend::new(inner.clone(), c.dir());
    assert_eq!(again.read(FileType::Index, &idx).unwrap(), idx_data);
    assert_eq!(requests(&inner), before + 3);
    // Files written through the cache are kept as written.
    let (idx2, idx2_data) = file(4, 700);
    c.write(FileType::Index, &idx2, &idx2_data).unwrap();
    let after_write = requests(&inner);
    assert_eq!(c.read(FileType::Index, &idx2).unwrap(), idx2_data);
    assert_eq!(requests(&inner), after_write);
    // The config is never cached.
    inner.write(FileType::Config, "config", b"cfg").unwrap();
    let r = requests(&inner);
    c.read(FileType::Config, "config").unwrap();
    c.read(FileType::Config, "config").unwrap();
    assert_eq!(requests(&inner), r + 2);
}

#[test]
fn damaged_copy_is_removed_and_refetched() {
    let (_tmp, inner, c) = setup();
    let (snap, data) = file(5, 1000);
    inner.write(FileType::Snapshot, &snap, &data).unwrap();
    c.read(FileType::Snapshot, &snap).unwrap();
    let path = c.dir().join("snapshots").join(&snap);
    flip_byte(&path, 10);
    let before = requests(&inner);
    assert_eq!(c.read(FileType::Snapshot, &snap).unwrap(), data);
    assert_eq!(requests(&inner), before + 1, "refetched");
    assert_eq!(fs::read(&path).unwrap(), data, "the copy is whole again");
    assert_eq!(c.read(FileType::Snapshot, &snap).unwrap(), data);
    assert_eq!(requests(&inner), before + 1);
    // A truncated copy, and one that is not a file at all.
    fs::write(&path, &data[..10]).unwrap();
    assert_eq!(c.read(FileType::Snapshot, &snap).unwrap(), data);
    fs::remove_file(&path).unwrap();
    fs::create_dir_all(path.join("inside")).unwrap();
    assert_eq!(c.read(FileType::Snapshot, &snap).unwrap(), data);
    assert_eq!(requests(&inner), before + 3);
    // The folder in the way is replaced by the copy: it stayed, and every run warned.
    assert_eq!(
        fs::read(&path).unwrap(),
        data,
        "the copy replaced the folder"
    );
    assert_eq!(c.read(FileType::Snapshot, &snap).unwrap(), data);
    assert_eq!(requests(&inner), before + 3);
}

#[test]
fn remote_damage_is_not_cached() {
    let (_tmp, inner, c) = setup();
    let (snap, data) = file(6, 100);
    inner
        .write(FileType::Snapshot, &snap, b"not the right bytes")
        .unwrap();
    // The caller gets what the repository holds (and reports the mismatch itself)...
    assert_eq!(
        c.read(FileType::Snapshot, &snap).unwrap(),
        b"not the right bytes"
    );
    // ...and nothing is kept.
    assert!(!c.dir().join("snapshots").join(&snap).exists());
    inner.write(FileType::Snapshot, &snap, &data).unwrap();
    assert_eq!(c.read(FileType::Snapshot, &snap).unwrap(), data);
}

#[test]
fn listing_drops_copies_of_files_deleted_elsewhere() {
    let (_tmp, inner, c) = setup();
    let (a, a_data) = file(7, 100);
    let (b, b_data) = file(8, 100);
    inner.write(FileType::Snapshot, &a, &a_data).unwrap();
    inner.write(FileType::Snapshot, &b, &b_data).unwrap();
    c.read(FileType::Snapshot, &a).unwrap();
    c.read(FileType::Snapshot, &b).unwrap();
    let dir = c.dir().join("snapshots");
    // Another client deletes `a` and adds `n`.
    inner.delete(FileType::Snapshot, &a).unwrap();
    let (n, n_data) = file(9, 100);
    inner.write(FileType::Snapshot, &n, &n_data).unwrap();
    // A temporary file left by a crash long ago, and a fresh one (another process writing).
    let old_tmp = dir.join(".tmp-0123456789abcdef");
    let new_tmp = dir.join(".tmp-fedcba9876543210");
    fs::write(&old_tmp, b"x").unwrap();
    fs::write(&new_tmp, b"x").unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(7200);
    fs::File::options()
        .write(true)
        .open(&old_tmp)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let mut l: Vec<String> = c
        .list(FileType::Snapshot)
        .unwrap()
        .into_iter()
        .map(|f| f.name)
        .collect();
    l.sort();
    let mut want = vec![b.clone(), n.clone()];
    want.sort();
    assert_eq!(l, want, "the listing is the repository's");
    assert!(
        !dir.join(&a).exists(),
        "copy of the deleted snapshot dropped"
    );
    assert!(dir.join(&b).exists());
    assert!(!old_tmp.exists() && new_tmp.exists());
    // A deletion through the cache drops the copy at once.
    c.delete(FileType::Snapshot, &b).unwrap();
    assert!(!dir.join(&b).exists());
    assert!(c.read(FileType::Snapshot, &b).unwrap_err().is_not_found());
}

#[test]
fn noted_tree_pack_is_fetched_once_and_served_locally() {
    let (_tmp, inner, c) = setup();
    let (pack, data) = file(10, 200_000);
    inner.write(FileType::Pack, &pack, &data).unwrap();
    // Not noted: ranges go through.
    let r0 = requests(&inner);
    assert_eq!(
        c.read_range(FileType::Pack, &pack, 5, 10).unwrap(),
        &data[5..15]
    );
    assert_eq!(requests(&inner), r0 + 1);
    assert!(!c.dir().join(FileType::Pack.path(&pack)).exists());

    c.note_tree_packs(std::slice::from_ref(&pack));
    let before = requests(&inner);
    let bytes_before = inner.stats().snapshot().bytes_read;
    for (off, len) in [(0u64, 100u64), (1000, 5000), (199_000, 1000), (12_345, 0)] {
        let (o, l) = (off as usize, len as usize);
        assert_eq!(
            c.read_range(FileType::Pack, &pack, off, len).unwrap(),
            &data[o..o + l]
        );
        let mut buf = b"previous contents".to_vec();
        c.read_range_into(FileType::Pack, &pack, off, len, &mut buf)
            .unwrap();
        assert_eq!(buf, &data[o..o + l]);
        let mut buf = vec![];
        let at = c
            .read_range_bulk(FileType::Pack, &pack, off, len, &mut buf)
            .unwrap();
        assert_eq!(&buf[at..at + l], &data[o..o + l]);
    }
    assert_eq!(c.read(FileType::Pack, &pack).unwrap(), data);
    assert_eq!(requests(&inner), before + 1, "one whole read");
    assert_eq!(
        inner.stats().snapshot().bytes_read - bytes_before,
        data.len() as u64
    );
    assert_eq!(
        fs::read(c.dir().join(FileType::Pack.path(&pack))).unwrap(),
        data
    );
    // The next process verifies the copy and reads nothing remote.
    let next = CachedBackend::new(inner.clone(), c.dir());
    next.note_tree_packs(std::slice::from_ref(&pack));
    assert_eq!(
        next.read_range(FileType::Pack, &pack, 777, 333).unwrap(),
        &data[777..1110]
    );
    assert_eq!(requests(&inner), before + 1);
}

#[test]
fn damaged_pack_copy_is_refetched() {
    let (_tmp, inner, c) = setup();
    let (pack, data) = file(11, 50_000);
    inner.write(FileType::Pack, &pack, &data).unwrap();
    c.note_tree_packs(std::slice::from_ref(&pack));
    c.read_range(FileType::Pack, &pack, 0, 10).unwrap();
    let path = c.dir().join(FileType::Pack.path(&pack));
    flip_byte(&path, 20_000);
    let next = CachedBackend::new(inner.clone(), c.dir());
    next.note_tree_packs(std::slice::from_ref(&pack));
    let before = requests(&inner);
    assert_eq!(
        next.read_range(FileType::Pack, &pack, 19_990, 20).unwrap(),
        &data[19_990..20_010]
    );
    assert_eq!(requests(&inner), before + 1, "refetched whole");
    assert_eq!(fs::read(&path).unwrap(), data);
    // A copy removed while in use: the range is read remotely, the pack fetched again later.
    fs::remove_file(&path).unwrap();
    assert_eq!(
        next.read_range(FileType::Pack, &pack, 5, 5).unwrap(),
        &data[5..10]
    );
    assert_eq!(
        next.read_range(FileType::Pack, &pack, 6, 5).unwrap(),
        &data[6..11]
    );
    assert_eq!(fs::read(&path).unwrap(), data);
}

#[test]
fn ranges_beyond_the_end_are_short_reads() {
    let (_tmp, inner, c) = setup();
    let (pack, data) = file(12, 1000);
    inner.write(FileType::Pack, &pack, &data).unwrap();
    c.note_tree_packs(std::slice::from_ref(&pack));
    // The first use (fetch) and later ones (local copy) alike.
    for _ in 0..2 {
        for (off, len) in [(998u64, 5u64), (1000, 1), (u64::MAX, 2), (5000, 0)] {
            let e = c.read_range(FileType::Pack, &pack, off, len).unwrap_err();
            assert_eq!(e.kind, ErrorKind::ShortRead, "{off}+{len}");
            let mut buf = vec![];
            let e = c
                .read_range_into(FileType::Pack, &pack, off, len, &mut buf)
                .unwrap_err();
            assert_eq!(e.kind, ErrorKind::ShortRead);
            let e = c
                .read_range_bulk(FileType::Pack, &pack, off, len, &mut buf)
                .unwrap_err();
            assert_eq!(e.kind, ErrorKind::ShortRead);
        }
    }
    assert_eq!(
        c.read_range(FileType::Pack, &pack, 995, 5).unwrap(),
        &data[995..]
    );
}

#[test]
fn written_tree_pack_lands_in_the_cache() {
    let (_tmp, inner, c) = setup();
    let (pack, data) = file(13, 30_000);
    let (other, other_data) = file(14, 30_000);
    c.note_tree_packs(std::slice::from_ref(&pack));
    c.write(FileType::Pack, &pack, &data).unwrap();
    c.write(FileType::Pack, &other, &other_data).unwrap();
    assert!(c.dir().join(FileType::Pack.path(&pack)).is_file());
    assert!(
        !c.dir().join(FileType::Pack.path(&other)).exists(),
        "only noted packs are kept"
    );
    let before = requests(&inner);
    assert_eq!(
        c.read_range(FileType::Pack, &pack, 100, 200).unwrap(),
        &data[100..300]
    );
    assert_eq!(requests(&inner), before);
    // A pack deleted elsewhere: the next listing of packs drops the copy.
    inner.delete(FileType::Pack, &pack).unwrap();
    let l = c.list(FileType::Pack).unwrap();
    assert_eq!(l.len(), 1);
    assert!(!c.dir().join(FileType::Pack.path(&pack)).exists());
    assert!(
        c.read_range(FileType::Pack, &pack, 100, 200)
            .unwrap_err()
            .is_not_found()
    );
}

#[test]
fn concurrent_readers_fetch_a_pack_once() {
    let (_tmp, inner, c) = setup();
    let (pack, data) = file(15, 400_000);
    inner.write(FileType::Pack, &pack, &data).unwrap();
    c.note_tree_packs(std::slice::from_ref(&pack));
    let before = requests(&inner);
    let barrier = Barrier::new(8);
    std::thread::scope(|s| {
        for i in 0..8u64 {
            let (c, data, pack, barrier) = (&c, &data, &pack, &barrier);
            s.spawn(move || {
                barrier.wait();
                let off = i * 40_000;
                let got = c.read_range(FileType::Pack, pack, off, 1000).unwrap();
                assert_eq!(got, &data[off as usize..off as usize + 1000]);
            });
        }
    });
    assert_eq!(requests(&inner), before + 1);
}

/// Every operation works, through to the inner backend, whatever state the cache is in.
fn exercise(c: &CachedBackend, inner: &Inner) {
    let (idx, idx_data) = file(20, 3000);
    let (pack, pack_data) = file(21, 3000);
    let (snap, snap_data) = file(22, 300);
    c.note_tree_packs(std::slice::from_ref(&pack));
    c.write(FileType::Index, &idx, &idx_data).unwrap();
    c.write(FileType::Pack, &pack, &pack_data).unwrap();
    inner.write(FileType::Snapshot, &snap, &snap_data).unwrap();
    for _ in 0..2 {
        assert_eq!(c.read(FileType::Index, &idx).unwrap(), idx_data);
        assert_eq!(c.read(FileType::Snapshot, &snap).unwrap(), snap_data);
        assert_eq!(
            c.read_range(FileType::Pack, &pack, 10, 20).unwrap(),
            &pack_data[10..30]
        );
        let mut buf = vec![];
        let at = c
            .read_range_bulk(FileType::Pack, &pack, 0, 3000, &mut buf)
            .unwrap();
        assert_eq!(&buf[at..at + 3000], &pack_data[..]);
        assert_eq!(
            c.read_range(FileType::Pack, &pack, 2999, 2)
                .unwrap_err()
                .kind,
            ErrorKind::ShortRead
        );
        assert_eq!(c.list(FileType::Index).unwrap().len(), 1);
        assert_eq!(c.list(FileType::Pack).unwrap().len(), 1);
    }
    c.delete(FileType::Snapshot, &snap).unwrap();
    c.delete(FileType::Index, &idx).unwrap();
}

#[test]
fn unusable_cache_never_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let inner: Inner = Arc::new(MeteredBackend::new(
        MemoryBackend::new(),
        Throttle::default(),
    ));
    // The cache folder is a file: nothing can be created below it.
    let blocked = tmp.path().join("blocked");
    fs::write(&blocked, b"not a folder").unwrap();
    let c = CachedBackend::new(inner.clone(), &blocked);
    exercise(&c, &inner);
    assert_eq!(fs::read(&blocked).unwrap(), b"not a folder");
    // Below a file, so missing and impossible to create.
    let inner: Inner = Arc::new(MeteredBackend::new(
        MemoryBackend::new(),
        Throttle::default(),
    ));
    let c = CachedBackend::new(inner.clone(), blocked.join("sub"));
    exercise(&c, &inner);
}

#[test]
fn read_only_cache_never_fails() {
    use std::os::unix::fs::PermissionsExt;
    let (_tmp, inner, c) = setup();
    fs::create_dir_all(c.dir()).unwrap();
    fs::set_permissions(c.dir(), fs::Permissions::from_mode(0o500)).unwrap();
    exercise(&c, &inner);
    fs::set_permissions(c.dir(), fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn missing_cache_folder_is_created_on_first_copy() {
    let (tmp, inner, _) = setup();
    let c = CachedBackend::new(inner.clone(), tmp.path().join("a/b/c"));
    exercise(&c, &inner);
    assert!(tmp.path().join("a/b/c").is_dir());
}

#[test]
fn root_preparation_and_lookup_across_repositories() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cache");
    prepare_root(&root).unwrap();
    let tag = fs::read_to_string(root.join("CACHEDIR.TAG")).unwrap();
    assert!(tag.starts_with("Signature: 8a477f597d28d172789f06886806bc55"));
    prepare_root(&root).unwrap();
    // An existing folder is used as it is, untagged.
    let existing = tmp.path().join("existing");
    fs::create_dir(&existing).unwrap();
    prepare_root(&existing).unwrap();
    assert!(!existing.join("CACHEDIR.TAG").exists());
    assert!(prepare_root(&root.join("CACHEDIR.TAG")).is_err());

    let (key, data) = file(30, 500);
    assert_eq!(find_in_root(&root, FileType::Key, &key), None);
    let repo_dir = root.join("ab".repeat(32));
    let c = CachedBackend::new(Arc::new(MemoryBackend::new()), &repo_dir);
    c.store(FileType::Key, &key, &data);
    assert_eq!(find_in_root(&root, FileType::Key, &key), Some(data.clone()));
    // A damaged copy is not returned; nor are files outside repository folders.
    flip_byte(&repo_dir.join("keys").join(&key), 3);
    assert_eq!(find_in_root(&root, FileType::Key, &key), None);
    fs::create_dir_all(root.join("other/keys")).unwrap();
    fs::write(root.join("other/keys").join(&key), &data).unwrap();
    assert_eq!(find_in_root(&root, FileType::Key, &key), None);
    assert_eq!(
        find_in_root(&tmp.path().join("nope"), FileType::Key, &key),
        None
    );
    // Bytes that do not match the name are never stored.
    c.store(FileType::Key, &"cd".repeat(32), b"x");
    assert!(!repo_dir.join("keys").join("cd".repeat(32)).exists());
}

//! Prune on a nearly full disk: the index is rewritten file by file, each old file deleted as
//! soon as the new ones cover it (the files naming only deleted packs first), so that the
//! rewrite needs room for one file, not for the whole index.

use std::sync::Arc;

use arca_backend::{Backend, FileType};
use arca_format::ContentRef;

use super::fixture::{Fixture, Quota};
use super::thorough;

/// Two backups of about the same size, each with its index file; the first one forgotten.
/// With no room for a new index file beside both old ones, prune deletes the forgotten
/// backup's index file first (it names only packs to delete), then writes the new index in
/// its room, and frees the forgotten backup's packs. Before, it wrote the new index first
/// and failed for lack of space every time, freeing nothing.
#[test]
fn a_prune_without_room_for_a_second_index_frees_space() {
    let quota = Arc::new(Quota::new(FileType::Index, u64::MAX));
    let mut f = Fixture::new(quota.clone());
    let backup = |f: &mut Fixture, seed: u64| {
        // Many small blobs: the index file is as large as the data is small.
        let blobs: Vec<ContentRef> = (0..400).map(|i| f.data(seed + i, 64)).collect();
        let root = f.tree(vec![Fixture::file("f", blobs)]);
        f.snapshot(root)
    };
    let old = backup(&mut f, 1_000);
    let _new = backup(&mut f, 2_000);
    f.forget(old);
    let clean = f.verify();
    let packs_before = f.packs();
    let full = quota.used();
    assert_eq!(quota.inner.list(FileType::Index).unwrap().len(), 2);
    // Room for half an index file more.
    *quota.cap.lock().unwrap() = full + full / 4;
    let (_, report) = f.prune(&thorough()).unwrap();
    assert_eq!(report.index_files_deleted, 2, "{report:?}");
    assert!(report.packs_deleted > 0, "{report:?}");
    assert!(quota.used() <= full / 2 + full / 8, "{}", quota.used());
    assert!(f.packs().len() < packs_before.len());
    assert_eq!(f.verify(), clean);
    assert_eq!(f.indexed(), clean, "nothing unused is left");
}

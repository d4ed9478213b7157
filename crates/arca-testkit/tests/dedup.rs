//! Dedup: an unchanged re-backup adds only a snapshot and a few tree blobs; a copy of a tree
//! under another path adds under 1% of its size; a known plaintext never reaches the disk.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::Path;

use arca_testkit::{random_bytes, text_bytes};
use common::*;

fn make_data(root: &Path) -> u64 {
    let mut total = 0;
    for i in 0..40u64 {
        let dir = root.join(format!("d{}", i % 5));
        fs::create_dir_all(&dir).unwrap();
        let len = 50_000 + (i as usize * 37_000) % 400_000;
        let data = if i % 2 == 0 {
            random_bytes(i, len)
        } else {
            text_bytes(i, len)
        };
        total += data.len() as u64;
        fs::write(dir.join(format!("f{i}")), data).unwrap();
    }
    total
}

#[test]
fn unchanged_backup_adds_only_a_snapshot_and_a_few_trees() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    make_data(&src);
    let repo_dir = tmp.path().join("repo");
    let repo = init(local(&repo_dir));
    let first = do_backup(&repo, &src).unwrap();
    assert!(first.snapshot.summary.data_blobs > 40);
    let before = du(&repo_dir);
    let second = do_backup(&repo, &src).unwrap();
    let s = &second.snapshot.summary;
    assert_eq!(s.data_blobs, 0);
    assert_eq!(s.files_unmodified, 40);
    assert_eq!(s.files_new + s.files_changed, 0);
    assert_eq!(second.snapshot.parent, Some(first.snapshot_id));
    assert!(s.tree_blobs <= 4, "{} tree blobs", s.tree_blobs);
    let added = du(&repo_dir) - before;
    assert!(added < 16 * 1024, "unchanged backup added {added} bytes");
}

#[test]
fn copy_under_another_path_adds_under_one_percent() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let size = make_data(&a);
    let repo_dir = tmp.path().join("repo");
    let repo = init(local(&repo_dir));
    do_backup(&repo, &a).unwrap();
    let before = du(&repo_dir);
    let b = tmp.path().join("elsewhere/b");
    fs::create_dir_all(&b).unwrap();
    for f in arca_testkit::files_under(&a) {
        let rel = f.strip_prefix(&a).unwrap();
        fs::create_dir_all(b.join(rel).parent().unwrap()).unwrap();
        fs::copy(&f, b.join(rel)).unwrap();
    }
    let r = do_backup(&repo, &b).unwrap();
    assert_eq!(r.snapshot.summary.data_blobs, 0);
    let added = du(&repo_dir) - before;
    assert!(
        added * 100 < size,
        "copy of {size} bytes added {added} bytes"
    );
}

#[test]
fn a_shifted_copy_dedups_through_content_defined_chunking() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(&src).unwrap();
    let data = random_bytes(77, 3 << 20);
    fs::write(src.join("orig"), &data).unwrap();
    let repo = init(local(&tmp.path().join("repo")));
    do_backup(&repo, &src).unwrap();
    let mut shifted = b"a few inserted bytes".to_vec();
    shifted.extend_from_slice(&data);
    fs::write(src.join("shifted"), &shifted).unwrap();
    let r = do_backup(&repo, &src).unwrap();
    // Only the chunk around the insertion is new (chunks average 64 KiB here).
    assert!(
        r.snapshot.summary.data_added < 600 << 10,
        "{} bytes added",
        r.snapshot.summary.data_added
    );
}

#[test]
fn known_plaintext_never_appears_in_the_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir_all(&src).unwrap();
    let marker = b"ARCA-PLAINTEXT-MARKER-7f3c9e";
    let mut content = vec![];
    for _ in 0..2000 {
        content.extend_from_slice(marker);
        content.extend_from_slice(b" some filler text around the marker\n");
    }
    fs::write(src.join("ARCA-PLAINTEXT-MARKER-7f3c9e.txt"), &content).unwrap();
    fs::write(src.join("raw"), marker).unwrap();
    xattr::set(src.join("raw"), "user.ARCA-PLAINTEXT-MARKER-7f3c9e", marker).unwrap();
    std::os::unix::fs::symlink("ARCA-PLAINTEXT-MARKER-7f3c9e", src.join("link")).unwrap();
    let repo_dir = tmp.path().join("repo");
    let repo = init(local(&repo_dir));
    do_backup(&repo, &src).unwrap();
    let files = arca_testkit::files_under(&repo_dir);
    assert!(files.len() >= 5);
    let needles: [&[u8]; 3] = [marker, b"PLAINTEXT-MARKER", b"some filler text"];
    for f in files {
        let bytes = fs::read(&f).unwrap();
        for n in needles {
            assert!(
                !bytes.windows(n.len()).any(|w| w == n),
                "{} contains {:?}",
                f.display(),
                String::from_utf8_lossy(n)
            );
        }
        // Nor does the backed-up path.
        let tmp_name = src.to_string_lossy().into_owned();
        assert!(
            !bytes
                .windows(tmp_name.len())
                .any(|w| w == tmp_name.as_bytes()),
            "{} leaks the path",
            f.display()
        );
    }
}

/// The subtree id of the directory at `path` (absolute, as backed up) in snapshot `report`.
fn subtree_at(
    repo: &arca_repo::Repository,
    report: &arca_backup::BackupReport,
    path: &Path,
) -> arca_format::Id {
    let index = repo.load_index().unwrap();
    let mut tree = report.snapshot.tree;
    for part in path.components().skip(1) {
        let name = part.as_os_str().as_encoded_bytes();
        let nodes = repo.load_tree(&index, &tree).unwrap().nodes;
        let node = nodes.iter().find(|n| n.name == name).unwrap();
        tree = node.subtree.unwrap();
    }
    tree
}

/// Reading a symlink moves its atime where atimes are kept (relatime moves one older than
/// the link's mtime), and there is no O_NOATIME for it. A backup that stored the atime seen
/// then stored every listing holding a link again on the next run, with nothing changed.
#[test]
fn reading_symlinks_does_not_change_their_listing_for_the_next_backup() {
    let tmp = tempfile::tempdir().unwrap();
    let links = tmp.path().join("src").join("links");
    fs::create_dir_all(&links).unwrap();
    fs::write(links.join("file"), b"data").unwrap();
    let old = arca_format::Timespec {
        sec: 1_000_000_000,
        nsec: 0,
    };
    let times = arca_format::Node {
        atime: old,
        mtime: old,
        ..arca_format::Node::default()
    };
    for i in 0..3 {
        let l = links.join(format!("link{i}"));
        std::os::unix::fs::symlink("file", &l).unwrap();
        arca_fs::set_times(&l, &times).unwrap();
    }
    let repo = init(local(&tmp.path().join("repo")));
    let first = do_backup(&repo, &links).unwrap();
    let second = do_backup(&repo, &links).unwrap();
    let listing = subtree_at(&repo, &second, &links);
    assert_eq!(
        subtree_at(&repo, &first, &links),
        listing,
        "the listing of {} was stored again",
        links.display()
    );
    // Both snapshots hold the links' atime as it was before the first backup read them.
    let index = repo.load_index().unwrap();
    let nodes = repo.load_tree(&index, &listing).unwrap().nodes;
    let link_atimes: Vec<_> = nodes
        .iter()
        .filter(|n| n.kind == Some(arca_format::NodeKind::Symlink))
        .map(|n| n.atime)
        .collect();
    assert_eq!(link_atimes, vec![old; 3]);
}

//! Unit tests of `diff` on hand-made listings whose changes and counts are known.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::find::testrepo::{TestRepo, dir, file, symlink};

fn run(
    r: &TestRepo,
    index: &Index,
    a: Option<&Node>,
    b: Option<&Node>,
    path: &[u8],
    metadata: bool,
) -> (Vec<String>, DiffStats) {
    let mut lines = vec![];
    let mut sink = |c: &Change<'_>| {
        lines.push(format!(
            "{:<5}{}",
            c.modifier,
            String::from_utf8_lossy(c.path)
        ));
        Ok(())
    };
    let s = diff(
        &r.repo,
        index,
        a,
        b,
        path,
        DiffOptions { metadata },
        &mut sink,
    )
    .unwrap();
    (lines, s)
}

struct Fixture {
    r: TestRepo,
    index: Index,
    roots: [Id; 2],
    /// Plain lengths of the listings by name.
    len: std::collections::HashMap<&'static str, u64>,
}

fn fixture() -> Fixture {
    let mut r = TestRepo::new();
    let d: Vec<_> = (1..=12u8).map(|i| r.data(i, 100 * u32::from(i))).collect();
    let ghost = Id([0xee; 32]); // never stored: equal on both sides, so never read
    let shared = r.tree(vec![file(b"s.txt", vec![d[4]], 5), dir(b"ghost", ghost)]);
    let docs_a = r.tree(vec![
        file(b"a.txt", vec![d[0], d[1]], 1),
        file(b"b.txt", vec![d[2]], 2),
        file(b"gone.txt", vec![d[3]], 3),
    ]);
    // b.txt was read in between: only its access time differs, which is no change.
    let read_b = Node {
        atime: arca_format::Timespec { sec: 99, nsec: 0 },
        ..file(b"b.txt", vec![d[2]], 2)
    };
    let docs_b = r.tree(vec![
        file(b"a.txt", vec![d[0], d[10]], 11),
        read_b,
        file(b"new.txt", vec![d[1]], 12),
    ]);
    let u_a = r.tree(vec![file(b"x", vec![], 1)]);
    let t_b = r.tree(vec![file(b"inner.txt", vec![d[6]], 7)]);
    let added = r.tree(vec![file(b"f", vec![d[11]], 12)]);
    // Other content of the same length, all else equal: probable bit rot.
    let rotten = r.data(13, 900);
    let mode_a = file(b"mode.txt", vec![d[7]], 8);
    let mode_b = Node {
        mode: 0o600,
        ..mode_a.clone()
    };
    let root_a = r.tree(vec![
        dir(b"docs", docs_a),
        symlink(b"link", b"x"),
        mode_a,
        file(b"rot.txt", vec![d[8]], 9),
        dir(b"same", shared),
        file(b"t", vec![d[5]], 6),
        dir(b"u", u_a),
    ]);
    let root_b = r.tree(vec![
        dir(b"added", added),
        dir(b"docs", docs_b),
        symlink(b"link", b"y"),
        mode_b,
        file(b"rot.txt", vec![rotten], 9),
        dir(b"same", shared),
        dir(b"t", t_b),
        file(b"u", vec![], 0),
    ]);
    let index = r.finish();
    let len = [
        ("docs_a", docs_a),
        ("docs_b", docs_b),
        ("u_a", u_a),
        ("t_b", t_b),
        ("added", added),
        ("root_a", root_a),
        ("root_b", root_b),
    ]
    .into_iter()
    .map(|(n, id)| {
        (
            n,
            u64::from(index.get(BlobKind::Tree, &id).unwrap().raw_length),
        )
    })
    .collect();
    Fixture {
        r,
        index,
        roots: [root_a, root_b],
        len,
    }
}

#[test]
fn changes_and_counts_between_two_roots() {
    let fx = fixture();
    let (a, b) = (root_node(fx.roots[0]), root_node(fx.roots[1]));
    let (lines, s) = run(&fx.r, &fx.index, Some(&a), Some(&b), b"/", false);
    assert_eq!(
        lines,
        [
            "+    /added/",
            "+    /added/f",
            "M    /docs/a.txt",
            "-    /docs/gone.txt",
            "+    /docs/new.txt",
            "M    /link",
            "M?   /rot.txt",
            "T    /t/",
            "+    /t/inner.txt",
            "T    /u",
            "-    /u/x",
        ]
    );
    let l = |n: &str| fx.len[n];
    assert_eq!(s.changed_files, 2);
    // d7, d13, d11, d12 (d2 moved from a.txt to new.txt: neither added nor removed) and the
    // listings added/, docs (new), t/, / (new).
    assert_eq!(
        s.added,
        DiffStat {
            files: 3,
            dirs: 1,
            others: 0,
            data_blobs: 4,
            tree_blobs: 4,
            bytes: 700 + 900 + 1100 + 1200 + l("added") + l("docs_b") + l("t_b") + l("root_b"),
        }
    );
    // d4, d6, d9 and the listings docs (old), u/, / (old).
    assert_eq!(
        s.removed,
        DiffStat {
            files: 2,
            dirs: 0,
            others: 0,
            data_blobs: 3,
            tree_blobs: 3,
            bytes: 400 + 600 + 900 + l("docs_a") + l("u_a") + l("root_a"),
        }
    );
    // Metadata changes only when asked; the reverse diff swaps the signs and counts.
    let (lines, _) = run(&fx.r, &fx.index, Some(&a), Some(&b), b"/", true);
    assert!(lines.contains(&"U    /mode.txt".to_string()), "{lines:?}");
    assert_eq!(lines.len(), 12);
    let (lines, r) = run(&fx.r, &fx.index, Some(&b), Some(&a), b"/", false);
    assert_eq!(lines[0], "-    /added/");
    assert_eq!(lines[7], "T    /t");
    assert_eq!(lines[8], "-    /t/inner.txt");
    assert_eq!((r.added, r.removed), (s.removed, s.added));
}

#[test]
fn a_path_restricts_both_sides() {
    let fx = fixture();
    let (a, b) = (root_node(fx.roots[0]), root_node(fx.roots[1]));
    let da = find_node(&fx.r.repo, &fx.index, &a, b"/docs").unwrap();
    let db = find_node(&fx.r.repo, &fx.index, &b, b"docs/").unwrap();
    let (lines, s) = run(&fx.r, &fx.index, da.as_ref(), db.as_ref(), b"/docs", false);
    assert_eq!(
        lines,
        [
            "M    /docs/a.txt",
            "-    /docs/gone.txt",
            "+    /docs/new.txt"
        ]
    );
    assert_eq!((s.added.files, s.removed.files, s.changed_files), (1, 1, 1));
    // A folder only one side has: everything in it is added.
    let none = find_node(&fx.r.repo, &fx.index, &a, b"/added").unwrap();
    assert!(none.is_none());
    let added = find_node(&fx.r.repo, &fx.index, &b, b"/added").unwrap();
    let (lines, s) = run(&fx.r, &fx.index, None, added.as_ref(), b"/added", false);
    assert_eq!(lines, ["+    /added/", "+    /added/f"]);
    assert_eq!((s.added.dirs, s.added.files, s.added.data_blobs), (1, 1, 1));
    // A single file, and paths that lead nowhere.
    let f = find_node(&fx.r.repo, &fx.index, &a, b"/rot.txt").unwrap();
    let g = find_node(&fx.r.repo, &fx.index, &b, b"/rot.txt").unwrap();
    let (lines, _) = run(&fx.r, &fx.index, f.as_ref(), g.as_ref(), b"/rot.txt", false);
    assert_eq!(lines, ["M?   /rot.txt"]);
    assert!(
        find_node(&fx.r.repo, &fx.index, &a, b"/rot.txt/x")
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        find_node(&fx.r.repo, &fx.index, &a, b"/docs/../etc"),
        Err(DiffError::BadPath(_))
    ));
}

#[test]
fn identical_snapshots_have_no_changes_and_read_nothing_below_the_root() {
    let fx = fixture();
    let a = root_node(fx.roots[0]);
    let (lines, s) = run(&fx.r, &fx.index, Some(&a), Some(&a), b"/", true);
    assert!(lines.is_empty());
    assert_eq!(s, DiffStats::default());
}

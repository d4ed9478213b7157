//! Unit tests of `find` on hand-made listings: hits in name order, object searches with
//! offsets, and listings met again answered from memory with the same result.

#![allow(clippy::unwrap_used)]

use super::testrepo::{TestRepo, dir, file, symlink};
use super::*;

/// Every hit as "path" (names) or "path blob@offsets" / "path tree" (objects).
fn run(f: &mut Finder<'_>, root: Id) -> Vec<String> {
    let mut out = vec![];
    let mut sink = |h: &Hit<'_>| {
        let mut s = String::from_utf8_lossy(h.path).into_owned();
        for b in h.blobs {
            s.push_str(&format!(" {}@{:?}", b.id.short(), b.offsets));
        }
        if h.tree.is_some() {
            s.push_str(" tree");
        }
        assert!(h.node.content.is_empty());
        out.push(s);
        Ok(())
    };
    let n = f.search(root, &mut sink).unwrap();
    assert_eq!(n as usize, out.len());
    out
}

fn names(p: &[&str]) -> Query {
    let v: Vec<String> = p.iter().map(|s| s.to_string()).collect();
    Query::Names(NameQuery::new(&v, false, None, None).unwrap())
}

/// Two snapshots sharing `/home/u/docs` (and the empty listing), differing in `/etc`.
struct Fixture {
    r: TestRepo,
    index: Index,
    roots: [Id; 2],
    docs: Id,
}

fn fixture() -> Fixture {
    let mut r = TestRepo::new();
    let a = r.data(1, 1000);
    let b = r.data(2, 500);
    let empty = r.tree(vec![]);
    let docs = r.tree(vec![
        file(b"a.txt", vec![a, b, a], 100),
        file(b"b.md", vec![b], 200),
        file(b"\xff\xfe.txt", vec![], 300),
        dir(b"empty", empty),
    ]);
    let u = r.tree(vec![
        dir(b"docs", docs),
        symlink(b"link.txt", b"docs/a.txt"),
    ]);
    let home = r.tree(vec![dir(b"u", u)]);
    let etc1 = r.tree(vec![file(b"passwd", vec![b], 50), dir(b"empty", empty)]);
    let etc2 = r.tree(vec![file(b"passwd.txt", vec![a], 60)]);
    let root1 = r.tree(vec![dir(b"etc", etc1), dir(b"home", home)]);
    let root2 = r.tree(vec![dir(b"etc", etc2), dir(b"home", home)]);
    let index = r.finish();
    Fixture {
        r,
        index,
        roots: [root1, root2],
        docs,
    }
}

#[test]
fn base_name_patterns_in_name_order_and_shared_listings_read_once() {
    let fx = fixture();
    let mut f = Finder::new(&fx.r.repo, &fx.index, names(&["*.txt"]));
    assert_eq!(
        run(&mut f, fx.roots[0]),
        [
            "/home/u/docs/a.txt",
            "/home/u/docs/\u{fffd}\u{fffd}.txt",
            "/home/u/link.txt"
        ]
    );
    // root, etc, empty, home, u, docs; the second empty folder came from memory.
    assert_eq!(f.stats().listings_read, 6);
    assert_eq!(f.stats().listings_reused, 1);
    assert_eq!(
        run(&mut f, fx.roots[1]),
        [
            "/etc/passwd.txt",
            "/home/u/docs/a.txt",
            "/home/u/docs/\u{fffd}\u{fffd}.txt",
            "/home/u/link.txt"
        ]
    );
    // Only the new root and the new /etc were read; /home came from memory.
    assert_eq!(f.stats().listings_read, 8);
    assert_eq!(f.stats().listings_reused, 2);
    // The same snapshot again: nothing read at all.
    assert_eq!(run(&mut f, fx.roots[1]).len(), 4);
    assert_eq!(f.stats().listings_read, 8);
}

#[test]
fn without_memory_the_answers_are_the_same() {
    let fx = fixture();
    for q in [["*.txt"], ["docs/*"], ["/home/*/docs"], ["*"]] {
        let mut cached = Finder::new(&fx.r.repo, &fx.index, names(&q));
        let mut plain = Finder::new(&fx.r.repo, &fx.index, names(&q)).with_cache_budget(0);
        for root in [fx.roots[0], fx.roots[1], fx.roots[0]] {
            assert_eq!(run(&mut cached, root), run(&mut plain, root), "{q:?}");
        }
        assert_eq!(plain.cache_bytes(), 0);
        // A budget too small for everything: what is remembered stays correct.
        let mut small = Finder::new(&fx.r.repo, &fx.index, names(&q)).with_cache_budget(700);
        for root in [fx.roots[0], fx.roots[1], fx.roots[0], fx.roots[1]] {
            assert_eq!(run(&mut small, root), run(&mut plain, root), "{q:?}");
            assert!(small.cache_bytes() <= 700);
        }
    }
}

#[test]
fn path_patterns_and_anchors() {
    let fx = fixture();
    let mut f = Finder::new(&fx.r.repo, &fx.index, names(&["docs/*.md", "/etc"]));
    assert_eq!(run(&mut f, fx.roots[0]), ["/etc", "/home/u/docs/b.md"]);
    // An anchored pattern alone reads only what leads to it.
    let mut f = Finder::new(&fx.r.repo, &fx.index, names(&["/home/u/docs/*.md"]));
    assert_eq!(run(&mut f, fx.roots[0]), ["/home/u/docs/b.md"]);
    // root, home, u, docs (not /etc nor the empty folders)
    assert_eq!(f.stats().listings_read, 4);
    // A directory matches like any entry; its contents only if they match too.
    let mut f = Finder::new(&fx.r.repo, &fx.index, names(&["empty"]));
    assert_eq!(
        run(&mut f, fx.roots[0]),
        ["/etc/empty", "/home/u/docs/empty"]
    );
}

#[test]
fn ignore_case_and_time_window() {
    let fx = fixture();
    let v = vec!["*.TXT".to_string()];
    let ts = |s| Some(arca_format::Timespec { sec: s, nsec: 0 });
    let q = NameQuery::new(&v, true, ts(100), ts(299)).unwrap();
    let mut f = Finder::new(&fx.r.repo, &fx.index, Query::Names(q));
    assert_eq!(run(&mut f, fx.roots[0]), ["/home/u/docs/a.txt"]);
}

#[test]
fn objects_report_files_offsets_and_folders() {
    let fx = fixture();
    let w = Wanted::resolve(
        &fx.index,
        ObjectKind::Blob,
        &[Id([1; 32]).to_hex()[..8].to_string()],
    )
    .unwrap();
    let mut f = Finder::new(&fx.r.repo, &fx.index, Query::Objects(w));
    assert_eq!(
        run(&mut f, fx.roots[0]),
        ["/home/u/docs/a.txt 01010101@[0, 1500]"]
    );
    assert_eq!(
        run(&mut f, fx.roots[1]),
        [
            "/etc/passwd.txt 01010101@[0]",
            "/home/u/docs/a.txt 01010101@[0, 1500]"
        ]
    );
    let trees = [fx.docs.to_hex(), fx.roots[1].to_hex()[..10].to_string()];
    let w = Wanted::resolve(&fx.index, ObjectKind::Tree, &trees).unwrap();
    let mut f = Finder::new(&fx.r.repo, &fx.index, Query::Objects(w));
    assert_eq!(run(&mut f, fx.roots[0]), ["/home/u/docs tree"]);
    assert_eq!(run(&mut f, fx.roots[1]), ["/ tree", "/home/u/docs tree"]);
}

/// A folder whose listing cannot be read is left out, named, and its siblings searched (the
/// whole snapshot was given up); a root listing that cannot be read fails the search.
#[test]
fn unreadable_listing_is_left_out_naming_it() {
    let mut r = TestRepo::new();
    let missing = Id([9; 32]);
    let root = r.tree(vec![dir(b"gone", missing), file(b"z.txt", vec![], 0)]);
    let index = r.finish();
    let mut f = Finder::new(&r.repo, &index, names(&["*.txt"]));
    let mut found = vec![];
    let mut sink = |h: &Hit<'_>| {
        found.push(String::from_utf8_lossy(h.path).into_owned());
        Ok(())
    };
    assert_eq!(f.search(root, &mut sink).unwrap(), 1);
    assert_eq!(found, ["/z.txt"]);
    let skipped = f.take_skipped();
    assert_eq!(skipped.len(), 1);
    let e = skipped[0].to_string();
    assert!(e.contains("/gone") && e.contains(&missing.to_hex()), "{e}");
    assert!(f.take_skipped().is_empty());
    let mut sink = |_: &Hit<'_>| Ok(());
    let e = f.search(missing, &mut sink).unwrap_err().to_string();
    assert!(e.contains(&missing.to_hex()), "{e}");
}

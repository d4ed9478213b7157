//! The change rule of the walk: which attributes make a file be read again.

use super::*;
use arca_format::Timespec;

/// Every attribute of the change rule changing alone, and together: a file is reused
/// only when none changed.
#[test]
fn change_detection_truth_table() {
    let base = Node {
        name: b"f".to_vec(),
        kind: Some(NodeKind::File),
        size: 100,
        mtime: Timespec { sec: 10, nsec: 5 },
        ctime: Timespec { sec: 11, nsec: 6 },
        inode: 42,
        mode: 0o644,
        ..Node::default()
    };
    type Change = fn(&mut Node);
    let changes: [(&str, Change); 5] = [
        ("type", |n| n.kind = Some(NodeKind::Symlink)),
        ("size", |n| n.size += 1),
        ("mtime", |n| n.mtime.nsec += 1),
        ("ctime", |n| n.ctime.sec += 1),
        ("inode", |n| n.inode += 1),
    ];
    // Every subset of the five attributes.
    for mask in 0u32..(1 << changes.len()) {
        let mut now = base.clone();
        for (i, (_, change)) in changes.iter().enumerate() {
            if mask & (1 << i) != 0 {
                change(&mut now);
            }
        }
        let names: Vec<_> = (0..changes.len())
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| changes[i].0)
            .collect();
        assert_eq!(unchanged(&base, &now), mask == 0, "changed: {names:?}");
        // `--ignore-ctime` and `--ignore-inode` leave their bit out of the rule, and
        // nothing else.
        let (ctime, inode) = (1 << 3, 1 << 4);
        for (ic, ii) in [(true, false), (false, true), (true, true)] {
            let ignored = if ic { ctime } else { 0 } | if ii { inode } else { 0 };
            assert_eq!(
                unchanged_but(&base, &now, ic, ii),
                mask & !ignored == 0,
                "changed: {names:?}, ignoring ctime {ic}, inode {ii}"
            );
        }
    }
    // Attributes outside the rule do not force a reread.
    let mut other = base.clone();
    other.mode = 0o600;
    other.atime = Timespec { sec: 99, nsec: 0 };
    assert!(unchanged(&base, &other));
    // A parent entry that is not a file is never reused.
    let mut dir = base.clone();
    dir.kind = Some(NodeKind::Dir);
    assert!(!unchanged(&dir, &dir.clone()));
}

//! Restores from a damaged repository: everything intact is restored, and only the files
//! whose blocks are lost are reported.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;

use common::*;

/// A pack cut short fails only the files whose blocks lay past its end: the merged read of
/// the whole pack failed, and with it every file with a block in it, though the blocks
/// before the cut were whole (hunt 19; restic restores them).
#[test]
fn a_pack_cut_short_fails_only_the_files_past_the_cut() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let data: Vec<Vec<u8>> = (0..3)
        .map(|n| arca_testkit::random_bytes(n, 20_000))
        .collect();
    for (n, d) in data.iter().enumerate() {
        fs::write(src.join(format!("f{n}")), d).unwrap();
    }
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    // The one pack over 50 kB holds the three files' blocks, in the order written.
    let mut packs = vec![];
    for d in fs::read_dir(e.path("repo/data")).unwrap() {
        for f in fs::read_dir(d.unwrap().path()).unwrap() {
            let f = f.unwrap();
            if f.metadata().unwrap().len() > 50_000 {
                packs.push(f.path());
            }
        }
    }
    assert_eq!(packs.len(), 1, "{packs:?}");
    fs::OpenOptions::new()
        .write(true)
        .open(&packs[0])
        .unwrap()
        .set_len(30_000)
        .unwrap();

    let target = e.path("t");
    let o = e.run(&["restore", "latest", "--target", target.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    let root = target.join(src.strip_prefix("/").unwrap());
    let whole: Vec<usize> = (0..3)
        .filter(|n| fs::read(root.join(format!("f{n}"))).ok().as_ref() == Some(&data[*n]))
        .collect();
    // Exactly one file's blocks lie before byte 30,000; it is whole, the others reported.
    assert_eq!(whole.len(), 1, "{err}");
    for n in (0..3).filter(|n| !whole.contains(n)) {
        assert!(
            err.contains(&format!("src/f{n}: content at offset 0 not restored")),
            "{err}"
        );
    }
    assert!(!err.contains(&format!("src/f{}:", whole[0])), "{err}");
}

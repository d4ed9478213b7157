//! Unit tests of the dump on a repository built by hand in memory: which blobs one ranged read
//! covers, that bytes leave in order whatever the read sizes, and the errors.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use arca_backend::{Backend, FileType, MemoryBackend};
use arca_format::{
    BlobKind, ChunkerParams, ContentRef, Id, IndexFile, KdfParams, Node, NodeKind, Tree,
};
use arca_repo::blob::seal_blob;
use arca_repo::pack::PackWriter;
use arca_repo::{InitOptions, Repository};

use super::{Archive, Dump, DumpError, Target};

fn repo() -> Repository {
    let opts = InitOptions {
        kdf: KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        },
        chunker: ChunkerParams {
            min: 1024,
            avg: 4096,
            max: 16384,
        },
        compression: 0,
        ..InitOptions::default()
    };
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    Repository::init(backend, b"pw", &opts).unwrap()
}

/// Stores `blobs` in one pack, in this order, and indexes it.
fn pack(repo: &Repository, kind: BlobKind, blobs: &[Vec<u8>]) -> Vec<Id> {
    let mut w = PackWriter::new(kind, 1 << 16);
    let mut ids = vec![];
    for b in blobs {
        let id = repo.key().blob_id(b);
        w.add(&seal_blob(repo.sealer(), kind, id, b, 0).unwrap())
            .unwrap();
        ids.push(id);
    }
    let p = w.finish(repo.sealer()).unwrap();
    repo.backend()
        .write(FileType::Pack, &p.id.to_hex(), &p.bytes)
        .unwrap();
    repo.save_index(&IndexFile {
        supersedes: vec![],
        packs: vec![p.index],
    })
    .unwrap();
    ids
}

fn file(name: &str, parts: &[(Id, usize)]) -> Node {
    Node {
        name: name.as_bytes().to_vec(),
        kind: Some(NodeKind::File),
        mode: 0o644,
        nlink: 1,
        size: parts.iter().map(|p| p.1 as u64).sum(),
        content: parts
            .iter()
            .map(|&(id, len)| ContentRef {
                id,
                len: len as u32,
            })
            .collect(),
        ..Node::default()
    }
}

fn block(i: u8) -> Vec<u8> {
    (0..1000u32).map(|j| (j as u8).wrapping_mul(i)).collect()
}

/// A root with files whose blocks lie in two packs: f1 = a0 a1 a2, f2 = a3, f3 = b0 a4,
/// f4 = a0 (again, behind the others).
fn fixture() -> (Repository, Id, Vec<u8>) {
    let repo = repo();
    let a: Vec<Vec<u8>> = (1..=5).map(block).collect();
    let b = vec![block(9)];
    let ia = pack(&repo, BlobKind::Data, &a);
    let ib = pack(&repo, BlobKind::Data, &b);
    let nodes = vec![
        file("f1", &[(ia[0], 1000), (ia[1], 1000), (ia[2], 1000)]),
        file("f2", &[(ia[3], 1000)]),
        file("f3", &[(ib[0], 1000), (ia[4], 1000)]),
        file("f4", &[(ia[0], 1000)]),
    ];
    let tree = Tree { nodes }.encode().unwrap();
    let root = pack(&repo, BlobKind::Tree, &[tree])[0];
    let all = [&a[..3], &a[3..4], &b[..], &a[4..], &a[..1]]
        .concat()
        .concat();
    (repo, root, all)
}

fn dump_all(d: &Dump<'_>, root: Id) -> (Vec<u8>, super::DumpReport) {
    let mut bytes = vec![];
    for name in ["f1", "f2", "f3", "f4"] {
        let t = d.resolve(root, Path::new(name)).unwrap();
        let r = d.write(&t, None, &mut bytes).unwrap();
        assert_eq!(r.files, 1);
    }
    // The reads of one archive of everything.
    let mut tar = vec![];
    let r = d
        .write(&Target::Root(root), Some(Archive::Tar), &mut tar)
        .unwrap();
    (bytes, r)
}

#[test]
fn reads_merge_consecutive_blobs_across_files() {
    let (repo, root, all) = fixture();
    let index = repo.load_index().unwrap();
    let mut d = Dump::new(&repo, &index);
    // Wait for the walker as long as it takes: the reads do not depend on timing then.
    d.gather = std::time::Duration::from_secs(30);
    d.read_gap = 1 << 20;
    d.max_read = 1 << 20;
    let (bytes, r) = dump_all(&d, root);
    assert_eq!(bytes, all);
    // a0..a3 in one read (f1 and f2), b0, then a4 and a0 again in one (a0 lies before a4,
    // within the read gap: hunt H12, a blob before the read's range made a read of its own).
    assert_eq!(r.reads, 3);
    assert_eq!((r.entries, r.files, r.bytes), (4, 4, 7000));

    // Reads of one blob at most: one per block.
    d.max_read = 1;
    let (bytes, r) = dump_all(&d, root);
    assert_eq!(bytes, all);
    assert_eq!(r.reads, 7);

    // Two blobs per read at most (plaintext bound), one read in flight.
    d.max_read = 2100;
    d.reads_in_flight = 1;
    let (bytes, r) = dump_all(&d, root);
    assert_eq!(bytes, all);
    assert_eq!(r.reads, 5, "a0 a1 | a2 a3 | b0 | a4 | a0");
}

#[test]
fn resolve_and_refuse() {
    let (repo, root, _) = fixture();
    let index = repo.load_index().unwrap();
    let d = Dump::new(&repo, &index);
    assert!(matches!(
        d.resolve(root, Path::new("/nope")),
        Err(DumpError::NotFound { path }) if path == Path::new("/nope")
    ));
    assert!(matches!(
        d.resolve(root, Path::new("f1/x")),
        Err(DumpError::NotAFolder { path }) if path == Path::new("/f1")
    ));
    for spelled in ["f1/", "/f1/."] {
        assert!(matches!(
            d.resolve(root, Path::new(spelled)),
            Err(DumpError::NotAFolder { path }) if path == Path::new("/f1")
        ));
    }
    assert!(matches!(
        d.resolve(root, Path::new("../f1")),
        Err(DumpError::InvalidPath { .. })
    ));
    assert!(matches!(
        d.resolve(root, Path::new("/")),
        Ok(Target::Root(_))
    ));
    assert!(matches!(
        d.write(&Target::Root(root), None, &mut vec![]),
        Err(DumpError::NotAFile { kind: "folder", .. })
    ));
}

#[test]
fn a_lost_pack_fails_naming_the_file() {
    let (repo, root, _) = fixture();
    let index = repo.load_index().unwrap();
    // Drop the pack holding b0.
    let b0 = index
        .packs()
        .iter()
        .find(|p| p.kind == BlobKind::Data && p.size < 2000)
        .unwrap()
        .id;
    repo.backend().delete(FileType::Pack, &b0.to_hex()).unwrap();
    let d = Dump::new(&repo, &index);
    let mut out = vec![];
    let err = d
        .write(&Target::Root(root), Some(Archive::Tar), &mut out)
        .unwrap_err();
    match err {
        DumpError::Repo { path, .. } => assert_eq!(path, Path::new("/f3")),
        e => panic!("{e}"),
    }
}

#[test]
fn a_zip_leaves_out_a_path_too_long_for_it_and_writes_the_rest() {
    use std::io::Read;
    use std::sync::mpsc::sync_channel;

    use super::{DumpReport, Entry, Msg, Sink, drain};

    let entry = |path: Vec<u8>, size: u64| {
        Msg::Entry(Box::new(Entry {
            path,
            node: file("x", &[]),
            size,
            link: None,
        }))
    };
    // 300 folders of 250 bytes: a path of about 75 KiB, more than a zip name can be.
    let mut long = [vec![b'd'; 250], b"/".to_vec()].concat().repeat(300);
    long.push(b'f');
    let (tx, rx) = sync_channel(8);
    for m in [
        entry(long, 5),
        Msg::Data(b"abc".to_vec()),
        Msg::Zeros(2),
        entry(b"ok".to_vec(), 2),
        Msg::Data(b"hi".to_vec()),
    ] {
        tx.send(m).unwrap();
    }
    drop(tx);
    let mut out = vec![];
    let mut sink = super::zip::ZipSink::new(&mut out);
    let mut report = DumpReport::default();
    drain(&mut sink, rx, &mut report).unwrap();
    sink.finish().unwrap();
    drop(sink);
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert!(report.skipped[0].reason.contains("64 KiB"));
    assert_eq!((report.entries, report.files, report.bytes), (1, 1, 2));
    // The long name's content went nowhere: the archive holds the other file, whole.
    let mut z = ::zip::ZipArchive::new(std::io::Cursor::new(out)).unwrap();
    assert_eq!(z.len(), 1);
    let mut f = z.by_index(0).unwrap();
    assert_eq!(f.name().unwrap(), "ok");
    let mut text = String::new();
    f.read_to_string(&mut text).unwrap();
    assert_eq!(text, "hi");
}

/// A member of a tar archive: path, type, link target and content.
type Member = (Vec<u8>, u8, Vec<u8>, Vec<u8>);

/// The members of a tar archive the dump wrote (pax `path` and `linkpath` records applied).
fn tar_members(tar: &[u8]) -> Vec<Member> {
    let field = |b: &[u8]| b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())].to_vec();
    let mut out = vec![];
    let mut pax: Vec<(Vec<u8>, Vec<u8>)> = vec![];
    let mut at = 0;
    while tar[at..at + 512].iter().any(|&b| b != 0) {
        let h = &tar[at..at + 512];
        let octal = String::from_utf8(field(&h[124..136])).unwrap();
        let size = usize::from_str_radix(octal.trim(), 8).unwrap();
        let data = &tar[at + 512..at + 512 + size];
        at += 512 + size.div_ceil(512) * 512;
        if h[156] == b'x' {
            let mut rest = data;
            while !rest.is_empty() {
                let sp = rest.iter().position(|&b| b == b' ').unwrap();
                let len: usize = std::str::from_utf8(&rest[..sp]).unwrap().parse().unwrap();
                let rec = &rest[sp + 1..len - 1];
                let eq = rec.iter().position(|&b| b == b'=').unwrap();
                pax.push((rec[..eq].to_vec(), rec[eq + 1..].to_vec()));
                rest = &rest[len..];
            }
            continue;
        }
        let mut name = field(&h[..100]);
        let mut link = field(&h[157..257]);
        for (k, v) in pax.drain(..) {
            match &k[..] {
                b"path" => name = v,
                b"linkpath" => link = v,
                _ => {}
            }
        }
        out.push((name, h[156], link, data.to_vec()));
    }
    out
}

#[test]
fn names_of_one_inode_with_different_contents_are_not_tar_links() {
    let repo = repo();
    let ids = pack(&repo, BlobKind::Data, &[block(1), block(2)]);
    let linked = |name: &str, id: Id, inode: u64| Node {
        dev: 5,
        inode,
        nlink: 2,
        ..file(name, &[(id, 1000)])
    };
    // a and b share inode 7 but not their content (the file changed between the reads of its
    // names); c and d share inode 9 and their content.
    let nodes = vec![
        linked("a", ids[0], 7),
        linked("b", ids[1], 7),
        linked("c", ids[0], 9),
        linked("d", ids[0], 9),
    ];
    let tree = Tree { nodes }.encode().unwrap();
    let root = pack(&repo, BlobKind::Tree, &[tree])[0];
    let index = repo.load_index().unwrap();
    let d = Dump::new(&repo, &index);
    let mut tar = vec![];
    let r = d
        .write(&Target::Root(root), Some(Archive::Tar), &mut tar)
        .unwrap();
    assert_eq!((r.files, r.hardlinks), (3, 1));
    let m = tar_members(&tar);
    let kinds: Vec<_> = m
        .iter()
        .map(|(p, t, l, _)| (String::from_utf8_lossy(p), *t, String::from_utf8_lossy(l)))
        .collect();
    assert_eq!(
        kinds,
        [
            ("a".into(), b'0', "".into()),
            ("b".into(), b'0', "".into()),
            ("c".into(), b'0', "".into()),
            ("d".into(), b'1', "c".into()),
        ]
    );
    assert_eq!(m[1].3, block(2), "b holds its own content");
}

#[test]
fn a_file_with_holes_is_a_sparse_member_holding_its_data_only() {
    let repo = repo();
    let ids = pack(&repo, BlobKind::Data, &[block(1), block(2)]);
    // The hole blob is never read: it need not be in the repository.
    let hole = repo.key().blob_id(&[0u8; 16384]);
    let long = "a".repeat(150);
    let linked = |name: &str| Node {
        dev: 5,
        inode: 7,
        nlink: 2,
        ..file(name, &[(hole, 16384), (ids[0], 1000), (hole, 16384)])
    };
    let nodes = vec![linked(&long), file("d", &[(ids[1], 1000)]), linked("link")];
    let tree = Tree { nodes }.encode().unwrap();
    let root = pack(&repo, BlobKind::Tree, &[tree])[0];
    let index = repo.load_index().unwrap();
    let d = Dump::new(&repo, &index);
    let mut tar = vec![];
    let r = d
        .write(&Target::Root(root), Some(Archive::Tar), &mut tar)
        .unwrap();
    assert_eq!((r.files, r.hardlinks, r.bytes), (2, 1, 1000 + 33768));
    let m = tar_members(&tar);
    // A file without holes as before; the sparse one under its stand-in name (cut to 100
    // bytes), its real name in GNU.sparse.name, not in `path`; its hard link to that name.
    assert_eq!(m[1], (b"d".to_vec(), b'0', vec![], block(2)));
    let stand_in = format!("GNUSparseFile.0/{long}");
    assert_eq!(m[0].0, &stand_in.as_bytes()[..100]);
    assert_eq!(
        m[2],
        (b"link".to_vec(), b'1', long.clone().into_bytes(), vec![])
    );
    let has = |s: &[u8]| tar.windows(s.len()).any(|w| w == s);
    assert!(has(format!(" GNU.sparse.name={long}\n").as_bytes()));
    for rec in ["GNU.sparse.major=1\n", "GNU.sparse.minor=0\n"] {
        assert!(has(rec.as_bytes()), "{rec}");
    }
    assert!(has(b"29 GNU.sparse.realsize=33768\n"));
    assert!(!has(b" path="));
    // The map (the data at 16384, widened to a block; an empty region at the end), then the
    // data: 1,536 bytes for a file of 33,768.
    let data = &m[0].3;
    assert_eq!(data.len(), 512 + 1024);
    let map = b"2\n16384\n1024\n33768\n0\n";
    assert_eq!(&data[..map.len()], map);
    assert!(data[map.len()..512].iter().all(|&b| b == 0));
    assert_eq!(&data[512..1512], &block(1)[..]);
    assert!(data[1512..].iter().all(|&b| b == 0));
}

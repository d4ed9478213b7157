//! The sealed path fed 10,000 mutated files: snapshots, index files and the config as the
//! repository opens them (envelope, authentication, decompression, decoding), and pack tails as
//! `read_pack_header` and `pack_header_from_bytes` read them. Every mutation must be refused
//! with an error, never a panic; an untouched file must still open.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use arca_backend::{Backend, FileType, MemoryBackend};
use arca_format::{
    BlobKind, ChunkerParams, Id, IndexFile, IndexPack, KdfParams, PackEntry, Snapshot,
};
use arca_repo::blob::seal_blob;
use arca_repo::pack::{PackWriter, pack_header_from_bytes, read_pack_header};
use arca_repo::{InitOptions, Repository};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;

/// A change to a valid file.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    SetU32(usize, u32),
    Insert(usize, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), 0u8..8).prop_map(|(p, b)| Mutation::Flip(p, b)),
        2 => any::<usize>().prop_map(Mutation::Truncate),
        3 => (any::<usize>(), prop_oneof![Just(u32::MAX), Just(0x8000_0000u32), any::<u32>(), 0u32..200])
            .prop_map(|(p, v)| Mutation::SetU32(p, v)),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..12))
            .prop_map(|(p, b)| Mutation::Insert(p, b)),
    ]
}

fn apply(mut b: Vec<u8>, muts: &[Mutation], tail_bias: bool) -> Vec<u8> {
    for m in muts {
        let len = b.len();
        // Pack tails are where the header and trailer are: aim there half of the time.
        let pos = |p: usize, width: usize| {
            let span = len + 1 - width.min(len);
            if tail_bias && p.is_multiple_of(2) {
                span - 1 - (p / 2) % span.min(200)
            } else {
                p % span
            }
        };
        match m {
            Mutation::Flip(p, bit) if len > 0 => {
                let i = pos(*p, 1);
                b[i] ^= 1 << bit;
            }
            Mutation::Truncate(n) if len > 0 => b.truncate(n % len),
            Mutation::SetU32(p, v) if len >= 4 => {
                let i = pos(*p, 4);
                b[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
            Mutation::Insert(p, bytes) => {
                let i = p % (len + 1);
                b.splice(i..i, bytes.iter().copied());
            }
            _ => {}
        }
    }
    b
}

struct Fixture {
    backend: Arc<dyn Backend>,
    repo: Repository,
    snapshot: (Id, Vec<u8>),
    index: (Id, Vec<u8>),
    config: Vec<u8>,
    pack: (Id, Vec<u8>),
}

fn file_id(b: &[u8]) -> Id {
    Id(*blake3::hash(b).as_bytes())
}

fn fixture() -> Fixture {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let opts = InitOptions {
        kdf: KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        },
        chunker: ChunkerParams::default(),
        ..InitOptions::default()
    };
    let repo = Repository::init(backend.clone(), b"pw", &opts).unwrap();
    let mut w = PackWriter::new(BlobKind::Data, 1 << 16);
    for i in 0..5u8 {
        let data = vec![i; 300 + usize::from(i) * 50];
        let id = repo.key().blob_id(&data);
        w.add(&seal_blob(repo.sealer(), BlobKind::Data, id, &data, 3).unwrap())
            .unwrap();
    }
    let p = w.finish(repo.sealer()).unwrap();
    let index = IndexFile {
        supersedes: vec![],
        packs: vec![
            p.index.clone(),
            IndexPack {
                id: Id([3; 32]),
                kind: BlobKind::Tree,
                size: 1000,
                blobs: vec![PackEntry {
                    id: Id([4; 32]),
                    offset: 8,
                    length: 100,
                    raw_length: 60,
                }],
            },
        ],
    };
    let index_id = repo.save_index(&index).unwrap();
    let mut body = b"ASNP\x01\x00".to_vec();
    body.extend_from_slice(
        br#"{"time":"2026-01-02T03:04:05+00:00","tree":"0101010101010101010101010101010101010101010101010101010101010101","paths":["/x"],"hostname":"h","username":"u","uid":1,"gid":2,"tags":[],"parent":null,"program_version":"t","complete":true}"#,
    );
    let snapshot = Snapshot::decode(&body).unwrap();
    let snapshot_id = repo.save_snapshot(&snapshot).unwrap();
    let read = |t, id: &Id| backend.read(t, &id.to_hex()).unwrap();
    Fixture {
        snapshot: (snapshot_id, read(FileType::Snapshot, &snapshot_id)),
        index: (index_id, read(FileType::Index, &index_id)),
        config: backend.read(FileType::Config, "config").unwrap(),
        pack: (p.id, p.bytes),
        backend,
        repo,
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("ARCA_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_sealed_files_are_refused_without_panics(
        which in prop_oneof![4 => Just(0u8), 4 => Just(1u8), 1 => Just(2u8), 6 => Just(3u8)],
        muts in proptest::collection::vec(mutation(), 0..4),
    ) {
        thread_local! {
            static FX: Fixture = fixture();
        }
        FX.with(|fx| -> Result<(), TestCaseError> {
            match which {
                // Snapshots and index files, stored under the name of their new bytes so that
                // the check of the name does not stop every mutation at once.
                0 | 1 => {
                    let (t, (id, orig)) = if which == 0 {
                        (FileType::Snapshot, &fx.snapshot)
                    } else {
                        (FileType::Index, &fx.index)
                    };
                    let b = apply(orig.clone(), &muts, false);
                    let new = file_id(&b);
                    fx.backend.write(t, &new.to_hex(), &b).unwrap();
                    let r = if which == 0 {
                        fx.repo.load_snapshot(&new).map(|_| ())
                    } else {
                        fx.repo.load_index_file(&new).map(|_| ())
                    };
                    if &b == orig {
                        prop_assert!(r.is_ok());
                    } else {
                        let e = r.unwrap_err();
                        prop_assert!(e.is_corruption(), "{e}");
                        prop_assert!(e.to_string().contains(&new.to_hex()), "{e}");
                        fx.backend.delete(t, &new.to_hex()).unwrap();
                    }
                    prop_assert_eq!(*id, file_id(orig));
                }
                // The config, through opening the repository.
                2 => {
                    let b = apply(fx.config.clone(), &muts, false);
                    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
                    for (id, _) in fx.repo.list_ids(FileType::Key).unwrap() {
                        let k = fx.backend.read(FileType::Key, &id.to_hex()).unwrap();
                        backend.write(FileType::Key, &id.to_hex(), &k).unwrap();
                    }
                    backend.write(FileType::Config, "config", &b).unwrap();
                    let r = Repository::open(backend, b"pw");
                    prop_assert_eq!(r.is_ok(), b == fx.config, "{:?}", r.err());
                }
                // Pack tails, read by range and whole.
                _ => {
                    let (id, orig) = &fx.pack;
                    let b = apply(orig.clone(), &muts, true);
                    let name = Id([0xee; 32]);
                    fx.backend.write(FileType::Pack, &name.to_hex(), &b).unwrap();
                    for size in [b.len() as u64, orig.len() as u64] {
                        let r = read_pack_header(fx.backend.as_ref(), fx.repo.sealer(), &name, size);
                        if let Ok(h) = &r {
                            // Only an intact header opens; it lists the same blobs.
                            let want = pack_header_from_bytes(fx.repo.sealer(), id, orig).unwrap();
                            prop_assert_eq!(h, &want);
                        }
                    }
                    let whole = pack_header_from_bytes(fx.repo.sealer(), &name, &b);
                    if b == *orig {
                        prop_assert!(whole.is_ok());
                    }
                }
            }
            Ok(())
        })?;
    }
}

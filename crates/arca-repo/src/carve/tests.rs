#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;

use arca_backend::MemoryBackend;
use arca_format::{BlobKind, Cipher, Id, Node, NodeKind, Tree};

use super::{Wanted, carve};
use crate::Repository;
use crate::blob::{compress_blob, seal_into};
use crate::pack::PackWriter;

fn repo(cipher: Cipher) -> Repository {
    let mut r = crate::testing::repo(Arc::new(MemoryBackend::new()));
    if cipher != r.config().cipher {
        r = Repository::init(
            Arc::new(MemoryBackend::new()),
            b"pw",
            &crate::InitOptions {
                cipher,
                ..crate::testing::options()
            },
        )
        .unwrap();
    }
    r
}

/// Pseudo-random bytes (incompressible).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Text-like bytes (compressible).
fn text(n: usize, seed: u64) -> Vec<u8> {
    let mut t = Vec::with_capacity(n + 32);
    let mut i = 0u64;
    while t.len() < n {
        t.extend_from_slice(format!("line {i} of text {seed}\n").as_bytes());
        i += 1;
    }
    t.truncate(n);
    t
}

/// A pack of `blobs` (each compressed when that pays) with its header's last bytes flipped:
/// its bytes and the entries its header held.
fn damaged_pack(
    r: &Repository,
    kind: BlobKind,
    blobs: &[Vec<u8>],
) -> (Vec<u8>, Vec<arca_format::PackEntry>) {
    damaged_pack_at(r, kind, blobs, 3)
}

/// [`damaged_pack`] at compression `level` (0: every blob stored as it is).
fn damaged_pack_at(
    r: &Repository,
    kind: BlobKind,
    blobs: &[Vec<u8>],
    level: i32,
) -> (Vec<u8>, Vec<arca_format::PackEntry>) {
    let mut w = PackWriter::new(kind, 1 << 20);
    for data in blobs {
        let id = r.key().blob_id(data);
        let c = compress_blob(data, level);
        w.add(&seal_into(r.sealer(), kind, id, data, c.as_deref(), vec![]).unwrap())
            .unwrap();
    }
    let p = w.finish(r.sealer()).unwrap();
    let mut bytes = p.bytes.clone();
    let at = bytes.len() - arca_format::pack::TRAILER_LEN - 5;
    bytes[at] ^= 0x40;
    assert!(crate::pack::pack_header_from_bytes(r.sealer(), &p.id, &bytes).is_err());
    (bytes, p.index.blobs)
}

fn wanted_all(r: &Repository, blobs: &[Vec<u8>]) -> HashMap<Id, Wanted> {
    blobs
        .iter()
        .map(|d| {
            let w = Wanted {
                kind: BlobKind::Data,
                len: Some(d.len() as u32),
            };
            (r.key().blob_id(d), w)
        })
        .collect()
}

/// Compressed blobs, full chunks stored raw and a file's short last chunk stored raw, with
/// the header damaged: every blob is found where the header had it, with both ciphers,
/// and nothing is left unaccounted for.
#[test]
fn every_blob_of_a_pack_with_a_damaged_header_is_found() {
    for cipher in [Cipher::XChaCha20Poly1305, Cipher::Xaes256Gcm] {
        let r = repo(cipher);
        let chunker = r.chunker();
        let big = noise(300_000, 1);
        let first_chunk = big[..chunker.cut(&big)].to_vec();
        let blobs = vec![
            text(50_000, 1),
            first_chunk,
            noise(3_000, 2), // a file's last chunk, followed by a compressed blob
            text(20_000, 2),
            noise(10, 3),
            text(9_000, 3),
        ];
        let (bytes, entries) = damaged_pack(&r, BlobKind::Data, &blobs);
        let c = carve(r.key(), r.sealer(), &chunker, &bytes, &HashMap::new());
        assert_eq!(c.entries, entries, "{cipher:?}");
        assert_eq!(c.kind, Some(BlobKind::Data));
        assert!(c.unresolved.is_empty(), "{:?}", c.unresolved);
        assert!(c.header_at.is_some());
    }
}

/// Stored blobs back to back (files' last chunks) whose ends no chunker cut or compressed
/// neighbour tells are found from the lengths the snapshots give them, and without those by
/// trying where a stored blob may start; nothing unverified is returned.
#[test]
fn stored_blobs_back_to_back_are_found_with_or_without_lengths() {
    let r = repo(Cipher::XChaCha20Poly1305);
    let chunker = r.chunker();
    let blobs = vec![
        noise(1_500, 4),
        noise(2_500, 5),
        noise(700, 6),
        text(30_000, 4),
    ];
    let (bytes, entries) = damaged_pack(&r, BlobKind::Data, &blobs);
    for wanted in [HashMap::new(), wanted_all(&r, &blobs)] {
        let c = carve(r.key(), r.sealer(), &chunker, &bytes, &wanted);
        assert_eq!(c.entries, entries);
        assert!(c.unresolved.is_empty());
    }
}

/// A pack of tree listings stored as they are (compression off): each listing's end is
/// where the next one's magic decrypts.
#[test]
fn stored_tree_listings_are_found_without_lengths() {
    let r = repo(Cipher::Xaes256Gcm);
    let trees: Vec<Vec<u8>> = (0..5).map(|i| listing(i, 30 + i as usize * 7)).collect();
    let (bytes, entries) = damaged_pack_at(&r, BlobKind::Tree, &trees, 0);
    let c = carve(r.key(), r.sealer(), &r.chunker(), &bytes, &HashMap::new());
    assert_eq!(c.entries, entries);
    assert_eq!(c.kind, Some(BlobKind::Tree));
    assert!(c.unresolved.is_empty());
}

/// A damaged blob is left out (as an unresolved range) and every blob after it is still
/// found; a pack cut short keeps every whole blob before the cut.
#[test]
fn a_damaged_blob_or_a_cut_loses_only_what_it_hits() {
    let r = repo(Cipher::Xaes256Gcm);
    let chunker = r.chunker();
    let blobs: Vec<Vec<u8>> = (0..6).map(|i| text(10_000 + i * 1_000, i as u64)).collect();
    let (mut bytes, entries) = damaged_pack(&r, BlobKind::Data, &blobs);
    let hit = &entries[2];
    bytes[(hit.offset + hit.length / 2) as usize] ^= 1;
    let c = carve(r.key(), r.sealer(), &chunker, &bytes, &HashMap::new());
    let mut expect = entries.clone();
    expect.remove(2);
    assert_eq!(c.entries, expect);
    assert_eq!(
        c.unresolved,
        vec![(u64::from(hit.offset), u64::from(hit.length))]
    );

    let cut = (entries[4].offset + 100) as usize;
    let c = carve(
        r.key(),
        r.sealer(),
        &chunker,
        &bytes[..cut],
        &HashMap::new(),
    );
    assert_eq!(c.entries, expect[..3].to_vec());
    assert_eq!(c.header_at, None);
    assert_eq!(c.unresolved_bytes(), u64::from(hit.length) + 100);
}

/// A pack of tree listings is found to be one.
#[test]
fn tree_listings_are_carved_as_trees() {
    let r = repo(Cipher::XChaCha20Poly1305);
    let trees: Vec<Vec<u8>> = (0..3).map(|i| listing(i, 20)).collect();
    assert!(Tree::decode(&trees[0]).is_ok());
    let (bytes, entries) = damaged_pack(&r, BlobKind::Tree, &trees);
    let c = carve(r.key(), r.sealer(), &r.chunker(), &bytes, &HashMap::new());
    assert_eq!(c.entries, entries);
    assert_eq!(c.kind, Some(BlobKind::Tree));
}

/// A damaged stored chunk: where it ended is found again (its chunker cut rarely moves, and
/// the snapshots give its length), so every chunk after it is still found.
#[test]
fn the_chunks_after_a_damaged_stored_chunk_are_found() {
    let r = repo(Cipher::XChaCha20Poly1305);
    let chunker = r.chunker();
    let mut data = noise(200_000, 9);
    let mut chunks = vec![];
    while !data.is_empty() {
        let n = chunker.cut(&data);
        chunks.push(data.drain(..n).collect::<Vec<u8>>());
    }
    assert!(chunks.len() >= 4, "{} chunks", chunks.len());
    let (mut bytes, entries) = damaged_pack(&r, BlobKind::Data, &chunks);
    let hit = entries[1];
    bytes[(hit.offset + 100) as usize] ^= 1;
    let mut expect = entries.clone();
    expect.remove(1);
    for wanted in [HashMap::new(), wanted_all(&r, &chunks)] {
        let c = carve(r.key(), r.sealer(), &chunker, &bytes, &wanted);
        assert_eq!(c.entries, expect);
        assert_eq!(
            c.unresolved,
            vec![(u64::from(hit.offset), u64::from(hit.length))]
        );
    }
}

/// An encoded tree listing of `n` files.
fn listing(i: u64, n: usize) -> Vec<u8> {
    let mut t = Tree {
        nodes: (0..n)
            .map(|j| Node {
                name: format!("file-{i}-{j}").into_bytes(),
                kind: Some(NodeKind::File),
                mode: 0o644,
                ..Node::default()
            })
            .collect(),
    };
    t.sort();
    t.encode().unwrap()
}

mod fuzz {
    use proptest::prelude::*;

    use super::*;

    /// A real pack of stored and compressed blobs, built once.
    fn sample(r: &Repository) -> Vec<u8> {
        let blobs = vec![
            text(5_000, 1),
            noise(3_000, 2),
            noise(700, 3),
            text(2_000, 4),
        ];
        damaged_pack(r, BlobKind::Data, &blobs).0
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Random bytes, and a real pack with bytes flipped, cut or appended: carving never
        /// panics, and every entry it returns lies in the file and opens under its id.
        #[test]
        fn carving_any_bytes_returns_only_verified_blobs(
            random in proptest::collection::vec(any::<u8>(), 0..3000),
            flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 0..6),
            cut in any::<usize>(), tail in proptest::collection::vec(any::<u8>(), 0..100),
        ) {
            let r = repo(Cipher::XChaCha20Poly1305);
            let chunker = r.chunker();
            let mut real = sample(&r);
            for (at, x) in flips {
                let i = at % real.len();
                real[i] ^= x;
            }
            real.truncate(cut % (real.len() + 1));
            real.extend_from_slice(&tail);
            for bytes in [random, real] {
                let c = carve(r.key(), r.sealer(), &chunker, &bytes, &HashMap::new());
                let mut covered = 0u64;
                for e in &c.entries {
                    let at = e.offset as usize;
                    let sealed = &bytes[at..at + e.length as usize];
                    prop_assert!(r
                        .open_blob(BlobKind::Data, &e.id, &Id([0; 32]), sealed, e.raw_length)
                        .is_ok());
                    covered += u64::from(e.length);
                }
                let header = c.header_at.map_or(0, |h| bytes.len() as u64 - h);
                // The envelope's 8 bytes (a file no longer than them is one unresolved range).
                let envelope = if bytes.len() > 8 { 8 } else { 0 };
                prop_assert!(covered + c.unresolved_bytes() + header + envelope <= bytes.len() as u64);
            }
        }
    }
}

//! Every decoder of the repository format fed 10,000 random and mutated inputs: bit flips,
//! truncations, inserted and deleted bytes, and length or count fields set to huge values in
//! valid encodings. A decoder must never panic, must return a readable error for what it
//! refuses, must accept only what it would write itself (decoding then encoding gives the same
//! bytes), and must never allocate more than the input can justify: a count claiming 4 GiB in
//! a 100-byte input fails before any allocation. A counting allocator measures the largest
//! single allocation made while a decoder runs.

#![allow(unsafe_code, clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use arca_format::envelope::{EnvelopeHeader, EnvelopeKind, HEADER_LEN};
use arca_format::{
    BlobKind, ChunkerParams, Cipher, Config, ContentRef, Id, IndexFile, IndexPack, KdfParams,
    KeyFile, Node, NodeKind, PackEntry, PackHeader, PackTrailer, Snapshot, Timespec, Tree,
};
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;

/// Cases per decoder: 10,000, or `ARCA_FUZZ_CASES` for a longer hunt.
fn cases() -> u32 {
    std::env::var("ARCA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

// ---- the allocation meter ----

/// The system allocator, noting the largest allocation of the current thread while armed.
struct Meter;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = ARMED.try_with(|a| {
        if a.get() {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        }
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; the bookkeeping only
// touches constant-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Meter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Meter = Meter;

/// Runs `f`, returning its result and the largest single allocation it made.
fn metered<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST.with(|l| l.set(0));
    ARMED.with(|a| a.set(true));
    let r = f();
    ARMED.with(|a| a.set(false));
    (r, LARGEST.with(Cell::get))
}

/// The most a decoder may allocate at once for `len` bytes of input: a small multiple of the
/// input (decoded structures are larger than their encoding) plus a little.
fn allowance(len: usize) -> usize {
    16 * len + 16 * 1024
}

/// Decodes `input` with `decode` under the meter and checks the common properties: no
/// panic (a panic fails the test), a bounded allocation, a non-empty error message.
/// Returns the decoded value, if any.
fn run<T, E: std::fmt::Display>(
    input: &[u8],
    decode: impl FnOnce(&[u8]) -> Result<T, E>,
) -> Result<Option<T>, TestCaseError> {
    let (r, largest) = metered(|| decode(input));
    prop_assert!(
        largest <= allowance(input.len()),
        "allocated {largest} bytes for {} bytes of input",
        input.len()
    );
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(!msg.trim().is_empty(), "empty error message");
            Ok(None)
        }
    }
}

// ---- inputs ----

/// A change to a valid encoding.
#[derive(Debug, Clone)]
enum Mutation {
    /// Flip one bit at a position (taken modulo the length).
    Flip(usize, u8),
    /// Keep only the first n bytes (n modulo the length).
    Truncate(usize),
    /// Write a 32-bit value at a position: length and count fields made huge or odd.
    SetU32(usize, u32),
    /// Write a 64-bit value at a position.
    SetU64(usize, u64),
    /// Insert bytes at a position.
    Insert(usize, Vec<u8>),
    /// Remove up to n bytes at a position.
    Remove(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let huge = prop_oneof![
        Just(u32::MAX),
        Just(u32::MAX - 1),
        Just(0x8000_0000u32),
        Just(0x7fff_ffffu32),
        Just(0x0100_0000u32),
        Just(0u32),
        any::<u32>(),
        0u32..300,
    ];
    prop_oneof![
        4 => (any::<usize>(), 0u8..8).prop_map(|(p, b)| Mutation::Flip(p, b)),
        2 => any::<usize>().prop_map(Mutation::Truncate),
        4 => (any::<usize>(), huge).prop_map(|(p, v)| Mutation::SetU32(p, v)),
        1 => (any::<usize>(), prop_oneof![Just(u64::MAX), any::<u64>()])
            .prop_map(|(p, v)| Mutation::SetU64(p, v)),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(p, b)| Mutation::Insert(p, b)),
        1 => (any::<usize>(), 1usize..16).prop_map(|(p, n)| Mutation::Remove(p, n)),
    ]
}

fn apply(mut b: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let len = b.len();
        match m {
            Mutation::Flip(p, bit) if len > 0 => b[p % len] ^= 1 << bit,
            Mutation::Truncate(n) if len > 0 => b.truncate(n % len),
            Mutation::SetU32(p, v) if len >= 4 => {
                let p = p % (len - 3);
                b[p..p + 4].copy_from_slice(&v.to_le_bytes());
            }
            Mutation::SetU64(p, v) if len >= 8 => {
                let p = p % (len - 7);
                b[p..p + 8].copy_from_slice(&v.to_le_bytes());
            }
            Mutation::Insert(p, bytes) => {
                let p = p % (len + 1);
                b.splice(p..p, bytes.iter().copied());
            }
            Mutation::Remove(p, n) if len > 0 => {
                let p = p % len;
                b.drain(p..(p + n).min(len));
            }
            _ => {}
        }
    }
    b
}

/// Random bytes, or a valid encoding from `valid` with one to four mutations (and, rarely,
/// untouched).
fn inputs(valid: impl Strategy<Value = Vec<u8>> + Clone + 'static) -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        3 => proptest::collection::vec(any::<u8>(), 0..512),
        6 => (valid.clone(), proptest::collection::vec(mutation(), 1..5))
            .prop_map(|(b, m)| apply(b, &m)),
        1 => valid,
    ]
    .boxed()
}

fn id() -> impl Strategy<Value = Id> + Clone {
    any::<[u8; 32]>().prop_map(Id)
}

fn small_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn config() -> impl Strategy<Value = Vec<u8>> + Clone {
    (
        any::<[u8; 32]>(),
        10u32..26,
        -7i32..=22,
        1u32 << 20..=1 << 30,
        any::<i64>(),
        any::<bool>(),
    )
        .prop_map(
            |(repo_id, shift, compression, pack_size, created_ns, aes)| {
                let avg = 1u32 << shift;
                Config {
                    repo_id,
                    chunker: ChunkerParams {
                        min: (avg / 4).max(1024),
                        avg,
                        max: (avg * 4).min(64 << 20),
                    },
                    compression,
                    pack_size,
                    created_ns,
                    content_keys: None,
                    cipher: if aes {
                        Cipher::Xaes256Gcm
                    } else {
                        Cipher::XChaCha20Poly1305
                    },
                }
                .encode()
            },
        )
}

fn key_file() -> impl Strategy<Value = Vec<u8>> + Clone {
    (
        (any::<u32>(), any::<u32>(), any::<u32>()),
        any::<[u8; 32]>(),
        any::<i64>(),
        "[a-z.-]{0,20}",
        "[a-z]{0,12}",
        any::<[u8; 24]>(),
        any::<[u8; 32]>(),
    )
        .prop_map(
            |((m, t, p), salt, created_ns, hostname, username, nonce, w)| {
                let mut wrapped = [0u8; 48];
                wrapped[..32].copy_from_slice(&w);
                KeyFile {
                    kdf: KdfParams {
                        memory_kib: m,
                        iterations: t,
                        parallelism: p,
                    },
                    salt,
                    created_ns,
                    hostname,
                    username,
                    nonce,
                    wrapped,
                }
                .encode()
                .unwrap()
            },
        )
}

fn envelope() -> impl Strategy<Value = Vec<u8>> + Clone {
    (0usize..5, any::<bool>(), small_bytes(40)).prop_map(|(k, z, rest)| {
        let mut b = EnvelopeHeader::new(KINDS[k], u8::from(z)).encode().to_vec();
        b.extend_from_slice(&rest);
        b
    })
}

const KINDS: [EnvelopeKind; 5] = [
    EnvelopeKind::Config,
    EnvelopeKind::Key,
    EnvelopeKind::Snapshot,
    EnvelopeKind::Index,
    EnvelopeKind::Pack,
];

fn entries(max: usize) -> impl Strategy<Value = Vec<PackEntry>> + Clone {
    proptest::collection::vec((id(), 41u32..3000, any::<u32>(), 0u32..50), 0..max).prop_map(|v| {
        let mut off = HEADER_LEN as u32;
        v.into_iter()
            .map(|(id, length, raw_length, gap)| {
                let e = PackEntry {
                    id,
                    offset: off + gap,
                    length,
                    raw_length,
                };
                off += gap + length;
                e
            })
            .collect()
    })
}

fn kind() -> impl Strategy<Value = BlobKind> + Clone {
    prop_oneof![Just(BlobKind::Data), Just(BlobKind::Tree)]
}

fn pack_header() -> impl Strategy<Value = Vec<u8>> + Clone {
    (kind(), entries(12)).prop_map(|(kind, entries)| PackHeader { kind, entries }.encode().unwrap())
}

fn index_file() -> impl Strategy<Value = Vec<u8>> + Clone {
    (
        proptest::collection::vec(id(), 0..3),
        proptest::collection::vec((id(), kind(), entries(6)), 0..5),
    )
        .prop_map(|(supersedes, packs)| {
            let packs = packs
                .into_iter()
                .map(|(id, kind, blobs)| IndexPack {
                    id,
                    kind,
                    size: blobs
                        .last()
                        .map_or(8, |b| u64::from(b.offset) + u64::from(b.length) + 100),
                    blobs,
                })
                .collect();
            IndexFile { supersedes, packs }.encode().unwrap()
        })
}

fn timespec() -> impl Strategy<Value = Timespec> + Clone {
    (any::<i64>(), 0u32..1_000_000_000).prop_map(|(sec, nsec)| Timespec { sec, nsec })
}

fn node() -> impl Strategy<Value = Node> + Clone {
    (
        "[a-zA-Z0-9 ._-]{1,12}",
        1u8..=7,
        (any::<u32>(), any::<u32>(), any::<u32>()),
        (small_bytes(6), small_bytes(6)),
        (timespec(), timespec(), timespec()),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()),
        small_bytes(20),
        proptest::collection::vec((small_bytes(8), small_bytes(8)), 0..3),
        proptest::collection::vec((id(), 0u32..1 << 22), 0..4),
        id(),
    )
        .prop_map(
            |(
                name,
                k,
                (mode, uid, gid),
                (user, group),
                (m, a, c),
                (dev, ino, nl, rdev),
                link,
                xattrs,
                content,
                sub,
            )| {
                let kind = NodeKind::from_code(k).unwrap();
                let content: Vec<ContentRef> = if kind == NodeKind::File {
                    content
                        .into_iter()
                        .map(|(id, len)| ContentRef { id, len })
                        .collect()
                } else {
                    vec![]
                };
                Node {
                    name: name.into_bytes(),
                    kind: Some(kind),
                    mode,
                    uid,
                    gid,
                    user,
                    group,
                    mtime: m,
                    atime: a,
                    ctime: c,
                    dev,
                    inode: ino,
                    nlink: nl,
                    rdev,
                    size: content.iter().map(|c| u64::from(c.len)).sum(),
                    link_target: link,
                    xattrs,
                    content,
                    subtree: (kind == NodeKind::Dir).then_some(sub),
                }
            },
        )
}

fn tree() -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::collection::vec(node(), 0..6).prop_map(|nodes| {
        let mut t = Tree { nodes };
        t.sort();
        t.nodes.dedup_by(|a, b| a.name == b.name);
        t.encode().unwrap()
    })
}

fn snapshot() -> impl Strategy<Value = Vec<u8>> + Clone {
    (
        id(),
        0i64..4_000_000_000,
        proptest::collection::vec("[ -~]{0,12}", 0..3),
        proptest::collection::vec("[a-z]{1,6}", 0..3),
        proptest::option::of(id()),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|(tree, secs, paths, tags, parent, complete, n)| {
            let time = chrono::DateTime::from_timestamp(secs, 0)
                .unwrap()
                .fixed_offset();
            let s = Snapshot {
                time,
                tree,
                paths,
                hostname: "host".into(),
                username: "user".into(),
                uid: 1000,
                gid: 1000,
                tags,
                parent,
                original: None,
                copied_tree: None,
                program_version: "arca 0.1.0".into(),
                complete,
                summary: arca_format::SnapshotSummary {
                    files_new: n,
                    backup_start: Some(time),
                    ..Default::default()
                },
            };
            s.encode().unwrap()
        })
}

// ---- the properties ----

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn config_decoder(b in inputs(config())) {
        if let Some(c) = run(&b, Config::decode)? {
            // A version 2 body with flags 0 is accepted and holds no keys (docs/FORMAT.md):
            // it is written back as version 1, without its flags byte.
            let mut canonical = b.clone();
            if b[4..6] == [2, 0] && b.get(66) == Some(&0) {
                canonical[4] = 1;
                canonical.remove(66);
            }
            prop_assert_eq!(c.encode(), canonical);
        }
    }

    #[test]
    fn key_file_decoder(b in inputs(key_file())) {
        if let Some(k) = run(&b, KeyFile::decode)? {
            // Names are decoded lossily; what re-encodes decodes to the same file.
            let again = k.encode().unwrap();
            prop_assert_eq!(KeyFile::decode(&again).unwrap(), k.clone());
            if !k.hostname.contains('\u{fffd}') && !k.username.contains('\u{fffd}') {
                prop_assert_eq!(again, b);
            }
        }
    }

    #[test]
    fn envelope_decoder(b in inputs(envelope()), k in 0usize..5) {
        if let Some(h) = run(&b, |b| EnvelopeHeader::decode(b, KINDS[k]))? {
            prop_assert_eq!(h.kind, KINDS[k]);
            prop_assert_eq!(&h.encode()[..], &b[..HEADER_LEN]);
        }
    }

    #[test]
    fn pack_header_decoder(b in inputs(pack_header()), size in prop_oneof![Just(u64::MAX), 0u64..100_000]) {
        if let Some(h) = run(&b, |b| PackHeader::decode(b, size))? {
            prop_assert_eq!(h.encode().unwrap(), b.clone());
            for e in &h.entries {
                prop_assert!(u64::from(e.offset) + u64::from(e.length) <= size);
            }
        }
        if let Some(t) = run(&b, PackTrailer::decode)? {
            prop_assert_eq!(&t.encode()[..], &b[b.len() - 8..]);
        }
    }

    #[test]
    fn index_decoder(b in inputs(index_file())) {
        if let Some(f) = run(&b, IndexFile::decode)? {
            prop_assert_eq!(f.encode().unwrap(), b);
        }
    }

    #[test]
    fn tree_decoder(b in inputs(tree())) {
        if let Some(t) = run(&b, Tree::decode)? {
            prop_assert_eq!(t.encode().unwrap(), b);
            for n in &t.nodes {
                prop_assert!(!n.name.is_empty() && !n.name.contains(&b'/'));
                if n.kind == Some(NodeKind::File) {
                    prop_assert_eq!(n.size, n.content.iter().map(|c| u64::from(c.len)).sum::<u64>());
                }
            }
        }
    }

    #[test]
    fn snapshot_decoder(b in inputs(snapshot())) {
        if let Some(s) = run(&b, Snapshot::decode)? {
            // JSON is not canonical: what decodes re-encodes to something that decodes alike.
            prop_assert_eq!(Snapshot::decode(&s.encode().unwrap()).unwrap(), s);
        }
    }
}

// ---- huge counts in small inputs ----

/// Every 4-byte window of `valid` set to each huge value: each decode fails or succeeds
/// within the allowance (checked by `run`), and none allocates in proportion to the value.
fn every_field_huge<T, E: std::fmt::Display>(valid: &[u8], decode: impl Fn(&[u8]) -> Result<T, E>) {
    for p in 0..valid.len().saturating_sub(3) {
        for v in [u32::MAX, 0x8000_0000, 0x1000_0000, 0x0100_0000] {
            let mut b = valid.to_vec();
            b[p..p + 4].copy_from_slice(&v.to_le_bytes());
            let (r, largest) = metered(|| decode(&b).is_ok());
            assert!(
                largest <= allowance(b.len()),
                "offset {p} = {v:#x}: {largest} bytes allocated for {} bytes",
                b.len()
            );
            let _ = r;
        }
    }
}

#[test]
fn a_count_of_4_gib_in_a_small_input_fails_before_allocating() {
    // The count fields at their offsets, set to u32::MAX, in inputs of about 100 bytes.
    let mut tree = b"ATRE\x01\x00".to_vec();
    tree.extend_from_slice(&u32::MAX.to_le_bytes());
    tree.resize(100, 0);
    let mut index = b"AIDX\x01\x00".to_vec();
    index.extend_from_slice(&0u32.to_le_bytes());
    index.extend_from_slice(&u32::MAX.to_le_bytes());
    index.resize(100, 0);
    let mut header = b"APHD\x01\x00\x00".to_vec();
    header.extend_from_slice(&u32::MAX.to_le_bytes());
    header.resize(100, 0);
    for (what, b, r) in [
        (
            "tree",
            &tree,
            metered(|| Tree::decode(&tree).map(|_| ()).map_err(|e| e.to_string())),
        ),
        (
            "index",
            &index,
            metered(|| {
                IndexFile::decode(&index)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }),
        ),
        (
            "pack header",
            &header,
            metered(|| {
                PackHeader::decode(&header, u64::MAX)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }),
        ),
    ] {
        let (res, largest) = r;
        let msg = res.unwrap_err();
        assert!(msg.contains("count 4294967295 exceeds"), "{what}: {msg}");
        assert!(largest < 1024, "{what}: allocated {largest} bytes");
        assert_eq!(b.len(), 100);
    }
    // A vbytes length of 4 GiB (a node name) in a small tree.
    let mut t = b"ATRE\x01\x00".to_vec();
    t.extend_from_slice(&1u32.to_le_bytes());
    t.extend_from_slice(&u32::MAX.to_le_bytes());
    t.resize(200, b'x');
    let (r, largest) = metered(|| Tree::decode(&t).map(|_| ()).map_err(|e| e.to_string()));
    assert!(r.unwrap_err().contains("truncated"));
    assert!(largest < 1024, "allocated {largest} bytes");
}

#[test]
fn every_field_of_valid_encodings_set_huge() {
    let id = |i: u8| Id([i; 32]);
    let tree = Tree {
        nodes: vec![
            Node {
                name: b"dir".to_vec(),
                kind: Some(NodeKind::Dir),
                user: b"alice".to_vec(),
                xattrs: vec![(b"user.x".to_vec(), b"v".to_vec())],
                subtree: Some(id(1)),
                ..Node::default()
            },
            Node {
                name: b"file".to_vec(),
                kind: Some(NodeKind::File),
                size: 30,
                content: vec![
                    ContentRef { id: id(2), len: 10 },
                    ContentRef { id: id(3), len: 20 },
                ],
                link_target: b"t".to_vec(),
                ..Node::default()
            },
        ],
    }
    .encode()
    .unwrap();
    every_field_huge(&tree, Tree::decode);
    let entries = vec![
        PackEntry {
            id: id(4),
            offset: 8,
            length: 50,
            raw_length: 9,
        },
        PackEntry {
            id: id(5),
            offset: 58,
            length: 50,
            raw_length: 9,
        },
    ];
    let header = PackHeader {
        kind: BlobKind::Data,
        entries: entries.clone(),
    }
    .encode()
    .unwrap();
    every_field_huge(&header, |b| PackHeader::decode(b, u64::MAX));
    let index = IndexFile {
        supersedes: vec![id(6)],
        packs: vec![IndexPack {
            id: id(7),
            kind: BlobKind::Tree,
            size: 500,
            blobs: entries,
        }],
    }
    .encode()
    .unwrap();
    every_field_huge(&index, IndexFile::decode);
    let key = KeyFile {
        kdf: KdfParams::default(),
        salt: [1; 32],
        created_ns: 5,
        hostname: "host".into(),
        username: "user".into(),
        nonce: [2; 24],
        wrapped: [3; 48],
    }
    .encode()
    .unwrap();
    every_field_huge(&key, KeyFile::decode);
    let config = Config {
        repo_id: [9; 32],
        chunker: ChunkerParams::default(),
        compression: 3,
        pack_size: 16 << 20,
        created_ns: 1,
        content_keys: None,
        cipher: Cipher::Xaes256Gcm,
    }
    .encode();
    every_field_huge(&config, Config::decode);
}

/// The case the fuzzer found: a version 2 body with flags 0 decodes to the same config as its
/// version 1 form, which is what encoding writes.
#[test]
fn a_version_2_config_without_keys_is_written_back_as_version_1() {
    let mut v1 = b"ACFG".to_vec();
    v1.extend([1, 0]);
    v1.extend([0u8; 32]); // repository id
    for x in [1024u32, 1024, 4096] {
        v1.extend(x.to_le_bytes()); // chunker min, avg, max
    }
    v1.extend(0i32.to_le_bytes()); // compression
    v1.extend((1u32 << 20).to_le_bytes()); // pack size
    v1.extend(0i64.to_le_bytes()); // creation time
    assert_eq!(v1.len(), 66);
    let mut v2 = v1.clone();
    v2[4] = 2;
    v2.push(0); // flags: no content keys
    let (Ok(a), Ok(b)) = (Config::decode(&v1), Config::decode(&v2)) else {
        panic!("both forms decode");
    };
    assert_eq!(a.encode(), v1);
    assert_eq!(b.encode(), v1);
}

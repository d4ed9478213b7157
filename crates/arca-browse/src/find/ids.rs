//! The objects `find --blob/--tree/--pack` looks for: hex id prefixes (8 digits or more)
//! resolved against the index, and the test of a node's blobs against them.

use std::collections::HashMap;

use arca_format::{BlobKind, Id};
use arca_repo::Index;

use super::FindError;

/// What the arguments of `find` name when they are ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// Data blobs (file content).
    Blob,
    /// Tree blobs (folder listings).
    Tree,
    /// Packs: every blob they hold.
    Pack,
}

impl ObjectKind {
    fn name(self) -> &'static str {
        match self {
            ObjectKind::Blob => "blob",
            ObjectKind::Tree => "tree",
            ObjectKind::Pack => "pack",
        }
    }
}

/// Index keys (first 16 bytes of an id) looked for, each with the hex prefixes given for it
/// (a prefix longer than the key is checked against the whole id; empty = any).
type Keys = HashMap<[u8; 16], Vec<String>>;

/// Resolved objects: the data and tree blobs looked for.
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    data: Keys,
    trees: Keys,
    packs: Vec<Id>,
}

/// Whether the first `hex.len()` hex digits of `bytes` are `hex` (lower case); only the
/// digits `bytes` holds are compared.
fn hex_prefix_matches(bytes: &[u8], hex: &str) -> bool {
    let digit = |i: usize| -> u8 {
        let b = bytes[i / 2];
        if i.is_multiple_of(2) { b >> 4 } else { b & 0xf }
    };
    hex.bytes()
        .take(bytes.len() * 2)
        .enumerate()
        .all(|(i, c)| char::from(c).to_digit(16) == Some(u32::from(digit(i))))
}

/// Checks an id argument: 8 to 64 hex digits, returned in lower case.
fn check_hex(kind: ObjectKind, s: &str) -> Result<String, FindError> {
    let lower = s.trim().to_ascii_lowercase();
    let why = if !lower.bytes().all(|b| b.is_ascii_hexdigit()) {
        "not hexadecimal"
    } else if lower.len() < 8 {
        "give at least 8 hex digits"
    } else if lower.len() > 64 {
        "longer than 64 hex digits"
    } else {
        return Ok(lower);
    };
    Err(FindError::BadId {
        kind: kind.name(),
        value: s.to_string(),
        why,
    })
}

impl Wanted {
    /// Resolves `args` as ids of `kind` against `index`: each must name exactly one object.
    pub fn resolve(index: &Index, kind: ObjectKind, args: &[String]) -> Result<Self, FindError> {
        let prefixes = args
            .iter()
            .map(|a| check_hex(kind, a))
            .collect::<Result<Vec<_>, _>>()?;
        let mut w = Wanted::default();
        if kind == ObjectKind::Pack {
            let mut positions = vec![];
            for (arg, p) in args.iter().zip(&prefixes) {
                let found: Vec<(usize, Id)> = index
                    .packs()
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| hex_prefix_matches(&r.id.0, p))
                    .map(|(i, r)| (i, r.id))
                    .collect();
                match found.as_slice() {
                    [(i, id)] => {
                        positions.push(*i as u32);
                        w.packs.push(*id);
                    }
                    [] => return Err(not_found(kind, arg)),
                    _ => return Err(ambiguous(kind, arg, found.len())),
                }
            }
            for pos in 0..index.len() {
                let Some((key, loc)) = index.at(pos) else {
                    break;
                };
                if positions.contains(&loc.pack_index) {
                    let set = match loc.pack.kind {
                        BlobKind::Data => &mut w.data,
                        BlobKind::Tree => &mut w.trees,
                    };
                    set.entry(key).or_default().push(String::new());
                }
            }
            return Ok(w);
        }
        let blob_kind = match kind {
            ObjectKind::Tree => BlobKind::Tree,
            _ => BlobKind::Data,
        };
        // Distinct keys per prefix (two are enough to call it ambiguous).
        let mut keys: Vec<Vec<[u8; 16]>> = vec![vec![]; prefixes.len()];
        for pos in 0..index.len() {
            let Some((key, loc)) = index.at(pos) else {
                break;
            };
            if loc.pack.kind != blob_kind {
                continue;
            }
            for (i, p) in prefixes.iter().enumerate() {
                if hex_prefix_matches(&key, p) && !keys[i].contains(&key) && keys[i].len() < 2 {
                    keys[i].push(key);
                }
            }
        }
        let set = match kind {
            ObjectKind::Tree => &mut w.trees,
            _ => &mut w.data,
        };
        for ((arg, p), k) in args.iter().zip(prefixes).zip(keys) {
            match k.as_slice() {
                [key] => set.entry(*key).or_default().push(p),
                [] => return Err(not_found(kind, arg)),
                _ => return Err(ambiguous(kind, arg, k.len())),
            }
        }
        Ok(w)
    }

    /// Checks the ids given with more digits than the index keeps (32) against the pack
    /// headers, which hold whole ids: an id that differs only past the key names no object
    /// (it found nothing, and said nothing).
    pub fn verify_long_ids(
        &self,
        repo: &arca_repo::Repository,
        index: &Index,
        args: &[String],
    ) -> Result<(), FindError> {
        for (keys, kind) in [(&self.data, BlobKind::Data), (&self.trees, BlobKind::Tree)] {
            for (key, given) in keys {
                for p in given.iter().filter(|p| p.len() > 32) {
                    let mut probe = [0u8; 32];
                    probe[..16].copy_from_slice(key);
                    let Some(loc) = index.get(kind, &Id(probe)) else {
                        continue;
                    };
                    let header = arca_repo::pack::read_pack_header(
                        repo.backend().as_ref(),
                        repo.sealer(),
                        &loc.pack.id,
                        loc.pack.size,
                    )?;
                    let whole = header
                        .entries
                        .iter()
                        .find(|e| e.offset == loc.offset)
                        .map(|e| e.id);
                    if !whole.is_some_and(|id| hex_prefix_matches(&id.0, p)) {
                        let arg = args
                            .iter()
                            .find(|a| a.trim().eq_ignore_ascii_case(p))
                            .map_or(p.as_str(), String::as_str);
                        let kind = match kind {
                            BlobKind::Data => ObjectKind::Blob,
                            BlobKind::Tree => ObjectKind::Tree,
                        };
                        return Err(not_found(kind, arg));
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the data blob `id` is looked for.
    pub fn wants_data(&self, id: &Id) -> bool {
        wants(&self.data, id)
    }

    /// Whether the tree blob `id` is looked for.
    pub fn wants_tree(&self, id: &Id) -> bool {
        wants(&self.trees, id)
    }

    /// The packs resolved (with [`ObjectKind::Pack`]).
    pub fn packs(&self) -> &[Id] {
        &self.packs
    }

    /// Number of distinct data and tree blobs looked for.
    pub fn len(&self) -> usize {
        self.data.len() + self.trees.len()
    }

    /// Whether nothing is looked for (an empty pack).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn wants(keys: &Keys, id: &Id) -> bool {
    keys.get(&id.prefix16())
        .is_some_and(|ps| ps.iter().any(|p| hex_prefix_matches(&id.0, p)))
}

fn not_found(kind: ObjectKind, arg: &str) -> FindError {
    FindError::NoSuchObject {
        kind: kind.name(),
        value: arg.to_string(),
    }
}

fn ambiguous(kind: ObjectKind, arg: &str, count: usize) -> FindError {
    FindError::Ambiguous {
        kind: kind.name(),
        value: arg.to_string(),
        count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arca_format::{IndexFile, IndexPack, PackEntry};

    fn id(first: &[u8]) -> Id {
        let mut b = [0x11u8; 32];
        b[..first.len()].copy_from_slice(first);
        Id(b)
    }

    fn index() -> Index {
        let e = |i: Id| PackEntry {
            id: i,
            offset: 0,
            length: 10,
            raw_length: 5,
        };
        Index::from_files([&IndexFile {
            supersedes: vec![],
            packs: vec![
                IndexPack {
                    id: id(&[0xaa, 0, 0, 0, 1]),
                    kind: BlobKind::Data,
                    size: 1,
                    blobs: vec![e(id(&[1, 2, 3, 4, 5])), e(id(&[1, 2, 3, 4, 6]))],
                },
                IndexPack {
                    id: id(&[0xaa, 0, 0, 0, 2]),
                    kind: BlobKind::Tree,
                    size: 1,
                    blobs: vec![e(id(&[7, 7, 7, 7, 7]))],
                },
            ],
        }])
    }

    #[test]
    fn prefixes_resolve_uniquely() {
        let ix = index();
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let w = Wanted::resolve(&ix, ObjectKind::Blob, &s(&["0102030405"])).unwrap();
        assert!(w.wants_data(&id(&[1, 2, 3, 4, 5])));
        assert!(!w.wants_data(&id(&[1, 2, 3, 4, 6])));
        assert!(!w.wants_tree(&id(&[1, 2, 3, 4, 5])));
        // A full id checks all 64 digits.
        let full = id(&[1, 2, 3, 4, 6]).to_hex();
        let w = Wanted::resolve(&ix, ObjectKind::Blob, &s(&[&full.to_uppercase()])).unwrap();
        assert!(w.wants_data(&id(&[1, 2, 3, 4, 6])));
        let mut other = id(&[1, 2, 3, 4, 6]);
        other.0[31] = 0;
        assert!(!w.wants_data(&other));
        let e = Wanted::resolve(&ix, ObjectKind::Blob, &s(&["01020304"])).unwrap_err();
        assert!(e.to_string().contains("\"01020304\""), "{e}");
        assert!(matches!(e, FindError::Ambiguous { count: 2, .. }));
        let e = Wanted::resolve(&ix, ObjectKind::Blob, &s(&["07070707"])).unwrap_err();
        assert!(
            matches!(e, FindError::NoSuchObject { kind: "blob", .. }),
            "{e}"
        );
        let t = Wanted::resolve(&ix, ObjectKind::Tree, &s(&["07070707"])).unwrap();
        assert!(t.wants_tree(&id(&[7, 7, 7, 7, 7])));
        for bad in ["0102", "xyz12345", &"0".repeat(65)] {
            let e = Wanted::resolve(&ix, ObjectKind::Blob, &s(&[bad])).unwrap_err();
            assert!(matches!(e, FindError::BadId { .. }), "{e}");
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn packs_expand_to_their_blobs() {
        let ix = index();
        let w = Wanted::resolve(&ix, ObjectKind::Pack, &["aa00000001".to_string()]).unwrap();
        assert_eq!(w.len(), 2);
        assert!(w.wants_data(&id(&[1, 2, 3, 4, 5])) && w.wants_data(&id(&[1, 2, 3, 4, 6])));
        assert_eq!(w.packs(), &[id(&[0xaa, 0, 0, 0, 1])]);
        let e = Wanted::resolve(&ix, ObjectKind::Pack, &["aa000000".to_string()]).unwrap_err();
        assert!(matches!(e, FindError::Ambiguous { kind: "pack", .. }));
    }
}

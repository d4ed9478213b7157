//! Snapshots (`snapshots/<id>`): who backed up what and when, and the root tree.
//! The body is a 6-byte magic and version followed by JSON, pleasant to inspect.

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use crate::{FormatError, Id};

/// Structure magic of the snapshot body.
pub const MAGIC: [u8; 4] = *b"ASNP";
/// Current snapshot version.
pub const VERSION: u16 = 1;

/// Counts gathered while the snapshot was made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SnapshotSummary {
    /// When the backup started.
    pub backup_start: Option<DateTime<FixedOffset>>,
    /// When the backup ended.
    pub backup_end: Option<DateTime<FixedOffset>>,
    /// Files not in the parent snapshot.
    pub files_new: u64,
    /// Files in the parent snapshot whose metadata changed (re-read).
    pub files_changed: u64,
    /// Files reused from the parent snapshot without reading.
    pub files_unmodified: u64,
    /// Directories not in the parent snapshot.
    pub dirs_new: u64,
    /// Directories whose listing changed.
    pub dirs_changed: u64,
    /// Directories whose listing is unchanged.
    pub dirs_unmodified: u64,
    /// Other entries (symlinks, devices, FIFOs, sockets).
    pub other_entries: u64,
    /// Data blobs added to the repository.
    pub data_blobs: u64,
    /// Tree blobs added to the repository.
    pub tree_blobs: u64,
    /// Plain bytes of the blobs added.
    pub data_added: u64,
    /// Bytes the added blobs take in packs (compressed and sealed).
    pub data_added_packed: u64,
    /// Files seen.
    pub total_files_processed: u64,
    /// File bytes seen.
    pub total_bytes_processed: u64,
    /// Entries that could not be read and were skipped.
    pub errors: u64,
}

/// A snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When the backup started.
    pub time: DateTime<FixedOffset>,
    /// Root tree: a directory standing for `/` that holds the backed-up paths.
    pub tree: Id,
    /// The backed-up paths, absolute (non-UTF-8 bytes replaced for display).
    pub paths: Vec<String>,
    /// Host name.
    pub hostname: String,
    /// User name.
    pub username: String,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Snapshot used for change detection.
    #[serde(default)]
    pub parent: Option<Id>,
    /// The snapshot this one was made from by `copy`, `tag` or `rewrite` (the first of a
    /// chain: a copy of a copy names the same original), as restic's `original`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original: Option<Id>,
    /// For a copy made by `copy` between repositories that identify blobs differently (the
    /// copy's tree ids are its own): the copied snapshot's root tree id in the repository it
    /// came from, so that a later copy tells a rewritten source snapshot from the one copied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied_tree: Option<Id>,
    /// Version of arca that made it.
    pub program_version: String,
    /// False when some entries could not be read and are missing.
    pub complete: bool,
    /// Counts.
    #[serde(default)]
    pub summary: SnapshotSummary,
}

impl Snapshot {
    /// Encodes the body: magic, version, JSON.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        framed(self)
    }

    /// The JSON fields this build knows. A field it does not know (a newer arca's) is kept
    /// when the snapshot is saved again ([`Self::encode_keeping`]).
    pub const KNOWN_FIELDS: [&'static str; 14] = [
        "time",
        "tree",
        "paths",
        "hostname",
        "username",
        "uid",
        "gid",
        "tags",
        "parent",
        "original",
        "copied_tree",
        "program_version",
        "complete",
        "summary",
    ];

    /// [`Self::encode`], keeping the JSON fields of `original` (the body of the snapshot this
    /// one replaces: tag, rewrite, repair) that this build does not know, as a newer arca
    /// wrote them. A body that does not decode adds nothing.
    pub fn encode_keeping(&self, original: &[u8]) -> Result<Vec<u8>, FormatError> {
        let old: Option<serde_json::Map<String, serde_json::Value>> = original
            .get(6..)
            .and_then(|j| serde_json::from_slice(j).ok());
        let unknown: Vec<(String, serde_json::Value)> = old
            .into_iter()
            .flatten()
            .filter(|(k, _)| !Self::KNOWN_FIELDS.contains(&k.as_str()))
            .collect();
        if unknown.is_empty() {
            return self.encode();
        }
        let mut v = serde_json::to_value(self).map_err(json_error)?;
        if let serde_json::Value::Object(m) = &mut v {
            m.extend(unknown);
        }
        framed(&v)
    }

    /// Decodes a body.
    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = crate::codec::Reader::new(b, "snapshot");
        r.magic(&MAGIC, VERSION)?;
        serde_json::from_slice(&b[6..]).map_err(json_error)
    }
}

fn json_error(source: serde_json::Error) -> FormatError {
    FormatError::Json {
        what: "snapshot",
        source,
    }
}

/// A snapshot body: magic, version, then `json`.
fn framed(json: &impl Serialize) -> Result<Vec<u8>, FormatError> {
    let mut b = Vec::with_capacity(512);
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    serde_json::to_writer(&mut b, json).map_err(json_error)?;
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(tree in any::<[u8; 32]>(), secs in 0i64..4_000_000_000, nanos in 0u32..1_000_000_000,
                      paths in proptest::collection::vec(".{0,12}", 0..4), tags in proptest::collection::vec("[a-z]{1,6}", 0..3),
                      parent in proptest::option::of(any::<[u8; 32]>()), complete in any::<bool>(), n in any::<u64>()) {
            let time = DateTime::from_timestamp(secs, nanos).unwrap().fixed_offset();
            let s = Snapshot {
                time, tree: Id(tree), paths, hostname: "h".into(), username: "u".into(), uid: 1, gid: 2, tags,
                parent: parent.map(Id), original: None, copied_tree: parent.map(Id), program_version: "arca 0".into(), complete,
                summary: SnapshotSummary { files_new: n, backup_start: Some(time), ..Default::default() },
            };
            prop_assert_eq!(Snapshot::decode(&s.encode().unwrap()).unwrap(), s);
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = Snapshot::decode(&b);
        }
    }

    /// Fields a newer arca added are kept when a snapshot is saved again (hunt 29 compat
    /// F5: tag, rewrite and repair dropped them); a known field cleared stays cleared.
    #[test]
    fn unknown_fields_are_kept_on_save() {
        let json = r#"{"time":"2026-01-02T03:04:05+00:00","tree":"0000000000000000000000000000000000000000000000000000000000000000","paths":["/"],"hostname":"h","username":"u","uid":1,"gid":2,"tags":[],"parent":null,"copied_tree":"1111111111111111111111111111111111111111111111111111111111111111","program_version":"arca","complete":true,"future_field":{"keep":"me"}}"#;
        let mut body = b"ASNP\x01\x00".to_vec();
        body.extend_from_slice(json.as_bytes());
        let mut s = Snapshot::decode(&body).unwrap();
        s.tags.push("new".into());
        s.copied_tree = None;
        let out = s.encode_keeping(&body).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out[6..]).unwrap();
        assert_eq!(v["future_field"]["keep"], "me", "{v}");
        assert_eq!(v["tags"][0], "new");
        assert!(v.get("copied_tree").is_none(), "{v}");
        assert_eq!(Snapshot::decode(&out).unwrap(), s);
    }
}

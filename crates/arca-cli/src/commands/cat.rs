//! `arca cat`: print decrypted repository structures as JSON (raw bytes for blobs).

use std::ffi::OsStr;
use std::io::Write;

use anyhow::{Context, Result, bail};
use arca_backend::FileType;
use arca_format::{BlobKind, Id, KeyFile};
use arca_repo::SnapshotFilter;
use arca_repo::pack::read_pack_header;
use serde_json::json;

use crate::cli::{CatArgs, CatWhat, Global};
use crate::util;

fn parse_id(s: &str) -> Result<Id> {
    // The cause adds nothing to this (it repeated the value twice more).
    Id::from_hex(s).map_err(|_| anyhow::anyhow!("{s:?} is not a full 64-digit id"))
}

fn pretty(v: &serde_json::Value) -> Result<()> {
    super::out(&serde_json::to_string_pretty(v)?)
}

pub fn run(g: &Global, a: &CatArgs) -> Result<u8> {
    let opened = util::open(g)?;
    let repo = &opened.repo;
    // As restic's: what prune or forget may delete is read under a shared lock.
    let reads_data = !matches!(
        a.what,
        CatWhat::Config | CatWhat::Masterkey | CatWhat::Key { .. } | CatWhat::Lock { .. }
    );
    let _lock = match reads_data {
        true => util::lock(g, repo, arca_repo::LockKind::Shared, "cat")?,
        false => None,
    };
    match &a.what {
        CatWhat::Config => {
            let c = repo.config();
            pretty(&json!({
                // As stored, not as this build would write it.
                "version": repo.config_version(),
                "id": c.repo_id.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                "chunker": {"algorithm": "fastcdc-keyed", "min": c.chunker.min, "avg": c.chunker.avg, "max": c.chunker.max},
                "compression": c.compression,
                "pack_size": c.pack_size,
                "cipher": c.cipher.name(),
                "created": chrono::DateTime::from_timestamp_nanos(c.created_ns).to_rfc3339(),
            }))?;
        }
        CatWhat::Snapshot { id } => {
            let (id, s) = repo.find_snapshot(id, &SnapshotFilter::default())?;
            // With the fields this build does not know (a newer arca's), as stored.
            let stored = repo
                .load_file(arca_backend::FileType::Snapshot, &id)
                .unwrap_or_default();
            let body = s.encode_keeping(&stored)?;
            let mut v: serde_json::Value = serde_json::from_slice(&body[6..])?;
            if let Some(m) = v.as_object_mut() {
                m.insert("id".into(), json!(id.to_hex()));
            }
            pretty(&v)?;
        }
        CatWhat::Index { id } => {
            let f = repo.load_index_file(&parse_id(id)?)?;
            pretty(&json!({
                "supersedes": f.supersedes.iter().map(Id::to_hex).collect::<Vec<_>>(),
                "packs": f.packs.iter().map(|p| json!({
                    "id": p.id.to_hex(), "type": p.kind.name(), "size": p.size,
                    "blobs": p.blobs.iter().map(|b| json!({"id": b.id.to_hex(), "offset": b.offset, "length": b.length, "raw_length": b.raw_length})).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            }))?;
        }
        CatWhat::Pack { id } => {
            let id = parse_id(id)?;
            let size = repo.backend().stat(FileType::Pack, &id.to_hex())?.size;
            let h = read_pack_header(repo.backend().as_ref(), repo.sealer(), &id, size)?;
            pretty(&json!({
                "id": id.to_hex(), "size": size, "type": h.kind.name(),
                "blobs": h.entries.iter().map(|b| json!({"id": b.id.to_hex(), "offset": b.offset, "length": b.length, "raw_length": b.raw_length})).collect::<Vec<_>>(),
            }))?;
        }
        CatWhat::Masterkey => {
            let k = repo.key();
            let hex = |b: &[u8; 32]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
            pretty(&json!({
                "secret": hex(k.secret()),
                "sealing_key": hex(k.sealing_key()),
                "id_key": hex(k.id_key()),
                "chunker_key": hex(k.chunker_key()),
                "cipher": repo.config().cipher.name(),
            }))?;
        }
        CatWhat::Key { id } => {
            let id = repo.find_key(id)?;
            let bytes = repo.backend().read(FileType::Key, &id.to_hex())?;
            let k = KeyFile::decode(&bytes).with_context(|| format!("key {id}"))?;
            pretty(&json!({
                "id": id.to_hex(), "hostname": k.hostname, "username": k.username,
                "created": chrono::DateTime::from_timestamp_nanos(k.created_ns).to_rfc3339(),
                "kdf": {"algorithm": "argon2id", "memory_kib": k.kdf.memory_kib, "iterations": k.kdf.iterations, "parallelism": k.kdf.parallelism},
            }))?;
        }
        CatWhat::Lock { id } => {
            if id.is_empty() {
                bail!("no lock id given (see `arca list locks`)");
            }
            let locks = repo.list_locks()?;
            let found: Vec<_> = locks
                .iter()
                .filter(|l| l.id.to_hex().starts_with(id.as_str()))
                .collect();
            let l = match found.as_slice() {
                [l] => *l,
                [] => bail!("no lock {id} in the repository (see `arca list locks`)"),
                many => bail!(
                    "lock id prefix {id} is ambiguous: {} locks match",
                    many.len()
                ),
            };
            let info = l
                .info
                .as_ref()
                .map_err(|why| anyhow::anyhow!("lock {}: {why}", l.id))?;
            pretty(&json!({
                "id": l.id.to_hex(),
                "time": chrono::DateTime::from_timestamp_nanos(info.time_ns).to_rfc3339(),
                "exclusive": info.exclusive,
                "hostname": info.hostname,
                "username": info.username,
                "pid": info.pid,
                "command": info.command,
                "stale": l.stale,
            }))?;
        }
        CatWhat::Tree { id } => {
            // A snapshot spec (as restic), else a tree id: `ID` or `ID:SUBFOLDER`, for its
            // root's or that folder's tree. The snapshot is found before the index is read.
            let found = match (
                super::subfolder::find(repo, OsStr::new(id), &SnapshotFilter::default()),
                parse_id(id),
            ) {
                (Ok(found), _) => Some(found),
                (Err(_), Ok(_)) => None,
                (Err(e), Err(_)) => {
                    // `e` names the value (once, as errors do).
                    bail!("not a full 64-digit tree id, and {e}")
                }
            };
            let index = repo.load_index()?;
            let tree = match found {
                None => parse_id(id)?,
                Some(found) => super::subfolder::resolve(repo, &index, found)?.tree(),
            };
            if !index.contains(BlobKind::Tree, &tree) && index.contains(BlobKind::Data, &tree) {
                // It said "not in the index" of a blob that is there.
                bail!("{tree} is a data blob, not a tree (`arca cat blob` prints it)");
            }
            let t = repo.load_tree(&index, &tree)?;
            let nodes: Vec<_> = t
                .nodes
                .iter()
                .map(|n| super::ls::node_json(n, None))
                .collect();
            pretty(&json!({"nodes": nodes}))?;
        }
        CatWhat::Blob { id } => {
            let index = repo.load_index()?;
            let id = parse_id(id)?;
            // A data blob, else a tree blob (as restic); the error for neither names no kind.
            // The index knows blobs by their first 16 bytes: an id typed with the right
            // start and a wrong end was found, and called damaged. A pack header that says
            // another id is there settles it (one that cannot be read leaves it to the read).
            let there = |k: BlobKind| {
                index.locations(k, &id).any(|loc| {
                    read_pack_header(
                        repo.backend().as_ref(),
                        repo.sealer(),
                        &loc.pack.id,
                        loc.pack.size,
                    )
                    .map_or(true, |h| {
                        h.entries
                            .iter()
                            .any(|e| e.offset == loc.offset && e.id == id)
                    })
                })
            };
            let kind = [BlobKind::Data, BlobKind::Tree]
                .into_iter()
                .find(|k| there(*k))
                .with_context(|| format!("blob {id} is not in the index"))?;
            let data = repo.read_blob(&index, kind, &id)?;
            let mut o = super::Stdout::lock();
            o.write_all(&data)?;
            o.flush()?;
        }
    }
    Ok(0)
}

//! Listing, finding and saving snapshots; `latest` and id prefixes name a snapshot.

use arca_backend::FileType;
use arca_format::{Id, Snapshot};

use crate::{RepoError, Repository, Result};

/// Restricts which snapshots `latest` and listings consider.
#[derive(Debug, Clone, Default)]
pub struct SnapshotFilter {
    /// Only snapshots of this host.
    pub host: Option<String>,
    /// Only snapshots carrying all these tags.
    pub tags: Vec<String>,
    /// Only snapshots whose paths include all of these.
    pub paths: Vec<String>,
}

impl SnapshotFilter {
    /// Whether a snapshot passes.
    pub fn matches(&self, s: &Snapshot) -> bool {
        self.host.as_ref().is_none_or(|h| &s.hostname == h)
            && self.tags.iter().all(|t| s.tags.contains(t))
            && self.paths.iter().all(|p| s.paths.contains(p))
    }
}

impl Repository {
    /// Saves a snapshot; call only after the index files naming its blobs are written.
    pub fn save_snapshot(&self, s: &Snapshot) -> Result<Id> {
        let body = s.encode().map_err(|e| RepoError::format("snapshot", e))?;
        self.save_file(FileType::Snapshot, &body)
    }

    /// Loads one snapshot.
    pub fn load_snapshot(&self, id: &Id) -> Result<Snapshot> {
        let body = self.load_file(FileType::Snapshot, id)?;
        Snapshot::decode(&body).map_err(|e| RepoError::format(format!("snapshot {id}"), e))
    }

    /// All snapshots passing `filter`, oldest first.
    pub fn list_snapshots(&self, filter: &SnapshotFilter) -> Result<Vec<(Id, Snapshot)>> {
        let mut out = vec![];
        for (id, _) in self.list_ids(FileType::Snapshot)? {
            let s = self.load_snapshot(&id)?;
            if filter.matches(&s) {
                out.push((id, s));
            }
        }
        out.sort_by(|a, b| a.1.time.cmp(&b.1.time).then(a.0.cmp(&b.0)));
        Ok(out)
    }

    /// Resolves `latest` (newest passing `filter`) or a unique id prefix.
    pub fn find_snapshot(&self, spec: &str, filter: &SnapshotFilter) -> Result<(Id, Snapshot)> {
        if spec == "latest" {
            return self
                .list_snapshots(filter)?
                .pop()
                .ok_or_else(|| RepoError::NoSuchSnapshot(spec.to_string()));
        }
        let lower = spec.to_ascii_lowercase();
        if lower.is_empty() || !lower.bytes().all(|b| b.is_ascii_hexdigit()) || lower.len() > 64 {
            return Err(RepoError::NoSuchSnapshot(spec.to_string()));
        }
        let ids: Vec<Id> = self
            .list_ids(FileType::Snapshot)?
            .into_iter()
            .map(|(id, _)| id)
            .filter(|id| id.to_hex().starts_with(&lower))
            .collect();
        match ids.as_slice() {
            [id] => Ok((*id, self.load_snapshot(id)?)),
            [] => Err(RepoError::NoSuchSnapshot(spec.to_string())),
            _ => Err(RepoError::AmbiguousSnapshot {
                prefix: spec.to_string(),
                count: ids.len(),
            }),
        }
    }
}

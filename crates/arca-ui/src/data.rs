//! The read views, computed once and shown twice (JSON under `/api/`, HTML by `pages`): the
//! repository overview, the snapshot list, a folder of a snapshot, the diff of two snapshots.

use std::collections::{BTreeMap, BTreeSet};

use arca_backend::FileType;
use arca_browse::diff::{self, DiffOptions, DiffStat, find_node, root_node};
use arca_format::{BlobKind, Id, Node, NodeKind, Snapshot};
use arca_repo::{Index, Repository, SnapshotFilter};
use serde::Serialize;
use serde_json::{Value, json};

use crate::html::{mode_string, url_bytes};
use crate::query::RawQuery;
use crate::state::ApiError;

/// Changes a diff lists at most (the summary counts them all).
pub const DIFF_LIMIT: usize = 5000;

/// A snapshot as the list shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotRow {
    /// Full id.
    pub id: String,
    /// First 8 hex digits.
    pub short_id: String,
    /// When the backup started (RFC 3339).
    pub time: String,
    /// Host name.
    pub hostname: String,
    /// User name.
    pub username: String,
    /// Backed-up paths.
    pub paths: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// False when some entries could not be read.
    pub complete: bool,
    /// Files in the snapshot.
    pub files: u64,
    /// Bytes of those files.
    pub bytes: u64,
    /// Bytes this backup added to the repository (before compression).
    pub data_added: u64,
    /// The parent snapshot's id.
    pub parent: Option<String>,
}

impl SnapshotRow {
    /// The row of snapshot `id`.
    pub fn new(id: &Id, s: &Snapshot) -> Self {
        SnapshotRow {
            id: id.to_hex(),
            short_id: id.short(),
            time: s.time.to_rfc3339(),
            hostname: s.hostname.clone(),
            username: s.username.clone(),
            paths: s.paths.clone(),
            tags: s.tags.clone(),
            complete: s.complete,
            files: s.summary.total_files_processed,
            bytes: s.summary.total_bytes_processed,
            data_added: s.summary.data_added,
            parent: s.parent.map(|p| p.to_hex()),
        }
    }

    /// The moment of the snapshot, for ordering: its text carries the offset of the machine
    /// that made it, so two snapshots of different time zones do not sort as text.
    fn instant(&self) -> Option<chrono::DateTime<chrono::FixedOffset>> {
        chrono::DateTime::parse_from_rfc3339(&self.time).ok()
    }

    /// `2024-05-01 12:30:00` in local time.
    pub fn local_time(&self) -> String {
        chrono::DateTime::parse_from_rfc3339(&self.time)
            .map(|t| {
                t.with_timezone(&chrono::Local)
                    .format("%Y-%m-%d %H:%M:%S")
                    .to_string()
            })
            .unwrap_or_else(|_| self.time.clone())
    }
}

/// Files of one type in the repository.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct FileCount {
    /// How many.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Blobs of one kind in the index.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct BlobCount {
    /// Blob locations (a blob in two packs counts twice).
    pub blobs: u64,
    /// Bytes as stored (compressed and sealed).
    pub stored_bytes: u64,
    /// Bytes before compression.
    pub raw_bytes: u64,
}

/// The newest snapshot of a host and a set of paths.
#[derive(Debug, Clone, Serialize)]
pub struct LastBackup {
    /// Host name.
    pub hostname: String,
    /// Paths.
    pub paths: Vec<String>,
    /// The snapshot.
    pub snapshot: SnapshotRow,
    /// Snapshots of this host and paths.
    pub count: usize,
}

/// The repository overview.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    /// Where the repository is.
    pub location: String,
    /// Repository id (hex).
    pub repository_id: String,
    /// Default compression level.
    pub compression: i32,
    /// Target pack size.
    pub pack_size: u32,
    /// Bytes of all files of the repository.
    pub size_on_disk: u64,
    /// Files by type (`packs`, `index`, `snapshots`, `keys`, `locks`).
    pub files: BTreeMap<&'static str, FileCount>,
    /// Snapshots.
    pub snapshots: usize,
    /// Data blobs.
    pub data: BlobCount,
    /// Tree blobs.
    pub trees: BlobCount,
    /// Bytes of files the snapshots hold, added up over snapshots.
    pub snapshot_bytes: u64,
    /// `snapshot_bytes` / data blobs' raw bytes: how much dedup saves (1 = nothing).
    pub dedup_ratio: Option<f64>,
    /// Raw bytes / stored bytes of data blobs: how much compression saves.
    pub compression_ratio: Option<f64>,
    /// The newest snapshot per host and paths, newest first.
    pub last_backups: Vec<LastBackup>,
    /// The last check run from this interface, if any.
    pub last_check: Option<Value>,
    /// Snapshot files that could not be read, left out of the counts.
    pub damaged: Vec<DamagedFile>,
}

/// A snapshot file that could not be read (damaged, or a newer arca's): left out of the
/// lists, and shown so, as the command line names it.
#[derive(Debug, Clone, Serialize)]
pub struct DamagedFile {
    /// Its id (hex).
    pub id: String,
    /// What is wrong with it, and how to remove it.
    pub message: String,
}

/// Snapshots with their ids, oldest first.
pub type SnapshotsById = Vec<(Id, Snapshot)>;

/// Every snapshot, and the snapshot files left out.
fn all_snapshots(repo: &Repository) -> Result<(SnapshotsById, Vec<DamagedFile>), ApiError> {
    snapshots_report(repo, &SnapshotFilter::default())
}

/// The snapshots passing `filter`, oldest first, and the snapshot files left out (all of
/// them: a damaged file cannot be told to pass the filter or not).
pub fn snapshots_report(
    repo: &Repository,
    filter: &SnapshotFilter,
) -> Result<(SnapshotsById, Vec<DamagedFile>), ApiError> {
    let (list, damaged) = repo.list_snapshots_report(filter)?;
    let damaged = damaged
        .iter()
        .map(|(id, e)| DamagedFile {
            id: id.to_hex(),
            message: arca_repo::damaged_snapshot_message(id, e),
        })
        .collect();
    Ok((list, damaged))
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (a > 0 && b > 0).then(|| a as f64 / b as f64)
}

/// Computes the overview from file listings, the index and the snapshots (no tree is read).
pub fn overview(
    repo: &Repository,
    index: &Index,
    last_check: Option<Value>,
) -> Result<Overview, ApiError> {
    let mut files = BTreeMap::new();
    let mut size_on_disk = 0;
    for (name, t) in [
        ("packs", FileType::Pack),
        ("index", FileType::Index),
        ("snapshots", FileType::Snapshot),
        ("keys", FileType::Key),
        ("locks", FileType::Lock),
    ] {
        let list = repo.list_ids(t)?;
        let c = FileCount {
            count: list.len() as u64,
            bytes: list.iter().map(|(_, s)| s).sum(),
        };
        size_on_disk += c.bytes;
        files.insert(name, c);
    }
    let (mut data, mut trees) = (BlobCount::default(), BlobCount::default());
    for pos in 0..index.len() {
        let Some((_, loc)) = index.at(pos) else { break };
        let c = match loc.pack.kind {
            BlobKind::Data => &mut data,
            BlobKind::Tree => &mut trees,
        };
        c.blobs += 1;
        c.stored_bytes += u64::from(loc.length);
        c.raw_bytes += u64::from(loc.raw_length);
    }
    let (snaps, damaged) = all_snapshots(repo)?;
    let snapshot_bytes = snaps
        .iter()
        .map(|(_, s)| s.summary.total_bytes_processed)
        .sum();
    let mut groups: BTreeMap<(String, Vec<String>), (usize, Id, Snapshot)> = BTreeMap::new();
    for (id, s) in &snaps {
        let key = (s.hostname.clone(), s.paths.clone());
        match groups.get_mut(&key) {
            Some(g) => {
                g.0 += 1;
                if s.time > g.2.time {
                    g.1 = *id;
                    g.2 = s.clone();
                }
            }
            None => {
                groups.insert(key, (1, *id, s.clone()));
            }
        }
    }
    let mut last_backups: Vec<LastBackup> = groups
        .into_iter()
        .map(|((hostname, paths), (count, id, s))| LastBackup {
            hostname,
            paths,
            snapshot: SnapshotRow::new(&id, &s),
            count,
        })
        .collect();
    last_backups.sort_by_key(|b| std::cmp::Reverse(b.snapshot.instant()));
    let config = repo.config();
    Ok(Overview {
        location: repo.backend().location(),
        repository_id: hex::encode(config.repo_id),
        compression: config.compression,
        pack_size: config.pack_size,
        size_on_disk,
        files,
        snapshots: snaps.len(),
        data,
        trees,
        snapshot_bytes,
        dedup_ratio: ratio(snapshot_bytes, data.raw_bytes),
        compression_ratio: ratio(data.raw_bytes, data.stored_bytes),
        last_backups,
        last_check,
        damaged,
    })
}

/// The snapshot list with its filters applied and sorted.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotList {
    /// The filters and sort order applied.
    pub query: Value,
    /// Matching snapshots, in the order asked for.
    pub snapshots: Vec<SnapshotRow>,
    /// Every host of the repository (for the filter's choices).
    pub hosts: Vec<String>,
    /// Every tag.
    pub tags: Vec<String>,
    /// Snapshot files that could not be read, left out of the list.
    pub damaged: Vec<DamagedFile>,
}

/// Sort keys of the snapshot list.
pub const SORTS: [&str; 5] = ["time", "host", "paths", "files", "size"];

/// Lists the snapshots passing `host`, `tag` (repeatable) and `path` (repeatable), sorted by
/// `sort` (time, host, paths, files, size) in `order` (`desc` by default for time).
pub fn snapshots(repo: &Repository, q: &RawQuery) -> Result<SnapshotList, ApiError> {
    let text = |v: Vec<Vec<u8>>| -> Vec<String> {
        v.into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    };
    // As the command line reads them: hosts and tag lists any of, paths all of and made
    // absolute and normalized as backup stores them (`/x/`, `//x` and `/x/.` name `/x`).
    // An empty `tag` selects the untagged snapshots, as the command line's `--tag ''`.
    let tag_values = text(q.every("tag"));
    let filter = SnapshotFilter {
        hosts: text(q.all("host"))
            .into_iter()
            .filter(|h| !h.is_empty())
            .collect(),
        tags: SnapshotFilter::tag_lists(&tag_values),
        paths: text(q.all("path"))
            .into_iter()
            .map(|p| {
                arca_backup::sources::absolute(std::path::Path::new(&format!("/{p}")))
                    .map_or(p, |a| a.to_string_lossy().into_owned())
            })
            .collect(),
    };
    let sort = q.text("sort").unwrap_or_else(|| "time".into());
    if !SORTS.contains(&sort.as_str()) {
        return Err(ApiError::bad(format!(
            "invalid sort {sort:?} (time, host, paths, files, size)"
        )));
    }
    let order = q.text("order").unwrap_or_else(|| "desc".into());
    if order != "asc" && order != "desc" {
        return Err(ApiError::bad(format!(
            "invalid order {order:?} (asc, desc)"
        )));
    }
    let (all, damaged) = all_snapshots(repo)?;
    let hosts: BTreeSet<String> = all.iter().map(|(_, s)| s.hostname.clone()).collect();
    let tags: BTreeSet<String> = all.iter().flat_map(|(_, s)| s.tags.clone()).collect();
    let mut rows: Vec<SnapshotRow> = all
        .iter()
        .filter(|(_, s)| filter.matches(s))
        .map(|(id, s)| SnapshotRow::new(id, s))
        .collect();
    rows.sort_by(|a, b| {
        let o = match sort.as_str() {
            "host" => a.hostname.cmp(&b.hostname),
            "paths" => a.paths.cmp(&b.paths),
            "files" => a.files.cmp(&b.files),
            "size" => a.bytes.cmp(&b.bytes),
            _ => std::cmp::Ordering::Equal,
        };
        o.then_with(|| a.instant().cmp(&b.instant()))
            .then_with(|| a.id.cmp(&b.id))
    });
    if order == "desc" {
        rows.reverse();
    }
    Ok(SnapshotList {
        query: json!({"host": filter.hosts.first(), "tags": tag_values, "paths": filter.paths,
            "sort": sort, "order": order}),
        snapshots: rows,
        hosts: hosts.into_iter().collect(),
        tags: tags.into_iter().collect(),
        damaged,
    })
}

/// An entry of a folder.
#[derive(Debug, Clone, Serialize)]
pub struct EntryRow {
    /// Its name (invalid UTF-8 replaced).
    pub name: String,
    /// Its absolute path in the snapshot, percent-encoded bytes (for `?path=`).
    pub path_q: String,
    /// `file`, `dir`, `symlink`, `fifo`, `chardev`, `blockdev`, `socket`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Bytes (files).
    pub size: u64,
    /// Modification time (RFC 3339, nanoseconds).
    pub mtime: String,
    /// Mode bits.
    pub mode: u32,
    /// `-rw-r--r--`.
    pub permissions: String,
    /// Owner.
    pub user: String,
    /// Group.
    pub group: String,
    /// A symlink's target.
    pub link_target: Option<String>,
    #[serde(skip)]
    /// Seconds and nanoseconds of the mtime (for the page).
    pub mtime_parts: (i64, u32),
}

/// A folder of a snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    /// The snapshot.
    pub snapshot: SnapshotRow,
    /// The folder's path (invalid UTF-8 replaced).
    pub path: String,
    /// The folder's path, percent-encoded bytes.
    pub path_q: String,
    /// Its entries in name order.
    pub entries: Vec<EntryRow>,
}

fn owner(name: &[u8], id: u32) -> String {
    if name.is_empty() {
        id.to_string()
    } else {
        String::from_utf8_lossy(name).into_owned()
    }
}

fn entry_row(n: &Node, dir: &[u8]) -> EntryRow {
    let mut path = dir.to_vec();
    if !path.ends_with(b"/") {
        path.push(b'/');
    }
    path.extend_from_slice(&n.name);
    let t = n.mtime;
    EntryRow {
        name: String::from_utf8_lossy(&n.name).into_owned(),
        path_q: url_bytes(&path),
        kind: n.kind().name(),
        size: n.size,
        mtime: arca_format::text::entry_time(t, arca_format::text::TimeStyle::Rfc3339),
        mode: n.mode,
        permissions: mode_string(n.kind(), n.mode),
        user: owner(&n.user, n.uid),
        group: owner(&n.group, n.gid),
        link_target: (n.kind() == NodeKind::Symlink)
            .then(|| String::from_utf8_lossy(&n.link_target).into_owned()),
        mtime_parts: (t.sec, t.nsec),
    }
}

/// `/`-normalised absolute path bytes: no empty or `.` components; `..` refused.
pub fn clean_path(p: &[u8]) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::with_capacity(p.len() + 1);
    for c in p
        .split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
    {
        if c == b".." {
            return Err(ApiError::bad(format!(
                "invalid path {:?}: `..` is not allowed",
                String::from_utf8_lossy(p)
            )));
        }
        out.push(b'/');
        out.extend_from_slice(c);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    Ok(out)
}

/// Finds snapshot `spec` (id, prefix or `latest`).
pub fn find_snapshot(repo: &Repository, spec: &str) -> Result<(Id, Snapshot), ApiError> {
    repo.find_snapshot(spec, &SnapshotFilter::default())
        .map_err(|e| ApiError::not_found(e.to_string()))
}

/// The node at `path` in snapshot `snap`; 404 when there is none.
pub fn node_at(
    repo: &Repository,
    index: &Index,
    snap: &Snapshot,
    path: &[u8],
) -> Result<Node, ApiError> {
    let root = root_node(snap.tree);
    match find_node(repo, index, &root, path) {
        Ok(Some(n)) => Ok(n),
        Ok(None) => Err(ApiError::not_found(format!(
            "{} is not in the snapshot",
            String::from_utf8_lossy(path)
        ))),
        Err(e) => Err(ApiError::failed(e.to_string())),
    }
}

/// The folder `path` of snapshot `spec`.
pub fn listing(
    repo: &Repository,
    index: &Index,
    spec: &str,
    path: &[u8],
) -> Result<Listing, ApiError> {
    let (id, snap) = find_snapshot(repo, spec)?;
    let path = clean_path(path)?;
    let node = node_at(repo, index, &snap, &path)?;
    let Some(sub) = node.subtree.filter(|_| node.is_dir()) else {
        return Err(ApiError::bad(format!(
            "{} is a {}, not a folder",
            String::from_utf8_lossy(&path),
            node.kind().name()
        )));
    };
    let tree = repo.load_tree(index, &sub)?;
    Ok(Listing {
        snapshot: SnapshotRow::new(&id, &snap),
        path: String::from_utf8_lossy(&path).into_owned(),
        path_q: url_bytes(&path),
        entries: tree.nodes.iter().map(|n| entry_row(n, &path)).collect(),
    })
}

/// One side's counts of a diff.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SideCounts {
    /// Files.
    pub files: u64,
    /// Folders.
    pub dirs: u64,
    /// Other entries.
    pub others: u64,
    /// Distinct data blobs.
    pub data_blobs: u64,
    /// Distinct tree blobs.
    pub tree_blobs: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl From<DiffStat> for SideCounts {
    fn from(s: DiffStat) -> Self {
        SideCounts {
            files: s.files,
            dirs: s.dirs,
            others: s.others,
            data_blobs: s.data_blobs,
            tree_blobs: s.tree_blobs,
            bytes: s.bytes,
        }
    }
}

/// One changed entry.
#[derive(Debug, Clone, Serialize)]
pub struct ChangeRow {
    /// `+`, `-`, `M`, `M?`, `T`, `U`.
    pub modifier: String,
    /// Its path (folders end with `/`).
    pub path: String,
}

/// What changed from snapshot `a` to snapshot `b`.
#[derive(Debug, Clone, Serialize)]
pub struct DiffView {
    /// First snapshot.
    pub a: SnapshotRow,
    /// Second snapshot.
    pub b: SnapshotRow,
    /// The changes, at most [`DIFF_LIMIT`].
    pub changes: Vec<ChangeRow>,
    /// More changes than listed.
    pub truncated: bool,
    /// Files whose content changed.
    pub changed_files: u64,
    /// What `b` adds.
    pub added: SideCounts,
    /// What `b` lacks.
    pub removed: SideCounts,
}

/// Compares snapshots `a` and `b` (metadata changes too when `metadata`).
pub fn diff(
    repo: &Repository,
    index: &Index,
    a: &str,
    b: &str,
    metadata: bool,
) -> Result<DiffView, ApiError> {
    let (ida, sa) = find_snapshot(repo, a)?;
    let (idb, sb) = find_snapshot(repo, b)?;
    let mut changes = vec![];
    let mut truncated = false;
    let stats = diff::diff(
        repo,
        index,
        Some(&root_node(sa.tree)),
        Some(&root_node(sb.tree)),
        b"/",
        DiffOptions { metadata },
        &mut |c| {
            if changes.len() < DIFF_LIMIT {
                changes.push(ChangeRow {
                    modifier: c.modifier.to_string(),
                    path: String::from_utf8_lossy(c.path).into_owned(),
                });
            } else {
                truncated = true;
            }
            Ok(())
        },
    )
    .map_err(|e| ApiError::failed(e.to_string()))?;
    Ok(DiffView {
        a: SnapshotRow::new(&ida, &sa),
        b: SnapshotRow::new(&idb, &sb),
        changes,
        truncated,
        changed_files: stats.changed_files,
        added: stats.added.into(),
        removed: stats.removed.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned() {
        assert_eq!(clean_path(b"").ok(), Some(b"/".to_vec()));
        assert_eq!(clean_path(b"a//b/./c/").ok(), Some(b"/a/b/c".to_vec()));
        assert_eq!(clean_path(b"/\xe9").ok(), Some(b"/\xe9".to_vec()));
        assert!(clean_path(b"/a/../b").is_err());
        assert_eq!(ratio(10, 0), None);
        assert_eq!(ratio(10, 4), Some(2.5));
    }
}

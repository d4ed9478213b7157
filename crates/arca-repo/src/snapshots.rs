//! Listing, finding and saving snapshots; `latest` and id prefixes name a snapshot.

use arca_backend::FileType;
use arca_format::{Id, Snapshot};
use std::io::Write as _;

use crate::{RepoError, Repository, Result};

/// Restricts which snapshots `latest` and listings consider, as restic's filters do.
#[derive(Debug, Clone, Default)]
pub struct SnapshotFilter {
    /// Only snapshots of one of these hosts (all hosts when empty).
    pub hosts: Vec<String>,
    /// Only snapshots carrying all the tags of at least one of these lists (any snapshot when
    /// empty); a list holding only the empty tag matches the snapshots without tags.
    pub tags: Vec<Vec<String>>,
    /// Only snapshots whose paths include all of these.
    pub paths: Vec<String>,
}

/// Tags from repeated, comma-separated values (`--tag a,b --tag c`, a profile's `tag = "a,b"`),
/// as restic reads them; blanks around tags and empty items are dropped.
pub fn split_tags<S: AsRef<str>>(values: &[S]) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for t in values
        .iter()
        .flat_map(|v| v.as_ref().split(','))
        .map(str::trim)
    {
        // A tag given twice is one tag (`--tag a,a` recorded `a` twice).
        if !t.is_empty() && !out.iter().any(|o| o == t) {
            out.push(t.to_string());
        }
    }
    out
}

/// Damaged files left out of a listing, each with why.
pub type DamagedFiles = Vec<(Id, RepoError)>;

impl SnapshotFilter {
    /// Only the snapshots of `host`.
    pub fn host(host: impl Into<String>) -> Self {
        Self {
            hosts: vec![host.into()],
            ..Self::default()
        }
    }

    /// Tag lists from option values (`--tag a,b --tag c`: `a` and `b`, or `c`); blanks
    /// around tags are dropped, and an empty value is the list of untagged snapshots.
    pub fn tag_lists<S: AsRef<str>>(values: &[S]) -> Vec<Vec<String>> {
        values
            .iter()
            .map(|v| {
                let list = split_tags(std::slice::from_ref(v));
                if list.is_empty() {
                    vec![String::new()]
                } else {
                    list
                }
            })
            .collect()
    }

    /// Whether a snapshot passes.
    pub fn matches(&self, s: &Snapshot) -> bool {
        let has_list = |list: &Vec<String>| {
            list.iter()
                .all(|t| s.tags.contains(t) || (t.is_empty() && s.tags.is_empty()))
        };
        (self.hosts.is_empty() || self.hosts.contains(&s.hostname))
            && (self.tags.is_empty() || self.tags.iter().any(has_list))
            && self.paths.iter().all(|p| s.paths.contains(p))
    }

    /// The filter as the options that set it (`--host h --tag t,u --path /p`), empty when it
    /// passes everything.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.hosts.iter().map(|h| format!("--host {h}")).collect();
        parts.extend(self.tags.iter().map(|t| match t.join(",") {
            t if t.is_empty() => "--tag ''".to_string(),
            t => format!("--tag {t}"),
        }));
        parts.extend(self.paths.iter().map(|p| format!("--path {p}")));
        parts.join(" ")
    }
}

/// Decodes the opened body of snapshot file `id`.
fn decode_snapshot(id: &Id, body: &[u8]) -> Result<Snapshot> {
    Snapshot::decode(body).map_err(|e| RepoError::format(format!("snapshot {id}"), e))
}

impl Repository {
    /// Saves a snapshot; call only after the index files naming its blobs are written.
    pub fn save_snapshot(&self, s: &Snapshot) -> Result<Id> {
        self.save_snapshot_keeping(s, &[])
    }

    /// [`Self::save_snapshot`], then reads the file back (and opens and decodes it): for a
    /// snapshot that replaces another, whose original is removed next (tag, rewrite,
    /// repair), so that a replacement damaged on the way never costs the original.
    pub fn save_snapshot_checked(&self, s: &Snapshot) -> Result<Id> {
        let id = self.save_snapshot(s)?;
        self.read_back(id)
    }

    /// Reads snapshot `id`, just saved, back; one that does not read is removed again, and
    /// one that cannot be removed is named in the error, with what to do.
    fn read_back(&self, id: Id) -> Result<Id> {
        // From the repository itself: the cache's copy is what was sent, not what arrived.
        let read = match self
            .load_stored_file(FileType::Snapshot, &id)
            .and_then(|body| decode_snapshot(&id, &body))
        {
            Ok(_) => return Ok(id),
            Err(e) => e,
        };
        Err(
            match self.backend().remove(FileType::Snapshot, &id.to_hex()) {
                Ok(()) => read,
                Err(removal) => RepoError::SnapshotLeft {
                    id,
                    read: Box::new(read),
                    removal: Box::new(removal),
                },
            },
        )
    }

    /// [`Self::save_snapshot_checked`] of `s`, which replaces snapshot `original` (tag,
    /// rewrite, repair): the JSON fields of the original that this build does not know (a
    /// newer arca's) are kept. An original that cannot be read adds nothing.
    pub fn save_snapshot_replacing(&self, s: &Snapshot, original: &Id) -> Result<Id> {
        let old = self
            .load_file(FileType::Snapshot, original)
            .unwrap_or_default();
        let id = self.save_snapshot_keeping(s, &old)?;
        self.read_back(id)
    }

    /// [`Self::save_snapshot`], keeping the JSON fields of `original` (a snapshot body, of
    /// this repository or another: `copy`) that this build does not know.
    pub fn save_snapshot_keeping(&self, s: &Snapshot, original: &[u8]) -> Result<Id> {
        crate::lock::check_held_before_write()?;
        let body = s
            .encode_keeping(original)
            .map_err(|e| RepoError::format("snapshot", e))?;
        self.save_commit(FileType::Snapshot, &body)
    }

    /// Loads one snapshot.
    pub fn load_snapshot(&self, id: &Id) -> Result<Snapshot> {
        decode_snapshot(id, &self.load_file(FileType::Snapshot, id)?)
    }

    /// All snapshots passing `filter`, oldest first, as [`Repository::list_snapshots_report`]
    /// finds them; each damaged snapshot file is left out with a warning on stderr (naming
    /// it and how to remove it), so one damaged file does not stop backups or listings.
    pub fn list_snapshots(&self, filter: &SnapshotFilter) -> Result<Vec<(Id, Snapshot)>> {
        let (list, damaged) = self.list_snapshots_report(filter)?;
        for (id, e) in &damaged {
            damaged_snapshot_warning(id, e);
        }
        Ok(list)
    }

    /// All snapshots passing `filter`, oldest first, and the damaged snapshot files (one
    /// that does not hash to its name, open with the key or decode) with the reason. Several
    /// are read at once (a repository of hundreds of snapshots reads them all to find
    /// `latest` or a backup's parent). Any other failure (the backend cannot list or read)
    /// is the error: a shorter list is only ever the result of damage.
    pub fn list_snapshots_report(
        &self,
        filter: &SnapshotFilter,
    ) -> Result<(Vec<(Id, Snapshot)>, DamagedFiles)> {
        let ids = self.list_ids(FileType::Snapshot)?;
        let loaded = crate::par::load_ordered(&ids, self.small_file_requests(), "snapshot", |id| {
            self.load_snapshot(id)
        });
        let mut out = vec![];
        let mut damaged = vec![];
        for ((id, _), s) in ids.iter().zip(loaded) {
            match s {
                Ok(s) if filter.matches(&s) => out.push((*id, s)),
                Ok(_) => {}
                Err(e) if e.is_unusable() => damaged.push((*id, e)),
                Err(e) => return Err(e),
            }
        }
        out.sort_by(|a, b| a.1.time.cmp(&b.1.time).then(a.0.cmp(&b.0)));
        Ok((out, damaged))
    }

    /// The snapshot `spec` names: `latest` (newest passing `filter`) or a unique id prefix,
    /// found without reading it (so a damaged snapshot can still be named, to remove it).
    pub fn resolve_snapshot(&self, spec: &str, filter: &SnapshotFilter) -> Result<Id> {
        if spec == "latest" {
            return self.find_snapshot(spec, filter).map(|(id, _)| id);
        }
        let lower = spec.to_ascii_lowercase();
        if lower.is_empty() || !lower.bytes().all(|b| b.is_ascii_hexdigit()) || lower.len() > 64 {
            // `latest:/x` or `ID:/x`, which `ls`, `dump` and `restore` take, the others not.
            if let Some((snapshot, _)) = spec.split_once(':')
                && (snapshot == "latest"
                    || (!snapshot.is_empty() && snapshot.bytes().all(|b| b.is_ascii_hexdigit())))
            {
                return Err(RepoError::SnapshotWithFolder {
                    spec: spec.to_string(),
                    snapshot: snapshot.to_string(),
                });
            }
            return Err(RepoError::NoSuchSnapshot(spec.to_string()));
        }
        let ids: Vec<Id> = self
            .list_ids(FileType::Snapshot)?
            .into_iter()
            .map(|(id, _)| id)
            .filter(|id| id.to_hex().starts_with(&lower))
            .collect();
        match ids.as_slice() {
            [id] => Ok(*id),
            [] => Err(RepoError::NoSuchSnapshot(spec.to_string())),
            _ => Err(RepoError::AmbiguousSnapshot {
                prefix: spec.to_string(),
                count: ids.len(),
            }),
        }
    }

    /// Resolves `latest` (newest passing `filter`) or a unique id prefix.
    pub fn find_snapshot(&self, spec: &str, filter: &SnapshotFilter) -> Result<(Id, Snapshot)> {
        if spec == "latest" {
            return self
                .list_snapshots(filter)?
                .pop()
                .ok_or_else(|| match filter.describe() {
                    f if f.is_empty() => RepoError::NoSuchSnapshot(spec.to_string()),
                    f => RepoError::NoSnapshotPasses {
                        spec: spec.to_string(),
                        filter: f,
                    },
                });
        }
        let id = self.resolve_snapshot(spec, filter)?;
        Ok((id, self.load_snapshot(&id)?))
    }
}

/// Reports on stderr that a snapshot file is damaged and left out, once per process: a
/// command that lists the snapshots twice (`diff A B` finds each) named it twice.
fn damaged_snapshot_warning(id: &Id, e: &RepoError) {
    static WARNED: std::sync::Mutex<Vec<Id>> = std::sync::Mutex::new(Vec::new());
    {
        let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
        if warned.contains(id) {
            return;
        }
        warned.push(*id);
    }
    #[allow(clippy::print_stderr)]
    {
        let _ = writeln!(
            std::io::stderr(),
            "arca: {}",
            damaged_snapshot_message(id, e)
        );
    }
}

/// The warning that snapshot file `id` is damaged (`e`) and left out.
pub fn damaged_snapshot_message(id: &Id, e: &RepoError) -> String {
    if e.is_newer_format() {
        // Not damage: forgetting it would delete a newer arca's snapshot.
        return format!("warning: {e}; it is left out");
    }
    format!(
        "warning: damaged snapshot file ({e}); it is left out (`arca forget {}` removes it)",
        id.short()
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use arca_backend::{Backend, BackendHints, FileInfo, MemoryBackend};
    use chrono::DateTime;

    use super::*;

    /// Tags split at commas, trimmed, the empty ones and repeats dropped, in order.
    #[test]
    fn tags_are_split_once_each() {
        assert_eq!(split_tags(&["a,a", " b ,a", ",", "c"]), ["a", "b", "c"]);
    }

    /// A memory backend behind a 4-connection remote whose snapshot reads take a while and
    /// are counted: how many were in flight at once, at most.
    #[derive(Debug, Default)]
    struct Slow {
        inner: MemoryBackend,
        now: AtomicUsize,
        most: AtomicUsize,
    }

    impl Backend for Slow {
        fn location(&self) -> String {
            "slow".into()
        }
        fn create(&self) -> arca_backend::Result<()> {
            self.inner.create()
        }
        fn list(&self, t: FileType) -> arca_backend::Result<Vec<FileInfo>> {
            self.inner.list(t)
        }
        fn read(&self, t: FileType, name: &str) -> arca_backend::Result<Vec<u8>> {
            if t == FileType::Snapshot {
                let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(n, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
                self.now.fetch_sub(1, Ordering::SeqCst);
            }
            self.inner.read(t, name)
        }
        fn read_range(
            &self,
            t: FileType,
            name: &str,
            offset: u64,
            len: u64,
        ) -> arca_backend::Result<Vec<u8>> {
            self.inner.read_range(t, name, offset, len)
        }
        fn hints(&self) -> BackendHints {
            BackendHints {
                connections: Some(4),
                ..Default::default()
            }
        }
        fn write(&self, t: FileType, name: &str, data: &[u8]) -> arca_backend::Result<()> {
            self.inner.write(t, name, data)
        }
        fn delete(&self, t: FileType, name: &str) -> arca_backend::Result<()> {
            self.inner.delete(t, name)
        }
        fn stat(&self, t: FileType, name: &str) -> arca_backend::Result<FileInfo> {
            self.inner.stat(t, name)
        }
    }

    fn snapshot(i: i64, host: &str) -> Snapshot {
        Snapshot {
            time: DateTime::<chrono::Utc>::from_timestamp(1_700_000_000 + i * 60, 0)
                .unwrap()
                .fixed_offset(),
            tree: Id::default(),
            paths: vec!["/data".into()],
            hostname: host.into(),
            username: "u".into(),
            uid: 0,
            gid: 0,
            tags: vec![],
            parent: None,
            original: None,
            copied_tree: None,
            program_version: "test".into(),
            complete: true,
            summary: Default::default(),
        }
    }

    #[test]
    fn filters_read_as_restic_reads_them() {
        let with = |host: &str, tags: &[&str]| Snapshot {
            tags: tags.iter().map(|t| t.to_string()).collect(),
            ..snapshot(0, host)
        };
        let (ab, a, b, none) = (
            with("h", &["a", "b"]),
            with("h", &["a"]),
            with("i", &["b"]),
            with("j", &[]),
        );
        let passing = |f: &SnapshotFilter| -> Vec<bool> {
            [&ab, &a, &b, &none].iter().map(|s| f.matches(s)).collect()
        };
        let tags = |v: &[&str]| SnapshotFilter {
            tags: SnapshotFilter::tag_lists(v),
            ..SnapshotFilter::default()
        };
        // Repeated --tag: any of them; a comma: all of its tags; empty: untagged.
        assert_eq!(passing(&tags(&["a", "b"])), [true, true, true, false]);
        assert_eq!(passing(&tags(&["a,b"])), [true, false, false, false]);
        assert_eq!(passing(&tags(&[" b , a "])), [true, false, false, false]);
        assert_eq!(passing(&tags(&[""])), [false, false, false, true]);
        assert_eq!(passing(&tags(&["a,b", ""])), [true, false, false, true]);
        // Repeated --host: any of them.
        let hosts = SnapshotFilter {
            hosts: vec!["h".into(), "j".into()],
            ..SnapshotFilter::default()
        };
        assert_eq!(passing(&hosts), [true, true, false, true]);
        assert_eq!(passing(&SnapshotFilter::default()), [true; 4]);
        assert_eq!(
            SnapshotFilter {
                tags: SnapshotFilter::tag_lists(&["a,b", ""]),
                ..hosts
            }
            .describe(),
            "--host h --host j --tag a,b --tag ''"
        );
    }

    #[test]
    fn snapshots_are_read_several_at_once_and_listed_oldest_first() {
        let backend = Arc::new(Slow::default());
        let repo = crate::testing::repo(backend.clone());
        // Saved newest first, so that id order and time order differ.
        for i in (0..16).rev() {
            repo.save_snapshot(&snapshot(i, if i % 2 == 0 { "a" } else { "b" }))
                .unwrap();
        }
        let all = repo.list_snapshots(&SnapshotFilter::default()).unwrap();
        let times: Vec<i64> = all.iter().map(|(_, s)| s.time.timestamp()).collect();
        assert_eq!(
            times,
            (0..16).map(|i| 1_700_000_000 + i * 60).collect::<Vec<_>>()
        );
        let most = backend.most.load(Ordering::SeqCst);
        assert!(
            (2..=4).contains(&most),
            "{most} snapshot reads in flight at most"
        );
        let a = SnapshotFilter::host("a");
        let (_, latest) = repo.find_snapshot("latest", &a).unwrap();
        assert_eq!(latest.time.timestamp(), 1_700_000_000 + 14 * 60);
        // A damaged snapshot is left out of the list and reported, named; it can still be
        // named by its id prefix (to remove it), and loading it is the error.
        let victim = all[5].0;
        let name = victim.to_hex();
        let mut bytes = backend.inner.read(FileType::Snapshot, &name).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        backend
            .inner
            .write(FileType::Snapshot, &name, &bytes)
            .unwrap();
        let (list, damaged) = repo
            .list_snapshots_report(&SnapshotFilter::default())
            .unwrap();
        assert_eq!(list.len(), 15);
        assert!(list.iter().all(|(id, _)| *id != victim));
        assert_eq!(damaged.len(), 1);
        assert_eq!(damaged[0].0, victim);
        assert!(damaged[0].1.to_string().contains(&name), "{}", damaged[0].1);
        assert_eq!(
            repo.list_snapshots(&SnapshotFilter::default())
                .unwrap()
                .len(),
            15
        );
        assert_eq!(repo.resolve_snapshot(&name[..10], &a).unwrap(), victim);
        assert!(repo.find_snapshot(&name[..10], &a).is_err());
        // A backend that cannot read is the error, not a shorter list.
        let faulty = Arc::new(arca_backend::FaultBackend::new(
            Arc::clone(&backend) as Arc<dyn Backend>
        ));
        let broken = Repository::open(faulty.clone(), b"pw").unwrap();
        faulty.add(arca_backend::Rule {
            op: Some(arca_backend::Op::Read),
            file_type: Some(FileType::Snapshot),
            trigger: arca_backend::Trigger::Always,
            fault: arca_backend::Fault::Fail(std::io::ErrorKind::Other),
        });
        assert!(broken.list_snapshots(&SnapshotFilter::default()).is_err());
    }

    /// Behind the local cache (a remote repository), a file just written is read back from
    /// the repository, not from the cache's copy of what was sent: a snapshot or a new key
    /// damaged on the way is found and removed (the cache answered the read-back with the
    /// good copy, and `key passwd` then removed the old key, the only one that opened).
    #[test]
    fn files_damaged_on_the_way_are_found_past_the_cache() {
        let fault = Arc::new(arca_backend::FaultBackend::new(MemoryBackend::new()));
        let dir = tempfile::tempdir().unwrap();
        let cached = arca_backend::CachedBackend::new(
            Arc::clone(&fault) as Arc<dyn Backend>,
            dir.path().join("cache"),
        );
        let repo = crate::testing::repo(Arc::new(cached));
        let corrupt_next_write = |t| {
            fault.add(arca_backend::Rule {
                op: Some(arca_backend::Op::Write),
                file_type: Some(t),
                trigger: arca_backend::Trigger::Nth(1),
                fault: arca_backend::Fault::Corrupt,
            })
        };
        let stored = |t| fault.inner().list(t).unwrap().len();
        // Sent whole: kept.
        let good = repo.save_snapshot_checked(&snapshot(0, "h")).unwrap();
        assert_eq!(stored(FileType::Snapshot), 1);
        corrupt_next_write(FileType::Snapshot);
        let e = repo.save_snapshot_checked(&snapshot(1, "h")).unwrap_err();
        assert!(!matches!(e, RepoError::SnapshotLeft { .. }), "{e}");
        assert_eq!(stored(FileType::Snapshot), 1);
        assert!(repo.load_snapshot(&good).is_ok());

        let kdf = arca_format::KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        };
        let keys = stored(FileType::Key);
        corrupt_next_write(FileType::Key);
        let e = repo.add_key(b"other", kdf).unwrap_err();
        assert!(e.to_string().contains("did not read back"), "{e}");
        assert_eq!(stored(FileType::Key), keys);
        repo.add_key(b"other", kdf).unwrap();
        assert_eq!(stored(FileType::Key), keys + 1);
    }

    /// A snapshot that does not read back once written is removed; one whose removal fails
    /// too is named in the error, with what to do (the failure was dropped, and the file
    /// stayed unmentioned).
    #[test]
    fn a_snapshot_that_does_not_read_back_and_stays_is_named() {
        let fault = Arc::new(arca_backend::FaultBackend::new(MemoryBackend::new()));
        let repo = crate::testing::repo(fault.clone());
        let corrupt_next_write = || {
            fault.add(arca_backend::Rule {
                op: Some(arca_backend::Op::Write),
                file_type: Some(FileType::Snapshot),
                trigger: arca_backend::Trigger::Nth(1),
                fault: arca_backend::Fault::Corrupt,
            })
        };
        let stored = || fault.inner().list(FileType::Snapshot).unwrap();
        // Removed: the read's error, and nothing left.
        corrupt_next_write();
        let e = repo.save_snapshot_checked(&snapshot(0, "h")).unwrap_err();
        assert!(!matches!(e, RepoError::SnapshotLeft { .. }), "{e}");
        assert!(stored().is_empty());
        // Not removed: named, with what to do.
        fault.clear();
        corrupt_next_write();
        fault.add(arca_backend::Rule {
            op: Some(arca_backend::Op::Delete),
            file_type: Some(FileType::Snapshot),
            trigger: arca_backend::Trigger::Always,
            fault: arca_backend::Fault::Fail(std::io::ErrorKind::PermissionDenied),
        });
        let e = repo.save_snapshot_checked(&snapshot(1, "h")).unwrap_err();
        let left = stored();
        assert_eq!(left.len(), 1);
        let id = &left[0].name;
        assert!(matches!(e, RepoError::SnapshotLeft { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("snapshot {id} did not read back once written (")),
            "{msg}"
        );
        assert!(
            msg.contains(&format!(
                "removing it again failed (delete memory:/snapshots/{id}: injected fault)"
            )),
            "{msg}"
        );
        assert!(
            msg.ends_with(&format!(
                "it is still there, perhaps damaged: remove it with `arca forget {id}`, then \
                 run the command again"
            )),
            "{msg}"
        );
    }
}

//! The virtual folders above the snapshots, like restic's mount: `ids/<short id>`,
//! `snapshots/<time>`, `hosts/<host>/<time>`, `tags/<tag>/<time>` and `latest` links.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arca_format::{Id, Snapshot};

/// The inode number of the mount's root.
pub(crate) const ROOT: u64 = 1;

/// Inode numbers are hashes, so that one name always gets the same number however often
/// the kernel forgets it and whichever listing or lookup meets it first; 0 and 1 are reserved.
fn finish(h: DefaultHasher) -> u64 {
    match h.finish() {
        n @ 2.. => n,
        n => n + 2,
    }
}

/// The inode of entry `name` in the folder `parent`.
pub(crate) fn child_ino(parent: u64, name: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    (0u8, parent, name).hash(&mut h);
    finish(h)
}

/// The inode of the folder `name` in `parent` showing snapshot `id`: a name that comes to
/// show another snapshot (a repeated time after a refresh) gets another inode, so nothing the
/// kernel cached of the old one is mixed in.
pub(crate) fn snapshot_ino(parent: u64, name: &[u8], id: &Id) -> u64 {
    let mut h = DefaultHasher::new();
    (2u8, parent, name, id.as_bytes()).hash(&mut h);
    finish(h)
}

/// The inode shared by the hard links of one file (`dev`, `inode`) in the snapshot shown at
/// the folder `root`.
pub(crate) fn hardlink_ino(root: u64, dev: u64, inode: u64, content: u64) -> u64 {
    let mut h = DefaultHasher::new();
    (1u8, root, dev, inode, content).hash(&mut h);
    finish(h)
}

/// One virtual entry.
#[derive(Debug, Clone)]
pub(crate) enum Virtual {
    /// A folder of virtual entries: name → inode.
    Dir {
        parent: u64,
        entries: BTreeMap<Vec<u8>, u64>,
        mtime: SystemTime,
    },
    /// A snapshot's root folder: the snapshot at `snapshot` in [`Layout::snapshots`].
    Snapshot { parent: u64, snapshot: usize },
    /// A symbolic link (`latest`).
    Link { target: Vec<u8>, mtime: SystemTime },
}

/// The virtual tree for one list of snapshots.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    /// Inode → entry.
    pub(crate) nodes: HashMap<u64, Virtual>,
    /// The snapshots shown, oldest first.
    pub(crate) snapshots: Vec<(Id, Arc<Snapshot>)>,
}

/// A snapshot's time as a folder name, in the snapshot's own time zone.
pub(crate) fn time_name(s: &Snapshot) -> String {
    s.time.format("%Y-%m-%dT%H:%M:%S%:z").to_string()
}

/// A snapshot's time as a file time.
pub(crate) fn system_time(s: &Snapshot) -> SystemTime {
    let (sec, nsec) = (s.time.timestamp(), s.time.timestamp_subsec_nanos());
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec.unsigned_abs(), nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + Duration::from_nanos(nsec.into())
    }
}

/// A host or tag as a file name: `/` and NUL become `_`, and `.`, `..` or nothing `_`
/// (a name another host or tag has already gets `-2`, `-3`, ...: see [`unique_name`]).
fn file_name(s: &str) -> Vec<u8> {
    let v: Vec<u8> = s
        .bytes()
        .map(|b| if b == b'/' || b == 0 { b'_' } else { b })
        .collect();
    if v.is_empty() || v == b"." || v == b".." {
        b"_".to_vec()
    } else {
        v
    }
}

/// `name`, or when it is taken, `name-2`, `name-3`, ...: the first free one, marked taken.
fn unique_name(name: Vec<u8>, taken: &mut std::collections::HashSet<Vec<u8>>) -> Vec<u8> {
    let mut candidate = name.clone();
    let mut n = 2;
    while !taken.insert(candidate.clone()) {
        candidate = [&name[..], format!("-{n}").as_bytes()].concat();
        n += 1;
    }
    candidate
}

struct Builder {
    nodes: HashMap<u64, Virtual>,
}

impl Builder {
    /// Adds `name` under the folder `parent`, returning its inode.
    fn add(&mut self, parent: u64, name: Vec<u8>, v: Virtual) -> u64 {
        let ino = child_ino(parent, &name);
        self.add_as(ino, parent, name, v)
    }

    /// Adds the folder of snapshot `snapshot` (`id`) as `name` under `parent`.
    fn add_snapshot(&mut self, parent: u64, name: Vec<u8>, snapshot: usize, id: &Id) {
        let ino = snapshot_ino(parent, &name, id);
        self.add_as(ino, parent, name, Virtual::Snapshot { parent, snapshot });
    }

    fn add_as(&mut self, ino: u64, parent: u64, name: Vec<u8>, v: Virtual) -> u64 {
        if let Some(Virtual::Dir { entries, .. }) = self.nodes.get_mut(&parent) {
            entries.insert(name, ino);
        }
        self.nodes.insert(ino, v);
        ino
    }

    fn dir(&mut self, parent: u64, name: &[u8], mtime: SystemTime) -> u64 {
        let d = Virtual::Dir {
            parent,
            entries: BTreeMap::new(),
            mtime,
        };
        self.add(parent, name.to_vec(), d)
    }

    /// Fills `dir` with one folder per snapshot of `members` (indexes, oldest first), named
    /// by time (`-1`, `-2`… after a repeated time), and a `latest` link to the newest.
    fn timeline(&mut self, dir: u64, members: &[usize], snaps: &[(Id, Arc<Snapshot>)]) {
        let mut last = None;
        for &m in members {
            let base = time_name(&snaps[m].1);
            let mut name = base.clone();
            let mut n = 1;
            while self.has(dir, name.as_bytes()) {
                name = format!("{base}-{n}");
                n += 1;
            }
            self.add_snapshot(dir, name.clone().into_bytes(), m, &snaps[m].0);
            last = Some((name, system_time(&snaps[m].1)));
        }
        if let Some((name, mtime)) = last {
            let v = Virtual::Link {
                target: name.into_bytes(),
                mtime,
            };
            self.add(dir, b"latest".to_vec(), v);
        }
    }

    fn has(&self, dir: u64, name: &[u8]) -> bool {
        matches!(self.nodes.get(&dir), Some(Virtual::Dir { entries, .. }) if entries.contains_key(name))
    }
}

impl Layout {
    /// The virtual tree of `snapshots` (in any order).
    pub(crate) fn build(mut snapshots: Vec<(Id, Arc<Snapshot>)>) -> Self {
        snapshots.sort_by(|a, b| a.1.time.cmp(&b.1.time).then(a.0.cmp(&b.0)));
        let newest = |members: &mut dyn Iterator<Item = usize>| {
            members
                .map(|i| system_time(&snapshots[i].1))
                .max()
                .unwrap_or(UNIX_EPOCH)
        };
        let all_time = newest(&mut (0..snapshots.len()));
        let mut b = Builder {
            nodes: HashMap::new(),
        };
        b.nodes.insert(
            ROOT,
            Virtual::Dir {
                parent: ROOT,
                entries: BTreeMap::new(),
                mtime: all_time,
            },
        );
        let ids = b.dir(ROOT, b"ids", all_time);
        let times = b.dir(ROOT, b"snapshots", all_time);
        let hosts = b.dir(ROOT, b"hosts", all_time);
        let tags = b.dir(ROOT, b"tags", all_time);

        // ids/: short ids, or full ones where two snapshots share a short id.
        let mut shorts: HashMap<String, usize> = HashMap::new();
        for (id, _) in &snapshots {
            *shorts.entry(id.short()).or_default() += 1;
        }
        for (i, (id, _)) in snapshots.iter().enumerate() {
            let short = id.short();
            let name = if shorts.get(&short).copied().unwrap_or(0) > 1 {
                id.to_hex()
            } else {
                short
            };
            b.add_snapshot(ids, name.into_bytes(), i, id);
        }

        let everyone: Vec<usize> = (0..snapshots.len()).collect();
        b.timeline(times, &everyone, &snapshots);

        let mut by_host: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        let mut by_tag: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, (_, s)) in snapshots.iter().enumerate() {
            by_host.entry(&s.hostname).or_default().push(i);
            for t in &s.tags {
                let members = by_tag.entry(t).or_default();
                if members.last() != Some(&i) {
                    members.push(i);
                }
            }
        }
        for (parent, groups) in [(hosts, by_host), (tags, by_tag)] {
            // Each host or tag its own folder: two whose file names agree (`a/b` and `a_b`)
            // shared one, which then listed snapshots without its tag.
            let mut taken = std::collections::HashSet::new();
            for (text, members) in groups {
                let name = unique_name(file_name(text), &mut taken);
                let d = b.dir(parent, &name, newest(&mut members.iter().copied()));
                b.timeline(d, &members, &snapshots);
            }
        }
        Layout {
            nodes: b.nodes,
            snapshots,
        }
    }

    /// The inode of `name` in the virtual folder `dir`.
    pub(crate) fn child(&self, dir: u64, name: &[u8]) -> Option<u64> {
        match self.nodes.get(&dir)? {
            Virtual::Dir { entries, .. } => entries.get(name).copied(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use chrono::DateTime;

    fn snap(time: &str, host: &str, tags: &[&str]) -> Arc<Snapshot> {
        Arc::new(Snapshot {
            time: DateTime::parse_from_rfc3339(time).unwrap(),
            tree: Id([0; 32]),
            paths: vec!["/data".into()],
            hostname: host.into(),
            username: "u".into(),
            uid: 0,
            gid: 0,
            tags: tags.iter().map(|t| t.to_string()).collect(),
            parent: None,
            original: None,
            copied_tree: None,
            program_version: String::new(),
            complete: true,
            summary: Default::default(),
        })
    }

    fn names(l: &Layout, path: &[&str]) -> Vec<String> {
        let mut ino = ROOT;
        for p in path {
            ino = l.child(ino, p.as_bytes()).unwrap();
        }
        match &l.nodes[&ino] {
            Virtual::Dir { entries, .. } => entries
                .keys()
                .map(|k| String::from_utf8(k.clone()).unwrap())
                .collect(),
            v => panic!("not a folder: {v:?}"),
        }
    }

    fn snapshot_at(l: &Layout, path: &[&str]) -> Id {
        let mut ino = ROOT;
        for p in path {
            ino = l.child(ino, p.as_bytes()).unwrap();
        }
        match &l.nodes[&ino] {
            Virtual::Snapshot { snapshot, .. } => l.snapshots[*snapshot].0,
            v => panic!("not a snapshot: {v:?}"),
        }
    }

    /// Tags (and hosts) whose file names agree get a folder each, not one listing both's
    /// snapshots.
    #[test]
    fn tags_alike_as_file_names_get_a_folder_each() {
        let (a, b, c) = (Id([0xaa; 32]), Id([0xbb; 32]), Id([0xcc; 32]));
        let l = Layout::build(vec![
            (a, snap("2026-11-21T08:00:00+00:00", "h", &["a/b"])),
            (b, snap("2026-11-22T08:00:00+00:00", "h", &["a_b"])),
            (c, snap("2026-11-23T08:00:00+00:00", "h", &[".", ".."])),
        ]);
        assert_eq!(names(&l, &["tags"]), ["_", "_-2", "a_b", "a_b-2"]);
        assert_eq!(
            snapshot_at(&l, &["tags", "a_b", "2026-11-21T08:00:00+00:00"]),
            a
        );
        assert_eq!(
            names(&l, &["tags", "a_b-2"]),
            ["2026-11-22T08:00:00+00:00", "latest"]
        );
    }

    #[test]
    fn folders_by_id_time_host_and_tag() {
        let (a, b, c) = (Id([0xaa; 32]), Id([0xbb; 32]), Id([0xcc; 32]));
        let l = Layout::build(vec![
            (
                c,
                snap("2026-11-22T10:04:05+01:00", "web", &["daily", "a/b"]),
            ),
            (a, snap("2026-11-21T08:00:00+00:00", "db", &["daily"])),
            // Same second as c: gets a suffix.
            (b, snap("2026-11-22T10:04:05+01:00", "web", &[])),
        ]);
        assert_eq!(names(&l, &[]), ["hosts", "ids", "snapshots", "tags"]);
        assert_eq!(names(&l, &["ids"]), ["aaaaaaaa", "bbbbbbbb", "cccccccc"]);
        assert_eq!(
            names(&l, &["snapshots"]),
            [
                "2026-11-21T08:00:00+00:00",
                "2026-11-22T10:04:05+01:00",
                "2026-11-22T10:04:05+01:00-1",
                "latest"
            ]
        );
        // Equal times are ordered by id: b before c.
        assert_eq!(
            snapshot_at(&l, &["snapshots", "2026-11-22T10:04:05+01:00"]),
            b
        );
        assert_eq!(
            snapshot_at(&l, &["snapshots", "2026-11-22T10:04:05+01:00-1"]),
            c
        );
        assert_eq!(snapshot_at(&l, &["ids", "aaaaaaaa"]), a);
        let latest = l
            .child(l.child(ROOT, b"snapshots").unwrap(), b"latest")
            .unwrap();
        match &l.nodes[&latest] {
            Virtual::Link { target, .. } => assert_eq!(target, b"2026-11-22T10:04:05+01:00-1"),
            v => panic!("{v:?}"),
        }
        assert_eq!(names(&l, &["hosts"]), ["db", "web"]);
        assert_eq!(
            names(&l, &["hosts", "web"]),
            [
                "2026-11-22T10:04:05+01:00",
                "2026-11-22T10:04:05+01:00-1",
                "latest"
            ]
        );
        assert_eq!(names(&l, &["tags"]), ["a_b", "daily"]);
        assert_eq!(
            names(&l, &["tags", "daily"]),
            [
                "2026-11-21T08:00:00+00:00",
                "2026-11-22T10:04:05+01:00",
                "latest"
            ]
        );
        assert_eq!(
            snapshot_at(&l, &["tags", "a_b", "2026-11-22T10:04:05+01:00"]),
            c
        );
        // The same names give the same inodes in a rebuilt layout.
        let again = Layout::build(l.snapshots.clone());
        assert_eq!(
            again
                .child(ROOT, b"ids")
                .and_then(|d| again.child(d, b"aaaaaaaa")),
            l.child(ROOT, b"ids").and_then(|d| l.child(d, b"aaaaaaaa"))
        );
    }

    #[test]
    fn empty_repository_and_shared_short_ids() {
        let l = Layout::build(vec![]);
        assert_eq!(names(&l, &["snapshots"]), Vec::<String>::new());
        let mut x = [0x11; 32];
        let y = x;
        x[31] = 0x22;
        let l = Layout::build(vec![
            (Id(x), snap("2026-01-01T00:00:00Z", "h", &[])),
            (Id(y), snap("2026-01-02T00:00:00Z", "h", &[])),
        ]);
        assert_eq!(names(&l, &["ids"]), [Id(y).to_hex(), Id(x).to_hex()]);
        assert_ne!(child_ino(5, b"a"), child_ino(6, b"a"));
        assert_ne!(child_ino(5, b"a"), hardlink_ino(5, 0, 0, 0));
        // A time folder showing another snapshot after a refresh is another inode.
        let one = Layout::build(vec![(Id(y), snap("2026-01-02T00:00:00Z", "h", &[]))]);
        let two = Layout::build(vec![(Id(x), snap("2026-01-02T00:00:00Z", "h", &[]))]);
        let at = |l: &Layout| {
            let d = l.child(ROOT, b"snapshots").unwrap();
            l.child(d, b"2026-01-02T00:00:00+00:00").unwrap()
        };
        assert_ne!(at(&one), at(&two));
    }
}

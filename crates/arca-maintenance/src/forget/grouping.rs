//! Grouping for `forget` (restic's `--group-by`): [`GroupBy`] names the fields, [`GroupKey`]
//! is what a group's snapshots share, [`group`] divides a list of snapshots.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use arca_format::{Id, Snapshot};

use super::ParseError;

/// Which snapshot fields divide snapshots into groups (restic's `--group-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupBy {
    /// By host name.
    pub host: bool,
    /// By the (sorted) backed-up paths.
    pub paths: bool,
    /// By the (sorted) tags.
    pub tags: bool,
}

impl Default for GroupBy {
    /// `host,paths`, as restic.
    fn default() -> Self {
        Self {
            host: true,
            paths: true,
            tags: false,
        }
    }
}

impl FromStr for GroupBy {
    type Err = ParseError;

    /// Parses a comma-separated list of `host`, `paths`, `tags` (or `hosts`, `path`, `tag`);
    /// an empty string means one group for all snapshots.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let mut g = Self {
            host: false,
            paths: false,
            tags: false,
        };
        for part in s.split(',').map(str::trim) {
            match part {
                "host" | "hosts" => g.host = true,
                "path" | "paths" => g.paths = true,
                "tag" | "tags" => g.tags = true,
                "" => {}
                other => {
                    return Err(ParseError(format!(
                        "unknown grouping option {other:?}: expected host, paths or tags"
                    )));
                }
            }
        }
        Ok(g)
    }
}

impl fmt::Display for GroupBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<&str> = [
            (self.host, "host"),
            (self.paths, "paths"),
            (self.tags, "tags"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
        f.write_str(&parts.join(","))
    }
}

/// What the snapshots of a group share; `None` for the fields not grouped by.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKey {
    /// Host name.
    pub hostname: Option<String>,
    /// Backed-up paths, sorted.
    pub paths: Option<Vec<String>>,
    /// Tags, sorted.
    pub tags: Option<Vec<String>>,
}

impl GroupKey {
    /// The key of `s` under `by`.
    pub fn of(s: &Snapshot, by: GroupBy) -> Self {
        let sorted = |v: &[String]| {
            let mut v = v.to_vec();
            v.sort();
            v
        };
        Self {
            hostname: by.host.then(|| s.hostname.clone()),
            paths: by.paths.then(|| sorted(&s.paths)),
            tags: by.tags.then(|| sorted(&s.tags)),
        }
    }
}

impl fmt::Display for GroupKey {
    /// `host [h], paths [/a, /b], tags [t]`, or `all snapshots` when nothing is grouped by.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = vec![];
        if let Some(h) = &self.hostname {
            parts.push(format!("host [{h}]"));
        }
        if let Some(p) = &self.paths {
            parts.push(format!("paths [{}]", p.join(", ")));
        }
        if let Some(t) = &self.tags {
            parts.push(format!("tags [{}]", t.join(", ")));
        }
        if parts.is_empty() {
            f.write_str("all snapshots")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// Snapshots sharing a [`GroupKey`].
#[derive(Debug, Clone)]
pub struct Group {
    /// What they share.
    pub key: GroupKey,
    /// The snapshots, in the order given to [`group`].
    pub snapshots: Vec<(Id, Snapshot)>,
}

/// Divides `snapshots` into groups by `by`, ordered by key.
pub fn group(snapshots: Vec<(Id, Snapshot)>, by: GroupBy) -> Vec<Group> {
    let mut groups: BTreeMap<GroupKey, Vec<(Id, Snapshot)>> = BTreeMap::new();
    for (id, s) in snapshots {
        groups
            .entry(GroupKey::of(&s, by))
            .or_default()
            .push((id, s));
    }
    groups
        .into_iter()
        .map(|(key, snapshots)| Group { key, snapshots })
        .collect()
}

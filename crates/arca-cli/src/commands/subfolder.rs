//! Snapshot specs with a folder (`ID:SUBFOLDER`, as restic spells them), shared by `diff` and
//! `restore`: the folder's path normalized and its node looked up in the snapshot.

use anyhow::{Result, bail};
use arca_browse::diff::{find_node, root_node};
use arca_format::{Id, Node, Snapshot};
use arca_repo::{Index, Repository, SnapshotFilter};

/// `/a/b` from a path given by the user (`a/b`, `/a/b/`, `./a//b`); `..` is refused.
pub fn normalize(p: &[u8], what: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for c in p
        .split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
    {
        if c == b".." {
            bail!(
                "invalid {what} {:?}: `..` is not allowed",
                String::from_utf8_lossy(p)
            );
        }
        out.push(b'/');
        out.extend_from_slice(c);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    Ok(out)
}

/// A snapshot named by `spec` (id, prefix or "latest", optionally `:SUBFOLDER`), with the
/// folder's normalized path and node when one is given.
pub struct Resolved {
    pub id: Id,
    pub snap: Snapshot,
    /// The subfolder's path (`/a/b`) and node, or `None` for the whole snapshot.
    pub folder: Option<(Vec<u8>, Node)>,
}

impl Resolved {
    /// The folder node the spec stands for: the subfolder's, or the snapshot's root.
    pub fn node(&self) -> Node {
        match &self.folder {
            Some((_, n)) => n.clone(),
            None => root_node(self.snap.tree),
        }
    }
}

/// Resolves `spec`; a subfolder that is missing or not a folder is an error naming it.
pub fn resolve(
    repo: &Repository,
    index: &Index,
    spec: &str,
    filter: &SnapshotFilter,
) -> Result<Resolved> {
    let (name, sub) = match spec.split_once(':') {
        Some((n, s)) => (n, Some(s)),
        None => (spec, None),
    };
    let (id, snap) = repo.find_snapshot(name, filter)?;
    let Some(sub) = sub else {
        return Ok(Resolved {
            id,
            snap,
            folder: None,
        });
    };
    let path = normalize(sub.as_bytes(), "subfolder")?;
    if path == b"/" {
        return Ok(Resolved {
            id,
            snap,
            folder: None,
        });
    }
    match find_node(repo, index, &root_node(snap.tree), &path)? {
        Some(n) if n.is_dir() && n.subtree.is_some() => Ok(Resolved {
            id,
            snap,
            folder: Some((path, n)),
        }),
        _ => bail!(
            "{} is not a folder in snapshot {}",
            String::from_utf8_lossy(&path),
            id.short()
        ),
    }
}

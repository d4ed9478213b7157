//! Snapshot specs with a folder (`ID:SUBFOLDER`, as restic spells them), shared by `diff` and
//! `restore`: the folder's path normalized and its node looked up in the snapshot.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{Result, bail};
use arca_browse::diff::{find_node, root_node};
use arca_format::text::shown;
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

/// What to add to "X is not in snapshot S": a snapshot keeps the whole path of what was
/// backed up, from the root of the machine it was taken on, so `src/b` (or `/src/b`, or
/// `me/src/b`) of a backup of `/home/me/src` is `/home/me/src/b`. Offers such a path when
/// the snapshot holds it (`exists`: it offered paths that were not there, and missed others);
/// else, for a path outside every backed-up path, names the snapshot's paths. Empty for a
/// path inside one (a name missing there needs no hint).
pub fn relative_hint(snap: &Snapshot, given: &[u8], exists: &dyn Fn(&[u8]) -> bool) -> String {
    let relative = !given.starts_with(b"/");
    let Ok(whole) = normalize(given, "path") else {
        return String::new();
    };
    let first = whole[1..].split(|b| *b == b'/').next().unwrap_or_default();
    // Each backed-up path's folders down to one named as the given path's first name.
    let mut candidates: Vec<Vec<u8>> = vec![];
    for p in &snap.paths {
        let names: Vec<&[u8]> = p
            .as_bytes()
            .split(|b| *b == b'/')
            .filter(|c| !c.is_empty())
            .collect();
        // From the root too when the path was given relative (`home/me` of `/home/me`); an
        // absolute one is the path that is missing.
        for (i, name) in names.iter().enumerate().skip(usize::from(!relative)) {
            if *name == first {
                let mut full: Vec<u8> = names[..i]
                    .iter()
                    .flat_map(|n| [b"/", *n].concat())
                    .collect();
                full.extend_from_slice(&whole);
                candidates.push(full);
            }
        }
    }
    candidates.sort();
    candidates.dedup();
    let fits: Vec<String> = candidates
        .iter()
        .filter(|full| exists(full))
        .map(|full| shown(Path::new(OsStr::from_bytes(full))).to_string())
        .collect();
    let why = if relative {
        "paths in a snapshot start at /"
    } else {
        "a snapshot keeps the whole path of what was backed up"
    };
    let inside = snap.paths.iter().any(|p| {
        let p = p.trim_end_matches('/').as_bytes();
        whole.starts_with(p) && matches!(whole.get(p.len()), None | Some(b'/'))
    });
    match fits.as_slice() {
        [] if snap.paths.is_empty() || (inside && !relative) => String::new(),
        [] => {
            const SHOWN: usize = 3;
            let mut paths: Vec<String> = snap.paths.iter().take(SHOWN).cloned().collect();
            if snap.paths.len() > SHOWN {
                paths.push(format!("{} more", snap.paths.len() - SHOWN));
            }
            if relative {
                format!(" ({why}; it holds {})", paths.join(", "))
            } else {
                format!(" (the snapshot holds {})", paths.join(", "))
            }
        }
        [one] => format!(" ({why}: did you mean {one}?)"),
        many => format!(" ({why}: did you mean one of {}?)", many.join(", ")),
    }
}

/// Whether the snapshot whose root listing is `tree` holds `path` (`/a/b`); a listing that
/// cannot be read counts as not.
fn in_tree<'a>(repo: &'a Repository, index: &'a Index, tree: Id) -> impl Fn(&[u8]) -> bool + 'a {
    move |path| find_node(repo, index, &root_node(tree), path).is_ok_and(|n| n.is_some())
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
    /// [`relative_hint`] for `given`, a path looked up from the snapshot's root; none inside
    /// `ID:SUBFOLDER`, whose paths are taken from that folder.
    pub fn missing_hint(&self, repo: &Repository, index: &Index, given: &[u8]) -> String {
        match self.folder {
            None => relative_hint(&self.snap, given, &in_tree(repo, index, self.snap.tree)),
            Some(_) => String::new(),
        }
    }

    /// The folder node the spec stands for: the subfolder's, or the snapshot's root.
    pub fn node(&self) -> Node {
        match &self.folder {
            Some((_, n)) => n.clone(),
            None => root_node(self.snap.tree),
        }
    }

    /// The tree of the folder the spec stands for (the snapshot's root tree without a
    /// subfolder).
    pub fn tree(&self) -> Id {
        match &self.folder {
            Some((_, n)) => n.subtree.unwrap_or(self.snap.tree),
            None => self.snap.tree,
        }
    }
}

/// The snapshot a spec names, and the path after its `:` if any; found before the index is
/// read (see [`find`]).
pub struct Found {
    id: Id,
    snap: Snapshot,
    sub: Option<Vec<u8>>,
}

/// Finds the snapshot `spec` names (id, prefix or "latest", optionally `:SUBFOLDER`). Called
/// before the index is loaded: a backup finishing meanwhile writes its index files before
/// its snapshot, so the index loaded next has the trees of every snapshot found (found after
/// the index, the newest snapshot's trees were "not in the index").
pub fn find(repo: &Repository, spec: &OsStr, filter: &SnapshotFilter) -> Result<Found> {
    let spec = spec.as_bytes();
    let (name, sub) = match spec.iter().position(|b| *b == b':') {
        Some(i) => (&spec[..i], Some(spec[i + 1..].to_vec())),
        None => (spec, None),
    };
    let Ok(name) = std::str::from_utf8(name) else {
        bail!(
            "no snapshot {:?}: a snapshot is named by its id, an id prefix or \"latest\"",
            String::from_utf8_lossy(name)
        );
    };
    let (id, snap) = repo.find_snapshot(name, filter)?;
    Ok(Found { id, snap, sub })
}

/// Resolves `found`; a subfolder that is missing or not a folder is an error naming it.
pub fn resolve(repo: &Repository, index: &Index, found: Found) -> Result<Resolved> {
    let (r, entry) = resolve_entry(repo, index, found)?;
    if let Some(name) = entry {
        let mut path = r.folder.map(|(p, _)| p).unwrap_or_default();
        path.push(b'/');
        path.extend_from_slice(&name);
        bail!(
            "{} is not a folder in snapshot {}",
            shown(Path::new(OsStr::from_bytes(&path))),
            r.id.short()
        );
    }
    Ok(r)
}

/// Resolves `found` as [`resolve`] does, except that its path may also name a file (or any
/// entry that is not a folder): then the folder holding it is resolved, and its name (one
/// component, raw bytes) comes along. A path the snapshot does not have is an error naming it.
pub fn resolve_entry(
    repo: &Repository,
    index: &Index,
    found: Found,
) -> Result<(Resolved, Option<Vec<u8>>)> {
    let Found { id, snap, sub } = found;
    let whole = |snap| Resolved {
        id,
        snap,
        folder: None,
    };
    let Some(sub) = sub else {
        return Ok((whole(snap), None));
    };
    let path = normalize(&sub, "subfolder")?;
    if path == b"/" {
        return Ok((whole(snap), None));
    }
    let missing = || {
        anyhow::anyhow!(
            "{} is not in snapshot {}{}",
            shown(Path::new(OsStr::from_bytes(&path))),
            id.short(),
            relative_hint(&snap, &sub, &in_tree(repo, index, snap.tree))
        )
    };
    // The folder holding the last name, then the entry inside it: one walk down.
    let cut = path.iter().rposition(|b| *b == b'/').unwrap_or(0);
    let (parent, name) = (&path[..cut], &path[cut + 1..]);
    let root = root_node(snap.tree);
    let folder = match parent {
        [] => None,
        p => Some(find_node(repo, index, &root, p)?.ok_or_else(missing)?),
    };
    let node =
        find_node(repo, index, folder.as_ref().unwrap_or(&root), name)?.ok_or_else(missing)?;
    if node.is_dir() && node.subtree.is_some() {
        return Ok((
            Resolved {
                id,
                snap,
                folder: Some((path, node)),
            },
            None,
        ));
    }
    let name = name.to_vec();
    let folder = folder.map(|f| (parent.to_vec(), f));
    Ok((Resolved { id, snap, folder }, Some(name)))
}

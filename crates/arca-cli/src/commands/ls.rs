//! `arca ls`: list a snapshot's entries, optionally below a path.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use arca_format::text::{TimeStyle, entry_time, shown};
use arca_format::{Id, Node, NodeKind, Timespec};
use arca_repo::{Index, Repository};
use serde_json::json;

use crate::cli::{Global, LsArgs};
use crate::util::{self, mode_string};

fn time(t: Timespec) -> String {
    entry_time(t, TimeStyle::Rfc3339)
}

/// The JSON form of a node (shared with `cat tree`).
pub fn node_json(n: &Node, path: Option<&Path>) -> serde_json::Value {
    let mut v = json!({
        "name": String::from_utf8_lossy(&n.name),
        "type": n.kind().name(),
        "mode": n.mode,
        "permissions": mode_string(n.kind(), n.mode),
        "uid": n.uid,
        "gid": n.gid,
        "user": String::from_utf8_lossy(&n.user),
        "group": String::from_utf8_lossy(&n.group),
        "size": n.size,
        "mtime": time(n.mtime),
        "atime": time(n.atime),
        "ctime": time(n.ctime),
        "inode": n.inode,
        "device_id": n.dev,
        "links": n.nlink,
    });
    let Some(m) = v.as_object_mut() else { return v };
    if let Some(p) = path {
        m.insert("path".into(), json!(p.to_string_lossy()));
    }
    if n.kind() == NodeKind::Symlink {
        m.insert(
            "link_target".into(),
            json!(String::from_utf8_lossy(&n.link_target)),
        );
    }
    if matches!(n.kind(), NodeKind::CharDev | NodeKind::BlockDev) {
        m.insert("rdev".into(), json!(n.rdev));
    }
    if !n.xattrs.is_empty() {
        let x: Vec<_> = n
            .xattrs
            .iter()
            .map(|(k, v)| json!({"name": String::from_utf8_lossy(k), "size": v.len()}))
            .collect();
        m.insert("xattrs".into(), json!(x));
    }
    if let Some(s) = n.subtree {
        m.insert("subtree".into(), json!(s.to_hex()));
    }
    if n.kind() == NodeKind::File {
        let c: Vec<_> = n
            .content
            .iter()
            .map(|c| json!({"id": c.id.to_hex(), "length": c.len}))
            .collect();
        m.insert("content".into(), json!(c));
    }
    v
}

/// The `ls -l` line of a node at `path` (shared with `find --long`).
pub(crate) fn long_line(n: &Node, path: &Path) -> Vec<u8> {
    let owner = |name: &[u8], id: u32| {
        if name.is_empty() {
            id.to_string()
        } else {
            String::from_utf8_lossy(name).into_owned()
        }
    };
    let t = entry_time(n.mtime, TimeStyle::Short);
    let mut line = format!(
        "{} {:>8} {:>8} {:>12} {} ",
        mode_string(n.kind(), n.mode),
        owner(&n.user, n.uid),
        owner(&n.group, n.gid),
        n.size,
        t
    )
    .into_bytes();
    line.extend_from_slice(path.as_os_str().as_bytes());
    if n.kind() == NodeKind::Symlink {
        line.extend_from_slice(b" -> ");
        line.extend_from_slice(&n.link_target);
    }
    line
}

struct Lister<'a> {
    repo: &'a Repository,
    index: &'a Index,
    /// The snapshot listed, named when a listing cannot be read.
    snapshot: Id,
    long: bool,
    json: bool,
    /// Folder listings below the one asked for that could not be read: named, and left out.
    skipped: std::cell::Cell<usize>,
}

impl Lister<'_> {
    fn print(&self, n: &Node, path: &Path) -> Result<()> {
        if self.json {
            let mut v = node_json(n, Some(path));
            if let Some(m) = v.as_object_mut() {
                m.insert("message_type".into(), json!("node"));
                // restic's older name for it, which many scripts still key on.
                m.insert("struct_type".into(), json!("node"));
                m.remove("content");
            }
            return super::out(&v.to_string());
        }
        if !self.long {
            return super::out_bytes(path.as_os_str().as_bytes());
        }
        super::out_bytes(&long_line(n, path))
    }

    /// Prints the entries of folder `tree` at `dir`, and with `deep` everything below them.
    /// Walked with a stack of listings and one path buffer, grown and cut back as the walk
    /// goes down and up: a frame per level holding its own full path took memory growing
    /// with the square of the depth (400 MB for 2,000 levels of 200-byte names).
    fn walk(&self, tree: &Id, dir: &Path, deep: bool) -> Result<()> {
        let mut path: Vec<u8> = dir.as_os_str().as_bytes().to_vec();
        // A listing that cannot be read is named with its folder and snapshot, as `find`
        // names it (only the pack's read error was said).
        let load = |tree: &Id, at: &[u8]| {
            self.repo.load_tree(self.index, tree).with_context(|| {
                format!(
                    "cannot read the listing of {} in snapshot {}",
                    shown(Path::new(OsStr::from_bytes(at))),
                    self.snapshot.short()
                )
            })
        };
        let nodes = load(tree, &path)?.nodes;
        let mut stack = vec![(nodes.into_iter(), path.len())];
        while let Some((nodes, len)) = stack.last_mut() {
            let len = *len;
            let Some(n) = nodes.next() else {
                stack.pop();
                continue;
            };
            path.truncate(len);
            if path.last() != Some(&b'/') {
                path.push(b'/');
            }
            path.extend_from_slice(&n.name);
            self.print(&n, Path::new(OsStr::from_bytes(&path)))?;
            if let Some(s) = n.subtree.filter(|_| deep) {
                // A folder whose listing cannot be read is named and left out; the rest is
                // listed (everything after it was dropped).
                match load(&s, &path) {
                    Ok(t) => stack.push((t.nodes.into_iter(), path.len())),
                    Err(e) => {
                        self.skipped.set(self.skipped.get() + 1);
                        crate::progress::warn(&format!("arca: {}; left out", crate::one_line(&e)));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The names of path `p`, without `/`, `.` or an empty name, `..` taking the name before it
/// away (as restic cleans the path: `/a/b/..` is `/a`; it was dropped, listing `/a/b`).
fn names(p: &Path) -> Vec<&OsStr> {
    let mut out = vec![];
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// For each path given to `ls`, whether it is listed and whether its own line is printed, so
/// that every entry is printed once however the paths overlap, as restic's `ls` does (it walks
/// the snapshot once): a path given twice, or (with `deep`) below another one given, is left
/// out; one whose parent folder is given too is not printed again as itself.
fn plan(listed: &[PathBuf], deep: bool) -> Vec<(bool, bool)> {
    let all: Vec<Vec<&OsStr>> = listed.iter().map(|p| names(p)).collect();
    all.iter()
        .enumerate()
        .map(|(i, p)| {
            let again = all[..i].contains(p);
            let below = |q: &Vec<&OsStr>| q.len() < p.len() && p.starts_with(q);
            let covered = deep && all.iter().any(below);
            let parent_given = !p.is_empty() && all.iter().any(|q| q[..] == p[..p.len() - 1]);
            (!again && !covered, !parent_given)
        })
        .collect()
}

/// Lists `start` of snapshot `id` (root `root`): a file itself (unless not `print_self`), a
/// folder with its entries (everything below it when `deep`), as restic's `ls` does.
fn list_path(
    repo: &Repository,
    index: &Index,
    l: &Lister<'_>,
    (id, root): (&Id, Id),
    (start, print_self): (&Path, bool),
    deep: bool,
    hint: &dyn Fn(&Path) -> String,
) -> Result<()> {
    let mut tree = root;
    let mut here = PathBuf::from("/");
    let comps = names(start);
    if comps.is_empty() {
        return l.walk(&root, Path::new("/"), deep);
    }
    // `file/.` names a folder as `file/` does (path components drop the `.`).
    let raw = start.as_os_str().as_bytes();
    let folder_asked = raw.ends_with(b"/") || raw.ends_with(b"/.");
    for (i, name) in comps.iter().enumerate() {
        let t = repo.load_tree(index, &tree).with_context(|| {
            format!(
                "cannot read the listing of {} in snapshot {}",
                shown(&here),
                id.short()
            )
        })?;
        let Some(n) = t.find(name.as_bytes()) else {
            bail!(
                "{} is not in snapshot {}{}",
                shown(start),
                id.short(),
                hint(start)
            );
        };
        here.push(name);
        let last = i + 1 == comps.len();
        match (n.subtree, last) {
            (Some(s), true) => {
                if print_self {
                    l.print(n, &here)?;
                }
                l.walk(&s, &here, deep)?;
            }
            (Some(s), false) => tree = s,
            (None, true) if folder_asked => {
                bail!(
                    "{} is not a folder in snapshot {}",
                    shown(start),
                    id.short()
                )
            }
            (None, true) if print_self => l.print(n, &here)?,
            (None, true) => {}
            (None, false) => bail!(
                "{} is not in snapshot {}{}",
                shown(start),
                id.short(),
                hint(start)
            ),
        }
    }
    Ok(())
}

pub fn run(g: &Global, a: &LsArgs) -> Result<u8> {
    let opened = util::open(g)?;
    let repo = &opened.repo;
    // As restic's: a shared lock, so that no prune or forget deletes what is being read
    // (one ran under an `ls` and it failed with "No such file").
    let _lock = util::lock(g, repo, arca_repo::LockKind::Shared, "ls")?;
    // `ID:SUBFOLDER` (as restic): that folder is listed as the root. The snapshot is found
    // before the index is read (see subfolder::find).
    let spec = OsStr::new(&a.snapshot);
    let found = super::subfolder::find(repo, spec, &super::filter(&a.filter))?;
    let index = repo.load_index()?;
    let resolved = super::subfolder::resolve(repo, &index, found)?;
    let (id, mut snap) = (resolved.id, resolved.snap.clone());
    snap.tree = resolved.tree();
    let l = Lister {
        repo,
        index: &index,
        snapshot: id,
        long: a.long,
        json: a.json,
        skipped: std::cell::Cell::new(0),
    };
    // Finished, but some folders could not be listed: exit 3, as restore and find.
    let partly = |code: u8| -> Result<u8> {
        let n = l.skipped.get();
        if n == 0 || code != 0 {
            return Ok(code);
        }
        Ok(super::left_out_listings(n, "listed"))
    };
    if a.json {
        let mut v = serde_json::to_value(&snap)?;
        if let Some(m) = v.as_object_mut() {
            m.insert("message_type".into(), json!("snapshot"));
            m.insert("struct_type".into(), json!("snapshot"));
            m.insert("id".into(), json!(id.to_hex()));
            m.insert("short_id".into(), json!(id.short()));
        }
        super::out(&v.to_string())?;
    }
    if a.listed.is_empty() {
        l.walk(&snap.tree, Path::new("/"), true)?;
        return partly(0);
    }
    let hint = |p: &Path| resolved.missing_hint(repo, &index, p.as_os_str().as_bytes());
    // A path that is not there is named, and the others are listed still (as restic lists
    // what it finds): one missing path listed nothing at all. Exit 1 all the same.
    let mut failed = 0;
    for (start, (list, print_self)) in a.listed.iter().zip(plan(&a.listed, a.recursive)) {
        if list {
            let start = (start.as_path(), print_self);
            let listed = list_path(
                repo,
                &index,
                &l,
                (&id, snap.tree),
                start,
                a.recursive,
                &hint,
            );
            match listed {
                Ok(()) => {}
                // Output that cannot be written ends it (a closed pipe is no error).
                Err(e) if e.downcast_ref::<std::io::Error>().is_some() => return Err(e),
                Err(e) => {
                    failed += 1;
                    crate::progress::warn(&format!("arca: {}", crate::one_line(&e)));
                }
            }
        }
    }
    partly(if failed > 0 { 1 } else { 0 })
}

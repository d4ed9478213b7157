//! Damage `check` found in packs, by pack and by blob, and the snapshot paths it reaches (a
//! file or folder whose blobs are lost cannot be restored intact).

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use arca_format::{BlobKind, Id};
use arca_repo::{Index, Repository};

use super::{CheckReport, DamagedPack};

#[derive(Default)]
pub(super) struct Damage {
    pub(super) packs: HashMap<Id, DamagedPack>,
    pub(super) blobs: HashSet<(BlobKind, Id)>,
    /// Each damaged blob with the pack it is damaged in (a blob stored twice may be damaged
    /// in one pack only).
    pub(super) in_pack: HashSet<(Id, BlobKind, Id)>,
}

impl Damage {
    pub(super) fn mark(
        &mut self,
        rep: &mut CheckReport,
        pack: &Id,
        problem: String,
        blobs: &mut dyn Iterator<Item = (BlobKind, Id)>,
    ) {
        rep.errors.push(format!("pack {pack}: {problem}"));
        let d = self.packs.entry(*pack).or_insert_with(|| DamagedPack {
            id: *pack,
            problems: vec![],
            bad_blobs: vec![],
        });
        d.problems.push(problem);
        for b in blobs {
            self.blobs.insert(b);
            if self.in_pack.insert((*pack, b.0, b.1)) {
                d.bad_blobs.push(b.1);
            }
        }
    }
}

pub(super) fn affected_paths(
    repo: &Repository,
    index: &Index,
    tree: &Id,
    dir: &Path,
    bad: &HashSet<(BlobKind, Id)>,
    out: &mut Vec<PathBuf>,
) {
    if bad.contains(&(BlobKind::Tree, *tree)) {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(t) = repo.load_tree(index, tree) else {
        out.push(dir.to_path_buf());
        return;
    };
    for n in &t.nodes {
        let p = dir.join(OsStr::from_bytes(&n.name));
        if let Some(sub) = n.subtree {
            affected_paths(repo, index, &sub, &p, bad, out);
        } else if n.content.iter().any(|c| {
            bad.contains(&(BlobKind::Data, c.id))
                || index
                    .get(BlobKind::Data, &c.id)
                    .is_some_and(|l| l.raw_length != c.len)
        }) {
            out.push(p);
        }
    }
}

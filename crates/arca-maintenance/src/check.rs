//! `check`: structural verification and, optionally, reading every pack.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use arca_backend::FileType;
use arca_format::{BlobKind, Id, IndexFile, IndexPack, Snapshot, Tree};
use arca_repo::pack::pack_header_from_bytes;
use arca_repo::{Index, IndexBuilder, RepoError, Repository};

/// What to check.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    /// Read, decrypt and verify every blob of every pack.
    pub read_data: bool,
    /// Threads reading packs (0 = one per core).
    pub workers: usize,
}

/// A pack with problems.
#[derive(Debug, Clone)]
pub struct DamagedPack {
    /// Pack id.
    pub id: Id,
    /// What is wrong with it.
    pub problems: Vec<String>,
    /// Blobs that cannot be read from it.
    pub bad_blobs: Vec<Id>,
}

/// A snapshot whose content is damaged.
#[derive(Debug, Clone)]
pub struct Affected {
    /// Snapshot id.
    pub snapshot: Id,
    /// Paths in the snapshot that cannot be restored intact.
    pub paths: Vec<PathBuf>,
}

/// The result of a check.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// Errors: damage or inconsistencies.
    pub errors: Vec<String>,
    /// Notes that are not damage (e.g. packs no index names yet).
    pub notes: Vec<String>,
    /// Snapshots checked.
    pub snapshots: usize,
    /// Distinct trees checked.
    pub trees: usize,
    /// Packs checked.
    pub packs: usize,
    /// Blobs verified by reading (with `read_data`).
    pub blobs_read: u64,
    /// Bytes read from packs (with `read_data`).
    pub bytes_read: u64,
    /// Damaged or missing packs.
    pub damaged_packs: Vec<DamagedPack>,
    /// Snapshots and paths hit by damage.
    pub affected: Vec<Affected>,
}

impl CheckReport {
    /// Whether no damage was found.
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Checks the repository.
pub fn check(repo: &Repository, opts: CheckOptions) -> Result<CheckReport, RepoError> {
    let mut rep = CheckReport::default();
    // Index files.
    let mut builder = IndexBuilder::new();
    let mut index_files: Vec<(Id, IndexFile)> = vec![];
    for (id, f) in repo.load_index_files()? {
        match f {
            Ok(f) => {
                builder.add(&f);
                index_files.push((id, f));
            }
            Err(e) => rep.errors.push(format!("index {id}: {e}")),
        }
    }
    let index = builder.finish();
    // Packs: existence and size.
    let on_disk: HashMap<Id, u64> = repo.list_ids(FileType::Pack)?.into_iter().collect();
    let mut dmg = Damage::default();
    // Each pack once, even when several index files list it.
    let mut indexed: HashSet<Id> = HashSet::new();
    let packs: Vec<&IndexPack> = index_files
        .iter()
        .flat_map(|(_, f)| &f.packs)
        .filter(|p| indexed.insert(p.id))
        .collect();
    for p in &packs {
        let blobs = || p.blobs.iter().map(|b| (p.kind, b.id));
        match on_disk.get(&p.id) {
            None => dmg.mark(
                &mut rep,
                &p.id,
                "missing (listed in an index)".into(),
                &mut blobs(),
            ),
            Some(&size) if size != p.size => dmg.mark(
                &mut rep,
                &p.id,
                format!(
                    "size is {size} bytes, index says {} (truncated or damaged)",
                    p.size
                ),
                &mut blobs(),
            ),
            Some(_) => {}
        }
    }
    rep.packs = packs.len();
    for id in on_disk.keys() {
        if !indexed.contains(id) {
            rep.notes.push(format!(
                "pack {id} is not in any index (left by an interrupted backup; harmless)"
            ));
        }
    }
    // Snapshots and trees.
    let mut snapshots: Vec<(Id, Snapshot)> = vec![];
    for (id, _) in repo.list_ids(FileType::Snapshot)? {
        match repo.load_snapshot(&id) {
            Ok(s) => snapshots.push((id, s)),
            Err(e) => rep.errors.push(format!("snapshot {id}: {e}")),
        }
    }
    rep.snapshots = snapshots.len();
    let mut seen_trees: HashSet<Id> = HashSet::new();
    let mut missing_blobs: HashSet<(BlobKind, Id)> = HashSet::new();
    for (sid, s) in &snapshots {
        let mut stack = vec![s.tree];
        while let Some(tid) = stack.pop() {
            if !seen_trees.insert(tid) {
                continue;
            }
            let tree = match load_tree_checked(repo, &index, &tid) {
                Ok(t) => t,
                Err(e) => {
                    rep.errors
                        .push(format!("snapshot {}: tree {tid}: {e}", sid.short()));
                    missing_blobs.insert((BlobKind::Tree, tid));
                    continue;
                }
            };
            for n in &tree.nodes {
                if let Some(sub) = n.subtree {
                    stack.push(sub);
                }
                for c in &n.content {
                    if !index.contains(BlobKind::Data, &c.id)
                        && missing_blobs.insert((BlobKind::Data, c.id))
                    {
                        rep.errors
                            .push(format!("data blob {} is not in the index", c.id));
                    }
                }
            }
        }
    }
    rep.trees = seen_trees.len();
    // Data.
    if opts.read_data {
        let results = read_all_packs(repo, &packs, &on_disk, &dmg.packs, opts.workers);
        for r in results {
            rep.blobs_read += r.blobs;
            rep.bytes_read += r.bytes;
            for (problem, blobs) in r.problems {
                dmg.mark(&mut rep, &r.id, problem, &mut blobs.into_iter());
            }
        }
    }
    // Which snapshots and files are hit.
    let bad: HashSet<(BlobKind, Id)> = dmg.blobs.union(&missing_blobs).copied().collect();
    if !bad.is_empty() {
        for (sid, s) in &snapshots {
            let mut paths = vec![];
            affected_paths(repo, &index, &s.tree, Path::new("/"), &bad, &mut paths);
            if !paths.is_empty() {
                rep.affected.push(Affected {
                    snapshot: *sid,
                    paths,
                });
            }
        }
    }
    rep.damaged_packs = dmg.packs.into_values().collect();
    rep.damaged_packs.sort_by_key(|d| d.id);
    Ok(rep)
}

#[derive(Default)]
struct Damage {
    packs: HashMap<Id, DamagedPack>,
    blobs: HashSet<(BlobKind, Id)>,
}

impl Damage {
    fn mark(
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
            if self.blobs.insert(b) {
                d.bad_blobs.push(b.1);
            }
        }
    }
}

fn load_tree_checked(repo: &Repository, index: &Index, id: &Id) -> Result<Tree, RepoError> {
    if !index.contains(BlobKind::Tree, id) {
        return Err(RepoError::BlobNotFound {
            kind: BlobKind::Tree,
            id: *id,
        });
    }
    repo.load_tree(index, id)
}

fn affected_paths(
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
        } else if n
            .content
            .iter()
            .any(|c| bad.contains(&(BlobKind::Data, c.id)))
        {
            out.push(p);
        }
    }
}

struct PackResult {
    id: Id,
    blobs: u64,
    bytes: u64,
    problems: Vec<(String, Vec<(BlobKind, Id)>)>,
}

fn read_all_packs(
    repo: &Repository,
    packs: &[&IndexPack],
    on_disk: &HashMap<Id, u64>,
    already: &HashMap<Id, DamagedPack>,
    workers: usize,
) -> Vec<PackResult> {
    let packs: Vec<&IndexPack> = packs
        .iter()
        .copied()
        .filter(|p| on_disk.contains_key(&p.id) && !already.contains_key(&p.id))
        .collect();
    let workers = if workers == 0 {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    } else {
        workers
    }
    .min(packs.len().max(1));
    let next = AtomicUsize::new(0);
    let out = Mutex::new(vec![]);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = packs.get(i) else { break };
                    let r = check_pack(repo, p);
                    out.lock().unwrap_or_else(|e| e.into_inner()).push(r);
                }
            });
        }
    });
    out.into_inner().unwrap_or_else(|e| e.into_inner())
}

fn check_pack(repo: &Repository, p: &IndexPack) -> PackResult {
    let mut r = PackResult {
        id: p.id,
        blobs: 0,
        bytes: 0,
        problems: vec![],
    };
    let all = || p.blobs.iter().map(|b| (p.kind, b.id)).collect::<Vec<_>>();
    let bytes = match repo.backend().read(FileType::Pack, &p.id.to_hex()) {
        Ok(b) => b,
        Err(e) => {
            r.problems.push((format!("cannot be read: {e}"), all()));
            return r;
        }
    };
    r.bytes = bytes.len() as u64;
    if Id(*blake3::hash(&bytes).as_bytes()) != p.id {
        r.problems
            .push(("content does not match its id (corrupted)".into(), vec![]));
    }
    if let Err(e) = header_matches(repo, p, &bytes) {
        r.problems.push((format!("header: {e}"), vec![]));
    }
    let mut bad = vec![];
    let mut first_err = None;
    for b in &p.blobs {
        let start = b.offset as usize;
        let end = start + b.length as usize;
        let res = match bytes.get(start..end) {
            Some(sealed) => repo
                .open_blob(p.kind, &b.id, &p.id, sealed, b.raw_length)
                .map(|_| ()),
            None => Err(RepoError::BlobCorrupt {
                kind: p.kind,
                id: b.id,
                pack: p.id,
                detail: "beyond the end of the pack".into(),
            }),
        };
        r.blobs += 1;
        if let Err(e) = res {
            first_err.get_or_insert(e.to_string());
            bad.push((p.kind, b.id));
        }
    }
    if !bad.is_empty() {
        r.problems.push((
            format!(
                "{} of {} blobs damaged (first: {})",
                bad.len(),
                p.blobs.len(),
                first_err.unwrap_or_default()
            ),
            bad,
        ));
    }
    r
}

fn header_matches(repo: &Repository, p: &IndexPack, bytes: &[u8]) -> Result<(), String> {
    let h = pack_header_from_bytes(repo.sealer(), &p.id, bytes).map_err(|e| e.to_string())?;
    if h.kind != p.kind || h.entries != p.blobs {
        return Err("does not match the index".into());
    }
    Ok(())
}

//! Index and prune planning at scale, over a synthetic repository.
//!
//! ```text
//! cargo run --release -p arca-maintenance --example index_scale -- --blobs 10000000
//!     [--blobs-per-pack 1000] [--index-files 250] [--dir PATH] [--keep] [--no-drop-caches]
//! ```
//!
//! Builds a repository in a local folder (`--dir`, default a fresh folder under the system's
//! temporary directory, deleted at the end unless `--keep`):
//!
//! * `--blobs` data blobs in packs of `--blobs-per-pack` (random ids, sealed lengths of 8 to
//!   24 KiB, so about 16 MiB per pack of 1000), listed by `--index-files` index files written
//!   with `Repository::save_index` as backups write them. The data packs are sparse files of
//!   the indexed size: planning lists them and compares sizes but never reads data packs;
//! * one snapshot whose trees (real, sealed tree blobs in real tree packs, in one more index
//!   file) reference about half of the data blobs: pack `p` has its first `(p mod 11) / 10`
//!   of blobs used, so that planning finds packs to delete (none used), to repack (partly
//!   used) and to keep (all used), in files of 100 chunks, 100 files per directory.
//!
//! Then, after dropping the page cache (when permitted), a fresh process (this program with
//! `--measure DIR`, with the allocator set up as `arca` sets it) opens the repository and
//! measures:
//!
//! * `Repository::load_index`: wall time, and the process's RSS before and after
//!   (`/proc/self/status` `VmRSS`) and its peak (`VmHWM`): bytes per blob = growth / blobs;
//! * `prune::plan` with the default options (what `arca prune` does before changing
//!   anything: list packs, walk the snapshot's trees from the cold tree packs, mark the used
//!   blobs, decide per pack): wall time, and RSS again;
//! * the marking core alone: one `Index::positions` lookup per used blob, as the walk makes.
//!
//! Prints one JSON line with every figure (the harness, `bench/run --maintenance-only`,
//! records it). Progress goes to stderr.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use arca_backend::{Backend, FileType, LocalBackend};
use arca_format::{
    BlobKind, ContentRef, Id, IndexFile, IndexPack, KdfParams, Node, NodeKind, PackEntry, Snapshot,
    Tree,
};
use arca_maintenance::prune::{self, PruneOptions};
use arca_repo::blob::seal_blob;
use arca_repo::pack::PackWriter;
use arca_repo::{InitOptions, Repository};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const PASSWORD: &[u8] = b"index-scale";
/// Chunks per synthetic file, files per directory.
const CHUNKS_PER_FILE: usize = 100;
const FILES_PER_DIR: usize = 100;
/// Target size of the tree packs.
const TREE_PACK: usize = 16 << 20;

struct Args {
    blobs: u64,
    per_pack: u64,
    index_files: u64,
    dir: Option<PathBuf>,
    keep: bool,
    drop_caches: bool,
    measure: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        blobs: 1_000_000,
        per_pack: 1000,
        index_files: 250,
        dir: None,
        keep: false,
        drop_caches: true,
        measure: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--blobs" => a.blobs = value()?.replace('_', "").parse()?,
            "--blobs-per-pack" => a.per_pack = value()?.parse()?,
            "--index-files" => a.index_files = value()?.parse()?,
            "--dir" => a.dir = Some(value()?.into()),
            "--measure" => a.measure = Some(value()?.into()),
            "--keep" => a.keep = true,
            "--no-drop-caches" => a.drop_caches = false,
            "-h" | "--help" => {
                eprintln!(
                    "index_scale [--blobs N] [--blobs-per-pack N] [--index-files N] [--dir PATH] \
                     [--keep] [--no-drop-caches]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if a.blobs == 0 || a.per_pack == 0 || a.index_files == 0 {
        return Err("--blobs, --blobs-per-pack and --index-files must be positive".into());
    }
    Ok(a)
}

/// A uniform 32-byte id from a domain and a number.
fn synth_id(domain: &[u8], n: u64) -> Id {
    let mut h = blake3::Hasher::new();
    h.update(domain);
    h.update(&n.to_le_bytes());
    Id(*h.finalize().as_bytes())
}

/// Data blob `n`: its id and sealed length (8 to 24 KiB).
fn blob(n: u64) -> (Id, u32) {
    let id = synth_id(b"arca index_scale blob", n);
    let b = id.as_bytes();
    let jitter = u32::from(u16::from_le_bytes([b[30], b[31]])) % (16 << 10);
    (id, (8 << 10) + jitter)
}

/// Blobs of pack `p` that the snapshot uses: its first `(p mod 11) / 10` (all for 10).
fn used_in_pack(p: u64, blobs_in_pack: u64) -> u64 {
    (blobs_in_pack * (p % 11)).div_ceil(10).min(blobs_in_pack)
}

/// (VmRSS, VmHWM) of this process in bytes.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn drop_caches() -> bool {
    // sync(1), then the procfs knob; false when not permitted.
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok()
}

fn dir_bytes(p: &Path) -> (u64, u64) {
    let (mut n, mut bytes) = (0, 0);
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            if let Ok(m) = e.metadata() {
                n += 1;
                bytes += m.len();
            }
        }
    }
    (n, bytes)
}

/// Tree blobs of the snapshot being built, packed as they come.
struct Trees<'a> {
    repo: &'a Repository,
    backend: &'a Arc<LocalBackend>,
    writer: PackWriter,
    packs: Vec<IndexPack>,
    blobs: u64,
    bytes: u64,
}

impl Trees<'_> {
    fn store(&mut self, mut nodes: Vec<Node>) -> Result<Id> {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let plain = Tree { nodes }.encode()?;
        let id = self.repo.key().blob_id(&plain);
        let sealed = seal_blob(self.repo.sealer(), BlobKind::Tree, id, &plain, 3)?;
        self.writer.add(&sealed)?;
        self.blobs += 1;
        self.bytes += plain.len() as u64;
        if self.writer.size() >= TREE_PACK {
            self.cut()?;
        }
        Ok(id)
    }

    fn cut(&mut self) -> Result<()> {
        let w = std::mem::replace(&mut self.writer, PackWriter::new(BlobKind::Tree, TREE_PACK));
        if w.is_empty() {
            return Ok(());
        }
        let p = w.finish(self.repo.sealer())?;
        self.backend
            .write(FileType::Pack, &p.id.to_hex(), &p.bytes)?;
        self.packs.push(p.index);
        Ok(())
    }
}

fn file_node(n: u64, content: Vec<ContentRef>) -> Node {
    Node {
        name: format!("f{n:06}").into_bytes(),
        kind: Some(NodeKind::File),
        mode: 0o644,
        size: content.iter().map(|c| u64::from(c.len)).sum(),
        content,
        ..Node::default()
    }
}

fn dir_node(n: u64, subtree: Id) -> Node {
    Node {
        name: format!("d{n:06}").into_bytes(),
        kind: Some(NodeKind::Dir),
        mode: 0o755,
        subtree: Some(subtree),
        ..Node::default()
    }
}

/// Writes the synthetic repository; returns its figures as JSON fields.
fn generate(a: &Args, root: &Path) -> Result<String> {
    let t0 = Instant::now();
    let backend = Arc::new(LocalBackend::new(root));
    let opts = InitOptions {
        kdf: KdfParams {
            memory_kib: 1024,
            iterations: 1,
            parallelism: 1,
        },
        ..InitOptions::default()
    };
    let repo = Repository::init(backend.clone(), PASSWORD, &opts)?;
    let packs = a.blobs.div_ceil(a.per_pack);
    let packs_per_file = packs.div_ceil(a.index_files);
    let mut trees = Trees {
        repo: &repo,
        backend: &backend,
        writer: PackWriter::new(BlobKind::Tree, TREE_PACK),
        packs: vec![],
        blobs: 0,
        bytes: 0,
    };
    let (mut file, mut dir, mut root_nodes) = (vec![], vec![], vec![]);
    let (mut files, mut dirs, mut used) = (0u64, 0u64, 0u64);
    let mut index = IndexFile::default();
    let mut index_files = 0u64;
    let mut next_blob = 0u64;
    for p in 0..packs {
        let n = a.per_pack.min(a.blobs - next_blob);
        let mut offset = 8u32;
        let mut entries = Vec::with_capacity(n as usize);
        let use_first = used_in_pack(p, n);
        for j in 0..n {
            let (id, length) = blob(next_blob);
            next_blob += 1;
            entries.push(PackEntry {
                id,
                offset,
                length,
                raw_length: length - 40,
            });
            offset += length;
            if j < use_first {
                used += 1;
                file.push(ContentRef {
                    id,
                    len: length - 40,
                });
                if file.len() == CHUNKS_PER_FILE {
                    dir.push(file_node(files, std::mem::take(&mut file)));
                    files += 1;
                    if dir.len() == FILES_PER_DIR {
                        let id = trees.store(std::mem::take(&mut dir))?;
                        root_nodes.push(dir_node(dirs, id));
                        dirs += 1;
                    }
                }
            }
        }
        let id = synth_id(b"arca index_scale pack", p);
        let size = u64::from(offset) + n * 44 + 67;
        let path = root.join(FileType::Pack.path(&id.to_hex()));
        std::fs::File::create(&path)?.set_len(size)?; // sparse: never read by planning
        index.packs.push(IndexPack {
            id,
            kind: BlobKind::Data,
            size,
            blobs: entries,
        });
        if index.packs.len() as u64 == packs_per_file || p + 1 == packs {
            repo.save_index(&index)?;
            index.packs.clear();
            index_files += 1;
            if index_files.is_multiple_of(25) {
                eprintln!("{index_files} index files, {next_blob} blobs");
            }
        }
    }
    eprintln!();
    if !file.is_empty() {
        dir.push(file_node(files, std::mem::take(&mut file)));
        files += 1;
    }
    if !dir.is_empty() {
        let id = trees.store(std::mem::take(&mut dir))?;
        root_nodes.push(dir_node(dirs, id));
        dirs += 1;
    }
    let data = trees.store(root_nodes)?;
    let top = trees.store(vec![dir_node(0, data)])?;
    trees.cut()?;
    let tree_packs = trees.packs.len();
    repo.save_index(&IndexFile {
        supersedes: vec![],
        packs: std::mem::take(&mut trees.packs),
    })?;
    index_files += 1;
    repo.save_snapshot(&Snapshot {
        time: chrono::Utc::now().fixed_offset(),
        tree: top,
        paths: vec!["/d000000".into()],
        hostname: "index-scale".into(),
        username: "bench".into(),
        uid: 0,
        gid: 0,
        tags: vec![],
        parent: None,
        original: None,
        copied_tree: None,
        program_version: "index_scale".into(),
        complete: true,
        summary: Default::default(),
    })?;
    let (_, index_bytes) = dir_bytes(&root.join("index"));
    Ok(format!(
        "\"blobs\":{},\"blobs_per_pack\":{},\"data_packs\":{packs},\"index_files\":{index_files},\
         \"index_bytes\":{index_bytes},\"snapshot_used_blobs\":{used},\"files\":{files},\
         \"dirs\":{dirs},\"tree_blobs\":{},\"tree_bytes\":{},\"tree_packs\":{tree_packs},\
         \"generate_s\":{:.3}",
        a.blobs,
        a.per_pack,
        trees.blobs,
        trees.bytes,
        t0.elapsed().as_secs_f64()
    ))
}

/// The measuring process: load the index, plan a prune, look every used blob up.
fn measure(root: &Path, blobs: u64, per_pack: u64) -> Result<()> {
    let backend = Arc::new(LocalBackend::new(root));
    let repo = Repository::open(backend, PASSWORD)?;
    let (rss0, hwm0) = memory();
    let t = Instant::now();
    let index = repo.load_index()?;
    let load_s = t.elapsed().as_secs_f64();
    let (rss1, hwm1) = memory();
    let t = Instant::now();
    let plan = prune::plan(&repo, &index, &PruneOptions::default())?;
    let plan_s = t.elapsed().as_secs_f64();
    let (rss2, hwm2) = memory();
    // The marking core: one lookup per used blob (ids regenerated first, not timed).
    let mut ids = vec![];
    let packs = blobs.div_ceil(per_pack);
    for p in 0..packs {
        let n = per_pack.min(blobs - p * per_pack);
        for j in 0..used_in_pack(p, n) {
            ids.push(blob(p * per_pack + j).0);
        }
    }
    let t = Instant::now();
    let mut found = 0u64;
    for id in &ids {
        found += index.positions(BlobKind::Data, id).count() as u64;
    }
    let lookup_s = t.elapsed().as_secs_f64();
    let s = &plan.stats;
    println!(
        "{{\"load_s\":{load_s:.3},\"rss_before\":{rss0},\"hwm_before\":{hwm0},\
         \"rss_after_load\":{rss1},\"hwm_after_load\":{hwm1},\"index_len\":{},\
         \"index_memory_bytes\":{},\"plan_s\":{plan_s:.3},\"rss_after_plan\":{rss2},\
         \"hwm_after_plan\":{hwm2},\"plan_snapshots\":{},\"plan_trees\":{},\
         \"plan_used_blobs\":{},\"plan_unused_blobs\":{},\"packs_keep\":{},\"packs_repack\":{},\
         \"packs_delete\":{},\"plan_freed_bytes\":{},\"lookups\":{},\"lookups_found\":{found},\
         \"lookup_s\":{lookup_s:.3}}}",
        index.len(),
        index.memory_bytes(),
        s.snapshots,
        s.trees,
        s.used_blobs,
        s.unused_blobs,
        s.keep.packs,
        s.repack.packs,
        s.delete.packs,
        s.freed_bytes,
        ids.len(),
    );
    Ok(())
}

fn main() -> Result<()> {
    // The allocator as `arca` sets it up: the figures are the program's.
    arca_repo::alloc::return_large_buffers();
    let a = parse_args()?;
    if let Some(root) = &a.measure {
        return measure(root, a.blobs, a.per_pack);
    }
    let root = a.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("arca-index-scale-{}", std::process::id()))
    });
    if root.exists() {
        std::fs::remove_dir_all(&root)?;
    }
    eprintln!(
        "writing a synthetic repository of {} blobs in {}",
        a.blobs,
        root.display()
    );
    let result = (|| -> Result<String> {
        let generated = generate(&a, &root)?;
        let dropped = a.drop_caches && drop_caches();
        eprintln!("measuring in a fresh process (page cache dropped: {dropped})");
        let out = Command::new(std::env::current_exe()?)
            .arg("--measure")
            .arg(&root)
            .args(["--blobs", &a.blobs.to_string()])
            .args(["--blobs-per-pack", &a.per_pack.to_string()])
            .stderr(std::process::Stdio::inherit())
            .output()?;
        if !out.status.success() {
            return Err(format!("the measuring process failed ({})", out.status).into());
        }
        let measured = String::from_utf8(out.stdout)?;
        let measured = measured
            .trim()
            .trim_start_matches('{')
            .trim_end_matches('}');
        Ok(format!(
            "{{{generated},\"caches_dropped\":{dropped},{measured}}}"
        ))
    })();
    if !a.keep {
        let _ = std::fs::remove_dir_all(&root);
    }
    println!("{}", result?);
    Ok(())
}

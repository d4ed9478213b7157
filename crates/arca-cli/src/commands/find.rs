//! `arca find`: the entries matching patterns across snapshots, or the files and folders that
//! use given blobs, trees or packs (restic's `find`); each distinct listing is searched once.

use std::ffi::OsStr;
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::Result;
use arca_browse::find::{FindError, Finder, Hit, NameQuery, ObjectKind, Query, Wanted, parse_time};
use arca_format::{BlobKind, Id, Snapshot};
use arca_repo::{Index, Repository};
use clap::Args;
use serde_json::json;

use crate::cli::{FilterArgs, Global};
use crate::util;

/// Options of `arca find`.
#[derive(Debug, Args)]
pub struct FindArgs {
    /// Patterns: a glob on the entry's name (`*`, `?`, `[...]`), or on its whole path when it
    /// holds a `/` (anchored at the root when it starts with `/`, `**` crosses folders). With
    /// --blob, --tree or --pack: ids (8 hex digits or more)
    #[arg(value_name = "PATTERN", required = true, value_parser = crate::util::TextPattern)]
    pub patterns: Vec<String>,
    /// Snapshot to search: id, id prefix or "latest" (repeatable) [default: every snapshot
    /// passing --host/--tag/--path]
    #[arg(short = 's', long = "snapshot", value_name = "ID")]
    pub snapshots: Vec<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Only entries modified at TIME or later: YYYY-MM-DD, YYYY-MM-DD HH:MM[:SS] (local time)
    /// or RFC 3339
    #[arg(short = 'O', long, value_name = "TIME", conflicts_with_all = ["blob", "tree", "pack"], value_parser = time_arg)]
    pub oldest: Option<String>,
    /// Only entries modified at TIME or earlier (same forms as --oldest)
    #[arg(short = 'N', long, value_name = "TIME", conflicts_with_all = ["blob", "tree", "pack"], value_parser = time_arg)]
    pub newest: Option<String>,
    /// Match patterns regardless of case
    #[arg(short = 'i', long, conflicts_with_all = ["blob", "tree", "pack"])]
    pub ignore_case: bool,
    /// Long listing (mode, owner, size, time), as `ls -l`
    #[arg(short = 'l', long, conflicts_with_all = ["blob", "tree", "pack"])]
    pub long: bool,
    /// Search the oldest snapshot first (default: the newest first)
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// The arguments are data blob ids: list the files using them and where
    #[arg(long, conflicts_with_all = ["tree", "pack"])]
    pub blob: bool,
    /// The arguments are tree ids: list the folders whose listing they are
    #[arg(long, conflicts_with = "pack")]
    pub tree: bool,
    /// The arguments are pack ids: list the files and folders using any blob of the packs
    #[arg(long)]
    pub pack: bool,
    /// Print JSON (one array)
    #[arg(long)]
    pub json: bool,
}

/// Where and how results are written.
struct Output<'a> {
    w: BufWriter<super::Stdout>,
    index: &'a Index,
    packs: Vec<Id>,
    json: bool,
    long: bool,
    quiet: bool,
    /// The snapshot being searched: full id, short id, local time, RFC 3339 time.
    snap: (String, String, String, String),
    hits: u64,
    /// Snapshots with hits so far.
    snapshots_with_hits: u64,
    /// JSON array elements written (object searches).
    elements: u64,
}

impl Output<'_> {
    fn begin(&mut self, id: &Id, s: &Snapshot) {
        let local = s.time.with_timezone(&chrono::Local);
        self.snap = (
            id.to_hex(),
            id.short(),
            local.format("%Y-%m-%d %H:%M:%S").to_string(),
            // As `snapshots --json` writes it.
            serde_json::to_value(s.time)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| s.time.to_rfc3339()),
        );
        self.hits = 0;
    }

    /// A hit of a pattern search.
    fn entry(&mut self, h: &Hit<'_>) -> std::io::Result<()> {
        let path = Path::new(OsStr::from_bytes(h.path));
        let first = self.hits == 0;
        self.hits += 1;
        if self.json {
            if first {
                let open = if self.snapshots_with_hits == 0 {
                    "["
                } else {
                    ","
                };
                write!(
                    self.w,
                    "{open}{{\"snapshot\":{},\"matches\":[",
                    json!(self.snap.0)
                )?;
            } else {
                self.w.write_all(b",")?;
            }
            let mut v = super::ls::node_json(h.node, Some(path));
            if let Some(m) = v.as_object_mut() {
                m.remove("content");
            }
            return serde_json::to_writer(&mut self.w, &v).map_err(std::io::Error::from);
        }
        if first && !self.quiet {
            if self.snapshots_with_hits > 0 {
                self.w.write_all(b"\n")?;
            }
            writeln!(
                self.w,
                "Found matching entries in snapshot {} from {}",
                self.snap.1, self.snap.2
            )?;
        }
        if self.long {
            self.w.write_all(&super::ls::long_line(h.node, path))?;
        } else {
            self.w.write_all(h.path)?;
        }
        self.w.write_all(b"\n")
    }

    /// The pack (among those searched for) holding a blob.
    fn pack_of(&self, kind: BlobKind, id: &Id) -> Option<Id> {
        self.index
            .locations(kind, id)
            .map(|l| l.pack.id)
            .find(|p| self.packs.contains(p))
    }

    /// A hit of an object search: one record per blob or tree found.
    fn object(&mut self, h: &Hit<'_>) -> std::io::Result<()> {
        self.hits += 1;
        let path = String::from_utf8_lossy(h.path);
        for b in h.blobs {
            let pack = self.pack_of(BlobKind::Data, &b.id);
            if self.json {
                let mut v = json!({
                    "object_type": "blob",
                    "id": b.id.to_hex(),
                    "path": path,
                    "parent_tree": h.parent_tree.to_hex(),
                    "snapshot": self.snap.0,
                    "time": self.snap.3,
                    "length": b.length,
                    "offsets": b.offsets,
                });
                if let (Some(p), Some(m)) = (pack, v.as_object_mut()) {
                    m.insert("pack".into(), json!(p.to_hex()));
                }
                self.element(&v)?;
                continue;
            }
            writeln!(
                self.w,
                "Found blob {} in snapshot {} from {}",
                b.id, self.snap.1, self.snap.2
            )?;
            self.w.write_all(b" ... in file ")?;
            self.w.write_all(h.path)?;
            let offsets: Vec<String> = b.offsets.iter().map(u64::to_string).collect();
            match offsets.as_slice() {
                [one] => writeln!(self.w, " at offset {one} ({} bytes)", b.length)?,
                many => writeln!(
                    self.w,
                    " at offsets {} ({} bytes each)",
                    many.join(", "),
                    b.length
                )?,
            }
            if let Some(p) = pack {
                writeln!(self.w, " ... in pack {p}")?;
            }
        }
        if let Some(t) = h.tree {
            let pack = self.pack_of(BlobKind::Tree, &t);
            if self.json {
                let mut v = json!({
                    "object_type": "tree",
                    "id": t.to_hex(),
                    "path": path,
                    "snapshot": self.snap.0,
                    "time": self.snap.3,
                });
                if let (Some(p), Some(m)) = (pack, v.as_object_mut()) {
                    m.insert("pack".into(), json!(p.to_hex()));
                }
                return self.element(&v);
            }
            writeln!(
                self.w,
                "Found tree {t} in snapshot {} from {}",
                self.snap.1, self.snap.2
            )?;
            self.w.write_all(b" ... folder ")?;
            self.w.write_all(h.path)?;
            self.w.write_all(b"\n")?;
            if let Some(p) = pack {
                writeln!(self.w, " ... in pack {p}")?;
            }
        }
        Ok(())
    }

    fn element(&mut self, v: &serde_json::Value) -> std::io::Result<()> {
        self.w
            .write_all(if self.elements == 0 { b"[" } else { b"," })?;
        self.elements += 1;
        serde_json::to_writer(&mut self.w, v).map_err(std::io::Error::from)
    }

    /// Closes a pattern search's snapshot.
    fn end(&mut self, objects: bool) -> std::io::Result<()> {
        if self.hits > 0 {
            self.snapshots_with_hits += 1;
            if self.json && !objects {
                write!(self.w, "],\"hits\":{}}}", self.hits)?;
            }
        }
        Ok(())
    }

    fn finish(mut self, objects: bool) -> std::io::Result<()> {
        if self.json {
            let empty = if objects {
                self.elements == 0
            } else {
                self.snapshots_with_hits == 0
            };
            self.w.write_all(if empty { b"[]\n" } else { b"]\n" })?;
        }
        self.w.flush()
    }
}

/// clap's check of `--oldest`/`--newest`: a bad time is a usage error (exit 2), as elsewhere.
fn time_arg(s: &str) -> Result<String, String> {
    parse_time(s).map(|_| s.to_string()).map_err(|_| {
        "expected YYYY-MM-DD, YYYY-MM-DD HH:MM, YYYY-MM-DD HH:MM:SS or RFC 3339".into()
    })
}

/// The snapshots to search, newest first (oldest first with `--reverse`), and how many
/// damaged snapshot files were left out (each named on stderr).
fn select(repo: &Repository, a: &FindArgs) -> Result<(Vec<(Id, Snapshot)>, usize)> {
    let filter = super::filter(&a.filter);
    let mut left_out = 0;
    let mut v: Vec<(Id, Snapshot)> = if a.snapshots.is_empty() {
        let (list, left) = super::list_all(repo, &filter)?;
        left_out = left;
        list
    } else {
        let mut v: Vec<(Id, Snapshot)> = vec![];
        for spec in &a.snapshots {
            let (id, s) = repo.find_snapshot(spec, &filter)?;
            if !v.iter().any(|(i, _)| *i == id) {
                v.push((id, s));
            }
        }
        v
    };
    v.sort_by(|x, y| x.1.time.cmp(&y.1.time).then(x.0.cmp(&y.0)));
    if !a.reverse {
        v.reverse();
    }
    Ok((v, left_out))
}

pub fn run(g: &Global, a: &FindArgs) -> Result<u8> {
    /// What the arguments are, checked before the repository is opened.
    enum What {
        Names(Box<NameQuery>),
        Ids(ObjectKind),
    }
    let args = match (a.blob, a.tree, a.pack) {
        (true, _, _) => What::Ids(ObjectKind::Blob),
        (_, true, _) => What::Ids(ObjectKind::Tree),
        (_, _, true) => What::Ids(ObjectKind::Pack),
        _ => {
            let oldest = a.oldest.as_deref().map(parse_time).transpose()?;
            let newest = a.newest.as_deref().map(parse_time).transpose()?;
            What::Names(Box::new(NameQuery::new(
                &a.patterns,
                a.ignore_case,
                oldest,
                newest,
            )?))
        }
    };
    let opened = util::open(g)?;
    let repo = &opened.repo;
    let _lock = util::lock(g, repo, arca_repo::LockKind::Shared, "find")?;
    let (snapshots, left_out) = select(repo, a)?;
    let index = repo.load_index()?;
    let (query, packs) = match args {
        What::Names(q) => (Query::Names(*q), vec![]),
        What::Ids(k) => {
            let w = Wanted::resolve(&index, k, &a.patterns)?;
            w.verify_long_ids(repo, &index, &a.patterns)?;
            let packs = w.packs().to_vec();
            (Query::Objects(w), packs)
        }
    };
    let objects = matches!(query, Query::Objects(_));
    let mut out = Output {
        w: BufWriter::new(super::Stdout::lock()),
        index: &index,
        packs,
        json: a.json,
        long: a.long,
        quiet: g.quiet,
        snap: Default::default(),
        hits: 0,
        snapshots_with_hits: 0,
        elements: 0,
    };
    let mut finder = Finder::new(repo, &index, query);
    let (mut failed, mut skipped) = (0, 0);
    for (id, s) in &snapshots {
        out.begin(id, s);
        let mut sink = |h: &Hit<'_>| {
            if objects { out.object(h) } else { out.entry(h) }
        };
        let r = finder.search(s.tree, &mut sink);
        // A folder whose listing cannot be read is left out, named on stderr, and the rest
        // of the snapshot is searched; a root listing that cannot be read fails that
        // snapshot. The other snapshots are searched, and the output stays whole (a JSON
        // array was left open).
        for e in finder.take_skipped() {
            skipped += 1;
            crate::progress::warn(&format!("arca: snapshot {}: {e}; left out", id.short()));
        }
        match r {
            Ok(_) => {}
            Err(e @ FindError::Listing { .. }) => {
                failed += 1;
                crate::progress::warn(&format!("arca: snapshot {}: {e}", id.short()));
            }
            Err(e) => return Err(e.into()),
        }
        out.end(objects)?;
    }
    out.finish(objects)?;
    if failed > 0 {
        anyhow::bail!(
            "{} could not be searched (see the errors above)",
            util::count(failed, "snapshot")
        );
    }
    if skipped > 0 {
        // Finished, but some entries could not be searched: as restore, exit 3.
        return Ok(super::left_out_listings(skipped, "searched"));
    }
    Ok(super::left_out_exit(left_out))
}

//! The tree assembler: receives each directory's entries from the walk (in name order, some
//! still waiting for a reader or a subdirectory) and the readers' finished files, and saves a
//! directory's tree blob as soon as its last entry is known. Entries fill fixed slots, so
//! the snapshot's trees do not depend on which thread finished first.

use std::collections::HashMap;
use std::path::PathBuf;

use arca_format::{BlobKind, ContentRef, Id, Node, SnapshotSummary, Tree};
use arca_repo::RepoError;
use arca_repo::profile::Clock;
use crossbeam_channel::Receiver;

use crate::WarningKind;
use crate::links::LinkKey;
use crate::pipeline::Ctx;

/// A file's content and size.
pub(crate) type Content = (Vec<ContentRef>, u64);

/// A directory of the walk, numbered in the order the walk met it.
pub(crate) type DirId = u64;

/// One entry of a directory.
pub(crate) enum Slot {
    /// Complete.
    Ready(Node),
    /// A file a reader is reading.
    Reading,
    /// A further name of a hard-linked file being read elsewhere: waits for that content.
    /// The flag says whether the parent snapshot had a (different) entry at this name.
    Link(Node, LinkKey, PathBuf, bool),
    /// A directory: waits for its tree id.
    Dir(Node),
}

/// What the assembler receives: from the walk and from the readers, on one channel, so a
/// directory always arrives before anything that fills its slots.
pub(crate) enum Msg {
    /// A directory's entries in name order. `parent` is the slot this directory fills (none
    /// for the root); `old` is its tree id in the parent snapshot.
    Dir {
        id: DirId,
        parent: Option<(DirId, u32)>,
        old: Option<Id>,
        slots: Vec<Slot>,
    },
    /// A file read (or skipped: `None`). For a hard-linked file, also its content and size
    /// for the other names, which may be known though this name was skipped (read by
    /// another name).
    File {
        dir: DirId,
        slot: u32,
        node: Option<Box<Node>>,
        link: Option<(LinkKey, Option<Content>)>,
    },
}

struct Pending {
    parent: Option<(DirId, u32)>,
    old: Option<Id>,
    slots: Vec<Option<Slot>>,
    waiting: usize,
}

enum LinkState {
    /// Names waiting for the content.
    Waiting(Vec<(DirId, u32)>),
    /// The content and size read, or `None` when the file could not be read.
    Read(Option<Content>),
}

/// What the assembler produced.
pub(crate) struct Assembled {
    /// The root tree, unless the walk stopped before finishing.
    pub root: Option<Id>,
    pub summary: SnapshotSummary,
    /// Names of hard-linked files that could not be read (counted as processed by the walk),
    /// and their bytes.
    pub skipped: (u64, u64),
    pub clock: Clock,
    pub error: Option<RepoError>,
}

struct Assembler<'c, 'a, 's> {
    ctx: &'c Ctx<'a, 's>,
    dirs: HashMap<DirId, Pending>,
    links: HashMap<LinkKey, LinkState>,
    root: Option<Id>,
    summary: SnapshotSummary,
    skipped: (u64, u64),
    /// The saver stopped: keep draining so that no sender blocks, store nothing more.
    stopped: bool,
    error: Option<RepoError>,
}

/// Runs until every sender is gone.
pub(crate) fn run(ctx: &Ctx<'_, '_>, rx: Receiver<Msg>) -> Assembled {
    let mut a = Assembler {
        ctx,
        dirs: HashMap::new(),
        links: HashMap::new(),
        root: None,
        summary: SnapshotSummary::default(),
        skipped: (0, 0),
        stopped: false,
        error: None,
    };
    let mut clock = Clock::new();
    for msg in rx.iter() {
        clock.waited_in();
        match msg {
            Msg::Dir {
                id,
                parent,
                old,
                slots,
            } => a.open(id, parent, old, slots),
            Msg::File {
                dir,
                slot,
                node,
                link,
            } => {
                if let Some((key, read)) = link {
                    a.link_read(key, read);
                }
                a.fill(dir, slot, node.map(|n| *n));
            }
        }
        clock.busy();
    }
    clock.waited_in();
    Assembled {
        root: a.root,
        summary: a.summary,
        skipped: a.skipped,
        clock,
        error: a.error,
    }
}

impl Assembler<'_, '_, '_> {
    fn open(&mut self, id: DirId, parent: Option<(DirId, u32)>, old: Option<Id>, slots: Vec<Slot>) {
        let mut waiting = 0;
        let mut stored = Vec::with_capacity(slots.len());
        let mut links = vec![];
        for (i, s) in slots.into_iter().enumerate() {
            match &s {
                Slot::Ready(_) => {}
                Slot::Link(_, key, _, _) => {
                    waiting += 1;
                    links.push((i as u32, *key));
                }
                Slot::Reading | Slot::Dir(_) => waiting += 1,
            }
            stored.push(Some(s));
        }
        self.dirs.insert(
            id,
            Pending {
                parent,
                old,
                slots: stored,
                waiting,
            },
        );
        for (slot, key) in links {
            match self.links.get_mut(&key) {
                Some(LinkState::Waiting(names)) => names.push((id, slot)),
                Some(LinkState::Read(r)) => {
                    let r = r.clone();
                    self.fill_link(id, slot, r);
                }
                None => {
                    self.links.insert(key, LinkState::Waiting(vec![(id, slot)]));
                }
            }
        }
        if waiting == 0 {
            self.finish(id);
        }
    }

    /// The first name of a hard-linked file was read: its other names take its content.
    fn link_read(&mut self, key: LinkKey, read: Option<Content>) {
        let prev = self.links.insert(key, LinkState::Read(read.clone()));
        if let Some(LinkState::Waiting(names)) = prev {
            for (dir, slot) in names {
                self.fill_link(dir, slot, read.clone());
            }
        }
    }

    fn fill_link(&mut self, dir: DirId, slot: u32, read: Option<Content>) {
        let Some(Slot::Link(mut node, _, path, changed)) = self
            .dirs
            .get_mut(&dir)
            .and_then(|d| d.slots.get_mut(slot as usize))
            .and_then(Option::take)
        else {
            return;
        };
        let size_listed = node.size;
        let node = match read {
            Some((content, size)) => {
                node.content = content;
                node.size = size;
                // Counted at the size read, not the size listed by the walk.
                self.summary.total_bytes_processed += size;
                self.skipped.1 += size_listed;
                // Counted and told (`-v`) as every name is, once its content is known.
                let change = crate::archiver::count_name(&mut self.summary, changed);
                self.ctx.report.file(&path, change);
                Some(node)
            }
            None => None,
        };
        if node.is_none() {
            self.skipped.0 += 1;
            self.skipped.1 += size_listed;
            let msg = format!(
                "{}: hard link to a file that could not be read; skipped",
                arca_format::text::shown(&path)
            );
            self.ctx.report.warn(&path, WarningKind::Unreadable, msg);
        }
        self.fill(dir, slot, node);
    }

    /// Puts `node` (or nothing, for a skipped entry) into its slot.
    fn fill(&mut self, dir: DirId, slot: u32, node: Option<Node>) {
        let Some(d) = self.dirs.get_mut(&dir) else {
            return;
        };
        if let Some(s) = d.slots.get_mut(slot as usize) {
            *s = node.map(Slot::Ready);
        }
        d.waiting -= 1;
        if d.waiting == 0 {
            self.finish(dir);
        }
    }

    /// Saves every directory that has become complete, from `id` up.
    fn finish(&mut self, mut id: DirId) {
        loop {
            let Some(d) = self.dirs.remove(&id) else {
                return;
            };
            let tree = Tree {
                nodes: d
                    .slots
                    .into_iter()
                    .filter_map(|s| match s {
                        Some(Slot::Ready(n)) => Some(n),
                        _ => None,
                    })
                    .collect(),
            };
            let tree_id = self.save(&tree, d.old, d.parent.is_some());
            let Some((pid, slot)) = d.parent else {
                self.root = tree_id;
                return;
            };
            let Some(p) = self.dirs.get_mut(&pid) else {
                return;
            };
            let filled = match (p.slots.get_mut(slot as usize), tree_id) {
                (Some(s @ Some(Slot::Dir(_))), Some(tid)) => match s.take() {
                    Some(Slot::Dir(mut node)) => {
                        node.subtree = Some(tid);
                        Some(Slot::Ready(node))
                    }
                    other => other,
                },
                _ => None,
            };
            if let Some(s) = p.slots.get_mut(slot as usize) {
                *s = filled;
            }
            p.waiting -= 1;
            if p.waiting > 0 {
                return;
            }
            id = pid;
        }
    }

    /// Encodes and queues a tree blob; `None` once the pipeline failed. `folder`: the tree
    /// is a folder's listing, counted in the summary (the snapshot's root listing is no
    /// folder, as restic counts).
    fn save(&mut self, tree: &Tree, old: Option<Id>, folder: bool) -> Option<Id> {
        let bytes = match tree.encode() {
            Ok(b) => b,
            Err(e) => {
                self.error.get_or_insert(RepoError::format("tree", e));
                self.stopped = true;
                return None;
            }
        };
        let id = self.ctx.repo.key().blob_id(&bytes);
        match old {
            _ if !folder => {}
            Some(o) if o == id => self.summary.dirs_unmodified += 1,
            Some(_) => self.summary.dirs_changed += 1,
            None => self.summary.dirs_new += 1,
        }
        if self.stopped {
            return None;
        }
        if self.ctx.known.claim(BlobKind::Tree, &id) {
            self.summary.tree_blobs += 1;
            self.summary.data_added += bytes.len() as u64;
            if self.ctx.saver.save(BlobKind::Tree, id, bytes).is_err() {
                self.stopped = true;
                return None;
            }
        }
        Some(id)
    }
}

//! Tree blobs: one directory listing each. A node carries everything a file system holds
//! for an entry, and a file node lists its content blobs with their plain lengths, so that
//! a restore knows every block's offset in every file without reading data.

use crate::codec::{Reader, Writer, len_u32};
use crate::{FormatError, Id};

/// Structure magic of a tree blob.
pub const MAGIC: [u8; 4] = *b"ATRE";
/// Current tree version.
pub const VERSION: u16 = 1;

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
    /// Named pipe.
    Fifo,
    /// Character device.
    CharDev,
    /// Block device.
    BlockDev,
    /// Unix domain socket.
    Socket,
}

impl NodeKind {
    /// On-disk code.
    pub fn code(self) -> u8 {
        match self {
            NodeKind::File => 1,
            NodeKind::Dir => 2,
            NodeKind::Symlink => 3,
            NodeKind::Fifo => 4,
            NodeKind::CharDev => 5,
            NodeKind::BlockDev => 6,
            NodeKind::Socket => 7,
        }
    }
    /// Parses the on-disk code.
    pub fn from_code(c: u8) -> Result<Self, FormatError> {
        Ok(match c {
            1 => NodeKind::File,
            2 => NodeKind::Dir,
            3 => NodeKind::Symlink,
            4 => NodeKind::Fifo,
            5 => NodeKind::CharDev,
            6 => NodeKind::BlockDev,
            7 => NodeKind::Socket,
            _ => {
                return Err(FormatError::Newer {
                    what: "tree",
                    detail: format!("unknown node kind {c}"),
                });
            }
        })
    }
    /// Lower-case name used in listings and JSON.
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::File => "file",
            NodeKind::Dir => "dir",
            NodeKind::Symlink => "symlink",
            NodeKind::Fifo => "fifo",
            NodeKind::CharDev => "chardev",
            NodeKind::BlockDev => "blockdev",
            NodeKind::Socket => "socket",
        }
    }
}

/// Seconds and nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Timespec {
    /// Seconds (may be negative).
    pub sec: i64,
    /// Nanoseconds, 0..1_000_000_000.
    pub nsec: u32,
}

/// One content blob of a file: its id and its plain (uncompressed) length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentRef {
    /// Blob id.
    pub id: Id,
    /// Plain length in bytes.
    pub len: u32,
}

/// Extended attributes: (name, value) pairs sorted by name.
pub type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node {
    /// File name bytes (any bytes but `/` and NUL; not empty, `.` or `..`).
    pub name: Vec<u8>,
    /// Entry kind.
    pub kind: Option<NodeKind>,
    /// Permission bits including setuid, setgid and sticky (`st_mode & 0o7777`).
    pub mode: u32,
    /// Owner id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Owner name, empty when unknown.
    pub user: Vec<u8>,
    /// Group name, empty when unknown.
    pub group: Vec<u8>,
    /// Modification time.
    pub mtime: Timespec,
    /// Access time.
    pub atime: Timespec,
    /// Status change time (change detection only; cannot be restored).
    pub ctime: Timespec,
    /// Device of the source file system (change detection and hard links).
    pub dev: u64,
    /// Inode number (change detection and hard links).
    pub inode: u64,
    /// Number of hard links to the inode.
    pub nlink: u64,
    /// Device number for character and block devices.
    pub rdev: u64,
    /// Size in bytes (files), 0 otherwise.
    pub size: u64,
    /// Symlink target bytes.
    pub link_target: Vec<u8>,
    /// Extended attributes, sorted by name (POSIX ACLs travel here).
    pub xattrs: Xattrs,
    /// File content, in order.
    pub content: Vec<ContentRef>,
    /// Directory listing blob.
    pub subtree: Option<Id>,
}

impl Node {
    /// The node kind (every decoded node has one).
    pub fn kind(&self) -> NodeKind {
        self.kind.unwrap_or(NodeKind::File)
    }
    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == Some(NodeKind::Dir)
    }
}

/// Checks that a name is safe to join to a directory path.
pub fn validate_name(name: &[u8]) -> Result<(), FormatError> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(FormatError::Corrupt {
            what: "tree",
            detail: format!("invalid entry name {:?}", String::from_utf8_lossy(name)),
        });
    }
    Ok(())
}

/// A directory listing: nodes sorted by name, names unique.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tree {
    /// Entries, sorted by name bytes.
    pub nodes: Vec<Node>,
}

impl Tree {
    /// Sorts nodes by name (the canonical order that makes equal listings encode equally).
    pub fn sort(&mut self) {
        self.nodes.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Finds a node by name.
    pub fn find(&self, name: &[u8]) -> Option<&Node> {
        self.nodes
            .binary_search_by(|n| n.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.nodes[i])
    }

    /// Encodes the tree. Nodes must already be sorted and unique.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut w = Writer::with_capacity(10 + self.nodes.len() * 160);
        w.magic(&MAGIC, VERSION);
        w.u32(len_u32(self.nodes.len())?);
        for n in &self.nodes {
            let kind = n.kind.ok_or_else(|| FormatError::Corrupt {
                what: "tree",
                detail: "node without kind".into(),
            })?;
            w.var_bytes(&n.name)?;
            w.u8(kind.code());
            w.u32(n.mode);
            w.u32(n.uid);
            w.u32(n.gid);
            w.var_bytes(&n.user)?;
            w.var_bytes(&n.group)?;
            for t in [n.mtime, n.atime, n.ctime] {
                w.i64(t.sec);
                w.u32(t.nsec);
            }
            w.u64(n.dev);
            w.u64(n.inode);
            w.u64(n.nlink);
            w.u64(n.rdev);
            w.u64(n.size);
            w.var_bytes(&n.link_target)?;
            w.u32(len_u32(n.xattrs.len())?);
            for (k, v) in &n.xattrs {
                w.var_bytes(k)?;
                w.var_bytes(v)?;
            }
            match kind {
                NodeKind::File => {
                    w.u32(len_u32(n.content.len())?);
                    for c in &n.content {
                        w.bytes(&c.id.0);
                        w.u32(c.len);
                    }
                }
                NodeKind::Dir => {
                    let sub = n.subtree.ok_or_else(|| FormatError::Corrupt {
                        what: "tree",
                        detail: "directory node without subtree".into(),
                    })?;
                    w.bytes(&sub.0);
                }
                _ => {}
            }
        }
        Ok(w.finish())
    }

    /// Decodes a tree, checking names, order and that file sizes match their content.
    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut nodes = Vec::with_capacity(Self::peek_len(b));
        Self::visit(b, |n| nodes.push(n.to_node()))?;
        Ok(Self { nodes })
    }

    /// The node count a listing announces, bounded by what its bytes can hold (0 if its
    /// header cannot be read): a capacity hint, not a checked value.
    fn peek_len(b: &[u8]) -> usize {
        let mut r = Reader::new(b, "tree");
        r.magic(&MAGIC, VERSION)
            .and_then(|_| r.count(MIN_NODE))
            .unwrap_or_default()
    }

    /// Walks an encoded listing node by node, in order, with every check [`Tree::decode`]
    /// makes, and without allocating: `f` sees each node as it lies in `b`. Returns the node
    /// count. On an error, `f` has seen the nodes before the bad one.
    pub fn visit<'a>(b: &'a [u8], mut f: impl FnMut(NodeRef<'a>)) -> Result<usize, FormatError> {
        let mut r = Reader::new(b, "tree");
        r.magic(&MAGIC, VERSION)?;
        let n = r.count(MIN_NODE)?;
        let mut prev: Option<&[u8]> = None;
        for _ in 0..n {
            let name = r.var_bytes()?;
            validate_name(name)?;
            if prev.is_some_and(|p| p >= name) {
                return Err(FormatError::Corrupt {
                    what: "tree",
                    detail: format!(
                        "entries out of order at {:?}",
                        String::from_utf8_lossy(name)
                    ),
                });
            }
            prev = Some(name);
            let kind = NodeKind::from_code(r.u8()?)?;
            let (mode, uid, gid) = (r.u32()?, r.u32()?, r.u32()?);
            let (user, group) = (r.var_bytes()?, r.var_bytes()?);
            let mut times = [Timespec::default(); 3];
            for t in &mut times {
                t.sec = r.i64()?;
                t.nsec = r.u32()?;
                if t.nsec >= 1_000_000_000 {
                    return Err(FormatError::Corrupt {
                        what: "tree",
                        detail: format!("nanoseconds {} out of range", t.nsec),
                    });
                }
            }
            let [mtime, atime, ctime] = times;
            let (dev, inode, nlink, rdev, size) =
                (r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?);
            let link_target = r.var_bytes()?;
            let xattr_count = r.count(8)?;
            let xattrs_at = r.position();
            for _ in 0..xattr_count {
                r.var_bytes()?;
                r.var_bytes()?;
            }
            let xattrs = &b[xattrs_at..r.position()];
            let (mut content, mut subtree) = (&b[..0], None);
            match kind {
                NodeKind::File => {
                    let nc = r.count(CONTENT_REF)?;
                    content = r.bytes(nc * CONTENT_REF)?;
                    let total: u64 = content_refs(content).map(|c| u64::from(c.len)).sum();
                    if total != size {
                        return Err(FormatError::Corrupt {
                            what: "tree",
                            detail: format!(
                                "file {:?} has size {size} but its content sums to {total}",
                                String::from_utf8_lossy(name),
                            ),
                        });
                    }
                }
                NodeKind::Dir => subtree = Some(Id(r.array()?)),
                _ => {}
            }
            f(NodeRef {
                name,
                kind,
                mode,
                uid,
                gid,
                user,
                group,
                mtime,
                atime,
                ctime,
                dev,
                inode,
                nlink,
                rdev,
                size,
                link_target,
                xattr_count,
                xattrs,
                content,
                subtree,
            });
        }
        r.finish()?;
        Ok(n)
    }
}

/// Smallest encoded node (every fixed field, empty variable ones): bounds a listing's count.
const MIN_NODE: usize = 100;
/// Encoded size of one content reference: blob id, then its plain length.
const CONTENT_REF: usize = 36;

/// The content references of an encoded (already checked) run of them.
fn content_refs(raw: &[u8]) -> impl Iterator<Item = ContentRef> + '_ {
    raw.chunks_exact(CONTENT_REF).map(|c| {
        let (id, len) = c.split_at(32);
        let mut a = [0u8; 32];
        a.copy_from_slice(id);
        let mut l = [0u8; 4];
        l.copy_from_slice(len);
        ContentRef {
            id: Id(a),
            len: u32::from_le_bytes(l),
        }
    })
}

/// A node as it lies in an encoded listing ([`Tree::visit`]): fixed fields decoded, names,
/// link target, xattrs and content borrowed from the listing's bytes, already checked.
#[derive(Debug, Clone, Copy)]
pub struct NodeRef<'a> {
    /// File name bytes.
    pub name: &'a [u8],
    /// Entry kind.
    pub kind: NodeKind,
    /// Permission bits.
    pub mode: u32,
    /// Owner id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Owner name.
    pub user: &'a [u8],
    /// Group name.
    pub group: &'a [u8],
    /// Modification time.
    pub mtime: Timespec,
    /// Access time.
    pub atime: Timespec,
    /// Status change time.
    pub ctime: Timespec,
    /// Device of the source file system.
    pub dev: u64,
    /// Inode number.
    pub inode: u64,
    /// Number of hard links.
    pub nlink: u64,
    /// Device number of devices.
    pub rdev: u64,
    /// Size in bytes (files).
    pub size: u64,
    /// Symlink target bytes.
    pub link_target: &'a [u8],
    xattr_count: usize,
    /// The encoded (name, value) pairs.
    xattrs: &'a [u8],
    /// The encoded content references.
    content: &'a [u8],
    /// Directory listing blob.
    pub subtree: Option<Id>,
}

impl<'a> NodeRef<'a> {
    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == NodeKind::Dir
    }
    /// How many content blobs the file has.
    pub fn blocks(&self) -> usize {
        self.content.len() / CONTENT_REF
    }
    /// The file's content blobs, in order.
    pub fn content(&self) -> impl Iterator<Item = ContentRef> + 'a {
        content_refs(self.content)
    }
    /// The extended attributes, sorted by name.
    pub fn xattrs(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let mut r = Reader::new(self.xattrs, "tree");
        (0..self.xattr_count).map_while(move |_| Some((r.var_bytes().ok()?, r.var_bytes().ok()?)))
    }
    /// The node, owned.
    pub fn to_node(&self) -> Node {
        Node {
            name: self.name.to_vec(),
            kind: Some(self.kind),
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
            user: self.user.to_vec(),
            group: self.group.to_vec(),
            mtime: self.mtime,
            atime: self.atime,
            ctime: self.ctime,
            dev: self.dev,
            inode: self.inode,
            nlink: self.nlink,
            rdev: self.rdev,
            size: self.size,
            link_target: self.link_target.to_vec(),
            xattrs: self
                .xattrs()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect(),
            content: self.content().collect(),
            subtree: self.subtree,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts() -> impl Strategy<Value = Timespec> {
        (any::<i64>(), 0u32..1_000_000_000).prop_map(|(sec, nsec)| Timespec { sec, nsec })
    }

    fn node_strategy() -> impl Strategy<Value = Node> {
        let name = proptest::collection::vec(
            any::<u8>().prop_filter("no / or NUL", |b| *b != b'/' && *b != 0),
            1..20,
        )
        .prop_filter("not . or ..", |n| n != b"." && n != b"..");
        (
            name,
            1u8..=7,
            (any::<u32>(), any::<u32>(), any::<u32>()),
            (
                proptest::collection::vec(any::<u8>(), 0..8),
                proptest::collection::vec(any::<u8>(), 0..8),
            ),
            (ts(), ts(), ts()),
            (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()),
            proptest::collection::vec(any::<u8>(), 0..30),
            proptest::collection::vec(
                (
                    proptest::collection::vec(any::<u8>(), 1..10),
                    proptest::collection::vec(any::<u8>(), 0..10),
                ),
                0..3,
            ),
            proptest::collection::vec((any::<[u8; 32]>(), 0u32..1 << 22), 0..5),
            any::<[u8; 32]>(),
        )
            .prop_map(
                |(
                    name,
                    k,
                    (mode, uid, gid),
                    (user, group),
                    (m, a, c),
                    (dev, inode, nlink, rdev),
                    link,
                    xattrs,
                    content,
                    sub,
                )| {
                    let kind = NodeKind::from_code(k).unwrap();
                    let content: Vec<ContentRef> = if kind == NodeKind::File {
                        content
                            .into_iter()
                            .map(|(id, len)| ContentRef { id: Id(id), len })
                            .collect()
                    } else {
                        vec![]
                    };
                    Node {
                        name,
                        kind: Some(kind),
                        mode,
                        uid,
                        gid,
                        user,
                        group,
                        mtime: m,
                        atime: a,
                        ctime: c,
                        dev,
                        inode,
                        nlink,
                        rdev,
                        size: content.iter().map(|c| u64::from(c.len)).sum(),
                        link_target: link,
                        xattrs,
                        content,
                        subtree: (kind == NodeKind::Dir).then_some(Id(sub)),
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn round_trip(nodes in proptest::collection::vec(node_strategy(), 0..12)) {
            let mut t = Tree { nodes };
            t.sort();
            t.nodes.dedup_by(|a, b| a.name == b.name);
            let b = t.encode().unwrap();
            let back = Tree::decode(&b).unwrap();
            prop_assert_eq!(&back, &t);
            for n in &t.nodes {
                prop_assert!(back.find(&n.name).is_some());
            }
            // The borrowed walk sees the same nodes, fields, xattrs and content.
            let mut seen = vec![];
            let count = Tree::visit(&b, |n| {
                assert_eq!(n.blocks(), n.content().count());
                assert_eq!(n.is_dir(), n.subtree.is_some());
                seen.push(n.to_node());
            }).unwrap();
            prop_assert_eq!(count, t.nodes.len());
            prop_assert_eq!(&seen, &t.nodes);
            if b.len() > 10 {
                prop_assert!(Tree::decode(&b[..b.len() - 1]).is_err());
            }
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = Tree::decode(&b);
        }
    }

    #[test]
    fn dangerous_names_are_rejected() {
        for bad in [&b".."[..], b".", b"a/b", b"", b"x\0"] {
            let node = Node {
                name: bad.to_vec(),
                kind: Some(NodeKind::Fifo),
                ..Node::default()
            };
            let b = Tree { nodes: vec![node] }.encode().unwrap();
            assert!(Tree::decode(&b).is_err(), "{bad:?} accepted");
        }
    }

    /// An unknown node kind is a newer arca's, not damage (hunt 29: check called the tree
    /// damaged and `repair snapshots --forget` removed its snapshot).
    #[test]
    fn unknown_node_kind_is_newer() {
        let e = NodeKind::from_code(8).unwrap_err();
        assert!(e.is_newer(), "{e}");
        assert!(e.to_string().contains("made by a newer arca"), "{e}");
        let e = crate::BlobKind::from_code(2).unwrap_err();
        assert!(e.is_newer(), "{e}");
    }
}

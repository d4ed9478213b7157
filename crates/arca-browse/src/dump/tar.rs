//! The dump's tar writer: POSIX pax, as GNU tar `--format=pax` writes and `tar --xattrs`
//! reads it. Every entry has an extended header with its times in nanoseconds (mtime, atime,
//! ctime) and its extended attributes (`SCHILY.xattr.NAME`); paths, link targets and owner
//! names that do not fit ustar's fields, or are not ASCII, go there too, as do sizes, owners
//! and times out of ustar's range; but a path or link target that is not UTF-8 stays in
//! ustar's fields, or, too long for them, goes in a GNU long name (`L`, `K`).
//!
//! A regular file with holes (at least one all-zero blob of the chunker's largest size) is a
//! sparse member in GNU tar's format 1.0, as `tar --sparse --format=pax` writes it: the
//! extended header has `GNU.sparse.major=1`, `GNU.sparse.minor=0`, the real path in
//! `GNU.sparse.name` and the real size in `GNU.sparse.realsize`; the ustar header names
//! `DIR/GNUSparseFile.0/NAME` (what a reader without sparse support extracts) and gives the
//! stored size; the data starts with the [`SparseMap`] and holds the data regions only.

use std::io::Write;

use arca_format::{Id, NodeKind, Timespec};

use super::sparse::SparseMap;
use super::{DumpError, Entry, Sink, Started, put_zeros};

const BLOCK: usize = 512;

/// Writes a pax archive to `out`.
pub(crate) struct TarSink<W: Write> {
    out: W,
    /// Padding owed after the current entry's content.
    pad: usize,
    /// Id and length of a hole blob.
    hole: (Id, u32),
    /// The current file's map when it is written sparse.
    sparse: Option<SparseMap>,
}

impl<W: Write> TarSink<W> {
    /// A writer to `out`; `hole` is the id and length of an all-zero blob of the chunker's
    /// largest size, which a sparse file's holes are.
    pub fn new(out: W, hole: (Id, u32)) -> Self {
        TarSink {
            out,
            pad: 0,
            hole,
            sparse: None,
        }
    }

    fn put(&mut self, b: &[u8]) -> Result<(), DumpError> {
        self.out.write_all(b).map_err(|source| DumpError::Write {
            what: "tar archive",
            source,
        })
    }

    fn pad(&mut self) -> Result<(), DumpError> {
        let n = std::mem::take(&mut self.pad);
        self.put(&[0u8; BLOCK][..n])
    }

    /// Writes `n` bytes of the current file's content, from `bytes` or zeros when `None`:
    /// all of them, or, for a sparse file, those in its data regions.
    fn content(&mut self, bytes: Option<&[u8]>, n: u64) -> Result<(), DumpError> {
        let ranges = match &mut self.sparse {
            Some(map) => map.route(n),
            None => vec![(0, n as usize)],
        };
        for (a, b) in ranges {
            match bytes {
                Some(bytes) => self.put(&bytes[a..b])?,
                None => put_zeros((b - a) as u64, |z| self.put(z))?,
            }
        }
        Ok(())
    }
}

impl<W: Write> Sink for TarSink<W> {
    fn entry(&mut self, e: &Entry) -> Result<Started, DumpError> {
        self.pad()?;
        let Some(typeflag) = typeflag(e) else {
            return Ok(Started::Skipped("a socket has no archive entry"));
        };
        self.sparse = match typeflag {
            b'0' => SparseMap::of(&e.node.content, self.hole, e.size),
            _ => None,
        };
        let map = self.sparse.as_ref().map(SparseMap::text);
        let (pax, header, longs) = headers(e, typeflag, self.sparse.as_ref());
        for (kind, name) in longs {
            // GNU's long name or link target ('L', 'K'): a NUL-terminated member of its own
            // before the entry, its bytes as they are.
            let mut l = Header::new(kind);
            l.name(b"././@LongLink");
            l.octal(100, 8, 0o644);
            l.octal(124, 12, name.len() as u64 + 1);
            l.octal(136, 12, 0);
            self.put(&l.finish())?;
            self.put(&name)?;
            self.pad = BLOCK - name.len() % BLOCK;
            self.pad()?;
        }
        if !pax.is_empty() {
            let mut x = Header::new(b'x');
            x.name(&pax_name(&e.path));
            x.octal(100, 8, 0o644);
            x.octal(124, 12, pax.len() as u64);
            x.octal(136, 12, e.node.mtime.sec.max(0) as u64);
            self.put(&x.finish())?;
            self.put(&pax)?;
            self.pad = (BLOCK - pax.len() % BLOCK) % BLOCK;
            self.pad()?;
        }
        self.put(&header.finish())?;
        if let Some(map) = &map {
            self.put(map)?;
        }
        let size = match (&self.sparse, typeflag) {
            (Some(m), _) => m.data_len(),
            (None, b'0') => e.size,
            (None, _) => 0,
        };
        self.pad = ((BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64) as usize;
        Ok(Started::Written)
    }

    fn data(&mut self, bytes: &[u8]) -> Result<(), DumpError> {
        self.content(Some(bytes), bytes.len() as u64)
    }

    fn zeros(&mut self, n: u64) -> Result<(), DumpError> {
        self.content(None, n)
    }

    fn finish(&mut self) -> Result<(), DumpError> {
        self.pad()?;
        self.put(&[0u8; 2 * BLOCK])?;
        self.out.flush().map_err(|source| DumpError::Write {
            what: "tar archive",
            source,
        })
    }
}

/// The ustar type of an entry; `None` for what tar cannot hold (sockets).
fn typeflag(e: &Entry) -> Option<u8> {
    if e.link.is_some() {
        return Some(b'1');
    }
    Some(match e.node.kind() {
        NodeKind::File => b'0',
        NodeKind::Dir => b'5',
        NodeKind::Symlink => b'2',
        NodeKind::CharDev => b'3',
        NodeKind::BlockDev => b'4',
        NodeKind::Fifo => b'6',
        NodeKind::Socket => return None,
    })
}

/// One 512-byte ustar header being filled.
struct Header([u8; BLOCK]);

impl Header {
    fn new(typeflag: u8) -> Self {
        let mut h = [0u8; BLOCK];
        h[156] = typeflag;
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        Header(h)
    }

    /// Stores a name: in `name` alone, or split at a `/` between `prefix` and `name`; false
    /// when it fits neither way (the first 100 bytes are stored, the pax record holds it).
    fn name(&mut self, path: &[u8]) -> bool {
        if path.len() <= 100 {
            self.0[..path.len()].copy_from_slice(path);
            return true;
        }
        let split = (0..path.len())
            .rev()
            .filter(|&i| path[i] == b'/')
            .find(|&i| i <= 155 && path.len() - i - 1 <= 100 && i + 1 < path.len());
        if let Some(i) = split {
            let (prefix, name) = (&path[..i], &path[i + 1..]);
            self.0[345..345 + prefix.len()].copy_from_slice(prefix);
            self.0[..name.len()].copy_from_slice(name);
            return true;
        }
        self.0[..100].copy_from_slice(&path[..100]);
        false
    }

    /// Copies bytes into a text field (truncated to it).
    fn text(&mut self, at: usize, len: usize, v: &[u8]) {
        let n = v.len().min(len);
        self.0[at..at + n].copy_from_slice(&v[..n]);
    }

    /// A number in octal (NUL-terminated) or, when too large, base-256 as GNU tar reads it;
    /// returns whether it fits in octal.
    fn octal(&mut self, at: usize, len: usize, v: u64) -> bool {
        let digits = len - 1;
        if digits >= 22 || v < 1u64 << (3 * digits) {
            let s = format!("{v:0digits$o}");
            self.0[at..at + digits].copy_from_slice(s.as_bytes());
            self.0[at + digits] = 0;
            return true;
        }
        let field = &mut self.0[at..at + len];
        let mut x = v;
        for b in field.iter_mut().rev() {
            *b = (x & 0xff) as u8;
            x >>= 8;
        }
        field[0] = 0x80;
        false
    }

    /// Sets the checksum and returns the block.
    fn finish(mut self) -> [u8; BLOCK] {
        self.0[148..156].copy_from_slice(b"        ");
        let sum: u32 = self.0.iter().map(|&b| u32::from(b)).sum();
        let s = format!("{sum:06o}\0 ");
        self.0[148..156].copy_from_slice(s.as_bytes());
        self.0
    }
}

/// The name of an extended header: `PaxHeaders/` and the entry's last component.
fn pax_name(path: &[u8]) -> Vec<u8> {
    let base = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let base = &base[base.len().saturating_sub(80)..];
    let mut n = b"PaxHeaders/".to_vec();
    n.extend_from_slice(base);
    n
}

/// Appends one pax record `LEN KEY=VALUE\n`, LEN counting the whole record.
fn record(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    let base = key.len() + value.len() + 3;
    let mut len = base + 1;
    while base + len.to_string().len() != len {
        len = base + len.to_string().len();
    }
    out.extend_from_slice(len.to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(key);
    out.push(b'=');
    out.extend_from_slice(value);
    out.push(b'\n');
}

/// A time as pax writes it: seconds, and nanoseconds when there are any (negative times
/// count down from the epoch: -1.5 is half a second before -1).
/// An attribute name as a pax keyword, as GNU tar writes it: `%` and `=` (which would end
/// the keyword) percent-encoded.
fn xattr_keyword(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    for &b in name {
        match b {
            b'%' => out.extend_from_slice(b"%25"),
            b'=' => out.extend_from_slice(b"%3D"),
            _ => out.push(b),
        }
    }
    out
}

/// The text form of a POSIX ACL attribute (`user::rw-,user:1000:r--,group::r--,mask::r--,
/// other::---`, ids numeric), from the kernel's binary form: a 4-byte version (2), then
/// 8-byte entries of tag, permissions and id (little-endian). `None` if it is not one.
fn acl_text(v: &[u8]) -> Option<String> {
    let (version, entries) = v.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*version) != 2 || !entries.len().is_multiple_of(8) {
        return None;
    }
    let mut out = vec![];
    for e in entries.chunks_exact(8) {
        let tag = u16::from_le_bytes([e[0], e[1]]);
        let perm = u16::from_le_bytes([e[2], e[3]]);
        let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
        let (kind, qualified) = match tag {
            0x01 => ("user", false),
            0x02 => ("user", true),
            0x04 => ("group", false),
            0x08 => ("group", true),
            0x10 => ("mask", false),
            0x20 => ("other", false),
            _ => return None,
        };
        let bit = |m: u16, c: char| if perm & m != 0 { c } else { '-' };
        let id = if qualified {
            id.to_string()
        } else {
            String::new()
        };
        out.push(format!(
            "{kind}:{id}:{}{}{}",
            bit(4, 'r'),
            bit(2, 'w'),
            bit(1, 'x')
        ));
    }
    Some(out.join(","))
}

pub(crate) fn pax_time(t: Timespec) -> String {
    if t.nsec == 0 {
        return t.sec.to_string();
    }
    let ns = i128::from(t.sec) * 1_000_000_000 + i128::from(t.nsec);
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.abs();
    format!("{sign}{}.{:09}", a / 1_000_000_000, a % 1_000_000_000)
}

/// Linux's `dev_t` split into major and minor (glibc's encoding).
pub(crate) fn major_minor(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (major, minor)
}

/// The name in the ustar header of a sparse member, `DIR/GNUSparseFile.0/NAME` as GNU tar
/// writes it (with 0 for its process id): a reader without sparse support extracts the map
/// and data there, beside where the file belongs.
fn sparse_stand_in(path: &[u8]) -> Vec<u8> {
    let (dir, base) = match path.iter().rposition(|&b| b == b'/') {
        Some(i) => (&path[..=i], &path[i + 1..]),
        None => (&b""[..], path),
    };
    [dir, b"GNUSparseFile.0/", base].concat()
}

/// Long names and link targets that go in members of their own ahead of the entry (GNU's
/// `L` and `K`).
type Longs = Vec<(u8, Vec<u8>)>;

/// The extended header's records, the ustar header and the long names of an entry; `sparse`
/// is the map of a file written sparse.
///
/// A path or link target that is not UTF-8 is never a pax record: those are UTF-8 unless
/// `hdrcharset=BINARY` says otherwise, which GNU tar does not know (it warns about every
/// entry), and without which bsdtar fails the extraction. It stays in ustar's fields when it
/// fits, else goes in a GNU long name, which both read as bytes.
fn headers(e: &Entry, typeflag: u8, sparse: Option<&SparseMap>) -> (Vec<u8>, Header, Longs) {
    let n = &e.node;
    let mut pax = vec![];
    let mut h = Header::new(typeflag);
    let mut longs = Longs::new();
    let mut binary = false;
    let mut path = e.path.clone();
    if typeflag == b'5' {
        path.push(b'/');
    }
    let utf8 = std::str::from_utf8(&path).is_ok();
    if let Some(map) = sparse {
        // The real path is in GNU.sparse.name, whatever its length (GNU tar and libarchive
        // take it over `path`, which is not written: a reader without sparse support would
        // put the map at the real name). The stand-in is cut to fit. A path that is not
        // UTF-8 is the entry's own name instead (see above), which the readers of the
        // format take when GNU.sparse.name is missing.
        record(&mut pax, b"GNU.sparse.major", b"1");
        record(&mut pax, b"GNU.sparse.minor", b"0");
        if utf8 {
            h.name(&sparse_stand_in(&path));
            record(&mut pax, b"GNU.sparse.name", &path);
        } else if !h.name(&path) {
            longs.push((b'L', path.clone()));
        }
        record(
            &mut pax,
            b"GNU.sparse.realsize",
            map.size.to_string().as_bytes(),
        );
    } else if !utf8 {
        if !h.name(&path) {
            longs.push((b'L', path.clone()));
        }
    } else if !h.name(&path) || !path.is_ascii() {
        record(&mut pax, b"path", &path);
    }
    let target: &[u8] = match &e.link {
        Some(first) => first,
        None => &n.link_target,
    };
    if matches!(typeflag, b'1' | b'2') {
        h.text(157, 100, target);
        if std::str::from_utf8(target).is_err() {
            if target.len() > 100 {
                longs.push((b'K', target.to_vec()));
            }
        } else if target.len() > 100 || !target.is_ascii() {
            record(&mut pax, b"linkpath", target);
        }
    }
    h.octal(100, 8, u64::from(n.mode & 0o7777));
    if !h.octal(108, 8, u64::from(n.uid)) {
        record(&mut pax, b"uid", n.uid.to_string().as_bytes());
    }
    if !h.octal(116, 8, u64::from(n.gid)) {
        record(&mut pax, b"gid", n.gid.to_string().as_bytes());
    }
    let size = match (sparse, typeflag) {
        (Some(m), _) => m.text().len() as u64 + m.data_len(),
        (None, b'0') => e.size,
        (None, _) => 0,
    };
    if !h.octal(124, 12, size) {
        record(&mut pax, b"size", size.to_string().as_bytes());
    }
    h.octal(136, 12, n.mtime.sec.clamp(0, (1 << 33) - 1) as u64);
    for (key, name, at) in [(&b"uname"[..], &n.user, 265), (b"gname", &n.group, 297)] {
        h.text(at, 31, name);
        if name.len() > 31 {
            binary |= std::str::from_utf8(name).is_err();
            record(&mut pax, key, name);
        }
    }
    if matches!(typeflag, b'3' | b'4') {
        let (major, minor) = major_minor(n.rdev);
        h.octal(329, 8, major);
        h.octal(337, 8, minor);
    }
    record(&mut pax, b"mtime", pax_time(n.mtime).as_bytes());
    record(&mut pax, b"atime", pax_time(n.atime).as_bytes());
    record(&mut pax, b"ctime", pax_time(n.ctime).as_bytes());
    for (k, v) in &n.xattrs {
        // POSIX ACLs also as star and GNU tar write them (text), which `tar --acls` reads
        // (skipping the raw attribute then); `tar --xattrs` alone sets the raw attribute.
        let acl = match &k[..] {
            b"system.posix_acl_access" => Some(&b"SCHILY.acl.access"[..]),
            b"system.posix_acl_default" => Some(&b"SCHILY.acl.default"[..]),
            _ => None,
        };
        if let Some((key, text)) = acl.zip(acl_text(v)) {
            record(&mut pax, key, text.as_bytes());
        }
        let mut key = b"SCHILY.xattr.".to_vec();
        key.extend_from_slice(&xattr_keyword(k));
        binary |= std::str::from_utf8(k).is_err();
        record(&mut pax, &key, v);
    }
    if binary {
        // Must come before the records it applies to.
        let mut first = vec![];
        record(&mut first, b"hdrcharset", b"BINARY");
        first.extend_from_slice(&pax);
        pax = first;
    }
    (pax, h, longs)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn records_count_their_own_length() {
        for n in [
            0, 1, 5, 80, 90, 95, 96, 97, 98, 99, 100, 990, 995, 996, 9990,
        ] {
            let mut out = vec![];
            record(&mut out, b"k", &vec![b'v'; n]);
            let sp = out.iter().position(|&b| b == b' ').unwrap();
            let len: usize = std::str::from_utf8(&out[..sp]).unwrap().parse().unwrap();
            assert_eq!(len, out.len(), "value of {n} bytes");
        }
    }

    #[test]
    fn acls_as_text_and_attribute_names_escaped() {
        let mut acl = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in [
            (1u16, 6u16, u32::MAX),
            (2, 6, 1234),
            (4, 4, u32::MAX),
            (8, 5, 77),
            (16, 7, u32::MAX),
            (32, 0, u32::MAX),
        ] {
            acl.extend_from_slice(&tag.to_le_bytes());
            acl.extend_from_slice(&perm.to_le_bytes());
            acl.extend_from_slice(&id.to_le_bytes());
        }
        assert_eq!(
            acl_text(&acl).unwrap(),
            "user::rw-,user:1234:rw-,group::r--,group:77:r-x,mask::rwx,other::---"
        );
        assert_eq!(acl_text(b"\x01\0\0\0"), None);
        assert_eq!(acl_text(&acl[..10]), None);
        assert_eq!(xattr_keyword(b"user.a=b%c"), b"user.a%3Db%25c");
    }

    #[test]
    fn times_and_devices() {
        let t = |sec, nsec| pax_time(Timespec { sec, nsec });
        assert_eq!(t(1_500_000_000, 0), "1500000000");
        assert_eq!(t(1_500_000_000, 5), "1500000000.000000005");
        assert_eq!(t(-2, 500_000_000), "-1.500000000");
        assert_eq!(t(-1, 0), "-1");
        // makedev(1, 3) and makedev(7, 200), and a large pair.
        assert_eq!(major_minor(0x103), (1, 3));
        assert_eq!(major_minor(0x7c8), (7, 200));
        let dev = ((0x12345u64 & 0xfffff000) << 32)
            | ((0x12345 & 0xfff) << 8)
            | ((0xabcdefu64 & 0xffffff00) << 12)
            | (0xabcdef & 0xff);
        assert_eq!(major_minor(dev), (0x12345, 0xabcdef));
    }

    #[test]
    fn numbers_too_large_for_octal_use_base_256() {
        let mut h = Header::new(b'0');
        assert!(h.octal(124, 12, 0o77_777_777_777));
        assert!(!h.octal(124, 12, 1 << 40));
        assert_eq!(h.0[124], 0x80);
        assert_eq!(&h.0[130..136], &[1, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn long_names_split_or_overflow() {
        let mut h = Header::new(b'0');
        let long = [vec![b'd'; 120], b"/".to_vec(), vec![b'f'; 50]].concat();
        assert!(h.name(&long));
        assert_eq!(&h.0[345..465], &long[..120]);
        let mut h = Header::new(b'0');
        assert!(!h.name(&vec![b'x'; 300]));
    }
}

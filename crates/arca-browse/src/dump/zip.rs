//! The dump's zip writer, streamed (no seeking: sizes and checksums follow each entry in a
//! data descriptor, so stdout works): unix modes in the external attributes, owners in the
//! Info-ZIP "ux" field (restored by `unzip -X`), mtimes as local
//! DOS times (clamped to 1980–2107) plus the extended-timestamp field (UTC seconds, signed
//! before 1970, unsigned from 2038, none past 2106), symlinks as unix symlink
//! entries, file content deflated (zip64 for files from 4 GiB). Names are stored as they are
//! (flagged UTF-8 when they are). Zip has no hard links (each name holds the
//! content), FIFOs or device nodes, nor names over 64 KiB (left out, reported).

use std::io::Write;

use arca_format::{NodeKind, Timespec};
use zip::write::{FullFileOptions, StreamWriter};
use zip::{CompressionMethod, DateTime, System, ZipWriter};

use super::{DumpError, Entry, Sink, Started};

const S_IFREG: u32 = 0o100_000;
const S_IFDIR: u32 = 0o040_000;
const S_IFLNK: u32 = 0o120_000;
/// MS-DOS's folder attribute, in the low byte of the external attributes.
const MSDOS_DIRECTORY: u32 = 0x10;
/// Extended timestamp extra field (Info-ZIP "UT").
const EXTENDED_TIMESTAMP: u16 = 0x5455;
/// Info-ZIP's new Unix extra field ("ux"): the owner's uid and gid, which `unzip -X` restores.
const UNIX_OWNER: u16 = 0x7875;
/// Longest entry name written. A local header's name and extra fields share 64 KiB with its
/// fixed 30 bytes (the zip crate refuses more); the extra fields written take under 64.
const MAX_NAME: usize = u16::MAX as usize - 30 - 64;

/// Writes a streamed zip archive to `out`.
pub(crate) struct ZipSink<W: Write> {
    zip: Option<ZipWriter<StreamWriter<Fused<W>>>>,
}

impl<W: Write> ZipSink<W> {
    pub fn new(out: W) -> Self {
        ZipSink {
            zip: Some(ZipWriter::new_stream(Fused { out, failed: false })),
        }
    }
}

/// The output, which after its first error takes (and drops) whatever it is given: the zip
/// writer, dropped unfinished after a write error, finishes the archive in its `Drop` and
/// prints its own second report of the error when that fails (a full disk, a closed pipe).
struct Fused<W> {
    out: W,
    failed: bool,
}

impl<W: Write> Write for Fused<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.failed {
            return Ok(buf.len());
        }
        self.out.write(buf).inspect_err(|_| self.failed = true)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.failed {
            return Ok(());
        }
        self.out.flush().inspect_err(|_| self.failed = true)
    }
}

fn write_err(e: std::io::Error) -> DumpError {
    DumpError::Write {
        what: "zip archive",
        source: e,
    }
}

fn zip_err(e: &Entry, err: zip::result::ZipError) -> DumpError {
    match err {
        zip::result::ZipError::Io(source) => write_err(source),
        other => DumpError::Entry {
            path: e.snapshot_path(),
            detail: format!("zip archive: {other}"),
        },
    }
}

/// The DOS time of `t` in local time (what zip readers show), within DOS's 1980–2107.
pub(crate) fn dos_time(t: Timespec) -> DateTime {
    use chrono::{Datelike, Timelike};
    let Some(local) = chrono::DateTime::from_timestamp(t.sec, 0)
        .map(|d| d.with_timezone(&chrono::Local).naive_local())
    else {
        return DateTime::default();
    };
    if local.year() < 1980 {
        return DateTime::default();
    }
    if local.year() > 2107 {
        return DateTime::from_date_and_time(2107, 12, 31, 23, 59, 58).unwrap_or_default();
    }
    DateTime::from_date_and_time(
        local.year() as u16,
        local.month() as u8,
        local.day() as u8,
        local.hour() as u8,
        local.minute() as u8,
        local.second() as u8,
    )
    .unwrap_or_default()
}

/// The 32 bits of the extended-timestamp field for `sec`, `None` out of its range (before
/// 1901 or after 2106). Info-ZIP's unzip (64-bit `time_t`) reads them unsigned when the
/// entry's DOS time is from 2038-01-18 on, and signed otherwise: times to 2038 are written
/// signed, later ones unsigned. Without the field, unzip took a 2040 time from the DOS time,
/// in the extracting machine's time zone (hours off when it differs from the dumping one's)
/// and to 2 seconds.
fn ut_seconds(sec: i64) -> Option<[u8; 4]> {
    if let Ok(s) = i32::try_from(sec) {
        return Some(s.to_le_bytes());
    }
    u32::try_from(sec).ok().map(u32::to_le_bytes)
}

/// The "ux" field's data: version 1, then the uid and the gid, each as its size (4) and
/// little-endian bytes.
fn owner_field(uid: u32, gid: u32) -> Vec<u8> {
    let mut f = vec![1u8, 4];
    f.extend_from_slice(&uid.to_le_bytes());
    f.push(4);
    f.extend_from_slice(&gid.to_le_bytes());
    f
}

impl<W: Write> Sink for ZipSink<W> {
    fn entry(&mut self, e: &Entry) -> Result<Started, DumpError> {
        let Some(zip) = self.zip.as_mut() else {
            return Err(DumpError::Internal("zip archive already finished".into()));
        };
        let n = &e.node;
        let perm = n.mode & 0o7777;
        let (kind_bits, method, suffix) = match n.kind() {
            NodeKind::File => (S_IFREG, CompressionMethod::Deflated, false),
            NodeKind::Dir => (S_IFDIR, CompressionMethod::Stored, true),
            NodeKind::Symlink => (S_IFLNK, CompressionMethod::Stored, false),
            NodeKind::Fifo => return Ok(Started::Skipped("a zip archive cannot hold a FIFO")),
            NodeKind::CharDev | NodeKind::BlockDev => {
                return Ok(Started::Skipped("a zip archive cannot hold a device node"));
            }
            NodeKind::Socket => return Ok(Started::Skipped("a socket has no archive entry")),
        };
        let mut name = e.path.clone();
        if suffix {
            name.push(b'/');
        }
        // Left out rather than ending the dump (the zip crate refuses it): the rest of the
        // archive is still written.
        if name.len() > MAX_NAME {
            return Ok(Started::Skipped(
                "its path is longer than a zip entry name can be (64 KiB)",
            ));
        }
        let mut opts = FullFileOptions::default()
            .compression_method(method)
            .system(System::Unix)
            .external_attributes((kind_bits | perm) << 16)
            .last_modified_time(dos_time(n.mtime))
            .large_file(n.kind() == NodeKind::File && e.size >= zip::ZIP64_BYTES_THR - (1 << 20));
        if let Some(secs) = ut_seconds(n.mtime.sec) {
            let mut ut = vec![1u8];
            ut.extend_from_slice(&secs);
            opts.add_extra_field(EXTENDED_TIMESTAMP, ut, false)
                .map_err(|err| zip_err(e, err))?;
        }
        opts.add_extra_field(UNIX_OWNER, owner_field(n.uid, n.gid), false)
            .map_err(|err| zip_err(e, err))?;
        if n.kind() == NodeKind::Dir {
            if let Ok(text) = std::str::from_utf8(&name) {
                zip.add_directory(text, opts)
                    .map_err(|err| zip_err(e, err))?;
                return Ok(Started::Written);
            }
            // `add_directory` takes the name as text (a lossy name split the folder in two on
            // extraction, and no entry lost its mode and time). A folder whose name is not is
            // an empty entry named with its bytes and a `/`, as `add_directory` writes it,
            // but streamed: the zip crate streams an entry (a data descriptor after it) only
            // if its unix mode is not a folder's, and seeks back to finish it otherwise. So
            // it is marked a folder by MS-DOS's attribute (0x10) and its name, which is how
            // unzip, bsdtar and Python's zipfile tell one; its unix mode holds the
            // permissions.
            opts = opts.external_attributes((perm << 16) | MSDOS_DIRECTORY);
        }
        zip.start_file_with_options(opts.name(&name))
            .map_err(|err| zip_err(e, err))?;
        if n.kind() == NodeKind::Symlink {
            zip.write_all(&n.link_target).map_err(write_err)?;
        }
        Ok(Started::Written)
    }

    fn data(&mut self, bytes: &[u8]) -> Result<(), DumpError> {
        match self.zip.as_mut() {
            Some(z) => z.write_all(bytes).map_err(write_err),
            None => Err(DumpError::Internal("zip archive already finished".into())),
        }
    }

    fn finish(&mut self) -> Result<(), DumpError> {
        let Some(zip) = self.zip.take() else {
            return Ok(());
        };
        let mut out = zip
            .finish()
            .map_err(|e| match e {
                zip::result::ZipError::Io(source) => write_err(source),
                other => DumpError::Write {
                    what: "zip archive",
                    source: std::io::Error::other(other.to_string()),
                },
            })?
            .into_inner();
        out.out.flush().map_err(write_err)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn times_after_2038_keep_their_utc_seconds() {
        let mut out = vec![];
        let mut sink = ZipSink::new(&mut out);
        for (name, sec) in [("y2040", 2_208_988_801i64), ("y2023", 1_700_000_001)] {
            let e = Entry {
                path: name.as_bytes().to_vec(),
                node: arca_format::Node {
                    kind: Some(NodeKind::Symlink),
                    mode: 0o777,
                    mtime: Timespec { sec, nsec: 0 },
                    link_target: b"t".to_vec(),
                    ..arca_format::Node::default()
                },
                size: 0,
                link: None,
            };
            assert_eq!(sink.entry(&e).unwrap(), Started::Written);
        }
        sink.finish().unwrap();
        drop(sink);
        let has = |sec: u32| {
            let mut ut = b"UT\x05\x00\x01".to_vec();
            ut.extend_from_slice(&sec.to_le_bytes());
            out.windows(ut.len()).filter(|w| *w == &ut[..]).count()
        };
        // In the local header and the central directory.
        assert_eq!(has(2_208_988_801), 2);
        assert_eq!(has(1_700_000_001), 2);
        assert_eq!(ut_seconds(-1), Some([0xff; 4]));
        assert_eq!(ut_seconds(1 << 32), None);
        assert_eq!(ut_seconds(-(1 << 31) - 1), None);
    }

    /// Out of DOS's 1980–2107, the DOS field is clamped (1980-01-01 00:00:00, which unzip
    /// needs to read a UT time before 1970 as signed; 2107-12-31 23:59:58), and the UT field
    /// keeps the true time where its 32 bits reach (1901–2106), signed before 1970.
    #[test]
    fn times_out_of_the_dos_range_are_clamped_and_kept_in_the_ut_field() {
        let fields = |d: DateTime| {
            (
                d.year(),
                d.month(),
                d.day(),
                d.hour(),
                d.minute(),
                d.second(),
            )
        };
        let t = |sec| dos_time(Timespec { sec, nsec: 0 });
        // 1950-06-01 12:00 UTC, 1901-12-14 00:00 UTC: before 1980 in every time zone.
        for sec in [-618_062_400, -2_147_472_000, 0] {
            assert_eq!(fields(t(sec)), (1980, 1, 1, 0, 0, 0), "{sec}");
        }
        // 2110-06-01 00:00 UTC: after 2107 in every time zone, past the UT field's 2106.
        assert_eq!(fields(t(4_431_024_000)), (2107, 12, 31, 23, 59, 58));
        let mut out = vec![];
        let mut sink = ZipSink::new(&mut out);
        for (name, sec) in [("y1950", -618_062_400i64), ("y2110", 4_431_024_000)] {
            let e = Entry {
                path: name.as_bytes().to_vec(),
                node: arca_format::Node {
                    kind: Some(NodeKind::Symlink),
                    mode: 0o777,
                    mtime: Timespec { sec, nsec: 0 },
                    link_target: b"t".to_vec(),
                    ..arca_format::Node::default()
                },
                size: 0,
                link: None,
            };
            assert_eq!(sink.entry(&e).unwrap(), Started::Written);
        }
        sink.finish().unwrap();
        drop(sink);
        let mut ut = b"UT\x05\x00\x01".to_vec();
        let any_ut = out.windows(ut.len()).filter(|w| *w == &ut[..]).count();
        ut.extend_from_slice(&(-618_062_400i32).to_le_bytes());
        let n = out.windows(ut.len()).filter(|w| *w == &ut[..]).count();
        // In the local header and the central directory, and none for 2110.
        assert_eq!((n, any_ut), (2, 2));
        let mut read = zip::ZipArchive::new(std::io::Cursor::new(out)).unwrap();
        for (name, want) in [
            ("y1950", (1980, 1, 1, 0, 0, 0)),
            ("y2110", (2107, 12, 31, 23, 59, 58)),
        ] {
            let e = read.by_name(name).unwrap();
            assert_eq!(e.last_modified().map(fields), Some(want), "{name}");
        }
    }

    #[test]
    fn the_longest_name_fits_with_every_extra_field() {
        let mut out = vec![];
        let mut sink = ZipSink::new(&mut out);
        for (i, (len, size, started)) in [
            (MAX_NAME, 5u64 << 30, Started::Written),
            (MAX_NAME, 0, Started::Written),
            (MAX_NAME + 1, 0, Started::Skipped("")),
        ]
        .into_iter()
        .enumerate()
        {
            let mut path = vec![b'n'; len - 1];
            path.push(b'0' + i as u8);
            let e = Entry {
                path,
                node: arca_format::Node {
                    kind: Some(NodeKind::File),
                    mtime: Timespec { sec: 1, nsec: 0 },
                    ..arca_format::Node::default()
                },
                size,
                link: None,
            };
            // (An error would print the whole name.)
            let got = sink.entry(&e).map_err(|e| e.to_string().len()).unwrap();
            assert_eq!(
                std::mem::discriminant(&got),
                std::mem::discriminant(&started),
                "{len} {size}"
            );
        }
    }

    #[test]
    fn owners_ride_in_the_unix_extra_field() {
        let mut out = vec![];
        let mut sink = ZipSink::new(&mut out);
        let e = Entry {
            path: b"f".to_vec(),
            node: arca_format::Node {
                kind: Some(NodeKind::File),
                mode: 0o644,
                uid: 3_000_000,
                gid: 4_000_000,
                ..arca_format::Node::default()
            },
            size: 0,
            link: None,
        };
        assert_eq!(sink.entry(&e).unwrap(), Started::Written);
        sink.finish().unwrap();
        drop(sink);
        // Id 0x7875, 11 bytes: version 1, a 4-byte uid, a 4-byte gid.
        let mut ux = vec![0x75, 0x78, 11, 0, 1, 4];
        ux.extend_from_slice(&3_000_000u32.to_le_bytes());
        ux.push(4);
        ux.extend_from_slice(&4_000_000u32.to_le_bytes());
        let n = out.windows(ux.len()).filter(|w| *w == &ux[..]).count();
        assert_eq!(n, 2, "in the local header and the central directory");
    }
}

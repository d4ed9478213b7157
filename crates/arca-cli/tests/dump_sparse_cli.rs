//! `arca dump --archive tar` of sparse files: a file with holes is a GNU sparse 1.0 member
//! (pax), so the archive holds its data only and GNU tar, bsdtar (when installed) and
//! Python's tarfile extract it with its holes and its bytes; a hard link to it, a long
//! non-UTF-8 name and a file without holes come through as well. In a zip, which has no
//! sparse form, the holes are deflated zeros: small, though extraction writes them.

#![allow(clippy::unwrap_used)]

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use arca_testkit::random_bytes;
use common::*;

/// Size of each sparse file: 64 MiB.
const SIZE: u64 = 64 << 20;

fn has_gnu_tar() -> bool {
    Command::new("tar")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("GNU tar"))
        .unwrap_or(false)
}

/// Writes a sparse file of [`SIZE`] bytes holding `islands` (offset, bytes) of data.
fn sparse(path: &Path, islands: &[(u64, &[u8])]) {
    let f = fs::File::create(path).unwrap();
    f.set_len(SIZE).unwrap();
    for (at, bytes) in islands {
        f.write_all_at(bytes, *at).unwrap();
    }
}

/// Checks that the extraction `out` of the source `src` holds the same bytes for `names`, and
/// that the sparse ones take far fewer blocks than their size.
fn same_and_sparse(src: &Path, out: &Path, names: &[&[u8]], reader: &str) {
    for name in names {
        let (a, b) = (
            src.join(OsStr::from_bytes(name)),
            out.join(OsStr::from_bytes(name)),
        );
        let what = format!("{reader}: {}", b.display());
        assert!(
            fs::read(&a).unwrap() == fs::read(&b).unwrap(),
            "{what}: bytes differ"
        );
        let m = fs::metadata(&b).unwrap();
        assert_eq!(m.len(), fs::metadata(&a).unwrap().len(), "{what}");
        if m.len() == SIZE {
            assert!(
                m.blocks() * 512 < SIZE / 16,
                "{what}: {} blocks for a sparse file",
                m.blocks()
            );
        }
    }
}

#[test]
fn a_sparse_file_is_a_sparse_tar_member() {
    if !has_gnu_tar() {
        eprintln!("GNU tar not found: skipped");
        return;
    }
    let e = Env::new();
    let src = e.path("src");
    let long_dir = src.join("d".repeat(120));
    fs::create_dir_all(&long_dir).unwrap();
    // Two islands, ending in a hole; and a long non-UTF-8 name ending in data.
    let (a, b) = (random_bytes(1, 100_000), random_bytes(2, 4096));
    sparse(
        &src.join("disk.img"),
        &[(8 << 20, &a), ((40 << 20) + 5, &b)],
    );
    let odd: Vec<u8> = [b"d".repeat(120), b"/".to_vec(), b"\xff".repeat(150)].concat();
    let tail = random_bytes(3, 1000);
    sparse(&src.join(OsStr::from_bytes(&odd)), &[(SIZE - 1000, &tail)]);
    // Holes only: its map is one empty region at its size.
    sparse(&src.join("holes.img"), &[]);
    fs::hard_link(src.join("disk.img"), src.join("link.img")).unwrap();
    let dense = random_bytes(4, 300_000);
    fs::write(src.join("dense.bin"), &dense).unwrap();
    e.init(&SMALL_CHUNKS);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);

    let archive = e.path("a.tar");
    e.ok(&[
        "dump",
        "latest",
        src.to_str().unwrap(),
        "-t",
        archive.to_str().unwrap(),
    ]);
    // Three 64 MiB files; before, the archive held every zero of them (201 MB).
    let len = fs::metadata(&archive).unwrap().len();
    assert!(len < 4 << 20, "archive of {len} bytes");
    let names: [&[u8]; 5] = [b"disk.img", b"link.img", &odd, b"holes.img", b"dense.bin"];

    // GNU tar lists the real size and extracts holes as holes, the hard link as a link.
    let o = Command::new("tar")
        .arg("-tvf")
        .arg(&archive)
        .output()
        .unwrap();
    assert!(o.status.success(), "tar -t: {}", stderr(&o));
    let listing = String::from_utf8_lossy(&o.stdout);
    let disk = listing.lines().find(|l| l.ends_with("/disk.img")).unwrap();
    assert!(disk.contains(&SIZE.to_string()), "{listing}");
    assert!(!listing.contains("GNUSparseFile"), "{listing}");
    let x = e.path("x");
    fs::create_dir(&x).unwrap();
    let o = Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&x)
        .output()
        .unwrap();
    assert!(o.status.success(), "tar -x: {}", stderr(&o));
    // No warning for the name that is not UTF-8 (it was `hdrcharset`, unknown to GNU tar).
    assert_eq!(stderr(&o), "");
    let out = x.join(src.strip_prefix("/").unwrap());
    same_and_sparse(&src, &out, &names, "GNU tar");
    let ino = |p: PathBuf| fs::metadata(p).unwrap().ino();
    assert_eq!(ino(out.join("disk.img")), ino(out.join("link.img")));

    // Python's tarfile reads the sparse member's bytes through its map.
    let script = r#"
import hashlib, sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    for m in t:
        if m.name.endswith('/disk.img'):
            print(m.size, hashlib.sha256(t.extractfile(m).read()).hexdigest())
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&archive)
        .output()
        .unwrap();
    assert!(o.status.success(), "python: {}", stderr(&o));
    let o = String::from_utf8(o.stdout).unwrap();
    let hash = Command::new("sha256sum")
        .arg(src.join("disk.img"))
        .output()
        .unwrap();
    let hash = String::from_utf8(hash.stdout).unwrap();
    assert_eq!(o.trim(), format!("{SIZE} {}", &hash[..64]));

    // bsdtar, when installed.
    if Command::new("bsdtar").arg("--version").output().is_err() {
        eprintln!("bsdtar not found (apt-get install libarchive-tools): its check skipped");
        return;
    }
    let y = e.path("y");
    fs::create_dir(&y).unwrap();
    let o = Command::new("bsdtar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&y)
        .output()
        .unwrap();
    assert!(o.status.success(), "bsdtar -x: {}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let out = y.join(src.strip_prefix("/").unwrap());
    same_and_sparse(&src, &out, &names, "bsdtar");
    assert_eq!(ino(out.join("disk.img")), ino(out.join("link.img")));
}

/// Zip has no sparse form: a sparse file's holes are zeros there, which deflate makes about a
/// thousand times smaller (extraction writes every zero).
#[test]
fn a_sparse_file_in_a_zip_is_deflated_zeros() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir(&src).unwrap();
    let island = random_bytes(5, 100_000);
    sparse(&src.join("disk.img"), &[(8 << 20, &island)]);
    e.init(&SMALL_CHUNKS);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let archive = e.path("a.zip");
    e.ok(&[
        "dump",
        "latest",
        src.to_str().unwrap(),
        "--archive",
        "zip",
        "-t",
        archive.to_str().unwrap(),
    ]);
    let len = fs::metadata(&archive).unwrap().len();
    assert!(len < 1 << 20, "zip of {len} bytes");
    let script = r#"
import hashlib, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for i in z.infolist():
        if i.filename.endswith('/disk.img'):
            print(i.file_size, hashlib.sha256(z.read(i)).hexdigest())
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&archive)
        .output()
        .unwrap();
    assert!(o.status.success(), "python: {}", stderr(&o));
    let hash = Command::new("sha256sum")
        .arg(src.join("disk.img"))
        .output()
        .unwrap();
    let hash = String::from_utf8(hash.stdout).unwrap();
    assert_eq!(
        String::from_utf8(o.stdout).unwrap().trim(),
        format!("{SIZE} {}", &hash[..64])
    );
}

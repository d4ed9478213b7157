//! `arca dump` end to end: a tree of every entry kind as tar, extracted by GNU tar and compared
//! byte for byte and metadata for metadata, its pax records read back by Python; a zip listed
//! and read by Python's zipfile; one large file streamed with bounded memory; snapshot filters,
//! `--target`, and the error cases.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use arca_testkit::{compare, generate, is_root, text_bytes};
use common::*;

/// `src` as it appears inside an archive or under an extraction folder (no leading `/`).
fn inside(src: &Path) -> PathBuf {
    src.strip_prefix("/").unwrap().to_path_buf()
}

fn has_gnu_tar() -> bool {
    Command::new("tar")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("GNU tar"))
        .unwrap_or(false)
}

fn has_bsdtar() -> bool {
    Command::new("bsdtar").arg("--version").output().is_ok()
}

/// `TOOL -xpf ARCHIVE -C INTO` (`tar` or `bsdtar`), into a new folder `into`.
fn extract(tool: &str, archive: &Path, into: &Path) -> std::process::Output {
    fs::create_dir(into).unwrap();
    Command::new(tool)
        .arg("-xpf")
        .arg(archive)
        .arg("-C")
        .arg(into)
        .output()
        .unwrap()
}

fn python(script: &str, arg: &Path) -> serde_json::Value {
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(arg)
        .output()
        .unwrap();
    assert!(o.status.success(), "python: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Members of a tar as Python's tarfile reads them: names, link targets and pax values in hex.
const TAR_LIST: &str = r#"
import json, sys, tarfile
h = lambda s: s.encode('utf-8', 'surrogateescape').hex()
out = []
with tarfile.open(sys.argv[1], encoding='utf-8', errors='surrogateescape') as t:
    for m in t:
        out.append({'name': h(m.name), 'type': m.type.decode(), 'mode': m.mode, 'uid': m.uid,
                    'gid': m.gid, 'uname': m.uname, 'gname': m.gname, 'size': m.size,
                    'link': h(m.linkname), 'major': m.devmajor, 'minor': m.devminor,
                    'pax': {k: h(v) for k, v in m.pax_headers.items()}})
print(json.dumps(out))
"#;

/// Entries of a zip: raw names, unix modes, DOS times, content in hex.
const ZIP_LIST: &str = r#"
import json, sys, zipfile
out = []
with zipfile.ZipFile(sys.argv[1]) as z:
    assert z.testzip() is None
    for i in z.infolist():
        raw = i.filename.encode('utf-8' if i.flag_bits & 0x800 else 'cp437')
        out.append({'name': raw.hex(), 'mode': i.external_attr >> 16, 'dos': i.external_attr & 0xff,
                    'dir': i.is_dir(), 'time': list(i.date_time),
                    'size': i.file_size, 'data': z.read(i).hex()})
print(json.dumps(out))
"#;

fn unhex(s: &serde_json::Value) -> Vec<u8> {
    let s = s.as_str().unwrap();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn pax_time(sec: i64, nsec: i64) -> String {
    if nsec == 0 {
        sec.to_string()
    } else {
        format!("{sec}.{nsec:09}")
    }
}

/// Compares an extracted tree with its source, access times aside: `tar -x` sets them to the
/// time of extraction (GNU tar restores atimes only in incremental mode). Returns the capture
/// of the extracted tree.
fn same_but_atimes_of(
    mut expected: BTreeMap<PathBuf, compare::Entry>,
    src: &Path,
    out: &Path,
) -> BTreeMap<PathBuf, compare::Entry> {
    let mut after = compare::snapshot(out).unwrap();
    for m in [&mut expected, &mut after] {
        for v in m.values_mut() {
            v.atime = (0, 0);
        }
    }
    let d = compare::diff(&expected, src, &after, out);
    assert!(d.is_empty(), "extracted tree differs:\n{}", d.join("\n"));
    after
}

fn same_but_atimes(src: &Path, out: &Path) {
    same_but_atimes_of(compare::snapshot(src).unwrap(), src, out);
}

#[test]
fn tar_of_every_kind_extracts_identically() {
    if !has_gnu_tar() {
        eprintln!("GNU tar not found: skipped");
        return;
    }
    let e = Env::new();
    let src = e.path("src");
    let g = generate::every_kind(&src, 7).unwrap();
    let before = compare::snapshot(&src).unwrap();
    e.init(&SMALL_CHUNKS);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);

    // To stdout and to --target: the same bytes.
    let archive = e.path("kinds.tar");
    e.ok(&[
        "dump",
        "latest",
        src.to_str().unwrap(),
        "--target",
        archive.to_str().unwrap(),
    ]);
    let piped = e.run(&["dump", "latest", src.to_str().unwrap()]);
    assert!(piped.status.success(), "{}", stderr(&piped));
    let bytes = fs::read(&archive).unwrap();
    assert_eq!(piped.stdout, bytes, "stdout and --target differ");
    assert_eq!(bytes.len() % 512, 0);

    // Extracted by GNU tar, as root with numeric owners.
    let x = e.path("x");
    fs::create_dir(&x).unwrap();
    let mut tar = Command::new("tar");
    tar.args(["--xattrs", "--xattrs-include=*", "-xpf"])
        .arg(&archive)
        .arg("-C")
        .arg(&x);
    if is_root() {
        tar.arg("--numeric-owner");
    }
    let o = tar.output().unwrap();
    assert!(o.status.success(), "tar -x: {}", stderr(&o));
    let out = x.join(inside(&src));
    // Sockets have no tar entry: dump leaves them out with a warning.
    assert!(stderr(&piped).contains("socket"), "{}", stderr(&piped));
    let mut expected = before.clone();
    assert_eq!(expected.remove(Path::new("socket")).unwrap().kind, 's');
    let after = same_but_atimes_of(expected, &src, &out);
    if g.devices {
        assert_eq!(after[Path::new("chardev")].kind, 'c');
    }

    // The pax records themselves, as another reader sees them.
    let members = python(TAR_LIST, &archive);
    let by_name: BTreeMap<Vec<u8>, &serde_json::Value> = members
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (unhex(&m["name"]), m))
        .collect();
    let key = |rel: &[u8]| {
        let mut k = inside(&src).as_os_str().as_bytes().to_vec();
        if !rel.is_empty() {
            k.push(b'/');
            k.extend_from_slice(rel);
        }
        k
    };
    assert_eq!(
        by_name.len(),
        before.len(),
        "every entry but the socket, and src/"
    );
    assert_eq!(by_name[&key(b"")]["type"], "5");
    let small = by_name[&key(b"small.txt")];
    let m = fs::symlink_metadata(src.join("small.txt")).unwrap();
    let pax = |m: &serde_json::Value, k: &str| String::from_utf8(unhex(&m["pax"][k])).unwrap();
    assert_eq!(pax(small, "mtime"), pax_time(m.mtime(), m.mtime_nsec()));
    assert_eq!(pax(small, "atime"), pax_time(m.atime(), m.atime_nsec()));
    assert_eq!(pax(small, "ctime"), pax_time(m.ctime(), m.ctime_nsec()));
    assert_eq!(pax(small, "SCHILY.xattr.user.comment"), "a note");
    assert_eq!(
        unhex(&small["pax"]["SCHILY.xattr.user.binary"]),
        [0, 1, 2, 255]
    );
    // An ACL also as text, which `tar --acls` reads (it skips the raw attribute then).
    let acl = xattr::get(src.join("dir/text.log"), "system.posix_acl_access");
    if acl.is_ok_and(|a| a.is_some()) {
        let log = by_name[&key(b"dir/text.log")];
        assert_eq!(
            pax(log, "SCHILY.acl.access"),
            "user::rw-,user:1000:rw-,group::r--,mask::rw-,other::r--"
        );
    }
    assert_eq!(small["size"], 11);
    assert_eq!(small["mode"], 0o644);
    let links: Vec<_> = ["dir/hard-2", "dir/nested/hard-3", "hard-1"]
        .iter()
        .map(|n| by_name[&key(n.as_bytes())]["type"].as_str().unwrap())
        .collect();
    assert_eq!(links, ["0", "1", "1"], "first name holds the data");
    assert_eq!(unhex(&by_name[&key(b"hard-1")]["link"]), key(b"dir/hard-2"));
    assert_eq!(by_name[&key(b"fifo")]["type"], "6");
    assert_eq!(by_name[&key(b"setuid")]["mode"], 0o4755);
    assert_eq!(
        unhex(&by_name[&key(b"link-abs")]["link"]),
        b"/nonexistent/arca/absolute target"
    );
    assert!(by_name.contains_key(&key(b"latin1-\xe9t\xe9")));
    if is_root() {
        assert_eq!(small["uid"], 1234);
        assert_eq!(small["gid"], 5678);
        let c = by_name[&key(b"chardev")];
        assert_eq!(
            (c["type"].as_str(), c["major"].as_u64(), c["minor"].as_u64()),
            (Some("3"), Some(1), Some(3))
        );
        let b = by_name[&key(b"blockdev")];
        assert_eq!(
            (b["major"].as_u64(), b["minor"].as_u64()),
            (Some(7), Some(200))
        );
    }
}

#[test]
fn long_and_odd_names_and_the_root() {
    if !has_gnu_tar() {
        eprintln!("GNU tar not found: skipped");
        return;
    }
    let e = Env::new();
    let src = e.path("src");
    // A path over 255 bytes, a name of 200 bytes, a link target of 150, non-UTF-8 names.
    let deep = src
        .join("a".repeat(90))
        .join("b".repeat(90))
        .join("c".repeat(90));
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("d".repeat(200)), b"deep").unwrap();
    std::os::unix::fs::symlink("t".repeat(150), src.join("long-target")).unwrap();
    let odd = src.join(OsStr::from_bytes(b"dir-\xff\xfe"));
    fs::create_dir(&odd).unwrap();
    fs::write(odd.join(OsStr::from_bytes(b"\xe9")), b"odd").unwrap();
    // Not UTF-8 and too long for ustar's fields: a name of 180 bytes, a target of 150.
    let long_odd = [b"\xe9".repeat(180)].concat();
    fs::write(odd.join(OsStr::from_bytes(&long_odd)), b"long odd").unwrap();
    std::os::unix::fs::symlink(
        OsStr::from_bytes(&b"\xfe".repeat(150)),
        src.join("odd-target"),
    )
    .unwrap();
    std::os::unix::fs::symlink(OsStr::from_bytes(b"\xfe"), src.join("short-odd-target")).unwrap();
    e.init(&SMALL_CHUNKS);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);

    // The whole snapshot: the folders above src are in it too.
    let archive = e.path("all.tar");
    e.ok(&["dump", "latest", "/", "-t", archive.to_str().unwrap()]);
    let x = e.path("x");
    let o = extract("tar", &archive, &x);
    assert!(o.status.success(), "{}", stderr(&o));
    // Not a warning: `hdrcharset`, which GNU tar does not know, is not written for names.
    assert_eq!(stderr(&o), "");
    same_but_atimes(&src, &x.join(inside(&src)));
    // bsdtar reads the names as bytes too (a `path` record that is not UTF-8, without
    // `hdrcharset`, failed its extraction).
    if has_bsdtar() {
        let y = e.path("y");
        let o = extract("bsdtar", &archive, &y);
        assert!(o.status.success(), "bsdtar: {}", stderr(&o));
        assert_eq!(stderr(&o), "");
        same_but_atimes(&src, &y.join(inside(&src)));
    } else {
        eprintln!("bsdtar not found (apt-get install libarchive-tools): its check skipped");
    }
    let members = python(TAR_LIST, &archive);
    let names: Vec<Vec<u8>> = members
        .as_array()
        .unwrap()
        .iter()
        .map(|m| unhex(&m["name"]))
        .collect();
    // The first entry is the top folder of the source's absolute path.
    let rel = inside(&src);
    let top = rel.components().next().unwrap();
    assert_eq!(names[0], top.as_os_str().as_bytes());
    let long = names.iter().find(|n| n.ends_with(b"ddd")).unwrap();
    assert!(long.len() > 400, "{}", long.len());
}

#[test]
fn zip_of_a_folder_holds_modes_times_links_and_bytes() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    std::os::unix::fs::symlink("docs/a.txt", src.join("link")).unwrap();
    fs::write(src.join("run.sh"), b"#!/bin/sh\n").unwrap();
    fs::set_permissions(
        src.join("run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o750),
    )
    .unwrap();
    fs::write(src.join(OsStr::from_bytes(b"caf\xe9")), b"latin-1 name").unwrap();
    // A folder whose name is not UTF-8 has its entry, with its mode and time (it had none:
    // the zip crate takes folder names as text).
    let odd_dir = src.join(OsStr::from_bytes(b"dir\xff"));
    fs::create_dir(&odd_dir).unwrap();
    fs::write(odd_dir.join("in.txt"), b"inside").unwrap();
    fs::set_permissions(
        &odd_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o750),
    )
    .unwrap();
    nix::unistd::mkfifo(
        &src.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    fs::hard_link(src.join("top.bin"), src.join("top-again.bin")).unwrap();
    e.init(&SMALL_CHUNKS);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let archive = e.path("src.zip");
    let o = e
        .cmd(&["dump", "--archive", "zip", "latest", src.to_str().unwrap()])
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("fifo: a zip archive cannot hold a FIFO"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("UTF-8"), "{}", stderr(&o));
    fs::write(&archive, &o.stdout).unwrap();
    let entries = python(ZIP_LIST, &archive);
    let prefix = inside(&src).as_os_str().as_bytes().to_vec();
    let mut seen = 0;
    for z in entries.as_array().unwrap() {
        let name = unhex(&z["name"]);
        let rel = name.strip_prefix(prefix.as_slice()).unwrap();
        let rel = rel.strip_prefix(b"/").unwrap_or(rel);
        let rel = rel.strip_suffix(b"/").unwrap_or(rel);
        let p = src.join(OsStr::from_bytes(rel));
        let m = fs::symlink_metadata(&p).unwrap();
        let mut mode = z["mode"].as_u64().unwrap() as u32;
        assert_eq!(z["dir"].as_bool(), Some(m.is_dir()), "{}", p.display());
        if mode & 0o170000 == 0 {
            // The folder whose name is not UTF-8: a folder by its MS-DOS attribute and the
            // `/` ending its name (see the zip writer).
            assert_eq!(rel, b"dir\xff");
            assert_eq!(z["dos"].as_u64(), Some(0x10));
            mode |= 0o040000;
        }
        assert_eq!(mode, m.mode(), "{}", p.display());
        let t = chrono::DateTime::from_timestamp(m.mtime(), 0).unwrap();
        use chrono::{Datelike, Timelike};
        let want = [
            t.year() as u64,
            u64::from(t.month()),
            u64::from(t.day()),
            u64::from(t.hour()),
            u64::from(t.minute()),
            u64::from(t.second() / 2 * 2),
        ];
        let got: Vec<u64> = z["time"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(got, want, "{}", p.display());
        let data = unhex(&z["data"]);
        if m.file_type().is_symlink() {
            assert_eq!(data, fs::read_link(&p).unwrap().as_os_str().as_bytes());
        } else if m.is_file() {
            assert_eq!(data, fs::read(&p).unwrap(), "{}", p.display());
        } else {
            assert!(m.is_dir());
        }
        seen += 1;
    }
    // src itself and every entry below it but the FIFO (the folder `dir\xff` was left out).
    assert_eq!(seen, compare::snapshot(&src).unwrap().len());
    // bsdtar makes the folder of the odd name once, with its bytes, permissions and time
    // (unzip and Python take such names for CP437 and translate them).
    if has_bsdtar() {
        let x = e.path("unzipped");
        let o = extract("bsdtar", &archive, &x);
        assert!(o.status.success(), "bsdtar: {}", stderr(&o));
        let out = x.join(inside(&src));
        let m = fs::symlink_metadata(out.join(OsStr::from_bytes(b"dir\xff"))).unwrap();
        assert!(m.is_dir());
        // libarchive adds search bits to a folder its unix mode does not call one.
        assert_eq!(m.mode() & 0o7776, 0o750, "{:o}", m.mode());
        assert_eq!(m.mtime(), fs::metadata(&odd_dir).unwrap().mtime());
        assert_eq!(
            fs::read(out.join(OsStr::from_bytes(b"dir\xff/in.txt"))).unwrap(),
            b"inside"
        );
        let dirs = fs::read_dir(&out)
            .unwrap()
            .filter(|d| {
                d.as_ref()
                    .unwrap()
                    .file_name()
                    .as_bytes()
                    .starts_with(b"dir")
            })
            .count();
        assert_eq!(dirs, 1);
    } else {
        eprintln!("bsdtar not found (apt-get install libarchive-tools): its check skipped");
    }
}

/// Peak resident memory of a running process, polled until it exits.
fn watch_peak(child: &mut std::process::Child) -> u64 {
    let mut peak = 0;
    let status = format!("/proc/{}/status", child.id());
    loop {
        if let Ok(s) = fs::read_to_string(&status)
            && let Some(l) = s.lines().find(|l| l.starts_with("VmHWM:"))
        {
            let kib: u64 = l
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            peak = peak.max(kib * 1024);
        }
        if child.try_wait().unwrap().is_some() {
            return peak;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_large_file_streams_in_bounded_memory() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    // Large enough that a bound well under its size leaves room for the process's own
    // footprint (a 40 MiB file against a 32 MiB bound measured 32 MiB once, under load).
    const SIZE: usize = 96 << 20;
    let content = text_bytes(11, SIZE);
    fs::write(src.join("big.txt"), &content).unwrap();
    e.init(&SMALL_CHUNKS);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let file = src.join("big.txt");
    // Slowed to ~80 MB/s so that the memory is sampled many times.
    let mut child = e
        .cmd(&[
            "--backend-bandwidth",
            "80MB",
            "dump",
            "latest",
            file.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::with_capacity(SIZE);
        stdout.read_to_end(&mut v).unwrap();
        v
    });
    let peak = watch_peak(&mut child);
    let got = reader.join().unwrap();
    assert!(child.wait().unwrap().success());
    assert!(got == content, "dumped bytes differ ({} bytes)", got.len());
    eprintln!("peak memory of the dump: {} KiB", peak >> 10);
    assert!(
        peak > 0 && peak < 64 << 20,
        "peak memory {} MiB for a {} MiB file",
        peak >> 20,
        SIZE >> 20
    );
    // --target writes the same bytes; nothing is left beside it.
    let t = e.path("out/big.txt");
    fs::create_dir(e.path("out")).unwrap();
    e.ok(&[
        "dump",
        "latest",
        file.to_str().unwrap(),
        "--target",
        t.to_str().unwrap(),
    ]);
    assert!(fs::read(&t).unwrap() == content);
    assert_eq!(fs::read_dir(e.path("out")).unwrap().count(), 1);
}

#[test]
fn snapshot_filters_pick_the_version() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let f = src.join("f.txt");
    fs::write(&f, b"first version\n").unwrap();
    e.init(&[]);
    e.ok(&["backup", "-q", "--tag", "one", src.to_str().unwrap()]);
    fs::write(&f, b"second version\n").unwrap();
    e.ok(&["backup", "-q", "--tag", "two", src.to_str().unwrap()]);
    // `--target -` is standard output (it made a file named `-`).
    let o = e
        .cmd(&["dump", "--target", "-", "latest", f.to_str().unwrap()])
        .current_dir(e.path(""))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, b"second version\n");
    assert!(!e.path("-").exists());
    let fs_ = f.to_str().unwrap();
    assert_eq!(e.ok(&["dump", "latest", fs_]), "second version\n");
    assert_eq!(
        e.ok(&["dump", "--tag", "one", "latest", fs_]),
        "first version\n"
    );
    let snaps = e.json(&["snapshots", "--json"]);
    let first = snaps[0]["id"].as_str().unwrap();
    assert_eq!(e.ok(&["dump", &first[..8], fs_]), "first version\n");
    // A path relative to the snapshot's root names the same file.
    assert_eq!(
        e.ok(&["dump", "latest", fs_.trim_start_matches('/')]),
        "second version\n"
    );
}

#[test]
fn bad_paths_and_snapshots_fail_with_one_line() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    std::os::unix::fs::symlink("top.bin", src.join("link")).unwrap();
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let s = |p: &str| format!("{}/{p}", src.display());
    let fail = |args: &[&str], want: &str| {
        let o = e.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(o.stdout.is_empty());
    };
    let missing = s("nope.txt");
    fail(
        &["dump", "latest", &missing],
        &format!("{missing} is not in snapshot"),
    );
    fail(&["dump", "abcdef12", &s("top.bin")], "abcdef12");
    fail(
        &["dump", "--host", "elsewhere", "latest", &s("top.bin")],
        "no snapshot matches \"latest\" with --host elsewhere",
    );
    fail(&["dump", "latest", &s("top.bin/x")], "is not a folder");
    // A file named with a trailing slash (or `/.`) is not a folder either (for ls too).
    for spelled in ["top.bin/", "top.bin/."] {
        fail(&["dump", "latest", &s(spelled)], "is not a folder");
        fail(&["ls", "latest", &s(spelled)], "is not a folder");
    }
    fail(&["dump", "latest", &s("link")], "is a symlink, not a file");
    fail(&["dump", "latest", &s("docs/../top.bin")], "`..`");
    // A path given without its leading `/` from the backed-up folder's name on (or from any
    // folder above it): the message offers the whole path (paths in a snapshot start at /),
    // in dump, ls and restore alike.
    let docs = s("docs");
    let mean = format!("(paths in a snapshot start at /: did you mean {docs}?)");
    let from_tmp = src.parent().unwrap().file_name().unwrap().to_str().unwrap();
    for given in ["src/docs".to_string(), format!("{from_tmp}/src/docs")] {
        fail(&["dump", "latest", &given], &mean);
        fail(&["ls", "latest", &given], &mean);
    }
    let into = e.path("into");
    let target = into.to_str().unwrap();
    fail(&["restore", "latest:src/docs", "--target", target], &mean);
    // A path that is not there either way is not offered (it was: "did you mean" a path the
    // snapshot does not hold); the snapshot's paths are named, as for one no backed-up
    // folder leads to.
    let holds = format!(
        "(paths in a snapshot start at /; it holds {})",
        src.display()
    );
    for given in ["src/nope.txt", "elsewhere/x"] {
        fail(&["dump", "latest", given], &holds);
        fail(&["ls", "latest", given], &holds);
    }
    fail(
        &["restore", "latest:src/nope.txt", "--target", target],
        &holds,
    );
    // Given from / on, but from the backed-up folder's name on: the whole path is offered.
    let whole =
        format!("(a snapshot keeps the whole path of what was backed up: did you mean {docs}?)");
    fail(&["ls", "latest", "/src/docs"], &whole);
    fail(&["dump", "latest", "/src/docs"], &whole);
    for given in ["/src/nope.txt", "/elsewhere/x"] {
        fail(
            &["ls", "latest", given],
            &format!("(the snapshot holds {})", src.display()),
        );
    }
    // A name missing inside a backed-up folder, or inside ID:SUBFOLDER, gets no hint.
    let o = e.run(&["dump", &format!("latest:{}", src.display()), "src/x"]);
    assert!(!stderr(&o).contains(" ("), "{}", stderr(&o));
    let o = e.run(&["dump", "latest", &missing]);
    assert!(!stderr(&o).contains(" ("), "{}", stderr(&o));
    // A failed dump leaves no --target behind, and no temporary file.
    let out = e.path("out");
    fs::create_dir(&out).unwrap();
    let t = out.join("x.tar");
    let o = e
        .cmd(&["dump", "latest", "/", "--target", t.to_str().unwrap()])
        .env("ARCA_TEST_FAULTS", "read:pack:from=2:denied")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(fs::read_dir(&out).unwrap().count(), 0);
    // Nor does one stopped by Ctrl-C (with or without a lock): the process ends without
    // destructors, and left its partial file (hunt 11).
    for lock in [&[][..], &["--no-lock"][..]] {
        let mut args = lock.to_vec();
        args.extend(["dump", "latest", "/", "--target", t.to_str().unwrap()]);
        let child = e
            .cmd(&args)
            .env("ARCA_TEST_FAULTS", "read:pack:always:delay=3s")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let partial = || fs::read_dir(&out).unwrap().count();
        let began = std::time::Instant::now();
        while partial() == 0 && began.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(partial(), 1, "no partial file appeared");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(130), "{lock:?}: {}", stderr(&o));
        assert_eq!(partial(), 0, "{lock:?}: partial file left");
    }
    // A folder as --target is refused before anything is read.
    let o = e
        .cmd(&["dump", "latest", "/", "--target", out.to_str().unwrap()])
        .env("ARCA_TEST_FAULTS", "read:pack:from=0:denied")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a folder"), "{}", stderr(&o));
    assert_eq!(fs::read_dir(&out).unwrap().count(), 0);
    // An archive of one file when --archive is given.
    let o = e.run(&["dump", "--archive", "tar", "latest", &s("top.bin")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let one = e.path("one.tar");
    fs::write(&one, &o.stdout).unwrap();
    let members = python(TAR_LIST, &one);
    let members = members.as_array().unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(
        unhex(&members[0]["name"]),
        inside(&src.join("top.bin")).as_os_str().as_bytes()
    );
    assert_eq!(members[0]["size"], 300_000);
}

#[test]
fn reads_merged_across_files_or_not_give_the_same_archive() {
    if !has_gnu_tar() {
        eprintln!("GNU tar not found: skipped");
        return;
    }
    let e = Env::new();
    let src = e.path("src");
    for d in 0..6 {
        let dir = src.join(format!("d{d}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..40 {
            let len = (100 + (d * 40 + f) * 37 % 5000) as usize;
            fs::write(dir.join(format!("f{f:02}")), text_bytes(d * 100 + f, len)).unwrap();
        }
    }
    // A file holding the same blocks twice, and one of many blocks.
    let block = arca_testkit::random_bytes(9, 300_000);
    fs::write(src.join("twice"), [block.clone(), block].concat()).unwrap();
    fs::write(src.join("large"), arca_testkit::random_bytes(10, 3_000_000)).unwrap();
    e.init(&[
        "--pack-size",
        "1MiB",
        "--chunk-min",
        "16KiB",
        "--chunk-avg",
        "64KiB",
        "--chunk-max",
        "256KiB",
    ]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let s = src.to_str().unwrap();
    let default = e.run(&["dump", "latest", s]);
    assert!(default.status.success(), "{}", stderr(&default));
    for tuning in [
        &["--max-read", "1", "--reads", "1"][..],
        &["--max-read", "64KiB", "--read-gap", "0", "--reads", "3"],
        &["--max-read", "8MiB", "--read-gap", "1MiB", "--reads", "16"],
    ] {
        let mut args = vec!["dump", "latest", s];
        args.extend_from_slice(tuning);
        let o = e.run(&args);
        assert!(o.status.success(), "{tuning:?}: {}", stderr(&o));
        assert!(o.stdout == default.stdout, "{tuning:?}: another archive");
    }
    let archive = e.path("a.tar");
    fs::write(&archive, &default.stdout).unwrap();
    let x = e.path("x");
    let o = extract("tar", &archive, &x);
    assert!(o.status.success(), "{}", stderr(&o));
    same_but_atimes(&src, &x.join(inside(&src)));
}

#[test]
fn an_archive_is_not_written_to_a_terminal() {
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    // Runs the command with stdout on a pseudo-terminal; prints its exit code and stderr.
    const ON_A_TTY: &str = r#"
import os, pty, subprocess, sys
m, s = pty.openpty()
p = subprocess.run(sys.argv[1:], stdout=s, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
print(p.returncode)
sys.stdout.write(p.stderr.decode())
"#;
    let run = |args: &[&str]| {
        let c = e.cmd(args);
        let mut py = Command::new("python3");
        py.arg("-c")
            .arg(ON_A_TTY)
            .arg(c.get_program())
            .args(c.get_args());
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => py.env(k, v),
                None => py.env_remove(k),
            };
        }
        let o = py.output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = run(&["dump", "latest", src.to_str().unwrap()]);
    assert!(
        out.starts_with("1\narca: stdout is a terminal: not writing a tar archive there"),
        "{out}"
    );
    // A file's bytes may go to a terminal (a small one: nobody reads this terminal).
    let file = src.join("small");
    fs::write(&file, b"hi\n").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    assert_eq!(run(&["dump", "latest", file.to_str().unwrap()]), "0\n");
}

#[test]
fn dump_and_stats_on_s3() {
    let e0 = Env::new();
    let s3 = arca_testkit::s3d::S3Server::start(&e0.path("s3"));
    s3.bucket("dumps");
    let e = Env::remote(s3.location("dumps", "repo"), s3.env());
    let src = e.path("src");
    sample(&src);
    e.init(&SMALL_CHUNKS);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let big = src.join("docs/deep/c.bin");
    let o = e.run(&[
        "dump",
        "latest",
        big.to_str().unwrap(),
        "--max-read",
        "128KiB",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout == fs::read(&big).unwrap());
    let archive = e.path("s3.tar");
    e.ok(&[
        "dump",
        "latest",
        src.to_str().unwrap(),
        "-t",
        archive.to_str().unwrap(),
    ]);
    let x = e.path("x");
    let o = extract("tar", &archive, &x);
    assert!(o.status.success(), "{}", stderr(&o));
    same_but_atimes(&src, &x.join(inside(&src)));
    let v = e.json(&["stats", "--json"]);
    let size: u64 = arca_testkit::files_under(&src)
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .sum();
    assert_eq!(v["snapshots"][0]["restore_size"], size);
    assert_eq!(v["snapshots"][0]["restore_plan"]["files"], 5);
    assert!(v["repository"]["packs"].as_u64().unwrap() >= 2, "{v}");
}

/// `--target` writes through what is not a regular file (a device, a FIFO, a symlink), as
/// restic does: the rename that keeps a replaced file whole on failure replaced the device or
/// link itself (`--target /dev/null` as root made /dev/null a regular file).
#[test]
fn a_target_that_is_a_device_fifo_or_symlink_is_written_through() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let e = Env::new();
    let src = e.path("src");
    sample(&src);
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let file = format!("{}/docs/a.txt", src.display());
    let want = fs::read(src.join("docs/a.txt")).unwrap();
    let dump_to = |t: &Path| e.ok(&["dump", "latest", &file, "--target", t.to_str().unwrap()]);
    let out = e.path("out");
    fs::create_dir(&out).unwrap();
    // A symlink: its target gets the bytes, the link stays.
    let real = out.join("real");
    fs::write(&real, b"old").unwrap();
    fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).unwrap();
    let link = out.join("link");
    std::os::unix::fs::symlink("real", &link).unwrap();
    dump_to(&link);
    assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(fs::read(&real).unwrap(), want);
    // The replaced file keeps its permissions.
    let mode = fs::metadata(&real).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
    // A dangling symlink: the file is created where it points.
    let dangling = out.join("dangling");
    std::os::unix::fs::symlink("made", &dangling).unwrap();
    dump_to(&dangling);
    assert_eq!(fs::read(out.join("made")).unwrap(), want);
    // A FIFO: a reader gets the bytes and the FIFO stays.
    let fifo = out.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read(fifo).unwrap())
    };
    dump_to(&fifo);
    assert_eq!(reader.join().unwrap(), want);
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    // A character device (a copy of /dev/null), as root.
    if nix::unistd::geteuid().is_root() {
        let null = out.join("null");
        nix::sys::stat::mknod(
            &null,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, 3),
        )
        .unwrap();
        dump_to(&null);
        let t = fs::symlink_metadata(&null).unwrap().file_type();
        assert!(t.is_char_device(), "the device was replaced");
    }
    // A name with a trailing slash is refused before anything is written.
    let o = e.run(&[
        "dump",
        "latest",
        &file,
        "--target",
        &format!("{}/", out.join("x").display()),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("names a folder"), "{}", stderr(&o));
    // No temporary file is left anywhere.
    let names: Vec<_> = fs::read_dir(&out)
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains("arca-dump")), "{names:?}");
}

/// `--target` takes any name the file system takes: the temporary file beside it
/// (`.NAME.arca-dump-PID`) went over 255 bytes for a NAME of 239 or more, and was refused.
#[test]
fn a_target_with_a_name_of_255_bytes_is_written() {
    let e = Env::new();
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"long-named copy").unwrap();
    e.init(&[]);
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let dir = e.path("out");
    fs::create_dir_all(&dir).unwrap();
    let target = dir.join("n".repeat(255));
    let file = src.join("f");
    e.ok(&[
        "dump",
        "latest",
        file.to_str().unwrap(),
        "--target",
        target.to_str().unwrap(),
    ]);
    assert_eq!(fs::read(&target).unwrap(), b"long-named copy");
    assert_eq!(
        fs::read_dir(&dir).unwrap().count(),
        1,
        "a temporary file is left"
    );
}

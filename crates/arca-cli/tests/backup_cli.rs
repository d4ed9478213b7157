//! `arca backup` options as restic users know them: exclude files and case-insensitive
//! patterns, cache and tag directories, a size limit, path lists, a dry run and stdin; and a
//! second backup of an unchanged tree that stores none of its listings again.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use arca_testkit::{generate, random_bytes, text_bytes};
use common::*;

const SIGNATURE: &str = "Signature: 8a477f597d28d172789f06886806bc55";

/// The snapshot's entries below `src`, as relative paths, sorted.
fn listed(e: &Env, src: &Path) -> Vec<String> {
    let prefix = format!("{}/", src.display());
    let mut v: Vec<String> = e
        .ok(&["ls", "latest"])
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix).map(str::to_string))
        .collect();
    v.sort();
    v
}

fn tree(src: &Path) {
    for d in ["keep", "cache", "fakecache", "tagged", "Build"] {
        fs::create_dir_all(src.join(d)).unwrap();
    }
    fs::write(src.join("keep/a.txt"), text_bytes(1, 1000)).unwrap();
    fs::write(src.join("keep/big.bin"), random_bytes(2, 200_000)).unwrap();
    fs::write(src.join("keep/notes.TMP"), b"tmp").unwrap();
    fs::write(src.join("keep/x.o"), b"object").unwrap();
    fs::write(
        src.join("cache/CACHEDIR.TAG"),
        format!("{SIGNATURE}\n# cache"),
    )
    .unwrap();
    fs::write(src.join("cache/blob"), b"cached").unwrap();
    fs::write(src.join("fakecache/CACHEDIR.TAG"), b"not a signature").unwrap();
    fs::write(src.join("fakecache/data"), b"kept").unwrap();
    fs::write(src.join("tagged/.nobackup"), b"").unwrap();
    fs::write(src.join("tagged/secret"), b"s").unwrap();
    fs::write(src.join("Build/out"), b"o").unwrap();
}

#[test]
fn exclusion_options_leave_out_exactly_what_they_name() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    tree(&src);
    let xfile = e.path("excludes.txt");
    fs::write(&xfile, "# objects\n*.o\n\n").unwrap();
    let ifile = e.path("iexcludes.txt");
    fs::write(&ifile, "BUILD\n").unwrap();
    let s = src.to_str().unwrap();
    let v = e.json(&[
        "backup",
        s,
        "--json",
        "--exclude-file",
        xfile.to_str().unwrap(),
        "--iexclude",
        "*.tmp",
        "--iexclude-file",
        ifile.to_str().unwrap(),
        "--exclude-caches",
        "--exclude-if-present",
        ".nobackup",
        "--exclude-larger-than",
        "100KiB",
    ]);
    // x.o, notes.TMP, Build, big.bin.
    assert_eq!(v["excluded"], 4, "{v}");
    assert_eq!(
        listed(&e, &src),
        vec![
            "cache",
            "cache/CACHEDIR.TAG",
            "fakecache",
            "fakecache/CACHEDIR.TAG",
            "fakecache/data",
            "keep",
            "keep/a.txt",
            "tagged",
            "tagged/.nobackup",
        ]
    );
    // Without the options everything is there.
    e.ok(&["backup", s]);
    assert_eq!(listed(&e, &src).len(), 16);
}

#[test]
fn bad_exclusion_arguments_are_named() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    tree(&src);
    let s = src.to_str().unwrap();
    // A value clap checks is a usage error (2); the others fail when used (1).
    for (args, says, code) in [
        (vec!["--exclude-larger-than", "lots"], "lots", 2),
        (vec!["--exclude-if-present", "a/b"], "a/b", 1),
        (
            vec!["--exclude-file", "/nonexistent/list"],
            "/nonexistent/list",
            1,
        ),
        (
            vec!["--files-from", "/nonexistent/paths"],
            "/nonexistent/paths",
            1,
        ),
        (vec!["--iexclude", "[z-a"], "[z-a", 2),
    ] {
        let mut a = vec!["backup", s];
        a.extend(args.iter());
        let o = e.run(&a);
        assert_eq!(o.status.code(), Some(code), "{a:?}");
        assert!(stderr(&o).contains(says), "{a:?}: {}", stderr(&o));
    }
    assert_eq!(e.ok(&["snapshots", "--json"]).trim(), "[]");
}

#[test]
fn files_from_adds_listed_paths() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    tree(&src);
    let list = e.path("paths.txt");
    fs::write(
        &list,
        format!(
            "# what to save\n{}\n\n{}\n",
            src.join("keep/a.txt").display(),
            src.join("tagged").display()
        ),
    )
    .unwrap();
    e.ok(&["backup", "--files-from", list.to_str().unwrap()]);
    let snaps: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let paths = snaps[0]["paths"].as_array().unwrap().clone();
    assert_eq!(paths.len(), 2, "{snaps}");
    assert_eq!(
        listed(&e, &src),
        vec![
            "keep",
            "keep/a.txt",
            "tagged",
            "tagged/.nobackup",
            "tagged/secret"
        ]
    );
    // Names that --files-from would trim or split: verbatim lines, NUL-separated (raw).
    let odd = src.join("odd");
    fs::create_dir_all(&odd).unwrap();
    fs::write(odd.join(" lead and trail "), b"spaces").unwrap();
    fs::write(odd.join("new\nline"), b"newline").unwrap();
    let verbatim = e.path("verbatim.txt");
    fs::write(
        &verbatim,
        format!("{}\n", odd.join(" lead and trail ").display()),
    )
    .unwrap();
    let raw = e.path("raw.bin");
    fs::write(&raw, format!("{}\0", odd.join("new\nline").display())).unwrap();
    let o = e.run(&[
        "backup",
        "--json",
        "--files-from-verbatim",
        verbatim.to_str().unwrap(),
        "--files-from-raw",
        raw.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let target = e.path("t-odd");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    let back = target.join(odd.strip_prefix("/").unwrap());
    assert_eq!(fs::read(back.join(" lead and trail ")).unwrap(), b"spaces");
    assert_eq!(fs::read(back.join("new\nline")).unwrap(), b"newline");

    // An empty list is an error, not an empty snapshot.
    fs::write(&list, "# nothing\n").unwrap();
    let o = e.run(&["backup", "--files-from", list.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no paths"), "{}", stderr(&o));
}

/// Files anywhere under `dir`.
fn count_files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                count_files(&e.path())
            } else {
                1
            }
        })
        .sum()
}

#[test]
fn dry_run_reads_everything_and_writes_nothing() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    tree(&src);
    let s = src.to_str().unwrap();
    let before = count_files(&e.repo);
    let v = e.json(&["backup", s, "--json", "--dry-run"]);
    assert_eq!(v["dry_run"], true);
    assert!(v["snapshot_id"].is_null(), "{v}");
    assert_eq!(v["files_new"], 11, "{v}");
    assert!(v["data_added"].as_u64().unwrap() > 200_000, "{v}");
    assert_eq!(
        count_files(&e.repo),
        before,
        "a dry run wrote to the repository"
    );
    let text = e.ok(&["backup", s, "-n"]);
    assert!(text.contains("dry run: nothing was written"), "{text}");
    assert_eq!(e.ok(&["snapshots", "--json"]).trim(), "[]");
    // The real backup then stores what the dry run counted.
    let real = e.json(&["backup", s, "--json"]);
    assert_eq!(real["data_added"], v["data_added"]);
}

#[test]
fn stdin_is_stored_as_one_file_and_restores_byte_for_byte() {
    let e = Env::new();
    e.init(&[]);
    let data = random_bytes(9, 3_000_000);
    let mut child = e
        .cmd(&["backup", "--stdin", "--stdin-filename", "db.sql", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&data).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(v["total_bytes_processed"], 3_000_000);
    let snaps: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    assert_eq!(snaps[0]["paths"][0], "/db.sql");
    let target = e.path("out");
    e.ok(&["restore", "latest", "--target", target.to_str().unwrap()]);
    assert_eq!(fs::read(target.join("db.sql")).unwrap(), data);
    // The file carries the user's and group's names, as a file backed up from disk does.
    let line = e.ok(&["ls", "--json", "latest", "/db.sql"]);
    let node: serde_json::Value = serde_json::from_str(line.lines().last().unwrap()).unwrap();
    assert!(!node["user"].as_str().unwrap().is_empty(), "{node}");
    assert!(!node["group"].as_str().unwrap().is_empty(), "{node}");
    // A path of names puts the file in folders made for it, as restic's.
    let mut child = e
        .cmd(&[
            "backup",
            "--stdin",
            "--stdin-filename",
            "/db/daily/dump.sql",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&data[..1000])
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let snaps: serde_json::Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    assert_eq!(snaps[1]["paths"][0], "/db/daily/dump.sql");
    let listing = e.ok(&["ls", "-l", "latest", "--recursive"]);
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with('d') && l.ends_with(" /db")),
        "{listing}"
    );
    let nested = e.path("nested");
    e.ok(&["restore", "latest", "--target", nested.to_str().unwrap()]);
    assert_eq!(
        fs::read(nested.join("db/daily/dump.sql")).unwrap(),
        &data[..1000]
    );
    // A name that is not a file name is refused; --stdin with paths is a usage error.
    // (a usage error, not "tree is corrupt").
    let o = e.run(&["backup", "--stdin", "--stdin-filename", "a/../b"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("a/../b"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("corrupt"), "{}", stderr(&o));
    let o = e.run(&["backup", "--stdin", "/tmp"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// `--files-from` lists are read as bytes: a path that is not UTF-8 is backed up.
#[test]
fn files_from_takes_paths_that_are_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir(&src).unwrap();
    let odd = src.join(std::ffi::OsStr::from_bytes(b"bad\xffname"));
    fs::write(&odd, b"content").unwrap();
    let list = e.path("list");
    let mut bytes = odd.as_os_str().as_bytes().to_vec();
    bytes.push(b'\n');
    fs::write(&list, &bytes).unwrap();
    let o = e.run(&["backup", "--files-from", list.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = e.path("out");
    e.ok(&["restore", "latest", "--target", out.to_str().unwrap()]);
    let back = out.join(odd.strip_prefix("/").unwrap());
    assert_eq!(fs::read(back).unwrap(), b"content");
}

#[test]
fn negated_and_unclean_patterns_read_as_restic_reads_them() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    for f in [
        "a.log",
        "keep.log",
        "code/keep/x",
        "code/other",
        "music/m",
        "logs/l",
    ] {
        let p = src.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, b"x").unwrap();
    }
    let xfile = e.path("excludes.txt");
    let s = src.display();
    fs::write(
        &xfile,
        format!("*.log\n!keep.log\n{s}/code/*/\n!{s}/code/keep\n{s}/keep/../logs\n"),
    )
    .unwrap();
    e.ok(&[
        "backup",
        "--exclude-file",
        xfile.to_str().unwrap(),
        &s.to_string(),
    ]);
    // `logs` is looked into (a `!` pattern that is not anchored may take back something in
    // any folder) but nothing in it is taken back: it is left out as a whole, not stored as
    // an empty folder.
    assert_eq!(
        listed(&e, &src),
        [
            "code",
            "code/keep",
            "code/keep/x",
            "keep.log",
            "music",
            "music/m"
        ],
    );
}

#[test]
fn excluded_folders_are_stored_only_for_what_a_negation_takes_back() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    for f in [
        "top",
        "cache/a/b/c/junk",
        "cache/d/x.keep",
        "cache/d/y",
        "tmp/e/f/g",
    ] {
        let p = src.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, b"x").unwrap();
    }
    let s = src.display();
    let j = e.json(&[
        "backup",
        "--json",
        &s.to_string(),
        "-e",
        &format!("{s}/cache"),
        "-e",
        &format!("{s}/tmp"),
        "-e",
        "!*.keep",
    ]);
    assert_eq!(j["complete"], true, "{j}");
    // Only the way to the file taken back is stored; the folders holding nothing taken back
    // are left out whole (they used to be stored empty, each of them walked to the bottom).
    assert_eq!(
        listed(&e, &src),
        ["cache", "cache/d", "cache/d/x.keep", "top"]
    );
}

/// A file named on the command line that a pattern excludes is left out even when a `!`
/// pattern elsewhere may take files back (hunt H9: any unanchored `!` pattern kept it, as
/// if the file were a folder it could take something back from); a folder named is still
/// looked into for what the `!` pattern takes back.
#[test]
fn a_named_file_stays_excluded_beside_an_unanchored_take_back() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    for f in ["b/f.txt", "b/g.dat", "x/k.txt", "x/l.dat"] {
        let p = src.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, b"x").unwrap();
    }
    let s = src.to_str().unwrap();
    let (f, g, x) = (
        format!("{s}/b/f.txt"),
        format!("{s}/b/g.dat"),
        format!("{s}/x"),
    );
    let o = e.run(&["backup", &f, "-e", "*.txt", "-e", "!x/*.txt"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("excluded"), "{}", stderr(&o));
    e.ok(&["backup", &f, &g, &x, "-e", "*.txt", "-e", "!x/*.txt"]);
    assert_eq!(
        listed(&e, &src),
        ["b", "b/g.dat", "x", "x/k.txt", "x/l.dat"]
    );
    e.ok(&["backup", &f, &g, "--iexclude", "*.TXT", "-e", "!x/*.txt"]);
    assert_eq!(listed(&e, &src), ["b", "b/g.dat"]);
}

#[test]
fn a_negated_class_stays_within_one_name() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    for f in ["a/b/c/f", "x", "ab"] {
        let p = src.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, b"x").unwrap();
    }
    let s = src.to_str().unwrap();
    // `[!a]` is one character other than `a` (and other than `/`): it matched `/` itself,
    // and the whole backup was excluded.
    e.ok(&["backup", s, "-e", "[!a]"]);
    assert_eq!(listed(&e, &src), ["a", "ab"]);
    // `b[!x]c` is a three-letter name: it matched the path `b/c`.
    e.ok(&["backup", s, "-e", "b[!x]c", "-e", "[^y]b"]);
    assert_eq!(listed(&e, &src), ["a", "a/b", "a/b/c", "a/b/c/f", "x"]);
    // `dir/**` leaves out `dir` itself too, as restic's.
    e.ok(&["backup", s, "-e", &format!("{s}/a/**")]);
    assert_eq!(listed(&e, &src), ["ab", "x"]);
}

#[test]
fn size_letters_are_binary_as_in_restic() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    // Between 1 MB and 1 MiB: restic's `1M` keeps it, and so does arca's now.
    fs::write(src.join("mid"), vec![7u8; 1_010_000]).unwrap();
    fs::write(src.join("big"), vec![7u8; 1_100_000]).unwrap();
    let s = src.to_str().unwrap();
    e.ok(&["backup", s, "--exclude-larger-than", "1M"]);
    assert_eq!(listed(&e, &src), ["mid"]);
    e.ok(&["backup", s, "--exclude-larger-than", "1MB"]);
    assert!(listed(&e, &src).is_empty());
}

#[test]
fn a_path_named_below_another_through_a_symlink_is_backed_up() {
    let e = Env::new();
    e.init(&[]);
    let home = e.path("home");
    let disk = e.path("disk");
    fs::create_dir_all(disk.join("photos")).unwrap();
    fs::create_dir_all(home.join("d")).unwrap();
    fs::write(disk.join("photos/img.jpg"), b"keep me").unwrap();
    fs::write(disk.join("other"), b"not asked for").unwrap();
    fs::write(home.join("d/o"), b"o").unwrap();
    std::os::unix::fs::symlink(&disk, home.join("data")).unwrap();
    let photos = home.join("data/photos");
    let j = e.json(&[
        "backup",
        "--json",
        home.to_str().unwrap(),
        photos.to_str().unwrap(),
    ]);
    assert_eq!(j["complete"], true, "{j}");
    // The walk of `home` stops at the symlink `data`; the path named through it was dropped
    // (the snapshot listed it and held nothing of it). Now the way to it is stored as when it
    // is backed up alone: `data` a folder holding only `photos`.
    assert_eq!(
        listed(&e, &home),
        ["d", "d/o", "data", "data/photos", "data/photos/img.jpg"]
    );
    let out = e.path("out");
    e.ok(&["restore", "latest", "--target", out.to_str().unwrap()]);
    let back = out.join(photos.strip_prefix("/").unwrap()).join("img.jpg");
    assert_eq!(fs::read(back).unwrap(), b"keep me");
    // Named the other way round, the same.
    e.ok(&["backup", photos.to_str().unwrap(), home.to_str().unwrap()]);
    assert_eq!(
        listed(&e, &home),
        ["d", "d/o", "data", "data/photos", "data/photos/img.jpg"]
    );
    // A path below another through real folders is covered by the outer walk, once.
    e.ok(&[
        "backup",
        home.to_str().unwrap(),
        home.join("d").to_str().unwrap(),
    ]);
    assert_eq!(listed(&e, &home), ["d", "d/o", "data"]);
}

#[test]
fn excludes_apply_to_the_backed_up_paths_too() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    for f in ["a.log", "b.txt", "logs/l.txt"] {
        let p = src.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, b"x").unwrap();
    }
    let list = e.path("list");
    let mut raw = vec![];
    for f in ["a.log", "b.txt", "logs/l.txt"] {
        raw.extend_from_slice(src.join(f).to_str().unwrap().as_bytes());
        raw.push(0);
    }
    fs::write(&list, &raw).unwrap();
    let l = list.to_str().unwrap();
    e.ok(&[
        "backup",
        "--files-from-raw",
        l,
        "--exclude",
        "*.log",
        "--exclude",
        "logs",
    ]);
    assert_eq!(listed(&e, &src), ["b.txt"]);
    // Every path given excluded: as restic ("snapshot is empty"), no snapshot is saved.
    let o = e.run(&[
        "backup",
        src.join("a.log").to_str().unwrap(),
        "--exclude",
        "*.log",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("every path given is excluded"),
        "{}",
        stderr(&o)
    );
    assert_eq!(listed(&e, &src), ["b.txt"]);
}

#[test]
fn a_path_below_a_symlinked_folder_is_backed_up_as_restic_does() {
    let e = Env::new();
    e.init(&[]);
    let real = e.path("real");
    fs::create_dir_all(real.join("sub")).unwrap();
    fs::write(real.join("sub/file"), b"data").unwrap();
    let link = e.path("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    // The folders above the path go through the link; the path is stored as named.
    let file = link.join("sub/file");
    let j = e.json(&["backup", "--json", file.to_str().unwrap()]);
    assert_eq!(j["complete"], true, "{j}");
    let out = e.path("out");
    e.ok(&["restore", "latest", "--target", out.to_str().unwrap()]);
    let back = out.join(file.strip_prefix("/").unwrap());
    assert_eq!(fs::read(&back).unwrap(), b"data");
    let folder = out.join(link.strip_prefix("/").unwrap());
    assert!(fs::symlink_metadata(&folder).unwrap().is_dir());
    // A backed-up path that is a symlink is stored as the symlink.
    e.ok(&["backup", link.to_str().unwrap()]);
    let listing = e.ok(&["ls", "-l", "latest"]);
    let line = listing
        .lines()
        .find(|l| l.ends_with(&format!("{} -> {}", link.display(), real.display())))
        .unwrap_or_else(|| panic!("{listing}"));
    assert!(line.starts_with('l'), "{line}");
    // `cd link/sub && arca backup .` stores the path as the shell names it ($PWD), as restic
    // does; a $PWD that is not the working directory is not believed.
    let dot = |pwd: &Path| {
        let o = e
            .cmd(&["backup", "--json", "."])
            .current_dir(link.join("sub"))
            .env("PWD", pwd)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        let id = summary["snapshot_id"].as_str().unwrap();
        let snap = e.json(&["snapshots", "--json", id]);
        snap[0]["paths"][0].as_str().unwrap().to_string()
    };
    let logical = link.join("sub");
    assert_eq!(dot(&logical), logical.to_str().unwrap());
    let physical = fs::canonicalize(real.join("sub")).unwrap();
    assert_eq!(dot(&e.path("elsewhere")), physical.to_str().unwrap());
}

/// The listing id (`subtree`) of the directory `dir` in snapshot `snap`, as user `uid` sees it.
fn listing_of(e: &Env, uid: Option<u32>, snap: &str, dir: &Path) -> String {
    let o = e.run_as(uid, &["ls", snap, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let want = dir.to_str().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["path"] == want)
        .and_then(|v| v["subtree"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{want} not in snapshot {snap}"))
}

/// A backup's own reads move atimes that it cannot keep: readlink always, and opening files
/// and directories of another owner (O_NOATIME is refused), as for a user backing up system
/// files. Storing the atime seen on the next run stored every listing again, with nothing
/// changed. As root, arca runs as `nobody` on files owned by root.
#[test]
fn a_second_backup_of_an_unchanged_tree_stores_no_listing_again() {
    let e = Env::new();
    let nobody = e.unprivileged();
    let src = e.path("src");
    fs::create_dir_all(src.join("d/e")).unwrap();
    fs::write(src.join("d/e/f"), b"in a subdirectory").unwrap();
    fs::write(src.join("g"), text_bytes(3, 5000)).unwrap();
    std::os::unix::fs::symlink("g", src.join("l")).unwrap();
    // Old times, so that relatime moves each atime on the first read.
    let old = (1_000_000_000, 0);
    for p in ["d/e/f", "d/e", "d", "g", "l", ""] {
        generate::set_times(&src.join(p), old, old).unwrap();
    }
    let as_user = |args: &[&str]| e.run_as(nobody, args);
    let o = as_user(&["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut listings = vec![];
    for _ in 0..2 {
        let o = as_user(&["backup", "--json", src.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        listings.push(listing_of(&e, nobody, "latest", &src));
    }
    assert_eq!(
        listings[0],
        listings[1],
        "the second backup stored the listing of {} again",
        src.display()
    );
}

/// Entries whose path is longer than the kernel takes at once (4096 bytes) are backed up
/// like any other (they were skipped with "File name too long"): files, a symlink and an
/// xattr 45 levels of 100-byte names down, restored through a subfolder and compared.
#[test]
fn entries_deeper_than_path_max_are_backed_up() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    let level = "d".repeat(100);
    let mut rel = PathBuf::new();
    for _ in 0..45 {
        rel.push(&level);
    }
    let mut deep = src.clone();
    for c in rel.components() {
        deep.push(c);
        arca_fs::io_on_long_path(&deep, |p| fs::create_dir_all(p)).unwrap();
    }
    let leaf = deep.join("leaf.bin");
    assert!(leaf.as_os_str().len() > 4096);
    let data = random_bytes(5, 300_000);
    arca_fs::io_on_long_path(&leaf, |p| fs::write(p, &data)).unwrap();
    arca_fs::io_on_long_path(&deep.join("link"), |p| {
        std::os::unix::fs::symlink("leaf.bin", p)
    })
    .unwrap();
    let _ = arca_fs::io_on_long_path(&leaf, |p| xattr::set(p, "user.k", b"v"));
    let o = e.run(&["backup", src.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The half of the path below the 20th level is short enough to restore into a target.
    let mut half = src.clone();
    for c in rel.components().take(20) {
        half.push(c);
    }
    let target = e.path("t");
    let spec = format!("latest:{}", half.display());
    e.ok(&["restore", &spec, "--target", target.to_str().unwrap()]);
    let mut back = target.clone();
    for c in rel.components().skip(20) {
        back.push(c);
    }
    assert_eq!(fs::read(back.join("leaf.bin")).unwrap(), data);
    assert_eq!(
        fs::read_link(back.join("link")).unwrap(),
        Path::new("leaf.bin")
    );
    // The whole snapshot restores too, at its full depth, and verifies; a damaged deep file
    // is patched by the next restore.
    let whole = e.path("whole");
    let w = whole.to_str().unwrap();
    e.ok(&["restore", "latest", "--target", w, "--verify"]);
    let deep_back = whole.join(leaf.strip_prefix("/").unwrap());
    let read_back = || arca_fs::io_on_long_path(&deep_back, |p| fs::read(p)).unwrap();
    assert_eq!(read_back(), data);
    let link_back = deep_back.with_file_name("link");
    let target_of = arca_fs::io_on_long_path(&link_back, |p| fs::read_link(p)).unwrap();
    assert_eq!(target_of, Path::new("leaf.bin"));
    arca_fs::io_on_long_path(&deep_back, |p| fs::write(p, b"damaged")).unwrap();
    let out = e.ok(&["restore", "latest", "--target", w, "--verify"]);
    assert!(out.contains("1 updated"), "{out}");
    assert_eq!(read_back(), data);
    // `backup .` in the deepest folder, as a shell that went there names it ($PWD): the
    // kernel's getcwd cannot give a path that long.
    let script = format!(
        "cd {} && for _ in $(seq 45); do cd {level}; done && exec \"$0\" -r \"$1\" backup --json .",
        src.display()
    );
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .arg(BIN)
        .arg(&e.repo)
        .env("ARCA_PASSWORD", "test password")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let id = summary["snapshot_id"].as_str().unwrap();
    let snap = e.json(&["snapshots", "--json", id]);
    assert_eq!(snap[0]["paths"][0], deep.to_str().unwrap());
    // Clean up what remove_dir_all cannot reach.
    let mut p = leaf;
    for f in ["leaf.bin", "link"] {
        arca_fs::io_on_long_path(&p.with_file_name(f), |q| fs::remove_file(q)).unwrap();
    }
    while p.pop() && p != src {
        let _ = arca_fs::io_on_long_path(&p, |q| fs::remove_dir(q));
    }
}

#[test]
fn a_tree_thousands_of_levels_deep_is_backed_up_found_and_restored() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    // Made level by level through descriptors: the path is far beyond PATH_MAX.
    let depth: u64 = 4000;
    let at = |dir: &fs::File, name: &str| {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}/{name}", dir.as_raw_fd()))
    };
    let mut dir = fs::File::open(&src).unwrap();
    for _ in 0..depth {
        fs::create_dir(at(&dir, "d")).unwrap();
        dir = fs::File::open(at(&dir, "d")).unwrap();
    }
    fs::write(at(&dir, "leaf"), b"at the bottom").unwrap();
    // The walk recursed once per level and overflowed its stack (abort, a lock left behind);
    // find's walk did too.
    let j = e.json(&["backup", "--json", src.to_str().unwrap()]);
    assert_eq!(j["complete"], true, "{j}");
    assert!(j["dirs_new"].as_u64().unwrap() > depth, "{j}");
    let found = e.ok(&["find", "leaf"]);
    let deepest = format!("{}{}/leaf", src.display(), "/d".repeat(depth as usize));
    assert!(
        found.lines().any(|l| l == deepest),
        "{}",
        &found[..found.len().min(300)]
    );
    let out = e.path("out");
    e.ok(&[
        "restore",
        "latest",
        "--target",
        out.to_str().unwrap(),
        "--verify",
    ]);
    e.ok(&["check"]);
}

/// `ls` of a tree 2,000 levels deep with 200-byte names (400 MB of folder paths in all): each
/// level of its walk held its own full path, and the listing peaked at the size of its output.
#[test]
fn ls_of_a_deep_tree_with_long_names_streams_in_little_memory() {
    use std::io::{BufRead, BufReader};
    use std::os::fd::AsRawFd;
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    let (depth, name) = (2000usize, "n".repeat(200));
    let at = |dir: &fs::File, name: &str| {
        PathBuf::from(format!("/proc/self/fd/{}/{name}", dir.as_raw_fd()))
    };
    let mut dir = fs::File::open(&src).unwrap();
    for _ in 0..depth {
        fs::create_dir(at(&dir, &name)).unwrap();
        dir = fs::File::open(at(&dir, &name)).unwrap();
    }
    fs::write(at(&dir, "leaf"), b"at the bottom").unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let mut child = e
        .cmd(&["ls", "latest"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let (mut lines, mut last) = (0usize, vec![]);
    for line in out.split(b'\n') {
        last = line.unwrap();
        lines += 1;
    }
    // The child's own peak RSS, from the kernel's accounting as it is reaped (the test's other
    // children would blur RUSAGE_CHILDREN).
    let mut status = 0;
    let pid = child.id() as libc::pid_t;
    #[allow(unsafe_code)]
    // SAFETY: `rusage` is plain data, all zeros is a valid value; wait4 writes into the two
    // live locals and reaps our own child, which `child` never waits for afterwards.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::wait4(pid, &mut status, 0, &mut usage), pid);
        usage
    };
    // Already reaped above: this only tells `Child` so (ECHILD).
    let _ = child.wait();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
    // The backed-up path's own folders, the deep ones and the leaf.
    assert!(lines > depth, "{lines}");
    let deepest = format!("{}{}/leaf", src.display(), format!("/{name}").repeat(depth));
    assert_eq!(String::from_utf8_lossy(&last), deepest);
    let peak_mib = usage.ru_maxrss / 1024;
    assert!(peak_mib < 200, "ls peaked at {peak_mib} MiB");
    arca_fs::io_on_long_path(&PathBuf::from(&deepest), |q| fs::remove_file(q)).unwrap();
}

#[test]
fn verbose_lists_new_modified_and_unchanged_files_as_restic_does() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("a"), b"a").unwrap();
    fs::write(src.join("d/b"), b"b").unwrap();
    let s = src.to_str().unwrap();
    let lines = |out: &str, word: &str| -> Vec<String> {
        let mut v: Vec<String> = out
            .lines()
            .filter_map(|l| l.strip_prefix(word))
            .map(|l| l.trim_start().to_string())
            .collect();
        v.sort();
        v
    };
    let (a, b) = (format!("{s}/a"), format!("{s}/d/b"));
    // A dry run previews what would be stored.
    let out = e.ok(&["backup", "--dry-run", "-v", s]);
    assert_eq!(lines(&out, "new"), [a.clone(), b.clone()], "{out}");
    assert!(
        e.json(&["snapshots", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    e.ok(&["backup", s]);
    fs::write(src.join("a"), b"changed, longer").unwrap();
    let out = e.ok(&["backup", "-v", s]);
    assert_eq!(lines(&out, "modified"), std::slice::from_ref(&a), "{out}");
    assert!(lines(&out, "unchanged").is_empty(), "{out}");
    let out = e.ok(&["backup", "-vv", s]);
    assert_eq!(lines(&out, "unchanged"), [a.clone(), b.clone()], "{out}");
    let out = e.ok(&["backup", "-v", "--json", "--force", s]);
    let items: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["message_type"] == "verbose_status")
        .collect();
    assert_eq!(items.len(), 2, "{out}");
    assert!(items.iter().all(|v| v["action"] == "modified"), "{out}");
}

/// `--skip-if-unchanged` writes no snapshot when the tree is the parent's, as restic's does,
/// and one as soon as anything changed.
#[test]
fn skip_if_unchanged_writes_no_snapshot_when_nothing_changed() {
    let e = Env::new();
    e.init(&[]);
    // The snapshot holds the folders above the source too: under /tmp, whose times change
    // whenever another test makes a folder there, the tree is not the parent's (a CI run
    // saw "dirs_changed": 1). As root, the source is made in a folder of / of its own.
    let own = arca_testkit::is_root().then(|| {
        tempfile::Builder::new()
            .prefix(".arca-skip-test-")
            .tempdir_in("/")
            .unwrap()
    });
    let src = own
        .as_ref()
        .map_or_else(|| e.path("src"), |d| d.path().join("src"));
    sample(&src);
    let s = src.to_str().unwrap();
    let count = || e.json(&["snapshots", "--json"]).as_array().unwrap().len();
    // No parent: saved.
    let first = e.json(&["backup", "--skip-if-unchanged", "--json", s]);
    assert_eq!(first["skipped"], false, "{first}");
    assert_eq!(count(), 1);
    let again = e.json(&["backup", "--skip-if-unchanged", "--json", s]);
    assert_eq!(again["skipped"], true, "{again}");
    assert!(again["snapshot_id"].is_null(), "{again}");
    assert_eq!(again["parent"], first["snapshot_id"]);
    assert_eq!(count(), 1);
    let text = e.ok(&["backup", "--skip-if-unchanged", s]);
    assert!(text.contains("no snapshot written"), "{text}");
    assert_eq!(count(), 1);
    // Without the flag an unchanged tree is saved, as before.
    e.ok(&["backup", "-q", s]);
    assert_eq!(count(), 2);
    fs::write(src.join("new-file"), b"news").unwrap();
    let changed = e.json(&["backup", "--skip-if-unchanged", "--json", s]);
    assert_eq!(changed["skipped"], false, "{changed}");
    assert_eq!(count(), 3);
}

/// `--no-scan` leaves out the count that gives the progress its totals, as restic's: status
/// lines carry no totals then, and the snapshot is the same.
#[test]
fn no_scan_backs_up_without_totals() {
    // Each into a new repository through a slow link: both upload everything, for a few
    // status lines.
    let status = |extra: &[&str]| -> (Vec<serde_json::Value>, serde_json::Value) {
        let e = Env::new();
        e.init(&[]);
        let src = e.path("src");
        sample(&src);
        let mut args = vec!["--backend-latency", "300ms", "backup", "--json"];
        args.extend_from_slice(extra);
        args.push(src.to_str().unwrap());
        let out = e.ok(&args);
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let summary = lines.last().unwrap().clone();
        let status = lines
            .into_iter()
            .filter(|l| l["message_type"] == "status")
            .collect();
        (status, summary)
    };
    let (lines, summary) = status(&["--no-scan"]);
    assert!(!lines.is_empty(), "no status line: {summary}");
    assert!(lines.iter().all(|l| l["total_files"] == 0), "{lines:?}");
    let (scanned, again) = status(&[]);
    assert!(
        scanned.iter().any(|l| l["total_files"].as_u64() > Some(0)),
        "{scanned:?}"
    );
    assert_eq!(
        summary["total_files_processed"],
        again["total_files_processed"]
    );
    // Not `data_added` nor `data_blobs`: the trees' size varies with the two samples'
    // timestamps, and the two repositories' chunkers (keyed per repository) cut the 900 kB
    // file into one or two blocks (5 against 6 blobs in about one run of five).
    assert_eq!(summary["files_new"], again["files_new"]);
    assert_eq!(
        summary["total_bytes_processed"],
        again["total_bytes_processed"]
    );
}

/// A report that cannot be written (stdout on a full disk) fails the backup, but the error
/// says the snapshot was saved; it said only "cannot write to standard output" (hunt 11).
#[test]
fn a_report_that_cannot_be_written_still_says_the_snapshot_was_saved() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"x").unwrap();
    let Ok(full) = fs::OpenOptions::new().write(true).open("/dev/full") else {
        return;
    };
    let o = e
        .cmd(&["backup", src.to_str().unwrap()])
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("saved; its report could not be written"),
        "{err}"
    );
    assert_eq!(
        e.json(&["snapshots", "--json"]).as_array().unwrap().len(),
        1
    );
}

/// Names that are not UTF-8 are shown with their bytes (`x\xe8y`) in backup's and restore's
/// listings and warnings: both became `x\u{fffd}y`, so two files printed the same (hunt 11).
#[test]
fn names_that_are_not_utf8_are_told_apart_in_listings() {
    use std::os::unix::ffi::OsStrExt;
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(&src).unwrap();
    for b in [0xe8u8, 0xe9] {
        let name = [b'x', b, b'y'];
        fs::write(src.join(std::ffi::OsStr::from_bytes(&name)), [b]).unwrap();
    }
    let out = e.ok(&["backup", "-v", src.to_str().unwrap()]);
    assert!(out.contains("x\\xe8y") && out.contains("x\\xe9y"), "{out}");
    let t = e.path("t");
    let out = e.ok(&["restore", "latest", "--target", t.to_str().unwrap(), "-v"]);
    assert!(out.contains("x\\xe8y") && out.contains("x\\xe9y"), "{out}");
}

/// On a file system that keeps whole seconds (ext4 with 128-byte inodes here; ext3, FAT, many
/// NFS servers), a file rewritten with its size kept in the second the previous backup read
/// it keeps its mtime and ctime: that backup's record of it is not trusted, so the next
/// backup reads it again. It kept the old content for good (hunt 13; restic does the same).
#[test]
fn a_file_changed_in_the_second_it_was_backed_up_is_read_again() {
    use std::process::Command;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let ok = |c: &mut Command| {
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !arca_testkit::is_root() || !ok(Command::new("mkfs.ext4").arg("-V")) {
        eprintln!("skipped: needs root and mkfs.ext4");
        return;
    }
    let e = Env::new();
    let img = e.path("ext4.img");
    let mnt = e.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    fs::File::create(&img).unwrap().set_len(32 << 20).unwrap();
    assert!(ok(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-I", "128"])
        .arg(&img)));
    if !ok(Command::new("mount")
        .args(["-o", "loop"])
        .arg(&img)
        .arg(&mnt))
    {
        eprintln!("skipped: cannot loop-mount here");
        return;
    }
    let _unmount = Unmount(&mnt);
    e.init(&[]);
    let src = mnt.join("src");
    fs::create_dir_all(&src).unwrap();
    let f = src.join("f");
    let now = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    // Write, back up and rewrite within one second (tried again if a second boundary fell
    // in between).
    for attempt in 0..5 {
        while now().subsec_millis() > 100 {
            std::thread::sleep(Duration::from_millis(10));
        }
        let second = now().as_secs();
        let (old, new) = (format!("version {attempt}a"), format!("version {attempt}b"));
        fs::write(&f, &old).unwrap();
        e.ok(&["backup", "-q", src.to_str().unwrap()]);
        fs::write(&f, &new).unwrap();
        if now().as_secs() != second {
            continue;
        }
        assert_eq!(
            fs::metadata(&f)
                .unwrap()
                .modified()
                .unwrap()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .subsec_nanos(),
            0,
            "whole seconds"
        );
        e.ok(&["backup", "-q", src.to_str().unwrap()]);
        let t = e.path(&format!("t{attempt}"));
        e.ok(&["restore", "-q", "latest", "--target", t.to_str().unwrap()]);
        let got = fs::read(t.join(f.strip_prefix("/").unwrap())).unwrap();
        assert_eq!(String::from_utf8_lossy(&got), new);
        return;
    }
    eprintln!("skipped: no attempt stayed within one second");
}

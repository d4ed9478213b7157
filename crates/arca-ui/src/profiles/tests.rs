//! Unit tests of the UI's profiles: reading them as `arca -P NAME backup` does, and refusing
//! what the page cannot carry out.

use super::*;

#[test]
fn profiles_are_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(
        d.join("home.toml"),
        "[global]\nrepo = \"/r\"\n[backup]\npaths = [\"/home/me\", \"/etc\"]\nexclude = \"*.tmp\"\n\
         tag = [\"daily\"]\nhost = \"box\"\nexclude-caches = true\nexclude-larger-than = \"2KiB\"\n",
    )
    .expect("write");
    std::fs::write(
        d.join("other.toml"),
        "[backup]\npaths = \"/x\"\n[global]\nrepo = \"/elsewhere\"\n",
    )
    .expect("write");
    std::fs::write(d.join("forget-only.toml"), "[forget]\nkeep-last = 3\n").expect("write");
    std::fs::write(d.join("broken.toml"), "[backup\n").expect("write");
    let l = list(Some(d), "/r", None);
    let names: Vec<&str> = l.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["broken", "home", "other"]);
    assert!(
        l[0].problem
            .as_deref()
            .is_some_and(|p| p.contains("broken.toml"))
    );
    assert_eq!(l[1].problem, None);
    assert_eq!(l[1].paths, ["/home/me", "/etc"]);
    assert!(
        l[2].problem
            .as_deref()
            .is_some_and(|p| p.contains("another repository"))
    );
    let (_, o) = find(Some(d), "home", "/r", None).expect("home");
    assert_eq!(o.tags, ["daily"]);
    assert_eq!(o.hostname.as_deref(), Some("box"));
    assert!(o.excludes.caches);
    assert_eq!(o.excludes.larger_than, Some(2048));
    assert_eq!(o.excludes.patterns, ["*.tmp"]);
    assert!(find(Some(d), "other", "/r", None).is_err());
    assert!(find(Some(d), "../x", "/r", None).is_err());
    assert!(find(Some(d), "missing", "/r", None).is_err_and(|e| e.contains("not found")));
    // A compression level zstd does not have is named, not passed on.
    for (level, ok) in [
        ("22", true),
        ("-7", true),
        ("23", false),
        ("-100000", false),
    ] {
        std::fs::write(
            d.join("z.toml"),
            format!("[global]\nrepo = \"/r\"\n[backup]\npaths = \"/x\"\ncompression = {level}\n"),
        )
        .expect("write");
        let got = find(Some(d), "z", "/r", None);
        assert_eq!(got.is_ok(), ok, "{level}");
        if !ok {
            assert!(
                got.is_err_and(|e| e.contains("not a zstd level")),
                "{level}"
            );
        }
    }
}

#[test]
fn home_and_tag_lists_read_as_on_the_command_line() {
    let Some(h) = std::env::var_os("HOME") else {
        return;
    };
    let h = Path::new(&h);
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(
        d.join("t.toml"),
        "[global]\nrepo = \"~/r\"\n[backup]\npaths = [\"~/docs\", \"/x/~/y\"]\n\
         exclude = [\"~/.cache\", \"~\"]\ntag = [\"a, b\", \"c\", \"~\"]\nhost = \"~/h\"\n",
    )
    .expect("write");
    let r = h.join("r").to_string_lossy().into_owned();
    let (p, o) = find(Some(d), "t", &r, None).expect("t");
    assert_eq!(p.problem, None, "the repository is ~/r");
    assert_eq!(o.paths, [h.join("docs"), PathBuf::from("/x/~/y")]);
    assert_eq!(
        o.excludes.patterns,
        [h.join(".cache").to_string_lossy().into_owned(), "~".into()]
    );
    // Tags and hosts are text, not paths.
    assert_eq!(o.tags, ["a", "b", "c", "~"]);
    assert_eq!(o.hostname.as_deref(), Some("~/h"));
}

/// Writes `NAME.toml` in `d` and gives what `list` makes of it.
fn listed(d: &Path, name: &str, text: &str, location: &str) -> Profile {
    std::fs::write(d.join(format!("{name}.toml")), text).expect("write");
    let p = load(&d.join(format!("{name}.toml")), location, None).expect("load");
    let _ = std::fs::remove_file(d.join(format!("{name}.toml")));
    p.0
}

#[test]
fn the_repository_is_found_as_the_cli_finds_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let other = |text: &str| {
        listed(d, "p", text, "/r")
            .problem
            .is_some_and(|p| p.contains("another repository (/other)"))
    };
    // `repository` is `repo`, in [global] and in [repository].
    assert!(other(
        "[global]\nrepository = \"/other\"\n[backup]\npaths = \"/x\"\n"
    ));
    assert!(other(
        "[repository]\nrepository = \"/other\"\n[backup]\npaths = \"/x\"\n"
    ));
    // [backup]'s repo wins over [global]'s.
    assert!(other(
        "[global]\nrepo = \"/r\"\n[backup]\nrepo = \"/other\"\npaths = \"/x\"\n"
    ));
    assert!(other(
        "[global]\nrepo = \"/r\"\n[backup]\nrepository = \"/other\"\npaths = \"/x\"\n"
    ));
    // [global]'s wins over [repository]'s.
    let p = listed(
        d,
        "p",
        "[repository]\nrepo = \"/other\"\n[global]\nrepo = \"/r\"\n[backup]\npaths = \"/x\"\n",
        "/r",
    );
    assert_eq!(p.problem, None);
    // `local:` names the same folder.
    for (repo, served) in [
        ("local:/r", "/r"),
        ("/r", "local:/r"),
        ("local:/r", "local:/r"),
    ] {
        let p = listed(
            d,
            "p",
            &format!("[global]\nrepo = \"{repo}\"\n[backup]\npaths = \"/x\"\n"),
            served,
        );
        assert_eq!(p.problem, None, "{repo} served as {served}");
    }
    // Both spellings in one section are refused, as by the CLI.
    let p = listed(
        d,
        "p",
        "[global]\nrepo = \"/r\"\nrepository = \"/r\"\n[backup]\npaths = \"/x\"\n",
        "/r",
    );
    assert!(p.problem.is_some_and(|p| p.contains("keep one")));
}

#[test]
fn keys_are_read_with_underscores_and_blank_hosts_are_this_machine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(
        d.join("u.toml"),
        "[global]\nrepo = \"/r\"\n[backup]\npaths = \"/x\"\nexclude_caches = true\n\
         exclude_larger_than = \"1KiB\"\none_file_system = true\nhost = \"\"\n\
         compression = \"5\"\ntag = true\nignore_ctime = true\nignore-inode = true\n",
    )
    .expect("write");
    let (p, o) = find(Some(d), "u", "/r", None).expect("u");
    assert_eq!(p.problem, None);
    assert!(o.excludes.caches);
    assert_eq!(o.excludes.larger_than, Some(1024));
    assert!(o.one_file_system);
    assert!(o.ignore_ctime && o.ignore_inode);
    assert_eq!(o.hostname, None, "a blank host is this machine's");
    assert_eq!(o.compression, Some(5));
    assert_eq!(o.tags, ["true"]);
    // One host only, as `--host` takes one.
    let p = listed(
        d,
        "m",
        "[backup]\npaths = \"/x\"\nhost = [\"h1\", \"h2\"]\n",
        "/r",
    );
    assert!(p.problem.is_some_and(|p| p.contains("takes one value")));
}

#[test]
fn options_the_page_does_not_carry_out_are_problems_not_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // A listed name must exist: one that does not is skipped, as restic's (Go's Glob).
    let y = d.join("y").display().to_string();
    std::fs::create_dir_all(&y).expect("mkdir");
    std::fs::write(d.join("list"), format!("{y}\n")).expect("write");
    let list = d.join("list").display().to_string();
    for (key, value) in [
        ("dry-run", "true"),
        ("dry_run", "true"),
        ("time", "2020-01-02T03:04:05"),
        ("stdin", "true"),
        ("parent", "\"latest\""),
        ("skip-if-unchanged", "true"),
        ("files-from-raw-typo", "\"x\""),
        ("exlude", "[\"*.tmp\"]"),
    ] {
        let p = listed(
            d,
            "k",
            &format!("[backup]\npaths = \"/x\"\n{key} = {value}\n"),
            "/r",
        );
        let problem = p.problem.unwrap_or_default();
        assert!(problem.contains(&format!("{key:?}")), "{key}: {problem}");
    }
    let p = listed(
        d,
        "k",
        "[global]\nexlude = 1\n[backup]\npaths = \"/x\"\n",
        "/r",
    );
    assert!(
        p.problem
            .is_some_and(|p| p.contains("unknown option \"exlude\""))
    );
    // A switch set to false asks for nothing; global options are the server's business.
    let p = listed(
        d,
        "k",
        "[global]\npassword-file = \"/pw\"\n[backup]\npaths = \"/x\"\ndry-run = false\n\
         verbose = 2\n[backup.options]\n\"s3.region\" = \"eu\"\n",
        "/r",
    );
    assert_eq!(p.problem, None);
    // `-` (the server's own standard input) and pipes are refused, never read.
    for (key, v) in [
        ("files-from", "-"),
        ("files-from-raw", "-"),
        ("files-from-verbatim", "-"),
        ("exclude-file", "-"),
        ("iexclude-file", "/dev/null"),
        ("files-from", "FIFO"),
    ] {
        let fifo = d.join("fifo");
        if v == "FIFO"
            && !std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .is_ok_and(|s| s.success())
        {
            continue;
        }
        let v = if v == "FIFO" {
            fifo.display().to_string()
        } else {
            v.to_string()
        };
        let p = listed(
            d,
            "s",
            &format!("[backup]\npaths = \"/x\"\n{key} = \"{v}\"\n"),
            "/r",
        );
        let problem = p.problem.unwrap_or_default();
        assert!(
            problem.contains("standard input") || problem.contains("not a regular file"),
            "{key} = {v}: {problem}"
        );
    }
    let p = listed(
        d,
        "s",
        &format!("[backup]\nfiles-from = \"{list}\"\n"),
        "/r",
    );
    assert_eq!(p.paths, [y]);
}

#[test]
fn lists_are_read_as_arca_backup_reads_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for f in [
        "b/file.txt",
        "b/other.txt",
        "b/keep.dat",
        "win/$RECYCLE.BIN",
        "c",
        "# x",
    ] {
        let p = d.join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, "x").expect("write");
    }
    let dd = d.display();
    std::fs::write(
        d.join("list"),
        format!("# comment\n  {dd}/b/*.txt  \n{dd}/win/$RECYCLE.BIN\n{dd}/nothing*\n"),
    )
    .expect("write");
    std::fs::write(d.join("verbatim"), format!("{dd}/# x\n")).expect("write");
    std::fs::write(d.join("raw"), format!("{dd}/c\0")).expect("write");
    let p = listed(
        d,
        "l",
        &format!(
            "[backup]\nfiles-from = \"{dd}/list\"\nfiles_from_verbatim = \"{dd}/verbatim\"\n\
             files-from-raw = \"{dd}/raw\"\n"
        ),
        "/r",
    );
    assert_eq!(p.problem, None);
    let mut got = p.paths.clone();
    got.sort();
    let mut want: Vec<String> = ["# x", "b/file.txt", "b/other.txt", "c", "win/$RECYCLE.BIN"]
        .iter()
        .map(|f| format!("{dd}/{f}"))
        .collect();
    want.sort();
    assert_eq!(got, want);
}

//! Unit tests of profile expansion.

#![allow(clippy::unwrap_used)]
use super::*;
use clap::Parser;

fn run(argv: &[&str], profile: &str) -> Result<Vec<String>> {
    let args: Vec<OsString> = argv.iter().map(OsString::from).collect();
    let table: Table = profile.parse().unwrap();
    let out = apply(args, &[(PathBuf::from("p.toml"), table)])?;
    Ok(out
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect())
}

const PROFILE: &str = r#"
[global]
repo = "/srv/repo"
password-file = "/etc/arca.pass"
options = { "s3.region" = "eu-west-1" }

[backup]
paths = ["/home", "/etc"]
exclude = ["*.tmp", "cache"]
exclude-caches = true
one-file-system = false
compression = -1
tag = ["daily"]

[forget]
keep-daily = 7
keep-weekly = 4
prune = true

[repair.index]
"#;

#[test]
fn adds_globals_command_options_and_paths() {
    let out = run(&["arca", "-P", "p", "backup"], PROFILE).unwrap();
    assert_eq!(
        out,
        [
            "arca",
            "--option=s3.region=eu-west-1",
            "--password-file=/etc/arca.pass",
            "--repo=/srv/repo",
            "-P",
            "p",
            "backup",
            "--compression=-1",
            "--exclude=*.tmp",
            "--exclude=cache",
            "--exclude-caches",
            "--tag=daily",
            "--",
            "/home",
            "/etc",
        ]
    );
    // The result parses.
    Cli::try_parse_from(&out).unwrap();
}

#[test]
fn command_line_wins_and_repeatables_merge() {
    let out = run(
        &[
            "arca",
            "-r",
            "/other",
            "-P",
            "p",
            "backup",
            "--compression",
            "5",
            "-e",
            "x",
            "/data",
        ],
        PROFILE,
    )
    .unwrap();
    assert!(!out.iter().any(|a| a == "--repo=/srv/repo"), "{out:?}");
    assert!(!out.iter().any(|a| a == "--compression=-1"), "{out:?}");
    assert!(out.iter().any(|a| a == "--exclude=*.tmp"), "{out:?}");
    assert!(
        !out.iter().any(|a| a == "/home"),
        "user's paths replace the profile's"
    );
    let cli = Cli::try_parse_from(&out).unwrap();
    let crate::cli::Command::Backup(b) = cli.command else {
        panic!()
    };
    assert_eq!(b.compression, Some(5));
    assert_eq!(b.paths, [PathBuf::from("/data")]);
    assert_eq!(b.exclude.excludes, ["*.tmp", "cache", "x"]);
}

#[test]
fn only_the_running_command_takes_its_section() {
    let out = run(&["arca", "-P", "p", "forget", "--keep-daily=3"], PROFILE).unwrap();
    assert!(out.iter().any(|a| a == "--keep-weekly=4"));
    assert!(out.iter().any(|a| a == "--prune"));
    assert!(!out.iter().any(|a| a == "--keep-daily=7"));
    assert!(!out.iter().any(|a| a.starts_with("--exclude")));
    Cli::try_parse_from(&out).unwrap();
    let out = run(&["arca", "-P", "p", "repair", "index"], PROFILE).unwrap();
    Cli::try_parse_from(&out).unwrap();
}

#[test]
fn unknown_sections_and_keys_are_named() {
    let e = run(&["arca", "-P", "p", "snapshots"], "[bakup]\nx = 1").unwrap_err();
    assert!(e.to_string().contains("unknown section [bakup]"), "{e}");
    let e = run(
        &["arca", "-P", "p", "snapshots"],
        "[backup]\nexclud = [\"a\"]",
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown option \"exclud\""), "{e}");
    let e = run(
        &["arca", "-P", "p", "snapshots"],
        "[backup]\nexclude-caches = 3",
    )
    .unwrap_err();
    assert!(e.to_string().contains("expected true or false"), "{e}");
}

#[test]
fn profile_names_are_found_in_every_spelling() {
    let args: Vec<OsString> = [
        "arca",
        "-P",
        "a",
        "-Pb",
        "--use-profile",
        "c",
        "--use-profile=d",
        "--",
        "-P",
        "e",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    assert_eq!(profile_names(&args), ["a", "b", "c", "d"]);
}

/// A password source on the command line or in a later profile replaces the profile's
/// other one (clap refuses both together).
#[test]
fn a_password_source_replaces_the_profiles_other_one() {
    let given = |v: &[String]| v.iter().any(|a| a.starts_with("--password-file"));
    let out = run(
        &[
            "arca",
            "-P",
            "p",
            "--password-command",
            "pass show x",
            "snapshots",
        ],
        PROFILE,
    )
    .unwrap();
    assert!(!given(&out), "{out:?}");
    Cli::try_parse_from(&out).unwrap();
    let later: Table = "[global]\npassword-command = \"echo pw\"".parse().unwrap();
    let args: Vec<OsString> = ["arca", "-P", "p", "-P", "q", "snapshots"]
        .iter()
        .map(OsString::from)
        .collect();
    let out: Vec<String> = apply(
        args,
        &[
            (PathBuf::from("p.toml"), PROFILE.parse().unwrap()),
            (PathBuf::from("q.toml"), later),
        ],
    )
    .unwrap()
    .iter()
    .map(|s| s.to_string_lossy().into_owned())
    .collect();
    assert!(!given(&out), "{out:?}");
    assert!(
        out.contains(&"--password-command=echo pw".to_string()),
        "{out:?}"
    );
    Cli::try_parse_from(&out).unwrap();
}

fn names(argv: &[&str]) -> Vec<String> {
    let args: Vec<OsString> = argv.iter().map(OsString::from).collect();
    profile_names(&args)
}

/// `-P` inside a cluster of short flags, and `-P=NAME`, as clap reads them (the profile was not
/// read, or was looked for as "=NAME"); a value of another option is not a profile.
#[test]
fn profile_names_in_clusters_and_with_an_equals_sign() {
    assert_eq!(names(&["arca", "-qPnightly", "snapshots"]), ["nightly"]);
    assert_eq!(names(&["arca", "-qP", "nightly", "snapshots"]), ["nightly"]);
    assert_eq!(names(&["arca", "-P=nightly", "snapshots"]), ["nightly"]);
    assert_eq!(names(&["arca", "snapshots", "-cP", "x"]), ["x"]);
    assert_eq!(
        names(&["arca", "-o", "-Pnot", "snapshots"]),
        Vec::<String>::new()
    );
    assert_eq!(
        names(&["arca", "-r", "/r", "snapshots"]),
        Vec::<String>::new()
    );
    // Each spelling parses to the same profile list in clap.
    for argv in [
        &["arca", "-qPnightly", "snapshots"][..],
        &["arca", "-P=nightly", "snapshots"][..],
    ] {
        let cli = Cli::try_parse_from(argv).unwrap();
        assert_eq!(cli.global.profiles, ["nightly"], "{argv:?}");
    }
}

#[test]
fn use_profile_in_a_profile_is_refused() {
    let e = run(
        &["arca", "-P", "p", "snapshots"],
        "[global]\nuse-profile = \"x\"",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("\"use-profile\" cannot be set in a profile"),
        "{e}"
    );
}

/// A global option typed before the command wins over the same key in the command's section
/// (it was only looked for after the command's name).
#[test]
fn a_global_typed_before_the_command_beats_the_commands_section() {
    let p = "[snapshots]\nrepo = \"/nonexistent\"\n[global]\nrepo = \"/g\"";
    let out = run(&["arca", "-r", "/typed", "-P", "p", "snapshots"], p).unwrap();
    assert!(!out.iter().any(|a| a.starts_with("--repo")), "{out:?}");
    let cli = Cli::try_parse_from(&out).unwrap();
    assert_eq!(cli.global.repo.as_deref(), Some("/typed"));
    // Within the profile, the command's section beats [global] (clap refused both).
    let out = run(&["arca", "-P", "p", "snapshots"], p).unwrap();
    let cli = Cli::try_parse_from(&out).unwrap();
    assert_eq!(cli.global.repo.as_deref(), Some("/nonexistent"));
}

fn backup_verbose(argv: &[&str], profile: &str) -> u8 {
    let out = run(argv, profile).unwrap();
    let cli = Cli::try_parse_from(crate::hoist::hoist_flags(
        out.iter().map(OsString::from).collect(),
    ))
    .unwrap();
    let crate::cli::Command::Backup(b) = cli.command else {
        panic!()
    };
    b.verbose
}

/// `verbose = 2` gives -vv (it was ignored), and a -v typed replaces the profile's count.
#[test]
fn verbose_takes_a_count_and_the_command_line_replaces_it() {
    let p = "[backup]\nverbose = 2\npaths = [\"/x\"]";
    assert_eq!(backup_verbose(&["arca", "-P", "p", "backup"], p), 2);
    assert_eq!(backup_verbose(&["arca", "-P", "p", "backup", "-v"], p), 1);
    assert_eq!(backup_verbose(&["arca", "-v", "-P", "p", "backup"], p), 1);
    let p = "[backup]\nverbose = true\npaths = [\"/x\"]";
    assert_eq!(backup_verbose(&["arca", "-P", "p", "backup"], p), 1);
    assert_eq!(backup_verbose(&["arca", "-P", "p", "backup", "-v"], p), 1);
    for bad in ["\"x\"", "-1", "1.5"] {
        let e = run(
            &["arca", "-P", "p", "snapshots"],
            &format!("[backup]\nverbose = {bad}"),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("p.toml, [backup] key \"verbose\": expected true, false or a count"),
            "{e}"
        );
    }
}

/// The profile's paths are not added to `--stdin` or to `--files-from` lists.
#[test]
fn paths_give_way_to_stdin_and_files_from() {
    for typed in [
        &["--stdin"][..],
        &["--files-from", "list"][..],
        &["--files-from-verbatim=list"][..],
        &["--files-from-raw", "list"][..],
    ] {
        let mut argv = vec!["arca", "-P", "p", "backup"];
        argv.extend(typed);
        let out = run(&argv, PROFILE).unwrap();
        assert!(!out.iter().any(|a| a == "/home"), "{out:?}");
        Cli::try_parse_from(&out).unwrap();
    }
    // A profile's --stdin gives way to paths or a list typed.
    let p = "[backup]\nstdin = true";
    let out = run(&["arca", "-P", "p", "backup", "/data"], p).unwrap();
    assert!(!out.iter().any(|a| a == "--stdin"), "{out:?}");
    let e = run(
        &["arca", "-P", "p", "snapshots"],
        "[backup]\nstdin = true\npaths = [\"/x\"]",
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("[backup]: \"stdin\" and \"paths\""),
        "{e}"
    );
}

/// copy's source password: the command line's source (or its variable) replaces the profile's
/// other one; a profile giving both is named.
#[test]
fn the_source_password_typed_replaces_the_profiles_other_one() {
    let p = "[copy]\nfrom-repo = \"/src\"\nfrom-password-file = \"/pw\"";
    let out = run(
        &[
            "arca",
            "-r",
            "/r",
            "-P",
            "p",
            "copy",
            "--from-password-command",
            "echo x",
        ],
        p,
    )
    .unwrap();
    assert!(
        !out.iter().any(|a| a.starts_with("--from-password-file")),
        "{out:?}"
    );
    Cli::try_parse_from(&out).unwrap();
    for section in ["global", "copy"] {
        let (a, b) = if section == "global" {
            ("password-file", "password-command")
        } else {
            ("from-password-file", "from-password-command")
        };
        let e = run(
            &["arca", "-P", "p", "snapshots"],
            &format!("[{section}]\n{a} = \"/pw\"\n{b} = \"echo x\""),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains(&format!(
                "p.toml, [{section}]: \"{a}\" and \"{b}\" cannot both"
            )),
            "{e}"
        );
    }
}

/// `~` expands in paths only (`~` alone too); tags, hosts and patterns stay as written, but an
/// exclude's leading `~/` expands, as documented.
#[test]
fn home_expands_in_paths_only() {
    let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else {
        return;
    };
    let home = home.to_string_lossy().into_owned();
    let p = r#"
[global]
repo = "~/repo"
[backup]
paths = ["~", "~/docs"]
exclude = ["~/.cache", "~"]
tag = ["~", "~/t"]
host = "~/h"
"#;
    let out = run(&["arca", "-P", "p", "backup"], p).unwrap();
    let cli = Cli::try_parse_from(&out).unwrap();
    assert_eq!(cli.global.repo, Some(format!("{home}/repo")));
    let crate::cli::Command::Backup(b) = cli.command else {
        panic!()
    };
    assert_eq!(
        b.paths,
        [PathBuf::from(&home), PathBuf::from(format!("{home}/docs"))]
    );
    assert_eq!(b.exclude.excludes, [format!("{home}/.cache"), "~".into()]);
    assert_eq!(b.tags, ["~", "~/t"]);
    assert_eq!(b.host.as_deref(), Some("~/h"));
}

/// An unquoted TOML datetime is a time value (it was refused as "2024-01-02T03:04:05").
#[test]
fn toml_datetimes_are_times() {
    let out = run(
        &["arca", "-P", "p", "backup", "/x"],
        "[backup]\ntime = 2024-01-02 03:04:05",
    )
    .unwrap();
    assert!(
        out.iter().any(|a| a == "--time=2024-01-02 03:04:05"),
        "{out:?}"
    );
    let out = run(
        &["arca", "-P", "p", "backup", "/x"],
        "[backup]\ntime = 2024-01-02T03:04:05+02:00",
    )
    .unwrap();
    assert!(
        out.iter().any(|a| a == "--time=2024-01-02T03:04:05+02:00"),
        "{out:?}"
    );
    Cli::try_parse_from(&out).unwrap();
}

/// Positional values in the command's order, not the section's (alphabetical) key order:
/// `listed` came before ls's `snapshot` ("no snapshot matches /some/dir").
#[test]
fn positionals_keep_the_commands_order() {
    let p = "[ls]\nsnapshot = \"latest\"\nlisted = [\"/some/dir\", \"/other\"]";
    let out = run(&["arca", "-P", "p", "ls"], p).unwrap();
    assert_eq!(
        out[out.len() - 4..],
        ["--", "latest", "/some/dir", "/other"]
    );
    let cli = Cli::try_parse_from(&out).unwrap();
    let crate::cli::Command::Ls(l) = cli.command else {
        panic!()
    };
    assert_eq!(l.snapshot, "latest");
    assert_eq!(
        l.listed,
        [PathBuf::from("/some/dir"), PathBuf::from("/other")]
    );
}

/// An option typed wins over the profile's that clap refuses with it, for every conflict clap
/// declares (clap's error named a flag never typed), and a section setting both is named.
#[test]
fn the_typed_option_wins_over_any_conflicting_one() {
    for (argv, p, left_out) in [
        (
            &["arca", "-r", "/r", "-P", "p", "check", "--read-data"][..],
            "[check]\nread-data-subset = \"10%\"",
            "--read-data-subset=10%",
        ),
        (
            &[
                "arca",
                "-r",
                "/r",
                "-P",
                "p",
                "restore",
                "--no-direct-io",
                "latest",
                "-t",
                "/t",
            ][..],
            "[restore]\ndirect-io = \"always\"",
            "--direct-io=always",
        ),
        (
            &[
                "arca",
                "-r",
                "/r",
                "-P",
                "p",
                "restore",
                "--direct-io",
                "never",
                "latest",
                "-t",
                "/t",
            ][..],
            "[restore]\nno-direct-io = true",
            "--no-direct-io",
        ),
        (
            &["arca", "-r", "/r", "-P", "p", "find", "--blob", "abc"][..],
            "[find]\ntree = true",
            "--tree",
        ),
    ] {
        let out = run(argv, p).unwrap();
        assert!(!out.iter().any(|a| a == left_out), "{out:?}");
        Cli::try_parse_from(&out).unwrap();
    }
    for (p, pair) in [
        (
            "[check]\nread-data = true\nread-data-subset = \"1/2\"",
            "[check]: \"read-data\" and \"read-data-subset\"",
        ),
        (
            "[find]\nblob = true\nlong = true",
            "[find]: \"blob\" and \"long\"",
        ),
    ] {
        let e = run(&["arca", "-P", "p", "snapshots"], p).unwrap_err();
        assert!(e.to_string().contains(pair), "{e}");
    }
}

/// A later profile's paths replace an earlier one's `stdin` (clap: "--stdin cannot be used
/// with [PATH]...").
#[test]
fn a_later_profiles_paths_replace_an_earlier_stdin() {
    let args: Vec<OsString> = ["arca", "-r", "/r", "-P", "st", "-P", "paths", "backup"]
        .iter()
        .map(OsString::from)
        .collect();
    let out: Vec<String> = apply(
        args,
        &[
            (
                PathBuf::from("st.toml"),
                "[backup]\nstdin = true".parse().unwrap(),
            ),
            (
                PathBuf::from("paths.toml"),
                "[backup]\npaths = [\"/x\"]".parse().unwrap(),
            ),
        ],
    )
    .unwrap()
    .iter()
    .map(|s| s.to_string_lossy().into_owned())
    .collect();
    assert!(!out.iter().any(|a| a == "--stdin"), "{out:?}");
    assert!(out.iter().any(|a| a == "/x"), "{out:?}");
    Cli::try_parse_from(&out).unwrap();
}

/// `~/` expands at the start of restore's include patterns too, as of exclude patterns.
#[test]
fn home_expands_at_the_start_of_include_patterns() {
    let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else {
        return;
    };
    let home = home.to_string_lossy().into_owned();
    let p = "[restore]\ninclude = [\"~/docs/sub\", \"a~\"]\niinclude = [\"~/X\"]";
    let out = run(
        &[
            "arca", "-r", "/r", "-P", "p", "restore", "latest", "-t", "/t",
        ],
        p,
    )
    .unwrap();
    for want in [
        format!("--include={home}/docs/sub"),
        "--include=a~".to_string(),
        format!("--iinclude={home}/X"),
    ] {
        assert!(out.contains(&want), "{want} not in {out:?}");
    }
    Cli::try_parse_from(&out).unwrap();
}

/// Two keys for one option in a section are refused, naming both (clap said "cannot be used
/// multiple times", naming no profile).
#[test]
fn one_option_set_twice_in_a_section_is_named() {
    for (p, keys) in [
        (
            "[global]\nrepo = \"/a\"\nrepository = \"/b\"",
            "p.toml, [global]: \"repo\" and \"repository\"",
        ),
        (
            "[backup]\nexclude_caches = true\nexclude-caches = true",
            "p.toml, [backup]: \"exclude-caches\" and \"exclude_caches\"",
        ),
    ] {
        let e = run(&["arca", "-P", "p", "snapshots"], p).unwrap_err();
        assert!(e.to_string().contains(keys), "{e}");
    }
}

/// restore's `-v` is a switch that takes `-vv` typed: `verbose = 2` is accepted (it was
/// refused with "expected true or false").
#[test]
fn restore_verbose_takes_a_count() {
    for (v, on) in [("2", true), ("1", true), ("0", false), ("true", true)] {
        let out = run(
            &[
                "arca", "-r", "/r", "-P", "p", "restore", "latest", "-t", "/t",
            ],
            &format!("[restore]\nverbose = {v}"),
        )
        .unwrap();
        let cli = Cli::try_parse_from(crate::hoist::hoist_flags(
            out.iter().map(OsString::from).collect(),
        ))
        .unwrap();
        let crate::cli::Command::Restore(r) = cli.command else {
            panic!()
        };
        assert_eq!(r.verbose, on, "{v}");
    }
    let e = run(
        &["arca", "-P", "p", "snapshots"],
        "[restore]\nverbose = \"x\"",
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("expected true, false or a count"),
        "{e}"
    );
}

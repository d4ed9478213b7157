//! End-to-end tests of profiles (`-P NAME`), `--password-command`, `arca completions` and
//! `arca man`: a profile found in `$XDG_CONFIG_HOME/arca/` or the current folder supplies the
//! repository, the password source and command defaults; the command line wins over it.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::process::Command;

use serde_json::Value;

mod common;
use common::*;

/// `arca` run in `cwd` with only the profile's settings (no repository or password in the
/// environment) and `XDG_CONFIG_HOME` set to `config`.
fn bare(e: &Env, cwd: &std::path::Path, args: &[&str]) -> std::process::Output {
    bare_with(e, cwd, args, &[])
}

/// [`bare`] with the variables `vars` set.
fn bare_with(
    e: &Env,
    cwd: &std::path::Path,
    args: &[&str],
    vars: &[(&str, &str)],
) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", e.path("config"))
        .env("XDG_CACHE_HOME", e.path("cache"))
        .env_remove("ARCA_PASSWORD")
        .env_remove("ARCA_PASSWORD_FILE")
        .env_remove("ARCA_PASSWORD_COMMAND")
        .env_remove("ARCA_REPOSITORY")
        .env_remove("ARCA_FROM_PASSWORD_FILE")
        .env_remove("ARCA_FROM_PASSWORD_COMMAND")
        .envs(vars.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn ok(o: &std::process::Output) -> String {
    assert!(o.status.success(), "failed: {}", stderr(o));
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn profile_supplies_repository_password_and_command_defaults() {
    let e = Env::new();
    e.init(&SMALL_CHUNKS);
    let src = e.path("src");
    sample(&src);
    fs::write(src.join("skip.tmp"), b"temporary").unwrap();
    fs::write(e.path("pass"), "test password\n").unwrap();
    let dir = e.path("config/arca");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("nightly.toml"),
        format!(
            r#"
[global]
repo = "{repo}"
password-command = "cat '{pass}'"

[backup]
paths = ["{src}"]
exclude = ["*.tmp"]
tag = ["nightly"]
host = "profile-host"

[snapshots]
json = true

[forget]
keep-last = 1
"#,
            repo = e.repo.display(),
            pass = e.path("pass").display(),
            src = src.display()
        ),
    )
    .unwrap();
    let cwd = e.path(".");
    // Two backups from the profile alone, one with the command line's extra tag.
    ok(&bare(&e, &cwd, &["-P", "nightly", "backup", "-q"]));
    ok(&bare(
        &e,
        &cwd,
        &["-P", "nightly", "backup", "-q", "--tag", "extra"],
    ));
    let v: Value =
        serde_json::from_str(&ok(&bare(&e, &cwd, &["-P", "nightly", "snapshots"]))).unwrap();
    let snaps = v.as_array().unwrap();
    assert_eq!(snaps.len(), 2);
    assert_eq!(snaps[0]["tags"], serde_json::json!(["nightly"]));
    assert_eq!(snaps[1]["tags"], serde_json::json!(["nightly", "extra"]));
    assert_eq!(snaps[0]["hostname"], "profile-host");
    assert_eq!(
        snaps[0]["paths"],
        serde_json::json!([src.to_str().unwrap()])
    );
    // The profile's exclude applied.
    let listing = e.ok(&["ls", "latest"]);
    assert!(listing.contains("top.bin"), "{listing}");
    assert!(!listing.contains("skip.tmp"), "{listing}");
    // The command line wins: keep the last 2, so nothing is removed.
    let out = ok(&bare(
        &e,
        &cwd,
        &["-P", "nightly", "forget", "--keep-last", "2", "--dry-run"],
    ));
    assert!(out.contains("nothing to remove"), "{out}");
    // The profile's policy: keep the last one.
    ok(&bare(&e, &cwd, &["-P", "nightly", "forget"]));
    let v: Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1);
}

#[test]
fn profile_in_current_folder_and_by_path() {
    let e = Env::new();
    e.init(&[]);
    let cwd = e.path("work");
    fs::create_dir_all(&cwd).unwrap();
    fs::write(
        cwd.join("here.toml"),
        format!("[repository]\nrepo = \"{}\"\n", e.repo.display()),
    )
    .unwrap();
    let o = bare(
        &e,
        &cwd,
        &[
            "-P",
            "here",
            "--password-command",
            "echo test password",
            "snapshots",
        ],
    );
    let out = ok(&o);
    assert!(
        out.contains("0 snapshots") || out.trim().is_empty() || out.contains("no snapshots"),
        "{out}"
    );
    let path = cwd.join("here.toml");
    ok(&bare(
        &e,
        &e.path("."),
        &[
            "--use-profile",
            path.to_str().unwrap(),
            "--password-command",
            "echo test password",
            "snapshots",
        ],
    ));
}

#[test]
fn profile_errors_name_the_file_and_the_key() {
    let e = Env::new();
    let cwd = e.path(".");
    let o = bare(&e, &cwd, &["-P", "missing", "snapshots"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("profile \"missing\" not found"), "{err}");
    assert!(err.contains("config/arca/missing.toml"), "{err}");
    // Under --json, one exit_error line, as every fatal error (it was plain text).
    let o = bare(&e, &cwd, &["-P", "missing", "snapshots", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let line: serde_json::Value = serde_json::from_str(err.trim()).unwrap();
    assert_eq!(line["message_type"], "exit_error", "{err}");
    assert!(
        line["message"].as_str().unwrap().contains("not found"),
        "{err}"
    );
    fs::write(e.path("bad.toml"), "[backup]\nexclud = [\"x\"]\n").unwrap();
    let o = bare(&e, &cwd, &["-P", "bad", "snapshots"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("bad.toml") && err.contains("unknown option \"exclud\""),
        "{err}"
    );
    fs::write(e.path("broken.toml"), "[backup\n").unwrap();
    let o = bare(&e, &cwd, &["-P", "broken", "snapshots"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("broken.toml"), "{}", stderr(&o));
}

#[test]
fn failing_password_command_is_named() {
    let e = Env::new();
    e.init(&[]);
    let o = Command::new(BIN)
        .args([
            "-r",
            e.repo.to_str().unwrap(),
            "--password-command",
            "exit 3",
            "snapshots",
        ])
        .env_remove("ARCA_PASSWORD")
        .env_remove("ARCA_PASSWORD_FILE")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("password command \"exit 3\" failed"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn completions_and_man_pages_cover_every_command() {
    let e = Env::new();
    let bash = e.ok(&["completions", "bash"]);
    for sub in [
        "backup", "restore", "forget", "prune", "find", "diff", "dump", "mount",
    ] {
        assert!(bash.contains(sub), "bash completion lacks {sub}");
    }
    assert!(bash.contains("--use-profile"));
    // The modes of restore's --overwrite and --direct-io are offered (file names were).
    assert!(bash.contains("\"if-changed always if-newer never\""));
    assert!(bash.contains("\"auto always never\""));
    let zsh = e.ok(&["completions", "zsh"]);
    assert!(
        zsh.starts_with("#compdef arca"),
        "{}",
        &zsh[..40.min(zsh.len())]
    );
    let fish = e.ok(&["completions", "fish"]);
    assert!(fish.contains("complete -c arca"));
    assert_eq!(e.run(&["completions", "tcsh"]).status.code(), Some(2));

    let page = e.ok(&["man"]);
    assert!(
        page.contains(".TH arca 1"),
        "{}",
        &page[..200.min(page.len())]
    );
    let dir = e.path("man");
    let out = e.ok(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(out.starts_with("wrote "), "{out}");
    for p in [
        "arca.1",
        "arca-backup.1",
        "arca-restore.1",
        "arca-key-add.1",
        "arca-repair-index.1",
    ] {
        let text = fs::read_to_string(dir.join(p)).unwrap();
        assert!(text.contains(".TH"), "{p}");
    }
    // A file given as the folder is named as one.
    let file = dir.join("arca.1");
    let o = e.run(&["man", "--dir", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("is a file, not a folder"),
        "{}",
        stderr(&o)
    );
    let backup = fs::read_to_string(dir.join("arca-backup.1")).unwrap();
    assert!(
        backup.contains("exclude\\-caches"),
        "backup page lacks its options"
    );
}

/// A value a profile gives that the option refuses names the profile, its section and key;
/// it was reported as if the user had typed the flag. An unknown key names the section alone
/// (it said "for `arca index`" for `[repair.index]`).
#[test]
fn a_bad_profile_value_names_the_profile() {
    let e = Env::new();
    e.init(&[]);
    let p = e.path("p.toml");
    fs::write(&p, "[snapshots]\nlatest = \"two\"\n").unwrap();
    let q = e.path("q.toml");
    fs::write(&q, "[repair.index]\nbogus = 1\n").unwrap();
    let o = e.run(&["-P", p.to_str().unwrap(), "snapshots"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("[snapshots] key \"latest\": invalid value \"two\" for --latest"),
        "{err}"
    );
    let o = e.run(&["-P", q.to_str().unwrap(), "repair", "index"]);
    let err = stderr(&o);
    assert!(
        err.contains("[repair.index]: unknown option \"bogus\""),
        "{err}"
    );
    assert!(!err.contains("arca index"), "{err}");
}

/// Command-line options win over a profile wherever they are typed and in every spelling clap
/// takes: `-r` before the command beat `[snapshots] repo`; `-qPNAME`, `-qP NAME` and `-P=NAME`
/// did not read the profile; an empty password variable (unset, as systemd's
/// `Environment=ARCA_PASSWORD_COMMAND=` writes it) dropped the profile's password file.
#[test]
fn command_line_wins_wherever_and_however_typed() {
    let e = Env::new();
    e.init(&[]);
    fs::write(e.path("pass"), "test password\n").unwrap();
    let cwd = e.path(".");
    fs::write(
        e.path("p.toml"),
        format!(
            "[global]\nrepo = \"{}\"\npassword-file = \"{}\"\n",
            e.repo.display(),
            e.path("pass").display()
        ),
    )
    .unwrap();
    fs::write(
        e.path("cmdrepo.toml"),
        "[snapshots]\nrepo = \"/nonexistent\"\n",
    )
    .unwrap();
    for spelling in [
        &["-qPp", "snapshots"][..],
        &["-qP", "p", "snapshots"][..],
        &["-P=p", "snapshots"][..],
    ] {
        ok(&bare(&e, &cwd, spelling));
    }
    for var in ["ARCA_PASSWORD_COMMAND", "ARCA_PASSWORD_FILE"] {
        ok(&bare_with(
            &e,
            &cwd,
            &["-P", "p", "snapshots"],
            &[(var, "")],
        ));
    }
    let repo = e.repo.to_str().unwrap();
    let pass = e.path("pass");
    let pass = pass.to_str().unwrap();
    ok(&bare(
        &e,
        &cwd,
        &[
            "-r",
            repo,
            "--password-file",
            pass,
            "-P",
            "cmdrepo",
            "snapshots",
        ],
    ));
    // copy's source password typed replaces the profile's other source.
    let target = e.path("target");
    let target = target.to_str().unwrap();
    let o = Command::new(BIN)
        .args(["-r", target, "--password-file", pass, "init"])
        .args(["--kdf-memory-kib", "256", "--kdf-iterations", "1"])
        .env_remove("ARCA_PASSWORD")
        .env_remove("ARCA_PASSWORD_COMMAND")
        .env_remove("ARCA_REPOSITORY")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    ok(&o);
    fs::write(
        e.path("copy.toml"),
        format!("[copy]\nfrom-repo = \"{repo}\"\nfrom-password-file = \"/nonexistent\"\n"),
    )
    .unwrap();
    let o = bare(
        &e,
        &cwd,
        &[
            "-r",
            target,
            "--password-file",
            pass,
            "-P",
            "copy",
            "copy",
            "--from-password-command",
            "echo test password",
            "--dry-run",
        ],
    );
    ok(&o);
}

/// `~` alone is the home folder in a profile's paths, and the profile's paths stay out of a
/// `--stdin` backup (clap refused it, naming paths the user never typed).
#[test]
fn profile_paths_home_and_stdin() {
    let e = Env::new();
    e.init(&[]);
    let home = e.path("home");
    sample(&home);
    fs::write(e.path("pass"), "test password\n").unwrap();
    fs::write(
        e.path("p.toml"),
        format!(
            "[global]\nrepo = \"{}\"\npassword-file = \"{}\"\n[backup]\npaths = [\"~\"]\ntag = [\"~\"]\n",
            e.repo.display(),
            e.path("pass").display()
        ),
    )
    .unwrap();
    let cwd = e.path(".");
    let home_s = home.to_str().unwrap();
    ok(&bare_with(
        &e,
        &cwd,
        &["-P", "p", "backup", "-q"],
        &[("HOME", home_s)],
    ));
    let o = Command::new(BIN)
        .args([
            "-P",
            "p",
            "backup",
            "-q",
            "--stdin",
            "--stdin-filename",
            "in.txt",
        ])
        .current_dir(&cwd)
        .env("HOME", home_s)
        .env("XDG_CONFIG_HOME", e.path("config"))
        .env("XDG_CACHE_HOME", e.path("cache"))
        .env_remove("ARCA_PASSWORD")
        .env_remove("ARCA_PASSWORD_COMMAND")
        .env_remove("ARCA_REPOSITORY")
        .stdin(fs::File::open(e.path("pass")).unwrap())
        .output()
        .unwrap();
    ok(&o);
    let v: Value = serde_json::from_str(&e.ok(&["snapshots", "--json"])).unwrap();
    let snaps = v.as_array().unwrap();
    assert_eq!(snaps.len(), 2, "{v}");
    assert_eq!(snaps[0]["paths"], serde_json::json!([home_s]));
    // A tag is not a path: `~` stays as written.
    assert_eq!(snaps[0]["tags"], serde_json::json!(["~"]));
    assert_eq!(snaps[1]["paths"], serde_json::json!(["/in.txt"]));
}

/// A profile's positionals in the command's order (`listed` was given to ls as its snapshot),
/// `-qv` wherever typed (refused: "unexpected argument '-v'"), and a folder named as a profile
/// said to be one (it was "not found").
#[test]
fn profile_positionals_clusters_and_folders() {
    let e = Env::new();
    e.init(&[]);
    let src = e.path("src");
    sample(&src);
    fs::write(e.path("pass"), "test password\n").unwrap();
    let cwd = e.path(".");
    let repo = e.repo.to_str().unwrap();
    let pass = e.path("pass");
    let pass = pass.to_str().unwrap();
    let globals = ["-r", repo, "--password-file", pass];
    let with = |args: &[&str]| {
        let mut a = globals.to_vec();
        a.extend(args);
        bare(&e, &cwd, &a)
    };
    ok(&with(&["-qv", "backup", "-n", src.to_str().unwrap()]));
    ok(&with(&["backup", "-qv", src.to_str().unwrap()]));
    ok(&with(&["snapshots", "-qv"]));
    let listed = src.to_str().unwrap();
    fs::write(
        e.path("pos.toml"),
        format!("[ls]\nsnapshot = \"latest\"\nlisted = [\"{listed}\"]\n"),
    )
    .unwrap();
    let out = ok(&with(&["-qvP", "pos", "ls"]));
    assert!(out.contains(listed), "{out}");
    fs::create_dir_all(e.path("dir.toml")).unwrap();
    let o = with(&["-P", "dir.toml", "snapshots"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("dir.toml is a folder"),
        "{}",
        stderr(&o)
    );
}

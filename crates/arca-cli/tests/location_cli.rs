//! The repository location and the global options as users type them: spaces around a
//! backend option's key and value, a file given for the repository's folder (to open or to
//! init), options set by environment variables.

#![allow(clippy::unwrap_used)]

mod common;

use common::{BIN, Env, stderr};

/// `-o " key = value "` (a space left after a comma in a script, or around `=`) is the
/// option: it was refused as an unknown key (exit 2).
#[test]
fn spaces_around_a_backend_options_key_and_value_are_ignored() {
    let e = Env::new();
    e.init(&[]);
    for opt in [
        " s3.region=eu-west-1",
        "s3.region =eu-west-1",
        " sftp.timeout = 30s ",
    ] {
        let o = e.run(&["-o", opt, "snapshots"]);
        assert_eq!(o.status.code(), Some(0), "{opt:?}: {}", stderr(&o));
    }
    // An unknown key is still refused, named without its spaces.
    let o = e.run(&["-o", " s3.regio = x", "snapshots"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown key \"s3.regio\""),
        "{}",
        stderr(&o)
    );
}

/// A file where the repository's folder should be (or above it) is no repository there: exit
/// 10, as a missing folder, naming the file (it was exit 1, "read FILE/config: Not a
/// directory").
#[test]
fn a_file_given_for_the_repository_is_no_repository() {
    let e = Env::new();
    let file = e.path("notes.txt");
    std::fs::write(&file, b"x").unwrap();
    let under = file.join("repo");
    for (repo, says) in [
        (
            &file,
            format!(
                "repository {} does not exist: it is a file, not a folder",
                file.display()
            ),
        ),
        (
            &under,
            format!(
                "repository {} does not exist: {} is a file, not a folder",
                under.display(),
                file.display()
            ),
        ),
    ] {
        let o = std::process::Command::new(BIN)
            .arg("-r")
            .arg(repo)
            .arg("snapshots")
            .env("ARCA_PASSWORD", "x")
            .env("XDG_CACHE_HOME", e.path("cache"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(10), "{}", stderr(&o));
        assert_eq!(stderr(&o).trim(), format!("arca: {says}"));
    }
}

/// `init` where a file is the repository's folder (or above it) names the file: it said
/// "create repository F: Not a directory". Exit 1, as init refusing any other location (a
/// repository already there, a folder not empty): 10 is a command finding no repository.
#[test]
fn init_on_a_file_names_it() {
    let e = Env::new();
    let file = e.path("notes.txt");
    std::fs::write(&file, b"x").unwrap();
    let under = file.join("repo");
    for (repo, says) in [
        (
            &file,
            format!(
                "create repository {}: it is a file, not a folder",
                file.display()
            ),
        ),
        (
            &under,
            format!(
                "create repository {}: {} is a file, not a folder",
                under.display(),
                file.display()
            ),
        ),
    ] {
        let o = std::process::Command::new(BIN)
            .arg("-r")
            .arg(repo)
            .args(["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"])
            .env("ARCA_PASSWORD", "x")
            .env("XDG_CACHE_HOME", e.path("cache"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert_eq!(stderr(&o).trim(), format!("arca: {says}"));
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
    }
}

/// Two options that cannot go together, one of them set by its environment variable, are
/// named as the user gave them: the variable by its name. clap said "the argument
/// '--password-file <FILE>' cannot be used with '--password-command <COMMAND>'" when only one
/// was typed, or none.
#[test]
fn a_conflict_with_an_environment_variable_names_the_variable() {
    let e = Env::new();
    e.init(&[]);
    let pw = e.tmp.path().join("pw");
    std::fs::write(&pw, "x\n").unwrap();
    let typed_file = e
        .cmd(&["snapshots", "--password-file", pw.to_str().unwrap()])
        .env("ARCA_PASSWORD_COMMAND", "echo x")
        .output()
        .unwrap();
    let both_set = e
        .cmd(&["snapshots"])
        .env("ARCA_PASSWORD_FILE", &pw)
        .env("ARCA_PASSWORD_COMMAND", "echo x")
        .output()
        .unwrap();
    let copy = e
        .cmd(&[
            "copy",
            "--from-repo",
            "x",
            "--from-password-command",
            "echo x",
        ])
        .env("ARCA_FROM_PASSWORD_FILE", &pw)
        .output()
        .unwrap();
    for (o, want) in [
        (
            &typed_file,
            "error: --password-file cannot be used with ARCA_PASSWORD_COMMAND (the \
             environment's --password-command)",
        ),
        (
            &both_set,
            "error: ARCA_PASSWORD_FILE (the environment's --password-file) cannot be used \
             with ARCA_PASSWORD_COMMAND (the environment's --password-command)",
        ),
        (
            &copy,
            "ARCA_FROM_PASSWORD_FILE (the environment's --from-password-file)",
        ),
    ] {
        assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
        assert!(stderr(o).contains(want), "{want:?} not in:\n{}", stderr(o));
        assert!(!stderr(o).contains("the argument"), "{}", stderr(o));
    }
    // Both typed: clap's own message, which is right.
    let typed_both = e
        .cmd(&[
            "snapshots",
            "--password-file",
            "f",
            "--password-command",
            "c",
        ])
        .output()
        .unwrap();
    assert_eq!(typed_both.status.code(), Some(2));
    assert!(
        stderr(&typed_both).contains("the argument '--password-file <FILE>' cannot be used"),
        "{}",
        stderr(&typed_both)
    );
}

/// A device given for the repository's folder is said to be one: `arca -r /dev/null
/// snapshots` said "it is a file, not a folder" of the character device.
#[test]
fn a_device_given_for_the_repository_is_named_a_device() {
    let e = Env::new();
    let o = std::process::Command::new(BIN)
        .args(["-r", "/dev/null", "snapshots"])
        .env("ARCA_PASSWORD", "x")
        .env("XDG_CACHE_HOME", e.path("cache"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(10), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).trim(),
        "arca: repository /dev/null does not exist: it is a device, not a folder"
    );
    let o = std::process::Command::new(BIN)
        .args(["-r", "/dev/null/repo", "snapshots"])
        .env("ARCA_PASSWORD", "x")
        .env("XDG_CACHE_HOME", e.path("cache"))
        .output()
        .unwrap();
    assert_eq!(
        stderr(&o).trim(),
        "arca: repository /dev/null/repo does not exist: /dev/null is a device, not a folder"
    );
}

/// `init` into a local folder that holds something says what an SFTP one says, with the
/// count: it said only "directory is not empty".
#[test]
fn init_into_a_folder_not_empty_counts_its_entries() {
    let e = Env::new();
    std::fs::create_dir_all(&e.repo).unwrap();
    std::fs::write(e.repo.join("notes.txt"), b"x").unwrap();
    let init = ["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"];
    let o = e.run(&init);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).trim(),
        format!(
            "arca: create repository {}: the folder is not empty (1 entry); choose an empty or \
             new folder",
            e.repo.display()
        )
    );
    std::fs::write(e.repo.join("more.txt"), b"x").unwrap();
    let o = e.run(&init);
    assert!(
        stderr(&o).contains("the folder is not empty (2 entries)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(e.repo.join("notes.txt")).unwrap(), b"x");
}

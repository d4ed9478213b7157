//! Profiles (`-P NAME`): a TOML file of defaults for the global options and for every command,
//! applied by adding the options it names to the command line before clap parses it.
//!
//! A profile `NAME` is `NAME.toml` in the current folder, else in `$XDG_CONFIG_HOME/arca/`
//! (`~/.config/arca/`); a value containing `/` or ending in `.toml` is a path. Sections:
//! `[global]` (alias `[repository]`) for the global options (`repo`, `password-file`,
//! `password-command`, `cache-dir`, `connections`, `options = { "s3.region" = "eu" }`...), and one
//! per command (`[backup]`, `[forget]`, `[restore]`...; `[repair.index]` for subcommands), whose
//! keys are the command's long option names, or the name of its positional arguments
//! (`paths = [...]` for backup). Options given on the command line win over the profile's;
//! repeatable options (`exclude`, `tag`...) take both. Later profiles override earlier ones.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use clap::{Arg, ArgAction, CommandFactory};
use toml::{Table, Value};

use crate::cli::Cli;

/// The command line with the options of the profiles named by `-P`/`--use-profile` added, or
/// unchanged when it names none.
pub fn expand(args: Vec<OsString>) -> Result<Vec<OsString>> {
    let names = profile_names(&args);
    if names.is_empty() {
        return Ok(args);
    }
    let mut profiles = Vec::new();
    for name in &names {
        let path = locate(name)?;
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read profile {}", path.display()))?;
        let table: Table = text
            .parse()
            .map_err(|e| anyhow!("profile {}: {e}", path.display()))?;
        profiles.push((path, table));
    }
    apply(args, &profiles)
}

/// The names given with `-P NAME`, `-PNAME`, `--use-profile NAME` or `--use-profile=NAME`,
/// before any `--`.
pub fn profile_names(args: &[OsString]) -> Vec<String> {
    let mut names = Vec::new();
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if s == "--" {
            break;
        }
        if s == "-P" || s == "--use-profile" {
            if let Some(v) = it.next() {
                names.push(v.to_string_lossy().into_owned());
            }
        } else if let Some(v) = s.strip_prefix("--use-profile=") {
            names.push(v.to_string());
        } else if let Some(v) = s.strip_prefix("-P")
            && !s.starts_with("--")
        {
            names.push(v.to_string());
        }
    }
    names
}

/// The places a profile name is looked for, in order.
fn candidates(name: &str) -> Vec<PathBuf> {
    if name.contains('/') || name.ends_with(".toml") {
        return vec![PathBuf::from(name)];
    }
    let file = format!("{name}.toml");
    let mut c = vec![PathBuf::from(&file)];
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")));
    if let Some(dir) = config {
        c.push(dir.join("arca").join(file));
    }
    c
}

fn locate(name: &str) -> Result<PathBuf> {
    if name.is_empty() {
        bail!("empty profile name given to -P");
    }
    let c = candidates(name);
    if let Some(p) = c.iter().find(|p| p.is_file()) {
        return Ok(p.clone());
    }
    let tried: Vec<_> = c.iter().map(|p| p.display().to_string()).collect();
    bail!(
        "profile {name:?} not found (looked for {})",
        tried.join(", ")
    )
}

/// What a command-line token is for the options of one command.
pub(crate) struct Parsed {
    /// Long names of the options given.
    given: Vec<String>,
    /// Whether a positional argument was given.
    positional: bool,
}

fn long_of(cmd: &clap::Command, short: char) -> Option<String> {
    cmd.get_arguments()
        .find(|a| a.get_short() == Some(short))
        .and_then(|a| a.get_long().map(str::to_string))
}

pub(crate) fn takes_value(cmd: &clap::Command, long: &str) -> bool {
    cmd.get_arguments()
        .find(|a| a.get_long() == Some(long))
        .is_some_and(|a| a.get_action().takes_values())
}

/// Walks `tokens` as options of `cmd` (globals included): the long names given and whether a
/// positional was. A token that names a subcommand of `cmd` stops the walk and is returned.
pub(crate) fn scan(cmd: &clap::Command, tokens: &[OsString]) -> (Parsed, Option<usize>) {
    let mut p = Parsed {
        given: Vec::new(),
        positional: false,
    };
    let mut i = 0;
    while i < tokens.len() {
        let s = tokens[i].to_string_lossy();
        if s == "--" {
            p.positional |= i + 1 < tokens.len();
            break;
        }
        if let Some(rest) = s.strip_prefix("--") {
            let (name, inline) = match rest.split_once('=') {
                Some((n, _)) => (n, true),
                None => (rest, false),
            };
            p.given.push(name.to_string());
            if !inline && takes_value(cmd, name) {
                i += 1;
            }
        } else if s.len() > 1 && s.starts_with('-') && !is_number(&s) {
            // A cluster of short flags, the last of which may take a value (inline or next).
            let shorts: Vec<char> = s[1..].chars().collect();
            for (k, c) in shorts.iter().enumerate() {
                let Some(long) = long_of(cmd, *c) else {
                    continue;
                };
                let value = takes_value(cmd, &long);
                p.given.push(long);
                if value {
                    if k + 1 == shorts.len() {
                        i += 1;
                    }
                    break;
                }
            }
        } else if cmd.find_subcommand(&*s).is_some() {
            return (p, Some(i));
        } else {
            p.positional = true;
        }
        i += 1;
    }
    (p, None)
}

fn is_number(s: &str) -> bool {
    s.parse::<f64>().is_ok()
}

/// A TOML scalar as an option value (`~/` expanded to the home folder).
fn scalar(v: &Value, at: &dyn Fn() -> String) -> Result<String> {
    Ok(match v {
        Value::String(s) => arca_backup::sources::expand_home(s),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Datetime(d) => d.to_string(),
        Value::Array(_) | Value::Table(_) => bail!("{}: expected a single value", at()),
    })
}

/// The options a section adds for `cmd`, given what the user already gave.
fn section_args(
    cmd: &clap::Command,
    section: &Table,
    given: &Parsed,
    where_: &str,
    out: &mut Vec<OsString>,
    positionals: &mut Vec<OsString>,
    nested: &mut Vec<(String, Table)>,
) -> Result<()> {
    for (key, value) in section {
        let at = || format!("{where_} key {key:?}");
        let name = key.replace('_', "-");
        if let Value::Table(t) = value {
            if cmd.find_subcommand(&name).is_some() {
                nested.push((name, t.clone()));
                continue;
            }
            if name == "options" || name == "option" {
                for (k, v) in t {
                    let v = scalar(v, &at)?;
                    out.push(OsString::from(format!("--option={k}={v}")));
                }
                continue;
            }
        }
        let arg: Option<&Arg> = cmd
            .get_arguments()
            .find(|a| {
                a.get_long() == Some(name.as_str())
                    || (name == "repository" && a.get_long() == Some("repo"))
            })
            .or_else(|| {
                cmd.get_positionals()
                    .find(|a| a.get_id().as_str() == key.replace('-', "_"))
            });
        let Some(arg) = arg else {
            // The section names the command (`[repair.index]`); `cmd`'s own name is the
            // innermost one only (`index`), or `arca` for `[global]`.
            bail!("{where_}: unknown option {key:?}");
        };
        let values: Vec<&Value> = match value {
            Value::Array(a) => a.iter().collect(),
            v => vec![v],
        };
        if arg.is_positional() {
            if !given.positional {
                for v in values {
                    positionals.push(OsString::from(scalar(v, &at)?));
                }
            }
            continue;
        }
        let Some(long) = arg.get_long() else { continue };
        let repeatable = matches!(arg.get_action(), ArgAction::Append | ArgAction::Count);
        if given.given.iter().any(|g| g == long) && !repeatable {
            continue;
        }
        if replaced_by_alternative(cmd, long, given) {
            continue;
        }
        match arg.get_action() {
            ArgAction::SetTrue => match value {
                Value::Boolean(true) => out.push(OsString::from(format!("--{long}"))),
                Value::Boolean(false) => {}
                _ => bail!("{}: expected true or false", at()),
            },
            ArgAction::Count => {
                if let Value::Boolean(true) = value {
                    out.push(OsString::from(format!("--{long}")));
                }
            }
            _ => {
                if values.len() > 1 && !repeatable {
                    bail!("{}: takes one value", at());
                }
                for v in values {
                    let v = scalar(v, &at)?;
                    // Checked here, so that a bad value names the profile, not a flag the
                    // user never typed.
                    let alone = clap::Command::new("arca")
                        .no_binary_name(true)
                        .arg(
                            Arg::new("value")
                                .long("value")
                                .value_parser(arg.get_value_parser().clone()),
                        )
                        .try_get_matches_from([format!("--value={v}")]);
                    if let Err(e) = alone {
                        // "error: invalid value 'x' for '--value <value>': CAUSE".
                        let e = e.to_string();
                        let first = e.lines().next().unwrap_or_default();
                        let cause = first.rsplit_once("': ").map_or(first, |(_, c)| c);
                        bail!("{}: invalid value {v:?} for --{long}: {cause}", at());
                    }
                    out.push(OsString::from(format!("--{long}={v}")));
                }
            }
        }
    }
    Ok(())
}

/// Options of which one at most may be given: one of them on the command line, in its
/// environment variable or in a later profile replaces the others a profile names.
const ALTERNATIVES: &[&[&str]] = &[&["password-file", "password-command"]];

/// Whether `long` gives way to another option of its [`ALTERNATIVES`] set that is given.
fn replaced_by_alternative(cmd: &clap::Command, long: &str, given: &Parsed) -> bool {
    let Some(set) = ALTERNATIVES.iter().find(|s| s.contains(&long)) else {
        return false;
    };
    set.iter().filter(|o| **o != long).any(|o| {
        given.given.iter().any(|g| g == o)
            || cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(o))
                .and_then(Arg::get_env)
                .is_some_and(|v| std::env::var_os(v).is_some())
    })
}

/// Adds the options of `profiles` to `args`.
fn apply(args: Vec<OsString>, profiles: &[(PathBuf, Table)]) -> Result<Vec<OsString>> {
    let mut root = Cli::command();
    // Building propagates the global options into every subcommand.
    root.build();
    let tokens = &args[1..];
    let (mut top_given, sub_at) = scan(&root, tokens);
    let mut global_args = Vec::new();
    // Later profiles win: apply them first, so their options count as given for earlier ones.
    let mut command_args: Vec<OsString> = Vec::new();
    let mut positionals = Vec::new();
    let sub = sub_at.map(|i| (i, tokens[i].to_string_lossy().into_owned()));
    // The subcommand path (e.g. repair index) and where its own tokens start.
    let mut path: Vec<(String, usize)> = Vec::new();
    if let Some((i, name)) = &sub {
        path.push((name.clone(), *i));
        if let Some(c) = root.find_subcommand(name)
            && let (_, Some(j)) = scan(c, &tokens[i + 1..])
        {
            path.push((tokens[i + 1 + j].to_string_lossy().into_owned(), i + 1 + j));
        }
    }
    if let Some((name, i)) = path.last() {
        let mut c = &root;
        for (n, _) in &path {
            c = c.find_subcommand(n).unwrap_or(c);
        }
        let _ = name;
        let (after, _) = scan(c, &tokens[i + 1..]);
        top_given.given.extend(after.given);
    }
    for (file, table) in profiles.iter().rev() {
        let shown = file.display().to_string();
        for (section, value) in table {
            let Value::Table(t) = value else {
                bail!("profile {shown}: {section:?} must be a [section]");
            };
            if section == "global" || section == "repository" {
                let mut nested = Vec::new();
                let mut unused = Vec::new();
                let before = global_args.len();
                section_args(
                    &root,
                    t,
                    &top_given,
                    &format!("profile {shown}, [{section}]"),
                    &mut global_args,
                    &mut unused,
                    &mut nested,
                )?;
                note_given(&mut top_given, &global_args[before..]);
                continue;
            }
            let Some(cmd) = root.find_subcommand(section) else {
                bail!("profile {shown}: unknown section [{section}] (no command `arca {section}`)");
            };
            // Only the section of the command being run applies (others are still checked).
            let running = path.first().is_some_and(|(n, _)| n == section);
            let cmd_tokens: &[OsString] = match path.first() {
                Some((_, i)) if running => &tokens[i + 1..],
                _ => &[],
            };
            let (mut given, _) = scan(cmd, cmd_tokens);
            note_given(&mut given, &command_args);
            let mut nested = Vec::new();
            let mut own = Vec::new();
            let mut pos = Vec::new();
            let where_ = format!("profile {shown}, [{section}]");
            section_args(cmd, t, &given, &where_, &mut own, &mut pos, &mut nested)?;
            let mut nested_own = Vec::new();
            for (name, nt) in &nested {
                let Some(sc) = cmd.find_subcommand(name) else {
                    continue;
                };
                let active = running && path.get(1).is_some_and(|(n, _)| n == name);
                let sc_tokens: &[OsString] = match path.get(1) {
                    Some((_, i)) if active => &tokens[i + 1..],
                    _ => &[],
                };
                let (mut g2, _) = scan(sc, sc_tokens);
                note_given(&mut g2, &command_args);
                let mut p2 = Vec::new();
                let mut n2 = Vec::new();
                let mut o2 = Vec::new();
                let w2 = format!("profile {shown}, [{section}.{name}]");
                section_args(sc, nt, &g2, &w2, &mut o2, &mut p2, &mut n2)?;
                if active {
                    nested_own.extend(o2);
                    if positionals.is_empty() {
                        positionals.extend(p2);
                    }
                }
            }
            if running {
                if path.len() > 1 {
                    command_args.extend(nested_own);
                } else {
                    command_args.extend(own);
                }
                if positionals.is_empty() && path.len() == 1 {
                    positionals.extend(pos);
                }
            }
        }
    }
    let mut out = Vec::with_capacity(args.len() + global_args.len() + command_args.len());
    out.push(args[0].clone());
    out.extend(global_args);
    match path.last() {
        Some((_, at)) => {
            let insert = at + 1;
            out.extend(tokens[..insert].iter().cloned());
            out.extend(command_args);
            let rest = &tokens[insert..];
            let dashdash = rest.iter().any(|t| t == OsStr::from_bytes(b"--"));
            out.extend(rest.iter().cloned());
            if !positionals.is_empty() {
                if !dashdash {
                    out.push(OsString::from("--"));
                }
                out.extend(positionals);
            }
        }
        None => out.extend(tokens.iter().cloned()),
    }
    Ok(out)
}

/// Records the long names of `--name[=value]` tokens in `added` as given.
fn note_given(p: &mut Parsed, added: &[OsString]) {
    for a in added {
        let s = a.to_string_lossy();
        if let Some(rest) = s.strip_prefix("--") {
            let name = rest.split_once('=').map_or(rest, |(n, _)| n);
            p.given.push(name.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
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
}

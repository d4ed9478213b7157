//! restic takes `--json` and `-v` before the command's name (`restic --json snapshots`,
//! `restic -v backup`), and for every command; arca's commands each define their own. This
//! moves such a flag written among the global options to just after the (innermost) command's
//! name, so both spellings work; where the command has no such option, the flag is dropped,
//! as restic ignores it there (`restic -v forget --prune` in scripts, wrappers that add
//! `--json` to every call).

use std::ffi::OsString;

use clap::CommandFactory;

use crate::profile::{scan, takes_value};

/// The long name of the command's option that a flag token given before the command stands for.
fn long_for(token: &OsString) -> Option<&'static str> {
    let t = token.to_string_lossy();
    if t == "--json" {
        Some("json")
    } else if t == "--verbose"
        || verbose_level(&t).is_some()
        || (t.len() >= 2 && t.starts_with('-') && t[1..].bytes().all(|b| b == b'v'))
    {
        Some("verbose")
    } else {
        None
    }
}

/// The level of restic's `--verbose=N`.
fn verbose_level(t: &str) -> Option<usize> {
    t.strip_prefix("--verbose=")?.parse().ok()
}

/// How many times `token` (one of [`long_for`]'s `verbose` spellings) says verbose.
fn verbose_count(token: &OsString) -> usize {
    let t = token.to_string_lossy();
    if t == "--verbose" {
        1
    } else if let Some(n) = verbose_level(&t) {
        n
    } else {
        t.len() - 1
    }
}

/// `args` (the program's name first) with every `--json`, `--verbose` or `-v` (`-vv`) given
/// before the command's name moved after it, when that command takes that option; such flags
/// are dropped, before or after the command's name, where the command has no such option.
pub fn hoist_flags(args: Vec<OsString>) -> Vec<OsString> {
    let args = split_clusters(args);
    let top = crate::cli::Cli::command();
    let Some(k) = scan(&top, args.get(1..).unwrap_or_default()).1 else {
        return args;
    };
    // Index of the command's name in `args`.
    let mut cmd_at = k + 1;
    // The flags among the global options (not the value of an option before them).
    let mut hoisted: Vec<usize> = (1..cmd_at)
        .filter(|&i| long_for(&args[i]).is_some() && !is_value(&top, &args[i - 1]))
        .collect();
    // Down to the innermost subcommand (`key list`, `repair index`).
    let mut cmd = top.clone();
    loop {
        let name = args[cmd_at].to_string_lossy().into_owned();
        let Some(sub) = cmd.find_subcommand(&name).cloned() else {
            break;
        };
        cmd = sub;
        match scan(&cmd, &args[cmd_at + 1..]).1 {
            Some(k) => {
                let next = cmd_at + k + 1;
                // Between a group and its subcommand (`key --json list`, `repair -v index`)
                // as before the group: the group has no such option, so clap refused them
                // (exit 2), while `-q` and the other global options are taken there. The
                // group's (or a global) option taking them as its value leaves them.
                hoisted.extend((cmd_at + 1..next).filter(|&i| {
                    long_for(&args[i]).is_some()
                        && !is_value(&cmd, &args[i - 1])
                        && !is_value(&top, &args[i - 1])
                }));
                cmd_at = next;
            }
            None => break,
        }
    }
    let takes = |long: &str| {
        cmd.get_arguments().any(|a| a.get_long() == Some(long))
            // `-v` meaning something else to this command is left alone.
            || (long == "verbose" && cmd.get_arguments().any(|a| a.get_short() == Some('v')))
    };
    let has_sub = cmd.has_subcommands();
    // After the command's name (before a `--`): the flags it does not take, dropped.
    let end = args
        .iter()
        .skip(cmd_at + 1)
        .position(|a| a == "--")
        .map_or(args.len(), |p| cmd_at + 1 + p);
    let dropped: Vec<usize> = (cmd_at + 1..end)
        .filter(|&i| {
            !has_sub
                && long_for(&args[i]).is_some_and(|l| !takes(l))
                && !is_value(&cmd, &args[i - 1])
        })
        .collect();
    let moved: Vec<OsString> = hoisted
        .iter()
        .filter(|&&i| !has_sub && long_for(&args[i]).is_some_and(takes))
        .map(|&i| args[i].clone())
        .collect();
    if has_sub {
        // No command reached (`arca --json key`): clap says what is missing.
        return args;
    }
    let mut out: Vec<OsString> = Vec::with_capacity(args.len());
    let mut first: Option<usize> = None;
    let mut json = false;
    let mut verbose = 0;
    for (i, a) in args.into_iter().enumerate() {
        // The command's own --json and -v, with those moved after its name, are merged
        // into one of each (restic takes `--json … --json`, `-vv` and `--verbose=2` for
        // every command): the first one's place takes them all.
        let merged = i > cmd_at
            && i < end
            && !hoisted.contains(&i)
            && !dropped.contains(&i)
            && !is_value(&cmd, &out[out.len() - 1]);
        match long_for(&a).filter(|_| merged) {
            Some("json") => {
                json = true;
                first.get_or_insert(out.len());
            }
            Some(_) => {
                verbose += verbose_count(&a);
                first.get_or_insert(out.len());
            }
            None => {
                if !hoisted.contains(&i) && !dropped.contains(&i) {
                    out.push(a);
                }
            }
        }
        if i == cmd_at {
            for m in &moved {
                match long_for(m) {
                    Some("json") => json = true,
                    _ => verbose += verbose_count(m),
                }
            }
            first = Some(out.len());
        }
    }
    let Some(at) = first else { return out };
    let mut flags = vec![];
    if verbose > 0 {
        // A command counting -v takes the level; one with a plain switch, the switch.
        let counts = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some("verbose"))
            .is_some_and(|a| matches!(a.get_action(), clap::ArgAction::Count));
        flags.push(if counts {
            OsString::from(format!("-{}", "v".repeat(verbose.min(255))))
        } else {
            OsString::from("--verbose")
        });
    }
    if json {
        flags.push(OsString::from("--json"));
    }
    out.splice(at..at, flags);
    out
}

/// `args` with each cluster of short flags that holds a `-v` among others (`-qv`, restic's
/// spelling) split into one token per flag (`-q -v`), before any `--`, so that its `-v` is
/// moved or dropped as one typed alone (clap refused `-qv` before the command's name, or for a
/// command without `-v`). Only a cluster of flags the command (globals included) knows, none
/// taking a value but the last (`-qvP NAME`), is split; others are left to clap.
fn split_clusters(args: Vec<OsString>) -> Vec<OsString> {
    let mut top = crate::cli::Cli::command();
    // Building propagates the global options (`-q`, `-P`) into every subcommand.
    top.build();
    let mut cmd = &top;
    let mut out: Vec<OsString> = Vec::with_capacity(args.len());
    let mut rest = args.into_iter();
    out.extend(rest.next());
    for a in rest.by_ref() {
        let s = a.to_string_lossy().into_owned();
        if s == "--" {
            out.push(a);
            break;
        }
        if out.len() > 1 && out.last().is_some_and(|p| is_value(cmd, p)) {
            out.push(a);
            continue;
        }
        if let Some(sub) = cmd.find_subcommand(&s) {
            cmd = sub;
            out.push(a);
            continue;
        }
        match split(cmd, &s) {
            Some(flags) => out.extend(flags),
            None => out.push(a),
        }
    }
    out.extend(rest);
    out
}

/// The flags of the cluster `token` one by one, if it is one [`split_clusters`] splits.
fn split(cmd: &clap::Command, token: &str) -> Option<Vec<OsString>> {
    let letters: Vec<char> = token.strip_prefix('-')?.chars().collect();
    if token.starts_with("--")
        || letters.len() < 2
        || !letters.contains(&'v')
        || letters.iter().all(|&c| c == 'v')
    {
        return None;
    }
    for (k, &c) in letters.iter().enumerate() {
        match cmd.get_arguments().find(|a| a.get_short() == Some(c)) {
            // A value taken by the last flag is the next token, split or not.
            Some(a) if a.get_action().takes_values() && k + 1 < letters.len() => return None,
            Some(_) => {}
            // restic's `-v`, moved or dropped below.
            None if c == 'v' => {}
            None => return None,
        }
    }
    Some(
        letters
            .iter()
            .map(|c| OsString::from(format!("-{c}")))
            .collect(),
    )
}

/// Whether `prev`, the token before another, is an option that takes that token as its value.
fn is_value(cmd: &clap::Command, prev: &OsString) -> bool {
    let s = prev.to_string_lossy();
    if let Some(long) = s.strip_prefix("--") {
        return !long.contains('=') && takes_value(cmd, long);
    }
    // A short option alone (`-r`), whose value is the next token.
    let mut chars = s.chars();
    match (chars.next(), chars.next(), chars.next()) {
        (Some('-'), Some(c), None) => cmd
            .get_arguments()
            .find(|a| a.get_short() == Some(c))
            .is_some_and(|a| a.get_action().takes_values()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(argv: &[&str]) -> Vec<String> {
        hoist_flags(argv.iter().map(OsString::from).collect())
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn json_before_the_command_moves_after_its_name() {
        assert_eq!(
            run(&["arca", "--json", "snapshots"]),
            ["arca", "snapshots", "--json"]
        );
        assert_eq!(
            run(&[
                "arca",
                "-r",
                "/r",
                "--json",
                "--no-lock",
                "snapshots",
                "--host",
                "h"
            ]),
            [
                "arca",
                "-r",
                "/r",
                "--no-lock",
                "snapshots",
                "--json",
                "--host",
                "h"
            ]
        );
        // Into the subcommand that takes it.
        assert_eq!(
            run(&["arca", "--json", "repair", "index"]),
            ["arca", "repair", "index", "--json"]
        );
        // Already in place, or no command: unchanged.
        let same = ["arca", "snapshots", "--json"];
        assert_eq!(run(&same), same);
        assert_eq!(run(&["arca", "--json"]), ["arca", "--json"]);
        // A value of an option is not an option.
        let value = ["arca", "--password-command", "--json", "snapshots"];
        assert_eq!(run(&value), value);
        // A command without --json or -v: dropped, before or after its name, as restic
        // ignores them there; after `--` they are names.
        assert_eq!(
            run(&["arca", "--json", "mount", "/mnt"]),
            ["arca", "mount", "/mnt"]
        );
        assert_eq!(
            run(&["arca", "mount", "/mnt", "--json"]),
            ["arca", "mount", "/mnt"]
        );
        assert_eq!(
            run(&["arca", "-v", "forget", "--prune"]),
            ["arca", "forget", "--prune"]
        );
        let after_dashes = ["arca", "find", "--", "-v"];
        assert_eq!(run(&after_dashes), after_dashes);
        // restic's -v, -vv and --verbose, for the commands that take them.
        assert_eq!(
            run(&["arca", "-vv", "-r", "/r", "backup", "/src"]),
            ["arca", "-r", "/r", "backup", "-vv", "/src"]
        );
        assert_eq!(
            run(&["arca", "--verbose", "--json", "restore", "latest"]),
            ["arca", "restore", "--verbose", "--json", "latest"]
        );
        assert_eq!(run(&["arca", "-v", "snapshots"]), ["arca", "snapshots"]);
        // Repeated, and restic's other spellings: one of each, as the command takes it (they
        // were usage errors, exit 2).
        assert_eq!(
            run(&["arca", "--json", "snapshots", "--json"]),
            ["arca", "snapshots", "--json"]
        );
        assert_eq!(
            run(&["arca", "-vv", "restore", "latest", "-v"]),
            ["arca", "restore", "--verbose", "latest"]
        );
        assert_eq!(
            run(&["arca", "--verbose=2", "backup", "/src", "-v"]),
            ["arca", "backup", "-vvv", "/src"]
        );
        assert_eq!(
            run(&["arca", "backup", "--verbose=2", "--json", "/src", "--json"]),
            ["arca", "backup", "-vv", "--json", "/src"]
        );
        // A value stays a value.
        let value = ["arca", "backup", "--tag", "--json", "/src"];
        assert_eq!(run(&value), value);
    }

    /// Between a command group and its subcommand, as before the group (`key --json list`
    /// was a usage error, exit 2, while `-q` was taken there).
    #[test]
    fn flags_between_a_group_and_its_subcommand_move_after_the_subcommand() {
        assert_eq!(
            run(&["arca", "-r", "/r", "key", "--json", "list"]),
            ["arca", "-r", "/r", "key", "list", "--json"]
        );
        assert_eq!(
            run(&["arca", "-r", "/r", "repair", "--json", "-q", "index", "-n"]),
            ["arca", "-r", "/r", "repair", "-q", "index", "--json", "-n"]
        );
        // Both places, and with the subcommand's own: one of each.
        assert_eq!(
            run(&["arca", "--json", "key", "--json", "list", "--json"]),
            ["arca", "key", "list", "--json"]
        );
        // A global option's value stays its value.
        let value = ["arca", "key", "--password-command", "--json", "list"];
        assert_eq!(run(&value), value);
        // `unlock` takes --json now (it was dropped there).
        assert_eq!(
            run(&["arca", "--json", "unlock"]),
            ["arca", "unlock", "--json"]
        );
        // No subcommand reached: clap says what is missing.
        let group = ["arca", "key", "--json"];
        assert_eq!(run(&group), group);
    }

    /// A cluster of flags holding `-v` (`-qv`, as restic takes it) is split, wherever typed, so
    /// that its `-v` is moved or dropped as one alone ("unexpected argument '-v'").
    #[test]
    fn clusters_with_v_are_split() {
        assert_eq!(
            run(&["arca", "-qv", "-r", "R", "backup", "-n", "src"]),
            ["arca", "-q", "-r", "R", "backup", "-v", "-n", "src"]
        );
        assert_eq!(
            run(&["arca", "-qvP", "p", "snapshots"]),
            ["arca", "-q", "-P", "p", "snapshots"]
        );
        assert_eq!(
            run(&["arca", "-r", "R", "snapshots", "-qv"]),
            ["arca", "-r", "R", "snapshots", "-q"]
        );
        assert_eq!(
            run(&["arca", "-r", "R", "backup", "-nqv", "src"]),
            ["arca", "-r", "R", "backup", "-v", "-n", "-q", "src"]
        );
        // Left alone: a value taken inside the cluster, an unknown letter, a value of an
        // option, names after `--`.
        for same in [
            &["arca", "-qvr/r", "snapshots"][..],
            &["arca", "-qxv", "snapshots"][..],
            &["arca", "--password-command", "-qv", "snapshots"][..],
            &["arca", "find", "--", "-qv"][..],
        ] {
            assert_eq!(run(same), same);
        }
        for argv in [
            &["arca", "-qv", "-r", "R", "backup", "-n", "src"][..],
            &["arca", "-qvP", "p", "snapshots"][..],
            &["arca", "-r", "R", "snapshots", "-qv"][..],
            &["arca", "-r", "R", "restore", "-qv", "latest", "-t", "/t"][..],
        ] {
            let out = run(argv);
            if let Err(e) = <crate::cli::Cli as clap::Parser>::try_parse_from(&out) {
                panic!("{out:?}: {e}");
            }
        }
    }
}

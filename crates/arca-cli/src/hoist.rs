//! restic takes `--json` before the command's name (`restic --json snapshots`); arca's commands
//! each define their own `--json`. This moves a `--json` written among the global options to
//! just after the (innermost) command's name, so both spellings work.

use std::ffi::OsString;

use clap::CommandFactory;

use crate::profile::{scan, takes_value};

/// `args` (the program's name first) with every `--json` given before the command's name moved
/// after it, when that command takes `--json`; unchanged otherwise (clap then names the
/// misplaced option).
pub fn hoist_json(args: Vec<OsString>) -> Vec<OsString> {
    let top = crate::cli::Cli::command();
    let Some(k) = scan(&top, args.get(1..).unwrap_or_default()).1 else {
        return args;
    };
    // Index of the command's name in `args`.
    let mut cmd_at = k + 1;
    // The `--json` tokens among the global options (not the value of an option before them).
    let hoisted: Vec<usize> = (1..cmd_at)
        .filter(|&i| args[i] == "--json" && !is_value(&top, &args[i - 1]))
        .collect();
    if hoisted.is_empty() {
        return args;
    }
    // Down to the innermost subcommand (`key list`, `repair index`).
    let mut cmd = top.clone();
    loop {
        let name = args[cmd_at].to_string_lossy().into_owned();
        let Some(sub) = cmd.find_subcommand(&name).cloned() else {
            break;
        };
        cmd = sub;
        match scan(&cmd, &args[cmd_at + 1..]).1 {
            Some(k) => cmd_at += k + 1,
            None => break,
        }
    }
    if !cmd.get_arguments().any(|a| a.get_long() == Some("json")) {
        return args;
    }
    let mut out: Vec<OsString> = Vec::with_capacity(args.len());
    for (i, a) in args.into_iter().enumerate() {
        if !hoisted.contains(&i) {
            out.push(a);
        }
        if i == cmd_at {
            out.push("--json".into());
        }
    }
    out
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
        hoist_json(argv.iter().map(OsString::from).collect())
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
        // A command without --json: left for clap to refuse.
        let mount = ["arca", "--json", "mount", "/mnt"];
        assert_eq!(run(&mount), mount);
    }
}

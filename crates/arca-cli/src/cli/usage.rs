//! Usage errors as arca reports them: clap's own, except where clap names what the user did
//! not type (a value that is not UTF-8, an option set by an environment variable).

use std::ffi::OsString;

/// The message for an argument that must be text but is not UTF-8: clap's own names neither
/// the value nor its option.
fn non_utf8_message(args: &[OsString]) -> Option<String> {
    let Some(i) = args.iter().position(|a| a.to_str().is_none()) else {
        // A variable clap reads (ARCA_REPOSITORY...).
        let (name, value) = std::env::vars_os().find(|(n, v)| {
            n.to_str().is_some_and(|n| n.starts_with("ARCA_")) && v.to_str().is_none()
        })?;
        return Some(format!(
            "error: {} {value:?} is not valid UTF-8: arca reads its variables as text only",
            name.to_string_lossy()
        ));
    };
    let bytes = args[i].as_encoded_bytes();
    let inline = bytes
        .starts_with(b"--")
        .then(|| bytes.iter().position(|b| *b == b'='))
        .flatten();
    let place = match inline {
        Some(eq) => format!(" (given to {})", String::from_utf8_lossy(&bytes[..eq])),
        None => i
            .checked_sub(1)
            .and_then(|p| args[p].to_str())
            .filter(|p| p.starts_with('-') && !p.contains('='))
            .map(|p| format!(" (after {p})"))
            .unwrap_or_default(),
    };
    Some(format!(
        "error: the argument {:?}{place} is not valid UTF-8: only file paths (what to back up, \
         --files-from, --stdin-filename, --path, targets) may hold other bytes; tags, hosts, \
         patterns and other values must be text",
        args[i]
    ))
}

/// Ends the process on a parse outcome: help and version text go to stdout, and a failed
/// write of them is an error (`arca help > /dev/full` exited 0, printing nothing); usage
/// errors as clap reports them.
pub(super) fn exit_with(e: &clap::Error, args: &[OsString]) -> ! {
    use clap::error::ErrorKind;
    use std::io::{IsTerminal, Write};
    // Only clap's own: options with their own text parser (patterns) name the value.
    if e.kind() == ErrorKind::InvalidUtf8
        && let Some(message) = non_utf8_message(args)
    {
        eprintln!("{message}");
        std::process::exit(e.exit_code())
    }
    if e.kind() == ErrorKind::ArgumentConflict
        && let Some(message) = env_conflict_message(e, args)
    {
        eprintln!("{message}");
        std::process::exit(e.exit_code())
    }
    // On a terminal clap prints it, styled.
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        && !std::io::stdout().is_terminal()
    {
        let text = e.render().to_string();
        let mut out = std::io::stdout().lock();
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => std::process::exit(0),
            Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
            Err(err) => {
                eprintln!("arca: cannot write to standard output: {err}");
                std::process::exit(1)
            }
        }
    }
    e.exit()
}

/// The message for two options that cannot go together when at least one of them was set by
/// its environment variable: clap names both as typed arguments
/// (`ARCA_PASSWORD_COMMAND=… arca --password-file F` said "the argument '--password-file'
/// cannot be used with '--password-command'", and nobody typed the second).
fn env_conflict_message(e: &clap::Error, args: &[OsString]) -> Option<String> {
    use clap::CommandFactory;
    use clap::error::{ContextKind, ContextValue};
    let shown = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => vec![s.clone()],
        Some(ContextValue::Strings(v)) => v.clone(),
        _ => Vec::new(),
    };
    let mut names = shown(ContextKind::InvalidArg);
    names.extend(shown(ContextKind::PriorArg));
    let root = super::Cli::command();
    let mut from_env = false;
    let said: Vec<String> = names
        .iter()
        .map(|shown| {
            let long = shown.split_whitespace().next().unwrap_or(shown);
            match env_of(&root, long.trim_start_matches("--"), args) {
                Some(var) => {
                    from_env = true;
                    format!("{var} (the environment's {long})")
                }
                None => long.to_string(),
            }
        })
        .collect();
    let (first, rest) = said.split_first()?;
    (from_env && !rest.is_empty()).then(|| {
        format!(
            "error: {first} cannot be used with {}: unset the variable, or give only one of them",
            rest.join(" or ")
        )
    })
}

/// The environment variable that set the option `--long`, if it has one, it is set (and not
/// empty: empty counts as unset) and the option was not typed.
fn env_of(cmd: &clap::Command, long: &str, args: &[OsString]) -> Option<String> {
    let var = env_var(cmd, long)?;
    let typed = args.iter().any(|a| {
        a.as_encoded_bytes()
            .strip_prefix(b"--")
            .and_then(|r| r.strip_prefix(long.as_bytes()))
            .is_some_and(|r| r.is_empty() || r.starts_with(b"="))
    });
    let set = std::env::var_os(var).is_some_and(|v| !v.is_empty());
    (set && !typed).then(|| var.to_string_lossy().into_owned())
}

/// The environment variable of the option `--long` of `cmd` or of any of its subcommands.
fn env_var<'a>(cmd: &'a clap::Command, long: &str) -> Option<&'a std::ffi::OsStr> {
    cmd.get_arguments()
        .find(|a| a.get_long() == Some(long))
        .and_then(clap::Arg::get_env)
        .or_else(|| cmd.get_subcommands().find_map(|c| env_var(c, long)))
}

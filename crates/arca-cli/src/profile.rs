//! Profiles (`-P NAME`): a TOML file of defaults for the global options and for every command,
//! applied by adding the options it names to the command line before clap parses it.
//!
//! A profile `NAME` is `NAME.toml` in the current folder, else in `$XDG_CONFIG_HOME/arca/`
//! (`~/.config/arca/`); a value containing `/` or ending in `.toml` is a path. Sections:
//! `[global]` (alias `[repository]`) for the global options (`repo`, `password-file`,
//! `password-command`, `cache-dir`, `connections`, `options = { "s3.region" = "eu" }`...), and one
//! per command (`[backup]`, `[forget]`, `[restore]`...; `[repair.index]` for subcommands), whose
//! keys are the command's long option names, or the name of its positional arguments
//! (`paths = [...]` for backup). Options given on the command line win over the profile's,
//! wherever they are typed; repeatable options (`exclude`, `tag`...) take both, but `--host ''`
//! (no host filter) leaves out the profile's hosts. Later profiles
//! override earlier ones, and a command's section overrides `[global]`. Relative paths are left
//! relative, so resolve against the current folder as on the command line.

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
            .with_context(|| format!("cannot read profile {}", arca_format::text::shown(&path)))?;
        let table: Table = text
            .parse()
            .map_err(|e| anyhow!("profile {}: {e}", arca_format::text::shown(&path)))?;
        profiles.push((path, table));
    }
    apply(args, &profiles)
}

/// Checks the profile file `file` as `arca -P FILE backup` reads it (every section known, each
/// section's options), running nothing: for `arca ui`, which reads the `[backup]` section
/// itself.
pub fn check_for_backup(file: &std::path::Path) -> Result<()> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read profile {}", arca_format::text::shown(file)))?;
    let table: Table = text
        .parse()
        .map_err(|e| anyhow!("profile {}: {e}", arca_format::text::shown(file)))?;
    apply(
        vec![OsString::from("arca"), OsString::from("backup")],
        &[(file.to_path_buf(), table)],
    )
    .map(drop)
}

/// The names given with `-P NAME`, `-PNAME`, `-P=NAME`, `--use-profile NAME` or
/// `--use-profile=NAME`, also inside a cluster of short flags (`-qP NAME`, `-qPNAME`), before
/// any `--`: read as clap reads the line, so that no spelling clap takes is missed (the profile
/// was then silently not read) and a value of another option is not taken for one.
pub fn profile_names(args: &[OsString]) -> Vec<String> {
    let tokens = args.get(1..).unwrap_or_default();
    // Most command lines name no profile: they need no clap command built.
    let may_name = tokens
        .iter()
        .map(|t| t.to_string_lossy())
        .take_while(|s| s != "--")
        .any(|s| {
            s.starts_with("--use-profile")
                || (!s.starts_with("--") && s.starts_with('-') && s.contains('P'))
        });
    if !may_name {
        return Vec::new();
    }
    let mut root = Cli::command();
    // Building propagates `-P` (a global option) into every subcommand.
    root.build();
    let mut names = Vec::new();
    let mut cmd = &root;
    let mut rest = tokens;
    loop {
        let (p, sub) = scan(cmd, rest);
        names.extend(
            p.values
                .iter()
                .filter(|(long, _)| long == "use-profile")
                .map(|(_, v)| v.to_string_lossy().into_owned()),
        );
        let Some(k) = sub else { break };
        let Some(next) = cmd.find_subcommand(&rest[k]) else {
            break;
        };
        cmd = next;
        rest = &rest[k + 1..];
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
    // A folder of the name was reported as "not found", though it is there.
    if let Some(p) = c.iter().find(|p| p.is_dir()) {
        bail!(
            "profile {name:?}: {} is a folder, not a profile file",
            arca_format::text::shown(p)
        );
    }
    let tried: Vec<_> = c
        .iter()
        .map(|p| arca_format::text::shown(p).to_string())
        .collect();
    bail!(
        "profile {name:?} not found (looked for {})",
        tried.join(", ")
    )
}

/// What a command-line token is for the options of one command.
#[derive(Default)]
pub(crate) struct Parsed {
    /// Long names of the options given.
    given: Vec<String>,
    /// The options given a value, with it (inline or the next token), in order.
    values: Vec<(String, OsString)>,
    /// Whether a positional argument was given.
    positional: bool,
}

impl Parsed {
    fn has(&self, long: &str) -> bool {
        self.given.iter().any(|g| g == long)
    }
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
    let mut p = Parsed::default();
    let mut i = 0;
    while i < tokens.len() {
        let s = tokens[i].to_string_lossy();
        if s == "--" {
            p.positional |= i + 1 < tokens.len();
            break;
        }
        if let Some(rest) = s.strip_prefix("--") {
            let (name, inline) = match rest.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (rest, None),
            };
            p.given.push(name.to_string());
            if takes_value(cmd, name) {
                let value = match inline {
                    Some(v) => Some(OsString::from(v)),
                    None => {
                        i += 1;
                        tokens.get(i).cloned()
                    }
                };
                if let Some(v) = value {
                    p.values.push((name.to_string(), v));
                }
            }
        } else if s.len() > 1 && s.starts_with('-') && !is_number(&s) {
            // A cluster of short flags, the last of which may take a value: the rest of the
            // cluster (clap drops a `=` before it: `-P=x` is `x`), else the next token.
            let shorts: Vec<char> = s[1..].chars().collect();
            for (k, c) in shorts.iter().enumerate() {
                let Some(long) = long_of(cmd, *c) else {
                    continue;
                };
                let value = takes_value(cmd, &long);
                p.given.push(long.clone());
                if value {
                    let attached: String = shorts[k + 1..].iter().collect();
                    let value = if attached.is_empty() {
                        i += 1;
                        tokens.get(i).cloned()
                    } else {
                        let v = attached.strip_prefix('=').unwrap_or(&attached);
                        Some(OsString::from(v))
                    };
                    if let Some(v) = value {
                        p.values.push((long, v));
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

/// Whether the values of `arg` name files or folders, where `~` means the home folder; other
/// values (tags, hosts, patterns, commands) are taken as written.
fn is_path(arg: &Arg) -> bool {
    arg.get_value_parser().type_id() == std::any::TypeId::of::<PathBuf>()
        // Text, for the remote forms (s3:...), but a local repository is a folder.
        || matches!(arg.get_long(), Some("repo" | "from-repo"))
}

/// A TOML datetime as the CLI takes times: a local one as "2006-01-02 15:04:05" (TOML writes
/// it with a `T`, which the CLI reads as RFC 3339 only, with an offset), others as TOML writes
/// them (RFC 3339, or a date or time alone).
fn datetime_text(d: &toml::value::Datetime) -> String {
    match (&d.date, &d.time, &d.offset) {
        (Some(date), Some(time), None) => format!("{date} {time}"),
        _ => d.to_string(),
    }
}

/// A TOML scalar as a value of `arg`: `~` and `~/` expanded to the home folder in paths, and
/// a leading `~/` in exclude and include patterns (as documented); other text as written.
fn scalar(v: &Value, arg: &Arg, at: &dyn Fn() -> String) -> Result<String> {
    Ok(match v {
        Value::String(s) if is_path(arg) => arca_backup::sources::expand_home(s),
        Value::String(s)
            if s.starts_with("~/")
                && matches!(
                    arg.get_long(),
                    Some("exclude" | "iexclude" | "include" | "iinclude")
                ) =>
        {
            arca_backup::sources::expand_home(s)
        }
        Value::String(s) => s.clone(),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Datetime(d) => datetime_text(d),
        Value::Array(_) | Value::Table(_) => bail!("{}: expected a single value", at()),
    })
}

/// A backend option's value (`options = { ... }`): a leading `~/` expanded, as before values
/// were told apart by kind (a key file or an ssh command may be written so).
fn option_value(v: &Value, at: &dyn Fn() -> String) -> Result<String> {
    Ok(match v {
        Value::String(s) if s.starts_with("~/") => arca_backup::sources::expand_home(s),
        Value::String(s) => s.clone(),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Datetime(d) => datetime_text(d),
        Value::Array(_) | Value::Table(_) => bail!("{}: expected a single value", at()),
    })
}

/// Pairs of options that cannot go together (`paths` stands for backup's positional paths),
/// besides those clap declares ([`clap_conflict`]), which are treated alike. One given on the
/// command line, in its environment variable or by a later profile (or by the command's
/// section over `[global]`) leaves out the other a profile names, as a password source given
/// on the command line replaces the profile's; both in one section are refused, naming the
/// profile (clap's error named flags the user never typed).
const CONFLICTS: &[(&str, &str)] = &[
    ("password-file", "password-command"),
    ("from-password-file", "from-password-command"),
    ("stdin", "files-from"),
    ("stdin", "files-from-verbatim"),
    ("stdin", "files-from-raw"),
    ("stdin", "paths"),
];

/// Options that say what to back up instead of positional paths: given, the profile's paths
/// are left out (they were added to the `--files-from` list, and broke `--stdin`).
const INSTEAD_OF_POSITIONALS: &[&str] = &[
    "stdin",
    "files-from",
    "files-from-verbatim",
    "files-from-raw",
];

/// The options `long` cannot be given with, of [`CONFLICTS`].
fn conflicting(long: &str) -> impl Iterator<Item = &'static str> + '_ {
    CONFLICTS.iter().filter_map(move |(a, b)| {
        if *a == long {
            Some(*b)
        } else if *b == long {
            Some(*a)
        } else {
            None
        }
    })
}

/// Whether clap refuses `a` and `b` together (`cmd` built), either way round: a conflict is
/// declared on one of the two only (`--read-data-subset` with `--read-data`).
fn clap_conflict(cmd: &clap::Command, a: &Arg, b: &Arg) -> bool {
    let names = |x: &Arg, y: &Arg| {
        cmd.get_arg_conflicts_with(x)
            .iter()
            .any(|c| c.get_id() == y.get_id())
    };
    a.get_id() != b.get_id() && (names(a, b) || names(b, a))
}

/// Whether `a` and `b` cannot go together: for clap, or in [`CONFLICTS`].
fn conflict(cmd: &clap::Command, a: &Arg, b: &Arg) -> bool {
    clap_conflict(cmd, a, b) || conflicting(conflict_name(a)).any(|o| o == conflict_name(b))
}

/// The name of `arg` in [`CONFLICTS`]: its long name, or a positional argument's name.
fn conflict_name(arg: &Arg) -> &str {
    if arg.is_positional() {
        arg.get_id().as_str()
    } else {
        arg.get_long().unwrap_or_default()
    }
}

/// Whether `arg` gives way to an option it conflicts with that is given (on the command line,
/// by a later profile or section, or in its environment variable: set but empty counts as
/// unset, as everywhere else).
fn replaced_by_conflicting(cmd: &clap::Command, arg: &Arg, given: &Parsed) -> bool {
    cmd.get_arguments()
        .filter(|o| conflict(cmd, arg, o))
        .any(|o| {
            (o.is_positional() && given.positional)
                || o.get_long().is_some_and(|l| given.has(l))
                || o.get_env()
                    .is_some_and(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()))
        })
}

/// The argument of `cmd` a section's key names: a long option name (`_` for `-`, `repository`
/// for `repo`), or a positional argument's name.
fn find_arg<'a>(cmd: &'a clap::Command, key: &str) -> Option<&'a Arg> {
    let name = key.replace('_', "-");
    cmd.get_arguments()
        .find(|a| {
            a.get_long() == Some(name.as_str())
                || (name == "repository" && a.get_long() == Some("repo"))
        })
        .or_else(|| {
            cmd.get_positionals()
                .find(|a| a.get_id().as_str() == key.replace('-', "_"))
        })
}

/// Refuses a section that names one option twice (`repo` and `repository`, `exclude_caches`
/// and `exclude-caches`: clap's error named no profile), or sets two options that cannot go
/// together.
fn check_conflicts(cmd: &clap::Command, section: &Table, where_: &str) -> Result<()> {
    let keys: Vec<(&String, &Value, &Arg)> = section
        .iter()
        .filter(|(k, v)| {
            !(matches!(v, Value::Table(_)) && cmd.find_subcommand(k.replace('_', "-")).is_some())
        })
        .filter_map(|(k, v)| find_arg(cmd, k).map(|a| (k, v, a)))
        .collect();
    for (i, (ka, va, a)) in keys.iter().enumerate() {
        for (kb, vb, b) in &keys[i + 1..] {
            if a.get_id() == b.get_id() {
                let shown = a
                    .get_long()
                    .map_or_else(|| a.get_id().to_string(), |l| format!("--{l}"));
                bail!("{where_}: {ka:?} and {kb:?} both set {shown}: keep one");
            }
            let set = |v: &Value| !matches!(v, Value::Boolean(false));
            if set(va) && set(vb) && conflict(cmd, a, b) {
                // Named in the order of [`CONFLICTS`] where listed there (the file's first).
                let swap = CONFLICTS.contains(&(conflict_name(b), conflict_name(a)));
                let (ka, kb) = if swap { (kb, ka) } else { (ka, kb) };
                bail!("{where_}: {ka:?} and {kb:?} cannot both be given: keep one");
            }
        }
    }
    Ok(())
}

/// The subcommand sections nested in `section` (`index` in `[repair]` for `[repair.index]`).
fn subsections<'a>(cmd: &clap::Command, section: &'a Table) -> Vec<(String, &'a Table)> {
    section
        .iter()
        .filter_map(|(k, v)| {
            let name = k.replace('_', "-");
            match v {
                Value::Table(t) if cmd.find_subcommand(&name).is_some() => Some((name, t)),
                _ => None,
            }
        })
        .collect()
}

/// The options a section adds for `cmd`, given what the user (or a later profile or section)
/// already gave; its positional values go to `positionals`. Nested subcommand sections are
/// left to the caller ([`subsections`]).
fn section_args(
    cmd: &clap::Command,
    section: &Table,
    given: &Parsed,
    where_: &str,
    out: &mut Vec<OsString>,
    positionals: &mut Vec<OsString>,
) -> Result<()> {
    check_conflicts(cmd, section, where_)?;
    // Positional values, by the argument's place on the command line: the section's keys come
    // in alphabetical order (`listed` before ls's `snapshot`).
    let mut by_index: Vec<(usize, Vec<OsString>)> = Vec::new();
    for (key, value) in section {
        let at = || format!("{where_} key {key:?}");
        let name = key.replace('_', "-");
        if let Value::Table(t) = value {
            if cmd.find_subcommand(&name).is_some() {
                continue;
            }
            if name == "options" || name == "option" {
                for (k, v) in t {
                    let v = option_value(v, &at)?;
                    out.push(OsString::from(format!("--option={k}={v}")));
                }
                continue;
            }
        }
        if name == "use-profile" {
            // Profiles are named on the command line only: one read from a profile would be
            // read after the options it should have lost to, and could name itself.
            bail!(
                "{where_}: \"use-profile\" cannot be set in a profile (name each profile with -P \
                 on the command line)"
            );
        }
        let Some(arg) = find_arg(cmd, key) else {
            // The section names the command (`[repair.index]`); `cmd`'s own name is the
            // innermost one only (`index`), or `arca` for `[global]`.
            bail!("{where_}: unknown option {key:?}");
        };
        let values: Vec<&Value> = match value {
            Value::Array(a) => a.iter().collect(),
            v => vec![v],
        };
        if arg.is_positional() {
            let instead = INSTEAD_OF_POSITIONALS.iter().any(|o| given.has(o))
                || replaced_by_conflicting(cmd, arg, given);
            if !given.positional && !instead {
                let mut these = Vec::new();
                for v in values {
                    these.push(OsString::from(scalar(v, arg, &at)?));
                }
                by_index.push((arg.get_index().unwrap_or(usize::MAX), these));
            }
            continue;
        }
        let Some(long) = arg.get_long() else { continue };
        // Repeatable options take both the command line's values and the profile's; a count
        // (`-v`) typed replaces the profile's, as any other option.
        let repeatable = matches!(arg.get_action(), ArgAction::Append);
        if given.has(long) && !repeatable {
            continue;
        }
        // `--host ''` typed (or set by a later profile) clears the profile's hosts: a lone
        // empty host is no host filter (restic's way to unset a default host), but added to
        // the profile's it left their filter in place, and a profile's hosts could not be unset.
        if long == "host"
            && repeatable
            && given.values.iter().any(|(n, v)| n == long && v.is_empty())
        {
            continue;
        }
        if replaced_by_conflicting(cmd, arg, given) {
            continue;
        }
        match arg.get_action() {
            ArgAction::SetTrue => match value {
                Value::Boolean(true) => out.push(OsString::from(format!("--{long}"))),
                Value::Boolean(false) => {}
                // restore's `-v` is a switch, but takes `-vv` typed, as every command
                // ([`crate::hoist`]): a count as for the commands counting it.
                Value::Integer(i) if long == "verbose" && (0..=i64::from(u8::MAX)).contains(i) => {
                    if *i > 0 {
                        out.push(OsString::from(format!("--{long}")));
                    }
                }
                _ if long == "verbose" => bail!(
                    "{}: expected true, false or a count from 0 to {}, not {value}",
                    at(),
                    u8::MAX
                ),
                _ => bail!("{}: expected true or false", at()),
            },
            ArgAction::Count => {
                // `verbose = 2` is -vv (it was silently ignored, as anything but true).
                let times = match value {
                    Value::Boolean(b) => Some(u8::from(*b)),
                    Value::Integer(i) => u8::try_from(*i).ok(),
                    _ => None,
                };
                let Some(times) = times else {
                    bail!(
                        "{}: expected true, false or a count from 0 to {}, not {value}",
                        at(),
                        u8::MAX
                    );
                };
                for _ in 0..times {
                    out.push(OsString::from(format!("--{long}")));
                }
            }
            _ => {
                if values.len() > 1 && !repeatable {
                    bail!("{}: takes one value", at());
                }
                for v in values {
                    let v = scalar(v, arg, &at)?;
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
    by_index.sort_by_key(|(i, _)| *i);
    positionals.extend(by_index.into_iter().flat_map(|(_, v)| v));
    Ok(())
}

/// The command run (`["repair", "index"]`), each name with its index in `tokens`.
fn command_path(root: &clap::Command, tokens: &[OsString]) -> Vec<(String, usize)> {
    let mut path = Vec::new();
    let mut cmd = root;
    let mut from = 0;
    while let (_, Some(k)) = scan(cmd, &tokens[from..]) {
        let at = from + k;
        let name = tokens[at].to_string_lossy().into_owned();
        let Some(next) = cmd.find_subcommand(&name) else {
            break;
        };
        path.push((name, at));
        cmd = next;
        from = at + 1;
    }
    path
}

/// What the user typed, anywhere on the line: before the command's name, between the names of
/// a command and its subcommand, and after. All read with the innermost command's options,
/// which include the global ones (built), and `-v`/`--json` that arca moves from before the
/// command to after it ([`crate::hoist`]). A global option typed before the command counts as
/// given for a command's section too (`-r R snapshots` lost to `[snapshots] repo`).
fn typed(cmd: &clap::Command, tokens: &[OsString], path: &[(String, usize)]) -> Parsed {
    let mut typed = Parsed::default();
    let mut from = 0;
    let ends = path.iter().map(|(_, i)| *i).chain([tokens.len()]);
    for end in ends {
        let (p, _) = scan(cmd, &tokens[from..end]);
        typed.given.extend(p.given);
        typed.values.extend(p.values);
        typed.positional |= p.positional && end == tokens.len();
        from = (end + 1).min(tokens.len());
    }
    typed
}

/// `typed` with the options of `added` (by later profiles or sections) given too, and
/// positional arguments when typed or added (`added_positionals`: a later profile's `paths`
/// replaces an earlier one's `stdin`).
/// One command section of a profile, to be read for the command being run.
struct Section<'a> {
    cmd: &'a clap::Command,
    table: &'a Table,
    /// "profile NAME, [section]", for errors.
    where_: String,
    /// Whether it is the running command's: only then do its options count.
    active: bool,
    /// Whether its positional values may be taken.
    positional: bool,
}

impl Section<'_> {
    /// Checks the section and, when active, adds its options to `command_args` and its
    /// positional values to `positionals` (unless a later section gave some), given what the
    /// user typed and what later sections already added.
    fn apply(
        &self,
        typed: &Parsed,
        global_args: &[OsString],
        command_args: &mut Vec<OsString>,
        positionals: &mut Vec<OsString>,
    ) -> Result<()> {
        let given = if self.active {
            given_with(typed, &[global_args, command_args], positionals)
        } else {
            Parsed::default()
        };
        let mut own = Vec::new();
        let mut pos = Vec::new();
        section_args(
            self.cmd,
            self.table,
            &given,
            &self.where_,
            &mut own,
            &mut pos,
        )?;
        if self.active {
            command_args.extend(own);
            if self.positional && positionals.is_empty() {
                *positionals = pos;
            }
        }
        Ok(())
    }
}

fn given_with(typed: &Parsed, added: &[&[OsString]], added_positionals: &[OsString]) -> Parsed {
    let mut p = Parsed {
        given: typed.given.clone(),
        values: typed.values.clone(),
        positional: typed.positional || !added_positionals.is_empty(),
    };
    for a in added {
        note_given(&mut p, a);
    }
    p
}

/// Adds the options of `profiles` to `args`. The command line wins over every profile, a later
/// profile over an earlier one, and within a profile the command's section (its subcommand's
/// for `[repair.index]`) over its parent's and over `[global]`.
fn apply(args: Vec<OsString>, profiles: &[(PathBuf, Table)]) -> Result<Vec<OsString>> {
    let mut root = Cli::command();
    // Building propagates the global options into every subcommand.
    root.build();
    let tokens = &args[1..];
    let path = command_path(&root, tokens);
    let mut running = &root;
    for (n, _) in &path {
        running = running.find_subcommand(n).unwrap_or(running);
    }
    let typed = typed(running, tokens, &path);
    let mut global_args: Vec<OsString> = Vec::new();
    let mut command_args: Vec<OsString> = Vec::new();
    let mut positionals: Vec<OsString> = Vec::new();
    // Later profiles win: apply them first, so their options count as given for earlier ones.
    for (file, table) in profiles.iter().rev() {
        let shown = arca_format::text::shown(file).to_string();
        let mut globals = Vec::new();
        for (section, value) in table {
            let Value::Table(t) = value else {
                bail!("profile {shown}: {section:?} must be a [section]");
            };
            if section == "global" || section == "repository" {
                globals.push((section, t));
                continue;
            }
            let Some(cmd) = root.find_subcommand(section) else {
                bail!("profile {shown}: unknown section [{section}] (no command `arca {section}`)");
            };
            // Only the sections of the command being run apply (others are still checked).
            let runs = path.first().is_some_and(|(n, _)| n == section);
            // Innermost first: `[repair.index]` wins over `[repair]`.
            for (name, nt) in subsections(cmd, t) {
                let Some(sc) = cmd.find_subcommand(&name) else {
                    continue;
                };
                let active = runs && path.get(1).is_some_and(|(n, _)| *n == name);
                let section = Section {
                    cmd: sc,
                    table: nt,
                    where_: format!("profile {shown}, [{section}.{name}]"),
                    active,
                    positional: true,
                };
                section.apply(&typed, &global_args, &mut command_args, &mut positionals)?;
            }
            // A parent command (`repair`, `key`) has the global options only, which clap
            // takes after the subcommand's name too; its positionals only when it runs alone.
            let whole = Section {
                cmd,
                table: t,
                where_: format!("profile {shown}, [{section}]"),
                active: runs,
                positional: path.len() == 1,
            };
            whole.apply(&typed, &global_args, &mut command_args, &mut positionals)?;
        }
        for (section, t) in globals {
            if let Some((name, _)) = subsections(&root, t).first() {
                bail!(
                    "profile {shown}: [{section}.{name}] is not a section: write [{name}] for \
                     the command's options"
                );
            }
            let given = given_with(&typed, &[&global_args, &command_args], &positionals);
            let mut unused = Vec::new();
            section_args(
                &root,
                t,
                &given,
                &format!("profile {shown}, [{section}]"),
                &mut global_args,
                &mut unused,
            )?;
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

/// Records the long names of `--name[=value]` tokens in `added` as given, with their values.
fn note_given(p: &mut Parsed, added: &[OsString]) {
    for a in added {
        let s = a.to_string_lossy();
        if let Some(rest) = s.strip_prefix("--") {
            let (name, value) = rest
                .split_once('=')
                .map_or((rest, None), |(n, v)| (n, Some(v)));
            p.given.push(name.to_string());
            if let Some(v) = value {
                p.values.push((name.to_string(), OsString::from(v)));
            }
        }
    }
}

#[cfg(test)]
mod tests;

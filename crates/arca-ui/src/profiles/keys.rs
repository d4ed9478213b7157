//! The keys of a profile's sections as the options they name, and their TOML values read as
//! the command line's text: single values, lists, switches and thread counts.

use std::collections::BTreeMap;

use toml::{Table, Value};

/// The options of `arca` itself (`[global]`, `[repository]`, and also allowed in `[backup]`).
/// Besides `repo`, they say how to reach the repository, which the server has open already, or
/// how much to print: the page needs none of them.
pub(super) const GLOBAL_KEYS: &[&str] = &[
    "repo",
    "password-file",
    "password-command",
    "quiet",
    "connections",
    "option",
    "options",
    "backend-latency",
    "backend-bandwidth",
    "cache-dir",
    "no-cache",
    "no-lock",
    "retry-lock",
];

/// Options of `arca backup` that only change what it prints: the page shows its own progress.
pub(super) const OUTPUT_KEYS: &[&str] = &["verbose", "json", "no-scan", "profile"];

/// Options of `arca backup` the page does not carry out: a profile setting one is not run.
pub(super) const UNSUPPORTED_KEYS: &[&str] = &[
    "dry-run",
    "skip-if-unchanged",
    "time",
    "parent",
    "stdin",
    "stdin-filename",
];

/// Options that may be given several times (a list in a profile).
const REPEATABLE: &[&str] = &[
    "paths",
    "files-from",
    "files-from-verbatim",
    "files-from-raw",
    "exclude",
    "iexclude",
    "exclude-file",
    "iexclude-file",
    "exclude-if-present",
    "tag",
    "option",
];

/// The most threads `--workers` and the like take, as on the command line.
const MAX_THREADS: usize = 256;

/// A section's keys by the option they name (`_` read as `-`, `repository` as `repo`), each
/// with the key as written; a section naming one option twice is refused, as by the CLI.
pub(super) fn normalized<'a>(
    t: &'a Table,
    where_: &str,
) -> Result<BTreeMap<String, (&'a str, &'a Value)>, String> {
    let mut out: BTreeMap<String, (&str, &Value)> = BTreeMap::new();
    for (k, v) in t {
        let mut name = k.replace('_', "-");
        if name == "repository" {
            name = "repo".into();
        }
        if let Some((other, _)) = out.get(&name) {
            return Err(format!(
                "{where_}: {other:?} and {k:?} both set --{name}: keep one"
            ));
        }
        out.insert(name, (k.as_str(), v));
    }
    Ok(out)
}

/// A TOML scalar as the command line's text (`tag = true` is the tag "true").
fn scalar(v: &Value, key: &str) -> Result<String, String> {
    Ok(match v {
        Value::String(s) => s.clone(),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Datetime(d) => d.to_string(),
        Value::Array(_) | Value::Table(_) => {
            return Err(format!("{key:?}: expected a single value"));
        }
    })
}

/// The values of `key`: a list, or one value.
pub(super) fn values(v: &Value, key: &str) -> Result<Vec<String>, String> {
    match v {
        Value::Array(a) => {
            if a.len() > 1 && !REPEATABLE.contains(&key) {
                return Err(format!("{key:?}: takes one value"));
            }
            a.iter().map(|x| scalar(x, key)).collect()
        }
        v => Ok(vec![scalar(v, key)?]),
    }
}

/// The value of a single-valued `key`, if set.
pub(super) fn one(v: &Value, key: &str) -> Result<Option<String>, String> {
    Ok(values(v, key)?.pop())
}

/// A switch: true or false.
pub(super) fn flag(v: &Value, key: &str) -> Result<bool, String> {
    match v {
        Value::Boolean(b) => Ok(*b),
        _ => Err(format!("{key:?}: expected true or false")),
    }
}

/// A thread count (`workers`, `read-concurrency`, `upload-queue`).
pub(super) fn threads(v: &Value, key: &str) -> Result<usize, String> {
    let s = one(v, key)?.unwrap_or_default();
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{key:?}: invalid value {s:?}: expected a whole number from 1 to {MAX_THREADS}"
        )),
    }
}

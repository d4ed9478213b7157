//! The backup profiles the page runs: `*.toml` files of the profiles folder
//! (`$XDG_CONFIG_HOME/arca`) with a `[backup]` section, read as `arca -P NAME backup` reads
//! them (crates/arca-cli/src/profile.rs and commands/backup.rs): keys are long option names,
//! `_` may stand for `-`, `repository` for `repo`; a `[backup]` key wins over `[global]`'s, and
//! `[global]`'s over `[repository]`'s; `files-from` lines are globbed (not `$VAR`-expanded),
//! `files-from-verbatim` and `files-from-raw` taken as names; a blank `host` is this machine's.
//! A key the page does not carry out (`dry-run`, `time`, `stdin`, `parent`...) or does not know
//! makes the profile one the page cannot run (its `problem`), never one run without it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arca_backup::filter::{ListForm, expand_glob, read_list, read_path_list_as};
use arca_backup::sources::expand_home;
use arca_backup::{BackupOptions, Excludes};
use serde::Serialize;
use toml::{Table, Value};

/// A profile as the page lists it.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    /// Its name (the file name without `.toml`).
    pub name: String,
    /// The file.
    pub file: PathBuf,
    /// Paths to back up.
    pub paths: Vec<String>,
    /// Exclude patterns (`exclude`, `iexclude` and the pattern files named).
    pub excludes: Vec<String>,
    /// Tags of the snapshots.
    pub tags: Vec<String>,
    /// Host name to record.
    pub host: Option<String>,
    /// The repository the profile names (`repo` or `repository` of `[backup]`, `[global]` or
    /// `[repository]`), if any.
    pub repo: Option<String>,
    /// Why the page cannot run it (another repository, no paths, a bad value, an option the
    /// page does not carry out).
    pub problem: Option<String>,
}

/// The options of `arca` itself (`[global]`, `[repository]`, and also allowed in `[backup]`).
/// Besides `repo`, they say how to reach the repository, which the server has open already, or
/// how much to print: the page needs none of them.
const GLOBAL_KEYS: &[&str] = &[
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
const OUTPUT_KEYS: &[&str] = &["verbose", "json", "no-scan", "profile"];

/// Options of `arca backup` the page does not carry out: a profile setting one is not run.
const UNSUPPORTED_KEYS: &[&str] = &[
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
fn normalized<'a>(
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
fn values(v: &Value, key: &str) -> Result<Vec<String>, String> {
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
fn one(v: &Value, key: &str) -> Result<Option<String>, String> {
    Ok(values(v, key)?.pop())
}

/// A switch: true or false.
fn flag(v: &Value, key: &str) -> Result<bool, String> {
    match v {
        Value::Boolean(b) => Ok(*b),
        _ => Err(format!("{key:?}: expected true or false")),
    }
}

/// A thread count (`workers`, `read-concurrency`, `upload-queue`).
fn threads(v: &Value, key: &str) -> Result<usize, String> {
    let s = one(v, key)?.unwrap_or_default();
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{key:?}: invalid value {s:?}: expected a whole number from 1 to {MAX_THREADS}"
        )),
    }
}

/// A repository location as compared: without the `local:` prefix a local one may have.
fn bare(location: &str) -> &str {
    location.strip_prefix("local:").unwrap_or(location)
}

/// Whether `repo` (from a profile) names the repository the server serves (`location`).
fn same_repository(repo: &str, location: &str) -> bool {
    let (a, b) = (bare(repo), bare(location));
    a == b
        || Path::new(a)
            .canonicalize()
            .ok()
            .zip(Path::new(b).canonicalize().ok())
            .is_some_and(|(x, y)| x == y)
}

/// Checks that the list file `f` of `key` can be read by the server: not standard input (the
/// server's own, which would stop it answering), and a regular file (a pipe would block).
fn readable_list(key: &str, f: &Path) -> Result<(), String> {
    if f == Path::new("-") {
        return Err(format!(
            "{key:?} = \"-\" reads the list from standard input, which the web UI cannot give"
        ));
    }
    match std::fs::metadata(f) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(format!(
            "{key:?}: {} is not a regular file (a pipe or device the web UI does not read)",
            f.display()
        )),
        Err(e) => Err(format!("{key:?}: cannot read {}: {e}", f.display())),
    }
}

/// What a profile's `[backup]` section gives.
struct Read {
    paths: Vec<PathBuf>,
    opts: BackupOptions,
}

/// Checks a `[global]`/`[repository]` section and gives its repository, if it names one.
fn global_section(t: &Table, section: &str) -> Result<Option<String>, String> {
    let where_ = format!("[{section}]");
    let keys = normalized(t, &where_)?;
    for (name, (key, v)) in &keys {
        let options_table = matches!(v, Value::Table(_)) && (name == "options" || name == "option");
        if !GLOBAL_KEYS.contains(&name.as_str()) || (matches!(v, Value::Table(_)) && !options_table)
        {
            return Err(format!(
                "{where_}: unknown option {key:?} (`arca -P NAME backup` refuses it too)"
            ));
        }
    }
    keys.get("repo")
        .map(|(k, v)| one(v, k).map(|r| r.map(|r| expand_home(&r))))
        .transpose()
        .map(Option::flatten)
}

/// Reads a `[backup]` section into backup options, as `arca backup` builds them from its
/// options; `name` is the profile's, for the advice to run it with the CLI.
fn backup_section(b: &Table, name: &str) -> Result<Read, String> {
    let keys = normalized(b, "[backup]")?;
    let mut paths: Vec<PathBuf> = vec![];
    let mut lists: Vec<(&str, ListForm, Vec<PathBuf>)> = vec![];
    let mut patterns = vec![];
    let mut ipatterns = vec![];
    let mut exclude_files = vec![];
    let mut iexclude_files = vec![];
    let mut opts = BackupOptions::default();
    let mut excludes = Excludes::default();
    let mut tags = vec![];
    // Values named as paths: `~` is the home folder, as on the command line's profiles.
    let path_values = |v: &Value, k: &str| -> Result<Vec<PathBuf>, String> {
        Ok(values(v, k)?
            .iter()
            .map(|s| PathBuf::from(expand_home(s)))
            .collect())
    };
    // Exclude patterns: only a leading `~/` is the home folder (a bare `~` is a name).
    let pattern_values = |v: &Value, k: &str| -> Result<Vec<String>, String> {
        Ok(values(v, k)?
            .into_iter()
            .map(|s| {
                if s.starts_with("~/") {
                    expand_home(&s)
                } else {
                    s
                }
            })
            .collect())
    };
    for (key, (written, v)) in &keys {
        let (k, v): (&str, &Value) = (key.as_str(), v);
        if UNSUPPORTED_KEYS.contains(&k) {
            // A switch set to false asks for nothing.
            if matches!(v, Value::Boolean(false)) {
                continue;
            }
            return Err(format!(
                "{written:?} is not supported by the web UI: run `arca -P {name} backup`"
            ));
        }
        if matches!(v, Value::Table(_)) && !(k == "options" || k == "option") {
            return Err(format!(
                "[backup]: unknown option {written:?} (`arca -P {name} backup` refuses it too)"
            ));
        }
        match k {
            "paths" => paths.extend(path_values(v, k)?),
            "files-from" => lists.push((k, ListForm::Trimmed, path_values(v, k)?)),
            "files-from-verbatim" => lists.push((k, ListForm::Verbatim, path_values(v, k)?)),
            "files-from-raw" => lists.push((k, ListForm::Raw, path_values(v, k)?)),
            "exclude" => patterns.extend(pattern_values(v, k)?),
            "iexclude" => ipatterns.extend(pattern_values(v, k)?),
            "exclude-file" => exclude_files.extend(path_values(v, k)?),
            "iexclude-file" => iexclude_files.extend(path_values(v, k)?),
            "exclude-caches" => excludes.caches = flag(v, k)?,
            "exclude-if-present" => excludes.if_present = values(v, k)?,
            "exclude-larger-than" => {
                excludes.larger_than = one(v, k)?
                    .map(|s| arca_format::text::parse_size(&s).map_err(|e| format!("{k:?}: {e}")))
                    .transpose()?;
            }
            "tag" => tags = values(v, k)?,
            // As restic: an empty host is this machine's name.
            "host" => opts.hostname = one(v, k)?.filter(|h| !h.trim().is_empty()),
            "force" => opts.force = flag(v, k)?,
            "one-file-system" => opts.one_file_system = flag(v, k)?,
            "compression" => {
                let Some(s) = one(v, k)? else { continue };
                let level: i64 = s.trim().parse().map_err(|_| {
                    format!("{k:?}: invalid value {s:?}: expected a number from -7 to 22")
                })?;
                if !(-7..=22).contains(&level) {
                    return Err(format!(
                        "compression: {level} is not a zstd level (-7 to 22)"
                    ));
                }
                opts.compression = i32::try_from(level).ok();
            }
            "read-concurrency" => opts.read_concurrency = threads(v, k)?,
            "upload-queue" => opts.upload_queue = threads(v, k)?,
            "workers" => opts.workers = threads(v, k)?,
            "memory" => {
                if let Some(s) = one(v, k)? {
                    opts.memory =
                        arca_format::text::parse_size(&s).map_err(|e| format!("{k:?}: {e}"))?;
                }
            }
            "cap" => {
                if let Some(s) = one(v, k)? {
                    opts.cap = s.trim().parse().map_err(|_| {
                        format!("{k:?}: invalid value {s:?}: expected a whole number")
                    })?;
                }
            }
            "verbose" => {
                if !matches!(v, Value::Boolean(_) | Value::Integer(0..=255)) {
                    return Err(format!(
                        "{k:?}: expected true, false or a count from 0 to 255"
                    ));
                }
            }
            _ if OUTPUT_KEYS.contains(&k) => {
                flag(v, k)?;
            }
            // Options of `arca` itself: the repository is compared by the caller.
            _ if GLOBAL_KEYS.contains(&k) => {}
            _ => {
                return Err(format!(
                    "[backup]: unknown option {written:?} (`arca -P {name} backup` refuses it too)"
                ));
            }
        }
    }
    // The lists, as `arca backup` reads them: `files-from` lines trimmed, `#` comments
    // skipped, and globbed (a pattern matching nothing skipped); the verbatim and raw forms
    // are names. No `$VAR` is expanded in them.
    for (key, form, files) in lists {
        for f in files {
            readable_list(key, &f)?;
            let listed = read_path_list_as(&f, form)
                .map_err(|e| format!("{key:?}: cannot read {}: {e}", f.display()))?;
            match form {
                ListForm::Trimmed => {
                    for l in &listed {
                        paths.extend(expand_glob(l));
                    }
                }
                _ => paths.extend(listed),
            }
        }
    }
    // Pattern files are read as on the command line (`$VAR`s expanded).
    for (key, files, out) in [
        ("exclude-file", &exclude_files, &mut patterns),
        ("iexclude-file", &iexclude_files, &mut ipatterns),
    ] {
        for f in files {
            readable_list(key, f)?;
            out.extend(
                read_list(f).map_err(|e| format!("{key:?}: cannot read {}: {e}", f.display()))?,
            );
        }
    }
    if paths.is_empty() {
        return Err(
            "no paths to back up (the [backup] section names none, its lists are empty, or \
             their patterns match no file)"
                .into(),
        );
    }
    excludes.patterns = patterns;
    excludes.ipatterns = ipatterns;
    // `tag = "a,b"` is two tags, as `--tag a,b` is.
    opts.tags = arca_repo::split_tags(&tags);
    opts.paths = paths.clone();
    opts.excludes = excludes;
    Ok(Read { paths, opts })
}

/// Reads the `[backup]` section of the profile file `file` into backup options; `location`
/// is the repository the server serves (a profile naming another one is refused). A profile
/// the page cannot run as `arca -P NAME backup` would comes back with its `problem`.
pub fn load(file: &Path, location: &str) -> Result<(Profile, BackupOptions), String> {
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read profile {}: {e}", file.display()))?;
    let table: Table = text
        .parse()
        .map_err(|e| format!("profile {}: {e}", file.display()))?;
    let Some(b) = table.get("backup").and_then(Value::as_table) else {
        return Err(format!(
            "profile {} has no [backup] section",
            file.display()
        ));
    };
    let mut problem = None;
    for (section, v) in &table {
        if !matches!(v, Value::Table(_)) {
            problem.get_or_insert_with(|| format!("{section:?} must be a [section]"));
        }
    }
    // The repository: `[backup]`'s wins over `[global]`'s, which wins over `[repository]`'s.
    let mut repo = None;
    for section in ["repository", "global"] {
        if let Some(t) = table.get(section).and_then(Value::as_table) {
            match global_section(t, section) {
                Ok(Some(r)) => repo = Some(r),
                Ok(None) => {}
                Err(e) => {
                    problem.get_or_insert(e);
                }
            }
        }
    }
    match normalized(b, "[backup]") {
        Ok(keys) => {
            if let Some((k, v)) = keys.get("repo") {
                match one(v, k) {
                    Ok(Some(r)) => repo = Some(expand_home(&r)),
                    Ok(None) => {}
                    Err(e) => {
                        problem.get_or_insert(e);
                    }
                }
            }
        }
        Err(e) => {
            problem.get_or_insert(e);
        }
    }
    if let Some(r) = &repo
        && !same_repository(r, location)
    {
        problem.get_or_insert_with(|| {
            format!("it backs up to another repository ({r}); run it with `arca -P {name} backup`")
        });
    }
    // Nothing of a profile refused is read (its lists could be standard input).
    let read = match problem {
        Some(_) => None,
        None => match backup_section(b, &name) {
            Ok(r) => Some(r),
            Err(e) => {
                problem = Some(e);
                None
            }
        },
    };
    let (paths, opts) = match read {
        Some(r) => (r.paths, r.opts),
        None => (vec![], BackupOptions::default()),
    };
    let mut shown = opts.excludes.patterns.clone();
    shown.extend(opts.excludes.ipatterns.iter().cloned());
    Ok((
        Profile {
            name,
            file: file.to_path_buf(),
            paths: paths
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            excludes: shown,
            tags: opts.tags.clone(),
            host: opts.hostname.clone(),
            repo,
            problem,
        },
        opts,
    ))
}

/// Every profile of `dir` with a `[backup]` section, by name; a file that cannot be read is
/// listed with its problem.
pub fn list(dir: Option<&Path>, location: &str) -> Vec<Profile> {
    let Some(dir) = dir else { return vec![] };
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
        .collect();
    files.sort();
    let mut out = vec![];
    for f in files {
        match load(&f, location) {
            Ok((p, _)) => out.push(p),
            Err(e) if e.contains("has no [backup] section") => {}
            Err(e) => out.push(Profile {
                name: f
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                file: f.clone(),
                paths: vec![],
                excludes: vec![],
                tags: vec![],
                host: None,
                repo: None,
                problem: Some(e),
            }),
        }
    }
    out
}

/// The profile named `name` in `dir`, ready to run.
pub fn find(
    dir: Option<&Path>,
    name: &str,
    location: &str,
) -> Result<(Profile, BackupOptions), String> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(format!("invalid profile name {name:?}"));
    }
    let Some(dir) = dir else {
        return Err("no profiles folder is known (set XDG_CONFIG_HOME or HOME)".into());
    };
    let file = dir.join(format!("{name}.toml"));
    if !file.is_file() {
        return Err(format!("profile {name:?} not found in {}", dir.display()));
    }
    let (p, o) = load(&file, location)?;
    if let Some(why) = &p.problem {
        return Err(format!("profile {name:?} cannot run from here: {why}"));
    }
    Ok((p, o))
}

#[cfg(test)]
mod tests {
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
        let l = list(Some(d), "/r");
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
        let (_, o) = find(Some(d), "home", "/r").expect("home");
        assert_eq!(o.tags, ["daily"]);
        assert_eq!(o.hostname.as_deref(), Some("box"));
        assert!(o.excludes.caches);
        assert_eq!(o.excludes.larger_than, Some(2048));
        assert_eq!(o.excludes.patterns, ["*.tmp"]);
        assert!(find(Some(d), "other", "/r").is_err());
        assert!(find(Some(d), "../x", "/r").is_err());
        assert!(find(Some(d), "missing", "/r").is_err_and(|e| e.contains("not found")));
        // A compression level zstd does not have is named, not passed on.
        for (level, ok) in [
            ("22", true),
            ("-7", true),
            ("23", false),
            ("-100000", false),
        ] {
            std::fs::write(
                d.join("z.toml"),
                format!(
                    "[global]\nrepo = \"/r\"\n[backup]\npaths = \"/x\"\ncompression = {level}\n"
                ),
            )
            .expect("write");
            let got = find(Some(d), "z", "/r");
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
        let (p, o) = find(Some(d), "t", &r).expect("t");
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
        let p = load(&d.join(format!("{name}.toml")), location).expect("load");
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
             compression = \"5\"\ntag = true\n",
        )
        .expect("write");
        let (p, o) = find(Some(d), "u", "/r").expect("u");
        assert_eq!(p.problem, None);
        assert!(o.excludes.caches);
        assert_eq!(o.excludes.larger_than, Some(1024));
        assert!(o.one_file_system);
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
        std::fs::write(d.join("list"), "/y\n").expect("write");
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
        assert_eq!(p.paths, ["/y"]);
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
}

//! The backup profiles the page runs: `*.toml` files of the profiles folder
//! (`$XDG_CONFIG_HOME/arca`) with a `[backup]` section, read as `arca -P NAME backup` reads
//! them (crates/arca-cli/src/profile.rs and commands/backup.rs): keys are long option names,
//! `_` may stand for `-`, `repository` for `repo`; a `[backup]` key wins over `[global]`'s, and
//! `[global]`'s over `[repository]`'s; `files-from` lines are globbed (not `$VAR`-expanded),
//! `files-from-verbatim` and `files-from-raw` taken as names; a blank `host` is this machine's.
//! A key the page does not carry out (`dry-run`, `time`, `stdin`, `parent`...) or does not know
//! makes the profile one the page cannot run (its `problem`), never one run without it.

use std::path::{Path, PathBuf};

use arca_backup::BackupOptions;
use arca_backup::sources::expand_home;
use serde::Serialize;
use toml::{Table, Value};

use crate::ProfileCheck;

mod keys;
mod sections;

use keys::{normalized, one};
use sections::{backup_section, global_section};

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
    /// What a backup of it warns about before it starts: the `files-from` patterns that
    /// match no file (skipped), as `arca -P NAME backup` says.
    pub warnings: Vec<String>,
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

/// Reads the `[backup]` section of the profile file `file` into backup options; `location`
/// is the repository the server serves (a profile naming another one is refused). A profile
/// the page cannot run as `arca -P NAME backup` would comes back with its `problem`.
///
/// `check`, when given, is the command line's check of the whole file (its sections, each
/// section's options; see [`crate::ProfileCheck`]): a profile it refuses is one the page
/// cannot run.
pub fn load(
    file: &Path,
    location: &str,
    check: Option<&ProfileCheck>,
) -> Result<(Profile, BackupOptions), String> {
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
    // Unknown sections (`[bakup]`) and the options of the other commands' sections, which
    // `arca -P NAME backup` checks too (they went unsaid here).
    if problem.is_none()
        && let Some(check) = check
        && let Err(e) = check(file)
    {
        problem = Some(format!("{e} (`arca -P {name} backup` refuses it too)"));
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
    let (paths, opts, warnings) = match read {
        Some(r) => (r.paths, r.opts, r.warnings),
        None => (vec![], BackupOptions::default(), vec![]),
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
            warnings,
        },
        opts,
    ))
}

/// Every profile of `dir` with a `[backup]` section, by name; a file that cannot be read is
/// listed with its problem.
pub fn list(dir: Option<&Path>, location: &str, check: Option<&ProfileCheck>) -> Vec<Profile> {
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
        match load(&f, location, check) {
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
                warnings: vec![],
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
    check: Option<&ProfileCheck>,
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
    let (p, o) = load(&file, location, check)?;
    if let Some(why) = &p.problem {
        return Err(format!("profile {name:?} cannot run from here: {why}"));
    }
    Ok((p, o))
}

#[cfg(test)]
mod tests;

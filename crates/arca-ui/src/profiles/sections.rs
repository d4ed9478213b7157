//! Reading a profile's sections: a `[global]` or `[repository]` section checked for its
//! repository, and a `[backup]` section (with the lists it names) made into backup options.

use std::path::{Path, PathBuf};

use arca_backup::filter::{ListForm, expand_files_from, read_list, read_path_list_as};
use arca_backup::sources::expand_home;
use arca_backup::{BackupOptions, Excludes};
use toml::{Table, Value};

use super::keys::{
    GLOBAL_KEYS, OUTPUT_KEYS, UNSUPPORTED_KEYS, flag, normalized, one, threads, values,
};

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
pub(super) struct Read {
    pub(super) paths: Vec<PathBuf>,
    pub(super) opts: BackupOptions,
    /// The `files-from` patterns that match no file (skipped), as `arca backup` warns.
    pub(super) warnings: Vec<String>,
}

/// Checks a `[global]`/`[repository]` section and gives its repository, if it names one.
pub(super) fn global_section(t: &Table, section: &str) -> Result<Option<String>, String> {
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
pub(super) fn backup_section(b: &Table, name: &str) -> Result<Read, String> {
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
    let mut warnings = vec![];
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
            "ignore-ctime" => opts.ignore_ctime = flag(v, k)?,
            "ignore-inode" => opts.ignore_inode = flag(v, k)?,
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
                    let (found, said) = expand_files_from(&listed, &f);
                    paths.extend(found);
                    warnings.extend(said);
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
    Ok(Read {
        paths,
        opts,
        warnings,
    })
}

//! The backup profiles the page runs: `*.toml` files of the profiles folder
//! (`$XDG_CONFIG_HOME/arca`) with a `[backup]` section, read with the keys `arca -P NAME backup`
//! takes (`paths`, `exclude`, `tag`, `host`...).

use std::path::{Path, PathBuf};

use arca_backup::filter::read_list;
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
    /// The repository the profile names (`[global] repo` or `[repository] repo`), if any.
    pub repo: Option<String>,
    /// Why the page cannot run it (another repository, no paths, a bad value).
    pub problem: Option<String>,
}

/// Text values of `key`, as written (tags, hosts, names).
fn strings(t: &Table, key: &str) -> Result<Vec<String>, String> {
    strings_with(t, key, str::to_string)
}

/// Path values of `key`, `~` made the home folder as the command line's profiles do.
fn paths_of(t: &Table, key: &str) -> Result<Vec<String>, String> {
    strings_with(t, key, expand_home)
}

/// Exclude patterns of `key`: only a leading `~/` is the home folder (a bare `~` is a name).
fn patterns_of(t: &Table, key: &str) -> Result<Vec<String>, String> {
    strings_with(t, key, |s| {
        if s.starts_with("~/") {
            expand_home(s)
        } else {
            s.to_string()
        }
    })
}

fn strings_with(
    t: &Table,
    key: &str,
    text: impl Fn(&str) -> String,
) -> Result<Vec<String>, String> {
    match t.get(key) {
        None => Ok(vec![]),
        Some(Value::String(s)) => Ok(vec![text(s)]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(text(s)),
                Value::Integer(i) => Ok(i.to_string()),
                other => Err(format!("{key}: expected text, found {}", other.type_str())),
            })
            .collect(),
        Some(Value::Integer(i)) => Ok(vec![i.to_string()]),
        Some(other) => Err(format!(
            "{key}: expected text or a list, found {}",
            other.type_str()
        )),
    }
}

fn one(t: &Table, key: &str) -> Result<Option<String>, String> {
    Ok(strings(t, key)?.pop())
}

fn flag(t: &Table, key: &str) -> Result<bool, String> {
    match t.get(key) {
        None => Ok(false),
        Some(Value::Boolean(b)) => Ok(*b),
        Some(other) => Err(format!(
            "{key}: expected true or false, found {}",
            other.type_str()
        )),
    }
}

/// The profile's repository from `[global]` or `[repository]`.
fn repo_of(t: &Table) -> Option<String> {
    ["global", "repository"]
        .iter()
        .filter_map(|s| t.get(*s).and_then(Value::as_table))
        .find_map(|g| g.get("repo").and_then(Value::as_str).map(expand_home))
}

/// Reads the `[backup]` section of the profile file `file` into backup options; `location`
/// is the repository the server serves (a profile naming another one is refused).
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
    let read = |key: &str| -> Result<Vec<String>, String> {
        let mut out = vec![];
        for f in paths_of(b, key)? {
            out.extend(read_list(Path::new(&f)).map_err(|e| format!("{key} {f}: {e}"))?);
        }
        Ok(out)
    };
    let mut paths = paths_of(b, "paths")?;
    paths.extend(read("files-from")?);
    let mut patterns = patterns_of(b, "exclude")?;
    patterns.extend(read("exclude-file")?);
    let mut ipatterns = patterns_of(b, "iexclude")?;
    ipatterns.extend(read("iexclude-file")?);
    let larger_than = one(b, "exclude-larger-than")?
        .map(|s| arca_format::text::parse_size(&s))
        .transpose()?;
    let compression = match b.get("compression") {
        None => None,
        Some(Value::Integer(i)) if (-7..=22).contains(i) => Some(*i as i32),
        Some(Value::Integer(i)) => {
            return Err(format!("compression: {i} is not a zstd level (-7 to 22)"));
        }
        Some(other) => {
            return Err(format!(
                "compression: expected a number, found {}",
                other.type_str()
            ));
        }
    };
    let repo = repo_of(&table);
    let mut problem = None;
    if paths.is_empty() {
        problem = Some("the [backup] section names no paths".to_string());
    }
    if let Some(r) = &repo {
        let same = r == location
            || Path::new(r)
                .canonicalize()
                .ok()
                .zip(Path::new(location).canonicalize().ok())
                .is_some_and(|(a, b)| a == b);
        if !same {
            problem = Some(format!(
                "it backs up to another repository ({r}); run it with `arca -P {name} backup`"
            ));
        }
    }
    let excludes = Excludes {
        patterns,
        ipatterns,
        if_present: strings(b, "exclude-if-present")?,
        caches: flag(b, "exclude-caches")?,
        larger_than,
    };
    let opts = BackupOptions {
        paths: paths.iter().map(PathBuf::from).collect(),
        excludes: excludes.clone(),
        // `tag = "a,b"` is two tags, as `--tag a,b` is.
        tags: arca_repo::split_tags(&strings(b, "tag")?),
        hostname: one(b, "host")?,
        force: flag(b, "force")?,
        compression,
        one_file_system: flag(b, "one-file-system")?,
        ..BackupOptions::default()
    };
    let mut shown = excludes.patterns.clone();
    shown.extend(excludes.ipatterns.iter().cloned());
    Ok((
        Profile {
            name,
            file: file.to_path_buf(),
            paths,
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
}

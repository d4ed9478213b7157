//! What a backup leaves out, as restic users spell it: path patterns (case-sensitive or not),
//! directories marked by a tag file (`CACHEDIR.TAG`, `--exclude-if-present`), large files.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use arca_fs::pattern::{PathMatcher, PatternError};

/// The tag file of the Cache Directory Tagging Specification.
pub const CACHEDIR_TAG: &str = "CACHEDIR.TAG";
/// The header a `CACHEDIR.TAG` must start with to count.
pub const CACHEDIR_SIGNATURE: &str = "Signature: 8a477f597d28d172789f06886806bc55";

/// A tag file that makes its directory's contents excluded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TagFile {
    name: Vec<u8>,
    /// When set, the file must start with these bytes.
    header: Option<Vec<u8>>,
}

impl TagFile {
    /// `NAME` or `NAME:HEADER`, as restic's `--exclude-if-present`.
    fn parse(spec: &str) -> Result<Self, PatternError> {
        let (name, header) = match spec.split_once(':') {
            Some((n, h)) => (n, Some(h.as_bytes().to_vec())),
            None => (spec, None),
        };
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(PatternError {
                pattern: spec.to_string(),
                detail: "--exclude-if-present takes a file name (NAME or NAME:HEADER)".into(),
            });
        }
        Ok(Self {
            name: name.as_bytes().to_vec(),
            header,
        })
    }

    /// Whether `dir` holds this tag: an entry of that name of any kind, as restic has it, or
    /// when a header is set, a file (or a symlink to one) starting with it.
    fn marks(&self, dir: &Path) -> io::Result<bool> {
        let path = dir.join(std::ffi::OsStr::from_bytes(&self.name));
        match arca_fs::lstat(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let Some(header) = &self.header else {
            return Ok(true);
        };
        // Only a regular file is opened (a FIFO would block the open).
        match arca_fs::io_on_long_path(&path, |p| std::fs::metadata(p)) {
            Ok(m) if m.is_file() => {}
            _ => return Ok(false),
        }
        let mut got = Vec::with_capacity(header.len());
        arca_fs::io_on_long_path(&path, |p| File::open(p))?
            .take(header.len() as u64)
            .read_to_end(&mut got)?;
        Ok(&got == header)
    }
}

/// Exclusion rules of one backup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Excludes {
    /// Path patterns (see [`arca_fs::pattern`]), `--exclude`.
    pub patterns: Vec<String>,
    /// Path patterns matched regardless of case, `--iexclude`.
    pub ipatterns: Vec<String>,
    /// `NAME` or `NAME:HEADER`: a directory holding such a file is stored with that file alone.
    pub if_present: Vec<String>,
    /// Directories holding a valid `CACHEDIR.TAG` are stored with that file alone.
    pub caches: bool,
    /// Regular files larger than this many bytes are left out.
    pub larger_than: Option<u64>,
}

/// What the patterns say of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Kept,
    Excluded,
    /// Excluded, but a `!` pattern may take back something below it: a folder is entered
    /// (and stored) so that its entries are judged one by one; anything else is excluded.
    KeptIfDir,
}

/// The compiled rules.
#[derive(Debug)]
pub(crate) struct Filter {
    paths: Option<PathMatcher>,
    ipaths: Option<PathMatcher>,
    tags: Vec<TagFile>,
    larger_than: Option<u64>,
}

impl Filter {
    pub(crate) fn new(x: &Excludes) -> Result<Self, PatternError> {
        let compile = |p: &[String], ci: bool| -> Result<Option<PathMatcher>, PatternError> {
            if p.is_empty() {
                Ok(None)
            } else {
                PathMatcher::with_case(p, ci).map(Some)
            }
        };
        let mut tags = x
            .if_present
            .iter()
            .map(|s| TagFile::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        if x.caches {
            tags.push(TagFile {
                name: CACHEDIR_TAG.as_bytes().to_vec(),
                header: Some(CACHEDIR_SIGNATURE.as_bytes().to_vec()),
            });
        }
        tags.dedup();
        Ok(Self {
            paths: compile(&x.patterns, false)?,
            ipaths: compile(&x.ipatterns, true)?,
            tags,
            larger_than: x.larger_than,
        })
    }

    /// Whether the absolute `path` is excluded by a pattern (a folder that a `!` pattern
    /// may take something back from is not: see [`Filter::judge`]).
    pub(crate) fn excludes_path(&self, path: &Path) -> bool {
        self.judge(path) == Verdict::Excluded
    }

    /// Whether a backed-up path (given on the command line or in a list) is excluded: by a
    /// pattern matching it or a folder above it, as restic applies its excludes to them. A
    /// `!` pattern that may take something back below it keeps it only when it is a folder
    /// (hunt H9: any unanchored `!` pattern kept every excluded file named).
    pub(crate) fn excludes_target(&self, path: &Path) -> bool {
        let mut dir = None;
        let mut is_dir =
            || *dir.get_or_insert_with(|| arca_fs::lstat(path).is_ok_and(|m| m.is_dir()));
        [&self.paths, &self.ipaths]
            .into_iter()
            .flatten()
            .any(|m| m.matches_or_inside(path) && !(m.takes_back_below(path) && is_dir()))
    }

    /// Whether a path named on the command line is left out as a whole: by the patterns
    /// ([`Self::excludes_target`]), or, a file, by `--exclude-larger-than` (hunt 30: such a
    /// file named alone saved a snapshot of its folders only, exit 0).
    pub(crate) fn excludes_named(&self, path: &Path) -> bool {
        self.excludes_target(path)
            || std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && self.too_large(m.len()))
    }

    /// What the patterns say of the absolute `path`.
    pub(crate) fn judge(&self, path: &Path) -> Verdict {
        let mut verdict = Verdict::Kept;
        for m in [&self.paths, &self.ipaths].into_iter().flatten() {
            if m.matches(path) {
                if !m.takes_back_below(path) {
                    return Verdict::Excluded;
                }
                verdict = Verdict::KeptIfDir;
            }
        }
        verdict
    }

    /// Whether something below directory `dir`, which a pattern excludes but a `!` pattern
    /// may take something back from ([`Verdict::KeptIfDir`]), is taken back: else the walk
    /// leaves the folder out as a whole, rather than storing its folders empty (and warning
    /// about those it cannot list, as in `/proc`). Looks no further than the first entry
    /// taken back; stays on device `dev` when given (`--one-file-system`); an unreadable
    /// folder holds nothing taken back.
    pub(crate) fn takes_back_in(&self, dir: &Path, dev: Option<u64>) -> bool {
        use std::os::unix::fs::MetadataExt;
        let mut seen = std::collections::HashSet::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            let Ok(names) = arca_fs::list_dir_names(&d) else {
                continue;
            };
            for name in names {
                let path = d.join(std::ffi::OsStr::from_bytes(&name));
                match self.judge(&path) {
                    Verdict::Kept => return true,
                    Verdict::Excluded => {}
                    Verdict::KeptIfDir => {
                        let Ok(m) = arca_fs::lstat(&path) else {
                            continue;
                        };
                        let key = (m.dev(), m.ino());
                        if m.is_dir() && dev.is_none_or(|d| d == m.dev()) && seen.insert(key) {
                            todo.push(path);
                        }
                    }
                }
            }
        }
        false
    }

    /// The tag that marks directory `dir` for exclusion of its contents, if any. A tag that
    /// cannot be read is an error naming it.
    pub(crate) fn tagged(&self, dir: &Path) -> Result<Option<String>, (PathBuf, io::Error)> {
        for t in &self.tags {
            match t.marks(dir) {
                Ok(true) => return Ok(Some(String::from_utf8_lossy(&t.name).into_owned())),
                Ok(false) => {}
                Err(e) => return Err((dir.join(std::ffi::OsStr::from_bytes(&t.name)), e)),
            }
        }
        Ok(None)
    }

    /// Whether a regular file of `size` bytes is left out.
    pub(crate) fn too_large(&self, size: u64) -> bool {
        self.larger_than.is_some_and(|l| size > l)
    }
}

/// Reads a pattern file (`--exclude-file`, `--iexclude-file`): one pattern per line, blank
/// lines and lines starting with `#` skipped, surrounding spaces trimmed, and environment
/// variables expanded as restic does (`$HOME/.cache`, `${XDG_CACHE_HOME}`; `$$` is a `$`; an
/// unset variable is empty). `-` reads standard input.
pub fn read_list(path: &Path) -> io::Result<Vec<String>> {
    Ok(read_lines(path)?.iter().map(|l| expand_env(l)).collect())
}

/// `line` with its environment variables expanded (see [`read_list`]).
fn expand_env(line: &str) -> String {
    let var = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some((name, r)) = after.strip_prefix('{').and_then(|a| a.split_once('}')) {
            out.push_str(&var(name).unwrap_or_default());
            rest = r;
        } else {
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            if len == 0 {
                out.push('$');
            } else {
                out.push_str(&var(&after[..len]).unwrap_or_default());
            }
            rest = &after[len..];
        }
    }
    out.push_str(rest);
    out
}

/// The lines of a list file, blank lines and `#` comments skipped, trimmed.
fn read_lines(path: &Path) -> io::Result<Vec<String>> {
    let bytes = if path == Path::new("-") {
        let mut b = Vec::new();
        io::stdin().read_to_end(&mut b)?;
        b
    } else {
        std::fs::read(path)?
    };
    let mut out = Vec::new();
    for (n, line) in without_bom(&bytes).split(|&b| b == b'\n').enumerate() {
        // Patterns are text: the line that is not is named.
        let line = std::str::from_utf8(line).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "line {} is not UTF-8 ({:?}): a pattern must be text; match such a name \
                     with a wildcard in place of its other bytes",
                    n + 1,
                    String::from_utf8_lossy(line).trim()
                ),
            )
        })?;
        let line = line.trim();
        if !line.is_empty() && !line.starts_with('#') {
            out.push(line.to_string());
        }
    }
    Ok(out)
}

/// A text list without its leading UTF-8 byte order mark, as restic reads one: editors on
/// Windows (Notepad, PowerShell's `Out-File`) write it, and it was taken as part of the first
/// line, so the first pattern matched nothing and the first path was missing.
fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes)
}

/// Reads a `--files-from` list as [`read_list`] does, but as bytes: a path need not be
/// UTF-8 (file names on Linux are any bytes but `/` and NUL).
pub fn read_path_list(path: &Path) -> io::Result<Vec<std::path::PathBuf>> {
    read_path_list_as(path, ListForm::Trimmed)
}

/// The paths the lines `listed` of the `--files-from` list `file` name, each globbed by
/// [`expand_glob`], and a warning for each pattern that matches nothing: restic skips it,
/// saying so, and so do `arca backup` and the web UI's backups.
pub fn expand_files_from(listed: &[PathBuf], file: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let mut paths = vec![];
    let mut warnings = vec![];
    for l in listed {
        let found = expand_glob(l);
        if found.is_empty() {
            warnings.push(match is_glob(l.as_os_str().as_bytes()) {
                true => format!(
                    "{}: the pattern of {} matches no file; skipped",
                    arca_format::text::shown(l),
                    file.display()
                ),
                false => format!(
                    "{}: named in {}, does not exist; skipped",
                    arca_format::text::shown(l),
                    file.display()
                ),
            });
        }
        paths.extend(found);
    }
    (paths, warnings)
}

/// Whether a `--files-from` line is a pattern: a wildcard, or as in Go's Glob a `\` (an
/// escape: `d/\[x\]` names `d/[x]`).
fn is_glob(text: &[u8]) -> bool {
    crate::gomatch::has_wildcard(text) || text.contains(&b'\\')
}

/// The paths a `--files-from` line names: itself when it has no wildcard (`*`, `?`, `[`)
/// and exists, else the existing paths its glob matches, sorted, as restic's (Go's `filepath.Glob`: each
/// wildcard within one name, dot files included; `\` escapes). A glob matching nothing
/// gives nothing: restic skips it, with a warning, and so does the backup.
pub fn expand_glob(line: &Path) -> Vec<PathBuf> {
    use crate::gomatch::{Glob, has_wildcard, unescape};
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let text = line.as_os_str().as_bytes();
    if !is_glob(text) {
        // As Go's Glob: a name that does not exist matches nothing (any other failure to
        // look at it is the backup's to report).
        if arca_fs::lstat(line).is_err_and(|e| e.kind() == io::ErrorKind::NotFound) {
            return vec![];
        }
        return vec![line.to_path_buf()];
    }
    let mut found = vec![if text.starts_with(b"/") {
        PathBuf::from("/")
    } else {
        PathBuf::new()
    }];
    for comp in text.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
        let mut next = vec![];
        if !has_wildcard(comp) {
            let name = unescape(comp);
            next.extend(found.iter().map(|f| f.join(OsStr::from_bytes(&name))));
        } else {
            let Some(glob) = Glob::new(comp) else {
                return vec![line.to_path_buf()];
            };
            for dir in &found {
                let list = if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                };
                // Through symlinks, as Go's Glob: `link/*` lists the folder `link` leads to.
                let Ok(read) = std::fs::read_dir(list) else {
                    continue;
                };
                let mut names: Vec<Vec<u8>> = read
                    .filter_map(Result::ok)
                    .map(|d| d.file_name().as_bytes().to_vec())
                    .collect();
                names.sort();
                for n in names {
                    if glob.matches(&n) {
                        next.push(dir.join(OsStr::from_bytes(&n)));
                    }
                }
            }
        }
        found = next;
    }
    found.retain(|p| arca_fs::lstat(p).is_ok());
    // `d/*/` matches folders only (a folder or a symlink to one).
    if text.ends_with(b"/") {
        found.retain(|p| std::fs::metadata(p).is_ok_and(|m| m.is_dir()));
    }
    found
}

/// How a list of paths is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListForm {
    /// One per line; blank lines and `#` comments skipped, surrounding spaces trimmed
    /// (`--files-from`).
    Trimmed,
    /// One per line, exactly as written: spaces and `#` are part of the name, only empty
    /// lines are skipped (`--files-from-verbatim`).
    Verbatim,
    /// Separated by NUL bytes, as `find -print0` writes them: any name, newlines included
    /// (`--files-from-raw`).
    Raw,
}

/// Reads a list of paths written in `form`, as bytes. `-` reads standard input.
pub fn read_path_list_as(path: &Path, form: ListForm) -> io::Result<Vec<std::path::PathBuf>> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = if path == Path::new("-") {
        let mut b = vec![];
        io::stdin().read_to_end(&mut b)?;
        b
    } else {
        std::fs::read(path)?
    };
    // A NUL-separated list is bytes, as `find -print0` writes them, not text: restic reads
    // it as it is, and a name may begin with those bytes.
    let (bytes, sep) = if form == ListForm::Raw {
        (&bytes[..], 0)
    } else {
        (without_bom(&bytes), b'\n')
    };
    Ok(bytes
        .split(|&b| b == sep)
        .map(|l| match form {
            ListForm::Trimmed => l.trim_ascii(),
            // As restic's line reading: a line's trailing CR (a list written on Windows)
            // is not part of the name.
            ListForm::Verbatim => l.strip_suffix(b"\r").unwrap_or(l),
            ListForm::Raw => l,
        })
        .filter(|l| !l.is_empty() && (form != ListForm::Trimmed || !l.starts_with(b"#")))
        .map(|l| std::path::PathBuf::from(std::ffi::OsStr::from_bytes(l)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_from_globs_read_as_go_reads_them() {
        let d = tempfile::tempdir().unwrap();
        for n in ["x!", "xa", "xb", "q{a,b}", "qa"] {
            std::fs::write(d.path().join(n), n).unwrap();
        }
        let names = |pattern: &str| -> Vec<String> {
            expand_glob(&d.path().join(pattern))
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        // Go's filepath.Match: `!` in a class is a character, braces are characters.
        assert_eq!(names("x[!a]"), ["x!", "xa"]);
        assert_eq!(names("x[^a]"), ["x!", "xb"]);
        assert_eq!(names("q*{a,b}"), ["q{a,b}"]);
    }

    /// A leading UTF-8 BOM is not part of a text list's first line (it took the first
    /// pattern, or the first path, with it); a NUL-separated list keeps its bytes.
    #[test]
    fn text_lists_drop_a_leading_bom() {
        let d = tempfile::tempdir().unwrap();
        let l = d.path().join("l");
        std::fs::write(&l, b"\xef\xbb\xbf*.log\n#c\nx\n").unwrap();
        assert_eq!(read_list(&l).unwrap(), ["*.log", "x"]);
        let want = [PathBuf::from("*.log"), PathBuf::from("x")];
        assert_eq!(read_path_list(&l).unwrap(), want);
        let want = [
            PathBuf::from("*.log"),
            PathBuf::from("#c"),
            PathBuf::from("x"),
        ];
        assert_eq!(read_path_list_as(&l, ListForm::Verbatim).unwrap(), want);
        // Only at the start: elsewhere it is part of a name.
        std::fs::write(&l, b"a\n\xef\xbb\xbfb\n").unwrap();
        assert_eq!(read_list(&l).unwrap(), ["a", "\u{feff}b"]);
        std::fs::write(&l, b"\xef\xbb\xbfa\0b\0").unwrap();
        let raw = read_path_list_as(&l, ListForm::Raw).unwrap();
        assert_eq!(
            raw,
            [
                PathBuf::from(std::ffi::OsStr::from_bytes(b"\xef\xbb\xbfa")),
                PathBuf::from("b")
            ]
        );
    }

    #[test]
    fn verbatim_lists_drop_a_trailing_cr() {
        let d = tempfile::tempdir().unwrap();
        let l = d.path().join("l");
        std::fs::write(&l, b"a\r\n b \r\n").unwrap();
        let got = read_path_list_as(&l, ListForm::Verbatim).unwrap();
        assert_eq!(got, [PathBuf::from("a"), PathBuf::from(" b ")]);
    }

    #[test]
    fn files_from_globs_expand_as_restic_expands_them() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        for f in [
            "a.conf", "b.conf", ".h.conf", "c.txt", "s/x.conf", "t/x.conf", "st*r",
        ] {
            let p = r.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"x").unwrap();
        }
        let g = |p: &str| expand_glob(&r.join(p));
        assert_eq!(
            g("*.conf"),
            [r.join(".h.conf"), r.join("a.conf"), r.join("b.conf")]
        );
        assert_eq!(g("*/x.conf"), [r.join("s/x.conf"), r.join("t/x.conf")]);
        assert_eq!(g("[ab].conf"), [r.join("a.conf"), r.join("b.conf")]);
        // A name without wildcards is itself when it exists, as Go's Glob (a missing one
        // made the snapshot incomplete, exit 3, where restic skips it); an escape is the
        // character.
        assert_eq!(g("c.txt"), [r.join("c.txt")]);
        assert!(g("none").is_empty());
        assert_eq!(g("st\\*r"), [r.join("st*r")]);
        assert_eq!(g("s?\\*r"), [r.join("st*r")]);
        // Matching nothing: nothing (the backup warns and skips it, as restic).
        assert!(g("*.none").is_empty());
        // Through a symlinked folder, as Go's Glob (it matched nothing, hunt 18); escapes
        // alone make a pattern; a trailing slash keeps folders only.
        std::os::unix::fs::symlink(r.join("s"), r.join("link")).unwrap();
        assert_eq!(g("link/*.conf"), [r.join("link/x.conf")]);
        std::fs::write(r.join("[x]"), b"x").unwrap();
        assert_eq!(g("\\[x\\]"), [r.join("[x]")]);
        assert_eq!(g("*/"), [r.join("link"), r.join("s"), r.join("t")]);
        // A line that is not UTF-8 is expanded too (it was taken literally, and missing).
        use std::os::unix::ffi::OsStrExt;
        let odd = r.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt"));
        std::fs::write(&odd, b"x").unwrap();
        assert_eq!(
            expand_glob(&r.join(std::ffi::OsStr::from_bytes(b"caf\xe9*"))),
            [odd]
        );
    }

    #[test]
    fn pattern_files_expand_environment_variables() {
        // PATH and HOME are set in any test run; this variable is not.
        let path = std::env::var("PATH").unwrap();
        let home = std::env::var("HOME").unwrap();
        assert_eq!(expand_env("$PATH/x"), format!("{path}/x"));
        assert_eq!(expand_env("${HOME}y"), format!("{home}y"));
        assert_eq!(expand_env("a$$b"), "a$b");
        assert_eq!(expand_env("/$ARCA_SURELY_UNSET_VAR/c"), "//c");
        assert_eq!(expand_env("cost$"), "cost$");
        assert_eq!(expand_env("$-x"), "$-x");
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        std::fs::write(&p, "# $HOME\n $HOME/.cache \n\n*.o\n").unwrap();
        assert_eq!(
            read_list(&p).unwrap(),
            [format!("{home}/.cache"), "*.o".into()]
        );
    }

    #[test]
    fn negated_patterns_enter_the_folders_they_take_back_from() {
        let f = Filter::new(&Excludes {
            patterns: vec!["/h/*".into(), "!/h/code/keep".into()],
            ..Excludes::default()
        })
        .unwrap();
        assert_eq!(f.judge(Path::new("/h/music")), Verdict::Excluded);
        assert_eq!(f.judge(Path::new("/h/code")), Verdict::KeptIfDir);
        assert_eq!(f.judge(Path::new("/h/code/other")), Verdict::Excluded);
        assert_eq!(f.judge(Path::new("/h/code/keep")), Verdict::Kept);
        assert_eq!(f.judge(Path::new("/h")), Verdict::Kept);
    }

    #[test]
    fn path_lists_are_read_as_bytes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("list");
        std::fs::write(&p, b"# comment\n/a/b\xffc \r\n\n  /plain\n").unwrap();
        let got = read_path_list(&p).unwrap();
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(
            got.iter()
                .map(|p| p.as_os_str().as_bytes())
                .collect::<Vec<_>>(),
            vec![&b"/a/b\xffc"[..], b"/plain"]
        );
    }

    #[test]
    fn verbatim_and_raw_lists_keep_every_byte_of_a_name() {
        use std::os::unix::ffi::OsStrExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("list");
        let names = |form| {
            read_path_list_as(&p, form)
                .unwrap()
                .iter()
                .map(|p| p.as_os_str().as_bytes().to_vec())
                .collect::<Vec<_>>()
        };
        std::fs::write(&p, b" /lead\n/trail \n\n#/hash\n").unwrap();
        assert_eq!(
            names(ListForm::Verbatim),
            vec![b" /lead".to_vec(), b"/trail ".to_vec(), b"#/hash".to_vec()]
        );
        std::fs::write(&p, b"/new\nline\0/sp ace \0\0").unwrap();
        assert_eq!(
            names(ListForm::Raw),
            vec![b"/new\nline".to_vec(), b"/sp ace ".to_vec()]
        );
    }

    #[test]
    fn tag_specs_parse_and_bad_ones_are_named() {
        let t = TagFile::parse("NOBACKUP:magic").unwrap();
        assert_eq!(t.name, b"NOBACKUP");
        assert_eq!(t.header.as_deref(), Some(&b"magic"[..]));
        assert_eq!(TagFile::parse(".nobackup").unwrap().header, None);
        for bad in ["", "a/b", "..", ":x"] {
            let e = TagFile::parse(bad).unwrap_err();
            assert_eq!(e.pattern, bad);
        }
    }

    #[test]
    fn tags_headers_sizes_and_case() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        let x = Excludes {
            ipatterns: vec!["*.TMP".into()],
            if_present: vec![".nobackup".into()],
            caches: true,
            larger_than: Some(10),
            ..Excludes::default()
        };
        let f = Filter::new(&x).unwrap();
        assert_eq!(f.tagged(p).unwrap(), None);
        std::fs::write(p.join(CACHEDIR_TAG), b"Signature: wrong").unwrap();
        assert_eq!(
            f.tagged(p).unwrap(),
            None,
            "a tag without the signature does not count"
        );
        std::fs::write(p.join(CACHEDIR_TAG), format!("{CACHEDIR_SIGNATURE}\n# x")).unwrap();
        assert_eq!(f.tagged(p).unwrap().as_deref(), Some(CACHEDIR_TAG));
        std::fs::remove_file(p.join(CACHEDIR_TAG)).unwrap();
        // Without a header, an entry of any kind is the tag, as restic has it.
        std::fs::create_dir(p.join(".nobackup")).unwrap();
        assert_eq!(f.tagged(p).unwrap().as_deref(), Some(".nobackup"));
        std::fs::remove_dir(p.join(".nobackup")).unwrap();
        std::os::unix::fs::symlink("nowhere", p.join(".nobackup")).unwrap();
        assert_eq!(f.tagged(p).unwrap().as_deref(), Some(".nobackup"));
        std::fs::remove_file(p.join(".nobackup")).unwrap();
        std::fs::write(p.join(".nobackup"), b"").unwrap();
        assert_eq!(f.tagged(p).unwrap().as_deref(), Some(".nobackup"));
        std::fs::remove_file(p.join(".nobackup")).unwrap();
        // With a header: a file, or a symlink to one, that starts with it; not a folder, and
        // a FIFO is not opened (that would block).
        std::fs::create_dir(p.join(CACHEDIR_TAG)).unwrap();
        assert_eq!(f.tagged(p).unwrap(), None);
        std::fs::remove_dir(p.join(CACHEDIR_TAG)).unwrap();
        nix::unistd::mkfifo(&p.join(CACHEDIR_TAG), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(f.tagged(p).unwrap(), None);
        std::fs::remove_file(p.join(CACHEDIR_TAG)).unwrap();
        std::fs::write(p.join("real-tag"), CACHEDIR_SIGNATURE).unwrap();
        std::os::unix::fs::symlink("real-tag", p.join(CACHEDIR_TAG)).unwrap();
        assert_eq!(f.tagged(p).unwrap().as_deref(), Some(CACHEDIR_TAG));
        assert!(f.excludes_path(Path::new("/a/b/c.tmp")));
        assert!(f.excludes_path(Path::new("/a/b/c.Tmp")));
        assert!(!f.excludes_path(Path::new("/a/b/c.tmpx")));
        assert!(f.too_large(11) && !f.too_large(10));
    }

    #[test]
    fn lists_skip_comments_and_blanks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("list");
        std::fs::write(&p, "# comment\n\n  *.o  \n/abs/path\n").unwrap();
        assert_eq!(read_list(&p).unwrap(), vec!["*.o", "/abs/path"]);
        assert!(read_list(&d.path().join("missing")).is_err());
    }
}

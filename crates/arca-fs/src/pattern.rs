//! Include and exclude patterns on absolute paths, as restic users know them: a pattern
//! starting with `/` is anchored at the root, any other matches at any depth; `*` stays
//! within one name, `**` crosses directories; a pattern matching a directory covers its
//! contents. A pattern starting with `!` takes back what the patterns before it matched
//! (restic's negation: the last pattern matching a path or a folder above it decides; `\!`
//! is a literal `!`). Patterns are cleaned as paths are (`./a`, `a//b`, `a/../b`). No
//! wildcard or class matches `/` (`[!a]` and `[^a]` are "one character but `a`"), and
//! `dir/**` also matches `dir` itself, as in restic; `{a,b}` is either name (an extension).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// A compiled set of patterns.
#[derive(Debug, Clone)]
pub struct PathMatcher {
    set: GlobSet,
    /// Per glob of `set`: the pattern it came from (`dir/**` gives two globs).
    globs: Vec<usize>,
    /// Per pattern: it is `/`, which matches everything (and is the only one asked about `/`).
    root: Vec<bool>,
    /// The cleaned patterns, without their `!`.
    patterns: Vec<String>,
    /// Per pattern: it starts with `!`.
    negated: Vec<bool>,
    /// Letters match regardless of case: patterns and paths are compared in lower case
    /// (Unicode's, as restic's `--iexclude`; bytes that are not UTF-8 stay as they are).
    fold: bool,
}

/// A pattern that does not compile.
#[derive(Debug, thiserror::Error)]
#[error("invalid pattern {pattern:?}: {detail}")]
pub struct PatternError {
    /// The pattern.
    pub pattern: String,
    /// Why.
    pub detail: String,
}

impl PathMatcher {
    /// Compiles `patterns`.
    pub fn new(patterns: &[String]) -> Result<Self, PatternError> {
        Self::with_case(patterns, false)
    }

    /// Compiles `patterns`, matching letters regardless of case when `ignore_case` is set
    /// (restic's `--iexclude`).
    pub fn with_case(patterns: &[String], ignore_case: bool) -> Result<Self, PatternError> {
        let glob = |full: &str, original: &str| glob(full, original);
        let mut b = GlobSetBuilder::new();
        let mut globs = vec![];
        let mut root = vec![];
        let mut cleaned = Vec::with_capacity(patterns.len());
        let mut negated = Vec::with_capacity(patterns.len());
        for (i, p) in patterns.iter().enumerate() {
            let (neg, body) = match p.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, p.as_str()),
            };
            let trimmed = clean(body);
            let trimmed = if ignore_case {
                go_lower(&trimmed)
            } else {
                trimmed
            };
            if trimmed.is_empty() {
                return Err(PatternError {
                    pattern: p.clone(),
                    detail: "empty pattern".into(),
                });
            }
            let mut add = |g: &str| -> Result<(), PatternError> {
                b.add(glob(g, p)?);
                globs.push(i);
                Ok(())
            };
            let anchored = |t: &str| match t.starts_with('/') {
                true => t.to_string(),
                false => format!("**/{t}"),
            };
            if trimmed == "/" {
                // "/" matches everything.
                add("/**")?;
            } else {
                add(&anchored(&trimmed))?;
                // `dir/**` matches `dir` too (`**` may be no folder at all), as restic's.
                if let Some(dir) = trimmed.strip_suffix("/**").filter(|d| !d.is_empty()) {
                    add(&anchored(dir))?;
                }
            }
            root.push(trimmed == "/");
            cleaned.push(trimmed);
            negated.push(neg);
        }
        let set = b.build().map_err(|e| PatternError {
            pattern: patterns.join(" "),
            detail: glob_error(&e),
        })?;
        Ok(Self {
            set,
            globs,
            root,
            patterns: cleaned,
            negated,
            fold: ignore_case,
        })
    }

    /// Whether some pattern starts with `!`.
    fn negates(&self) -> bool {
        self.negated.iter().any(|&n| n)
    }

    /// Whether there are no patterns.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether the absolute path itself matches a pattern (walks that do not enter what
    /// matched need not ask about the folders above). With `!` patterns: whether the last
    /// pattern matching the path or a folder above it is not one of them.
    pub fn matches(&self, path: &Path) -> bool {
        let path = &*self.key(path);
        if !self.negates() {
            return self.set.is_match(path);
        }
        self.last_match(path).is_some_and(|i| !self.negated[i])
    }

    /// The last pattern matching `path` or a folder above it (`/` only matches `/`).
    fn last_match(&self, path: &Path) -> Option<usize> {
        let root = self.root.iter().rposition(|&r| r);
        path.ancestors()
            .filter(|a| *a != Path::new("") && *a != Path::new("/"))
            .filter_map(|a| self.set.matches(a).into_iter().map(|g| self.globs[g]).max())
            .chain(root.filter(|_| path.starts_with("/")))
            .max()
    }

    /// `path` as the patterns are compared with it.
    fn key<'p>(&self, path: &'p Path) -> std::borrow::Cow<'p, Path> {
        use std::borrow::Cow;
        if !self.fold {
            return Cow::Borrowed(path);
        }
        Cow::Owned(match path.to_str() {
            Some(s) => go_lower(s).into(),
            None => OsStr::from_bytes(&lower_bytes(path.as_os_str().as_bytes())).into(),
        })
    }

    /// Whether the path or one of its ancestors matches a pattern.
    pub fn matches_or_inside(&self, path: &Path) -> bool {
        if self.negates() {
            return self.matches(path);
        }
        let path = &*self.key(path);
        path.ancestors()
            .any(|a| a != Path::new("/") && a != Path::new("") && self.set.is_match(a))
            || (self.root.contains(&true) && path.starts_with("/"))
    }

    /// Whether a `!` pattern could take back something below directory `dir`: a walk must
    /// then enter `dir` even though it matches, and ask about each entry.
    pub fn takes_back_below(&self, dir: &Path) -> bool {
        // Asked for every entry below an included folder: nothing to fold without a `!`.
        if !self.negates() {
            return false;
        }
        let dir = &*self.key(dir);
        self.patterns
            .iter()
            .zip(&self.negated)
            .any(|(p, &neg)| neg && pattern_may_reach(p, dir))
    }

    /// Whether a match could lie below directory `dir` (used to prune restore walks): true
    /// unless every pattern is anchored at a path that diverges from `dir`.
    pub fn may_match_below(&self, dir: &Path) -> bool {
        let dir = &*self.key(dir);
        self.patterns.iter().any(|p| pattern_may_reach(p, dir))
    }
}

/// `s` in lower case as Go's `strings.ToLower` (restic's `--iexclude`) makes it: one character
/// for one, so `İ` is `i` (Rust's full mapping makes it `i` and a combining dot, and a pattern
/// `istanbul` then missed `İstanbul`).
fn go_lower(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\u{130}' => 'i',
            c => {
                let mut l = c.to_lowercase();
                match (l.next(), l.next()) {
                    (Some(one), None) => one,
                    _ => c,
                }
            }
        })
        .collect()
}

/// `bytes` in lower case as [`go_lower`] makes text, its bytes that are not UTF-8 kept as they
/// are: a path with such a byte in one name still has its other names folded in full (folded
/// as ASCII only, `/data/ÄRGER/junk\xff.tmp` escaped `--iexclude 'ärger/*.tmp'`, and
/// `--delete` removed it as extra).
fn lower_bytes(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.extend_from_slice(go_lower(chunk.valid()).as_bytes());
        out.extend_from_slice(chunk.invalid());
    }
    out
}

/// Whether pattern `p` (cleaned) could match something below directory `dir`: true unless it
/// is anchored at a path that diverges from `dir`.
fn pattern_may_reach(p: &str, dir: &Path) -> bool {
    if !p.starts_with('/') {
        return true;
    }
    // Compare the literal prefix of the pattern (escapes removed) with the directory.
    let literal: Vec<Vec<u8>> = p
        .split('/')
        .filter(|c| !c.is_empty())
        .map_while(literal_name)
        .collect();
    let dir_comps: Vec<&[u8]> = dir
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => Some(OsStr::as_bytes(n)),
            _ => None,
        })
        .collect();
    literal.iter().zip(dir_comps.iter()).all(|(a, b)| a == b)
}

/// The name a pattern component stands for when it has no wildcard, class or alternation,
/// with its escapes (`\x`) removed.
fn literal_name(c: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(c.len());
    let mut bytes = c.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => out.push(bytes.next().unwrap_or(b'\\')),
            b'*' | b'?' | b'[' | b'{' => return None,
            b => out.push(b),
        }
    }
    Some(out)
}

/// `p` with every negated class (`[!…]`, `[^…]`) made to leave out `/` too, so that no class
/// matches across folders (as `*` and `?` do not).
fn classes_within_names(p: &str) -> String {
    let mut out = String::with_capacity(p.len() + 4);
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        match c {
            '\\' => out.extend(chars.next()),
            '[' => {
                if chars.next_if(|&n| n == '!' || n == '^').is_some() {
                    out.push_str("!/");
                }
                // A `]` first in a class is one of its characters.
                out.extend(chars.next_if_eq(&']'));
                for n in chars.by_ref() {
                    out.push(n);
                    if n == ']' {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// A pattern cleaned as a path is (restic's `filepath.Clean`): no empty or `.` components,
/// `..` taking back the one before, no trailing `/`; `/` stays `/`.
fn clean(p: &str) -> String {
    let absolute = p.starts_with('/');
    let mut parts: Vec<&str> = vec![];
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." if parts.last().is_some_and(|l| *l != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            c => parts.push(c),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// What is wrong with a pattern, without the glob it was rewritten to (`**/NAME` for a
/// pattern that matches at any depth): the error names the pattern as it was given.
pub fn glob_error(e: &globset::Error) -> String {
    e.kind().to_string()
}

fn glob(full: &str, original: &str) -> Result<globset::Glob, PatternError> {
    GlobBuilder::new(&classes_within_names(full))
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| PatternError {
            pattern: original.to_string(),
            detail: glob_error(&e),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &[&str]) -> PathMatcher {
        PathMatcher::new(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn a_path_with_bytes_that_are_not_utf8_is_folded_in_full() {
        let x = PathMatcher::with_case(&["ärger/*.tmp".to_string()], true).unwrap();
        let p = |b: &[u8]| Path::new(OsStr::from_bytes(b)).to_path_buf();
        assert!(x.matches(&p(b"/d/\xc3\x84RGER/junk\xff.TMP")));
        assert!(x.matches(&p(b"/d/\xc3\x84RGER/J\xffunk.tmp")));
        assert!(!x.matches(&p(b"/d/\xc3\x84RGER/junk\xff.txt")));
    }

    #[test]
    fn anchored_and_floating_patterns() {
        let x = m(&["*.tmp", "/home/u/cache", "/srv/**/logs"]);
        assert!(x.matches(Path::new("/a/b/c.tmp")));
        assert!(x.matches(Path::new("/c.tmp")));
        assert!(!x.matches(Path::new("/a/b/c.tmpx")));
        assert!(x.matches(Path::new("/home/u/cache")));
        assert!(!x.matches(Path::new("/other/home/u/cache")));
        assert!(x.matches_or_inside(Path::new("/home/u/cache/deep/file")));
        assert!(x.matches(Path::new("/srv/a/b/logs")));
        assert!(!m(&["/home/*"]).matches(Path::new("/home/u/x")));
        assert!(m(&["/home/*"]).matches_or_inside(Path::new("/home/u/x")));
        assert!(PathMatcher::new(&["[".to_string()]).is_err());
        assert!(m(&["/"]).matches_or_inside(Path::new("/x/y")));
    }

    #[test]
    fn a_negated_pattern_takes_back_what_came_before() {
        let x = m(&["*.log", "!keep.log"]);
        assert!(x.matches(Path::new("/s/a.log")));
        assert!(!x.matches(Path::new("/s/keep.log")));
        assert!(!x.matches(Path::new("/s/other")));
        // The last match decides: a later pattern excludes again.
        let x = m(&["*.log", "!keep.log", "/s/keep.log"]);
        assert!(x.matches(Path::new("/s/keep.log")));
        // A folder's pattern covers what it holds; a later `!` inside takes back part of
        // it, and the walk must enter the folder to find it.
        let x = m(&["/home/u/*", "!/home/u/code/keep"]);
        assert!(x.matches(Path::new("/home/u/code")));
        assert!(x.takes_back_below(Path::new("/home/u/code")));
        assert!(!x.takes_back_below(Path::new("/home/u/music")));
        assert!(x.matches(Path::new("/home/u/code/other")));
        assert!(!x.matches(Path::new("/home/u/code/keep")));
        assert!(!x.matches(Path::new("/home/u/code/keep/deep/file")));
        assert!(!m(&["*.log"]).takes_back_below(Path::new("/s")));
        // `\!` is a literal `!`.
        assert!(m(&["\\!x"]).matches(Path::new("/a/!x")));
    }

    #[test]
    fn patterns_are_cleaned_as_paths() {
        for p in [
            "./logs",
            "/s//logs",
            "/s/keep/../logs",
            "/s/./logs/",
            "logs/.",
        ] {
            assert!(m(&[p]).matches(Path::new("/s/logs")), "{p}");
        }
        assert_eq!(clean("/../a"), "/a");
        assert_eq!(clean("../a"), "../a");
        assert_eq!(clean("//"), "/");
        assert!(PathMatcher::new(&["./".to_string()]).is_err());
    }

    #[test]
    fn ignoring_case_folds_every_letter() {
        let x = PathMatcher::with_case(&["été.txt".into(), "/Home/*.LOG".into()], true).unwrap();
        assert!(x.matches(Path::new("/d/ÉTÉ.txt")));
        assert!(x.matches(Path::new("/d/été.TXT")));
        assert!(x.matches(Path::new("/home/a.log")));
        assert!(!x.matches(Path::new("/home/a.txt")));
        assert!(x.matches(Path::new(OsStr::from_bytes(b"/HOME/\xff.Log"))));
        assert!(x.may_match_below(Path::new("/HOME")));
        assert!(!m(&["été.txt"]).matches(Path::new("/d/ÉTÉ.txt")));
        // One character for one, as Go folds: `İ` is `i`, a final `Σ` is `σ`.
        let g = PathMatcher::with_case(&["/src/istanbul".into(), "/ΟΔΟΣ".into()], true).unwrap();
        assert!(g.matches(Path::new("/src/İstanbul")));
        assert!(g.matches(Path::new("/οδοσ")) && g.matches(Path::new("/Οδοσ")));
    }

    #[test]
    fn non_utf8_paths_match() {
        let name = OsStr::from_bytes(b"/d/\xff\xfe.tmp");
        assert!(m(&["*.tmp"]).matches(Path::new(name)));
    }

    #[test]
    fn classes_and_double_stars_stay_within_restic_rules() {
        // A negated class is one character of a name, never `/`.
        assert!(!m(&["[!a]"]).matches_or_inside(Path::new("/aa/a")));
        assert!(m(&["[!a]"]).matches(Path::new("/aa/b")));
        assert!(!m(&["b[!x]c"]).matches(Path::new("/a/b/c")));
        assert!(!m(&["b[^x]c"]).matches(Path::new("/a/b/c")));
        assert!(m(&["b[^x]c"]).matches(Path::new("/a/bac")));
        assert!(m(&["[]a]"]).matches(Path::new("/d/]")));
        // With a negation among the patterns, `/` is asked about only for the pattern `/`.
        let x = m(&["[!a]", "!keep"]);
        assert!(!x.matches(Path::new("/aa/a")));
        assert!(m(&["/", "!/keep"]).matches(Path::new("/x")));
        assert!(!m(&["/", "!/keep"]).matches(Path::new("/keep/y")));
        // `dir/**` is `dir` and everything in it.
        let x = m(&["/s/dir/**"]);
        assert!(x.matches(Path::new("/s/dir")));
        assert!(x.matches(Path::new("/s/dir/a/b")));
        assert!(!x.matches(Path::new("/s/dirx")));
        assert!(m(&["cache/**"]).matches(Path::new("/h/cache")));
        assert!(!m(&["/s/dir/**", "!/s/dir"]).matches(Path::new("/s/dir")));
    }

    #[test]
    fn escapes_in_the_literal_part_of_an_anchored_pattern_are_names() {
        // The walk of a restore prunes folders by the pattern's literal part: `My\ Docs` is
        // the folder `My Docs` (it pruned it, and restored nothing).
        let x = m(&["/s/My\\ Docs/*.txt"]);
        assert!(x.may_match_below(Path::new("/s/My Docs")));
        assert!(x.matches(Path::new("/s/My Docs/a.txt")));
        assert!(!x.may_match_below(Path::new("/s/Other")));
        let x = m(&["/s/*", "!/s/My\\ Docs/x*"]);
        assert!(x.takes_back_below(Path::new("/s/My Docs")));
        assert!(!x.matches(Path::new("/s/My Docs/x1")));
        assert_eq!(literal_name("a\\[b"), Some(b"a[b".to_vec()));
        assert_eq!(literal_name("a[b]"), None);
    }

    #[test]
    fn may_match_below_prunes_diverging_anchors() {
        let x = m(&["/home/u/docs/*.txt"]);
        assert!(x.may_match_below(Path::new("/home")));
        assert!(x.may_match_below(Path::new("/home/u/docs")));
        assert!(!x.may_match_below(Path::new("/etc")));
        assert!(m(&["*.txt"]).may_match_below(Path::new("/etc")));
    }
}

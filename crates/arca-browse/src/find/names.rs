//! Name and path patterns of `find` with its modification-time window, and which folders may
//! hold a match at all (restic's "child match"), so that the others are never read.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use arca_format::{Node, Timespec};
use arca_fs::pattern::{PathMatcher, PatternError};
use globset::{GlobBuilder, GlobMatcher};

use super::FindError;

/// One component of an anchored pattern.
#[derive(Debug, Clone)]
enum Comp {
    /// `**`: any number of names.
    Any,
    /// A glob over one name.
    Glob(GlobMatcher),
}

/// What `find PATTERN...` looks for: entries whose base name matches a pattern without `/`,
/// or whose whole path matches a pattern with one (anchored at the root when it starts with
/// `/`, at any depth otherwise), modified within the window.
#[derive(Debug, Clone)]
pub struct NameQuery {
    matcher: PathMatcher,
    /// Every pattern named the root (`/`), which is never a hit.
    matches_nothing: bool,
    /// Per anchored pattern, its components; unanchored patterns may match anywhere.
    anchored: Vec<Vec<Comp>>,
    /// Some pattern may match anywhere below any folder.
    floating: bool,
    /// Some pattern looks at more than the base name.
    path_dependent: bool,
    oldest: Option<Timespec>,
    newest: Option<Timespec>,
}

fn component_glob(c: &str, pattern: &str, ignore_case: bool) -> Result<GlobMatcher, FindError> {
    GlobBuilder::new(c)
        .literal_separator(true)
        .case_insensitive(ignore_case)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| {
            FindError::Pattern(PatternError {
                pattern: pattern.to_string(),
                detail: arca_fs::pattern::glob_error(&e),
            })
        })
}

impl NameQuery {
    /// Compiles `patterns` (letters of any case when `ignore_case`), keeping entries whose
    /// modification time lies within `oldest..=newest` (either bound may be open).
    pub fn new(
        patterns: &[String],
        ignore_case: bool,
        oldest: Option<Timespec>,
        newest: Option<Timespec>,
    ) -> Result<Self, FindError> {
        if let (Some(o), Some(n)) = (oldest, newest)
            && o > n
        {
            return Err(FindError::TimeWindow);
        }
        if patterns.is_empty() {
            return Err(FindError::Pattern(PatternError {
                pattern: String::new(),
                detail: "no pattern given".into(),
            }));
        }
        // `/` names the root, which find never prints: it matches nothing (trimmed to an
        // empty pattern, it matched every entry; hunt 28).
        let is_root = |p: &String| p.starts_with('/') && p.trim_matches('/').is_empty();
        let patterns: Vec<String> = patterns.iter().filter(|p| !is_root(p)).cloned().collect();
        let matcher = PathMatcher::with_case(&patterns, ignore_case)?;
        let mut anchored = vec![];
        let mut floating = false;
        let mut path_dependent = false;
        let matches_nothing = patterns.is_empty();
        for p in &patterns {
            let trimmed = p.trim_end_matches('/');
            if trimmed.contains('/') {
                path_dependent = true;
            }
            if !trimmed.starts_with('/') {
                floating = true;
                continue;
            }
            let comps = trimmed
                .split('/')
                .filter(|c| !c.is_empty())
                .map(|c| match c {
                    "**" => Ok(Comp::Any),
                    _ => component_glob(c, p, ignore_case).map(Comp::Glob),
                })
                .collect::<Result<Vec<_>, _>>()?;
            anchored.push(comps);
        }
        Ok(Self {
            matcher,
            matches_nothing,
            anchored,
            floating,
            path_dependent,
            oldest,
            newest,
        })
    }

    /// Whether the answer for an entry depends on more than its base name (a pattern holds a
    /// `/`): listings met at different paths are then searched separately.
    pub fn path_dependent(&self) -> bool {
        self.path_dependent
    }

    /// Whether the entry `node` at absolute `path` is a hit.
    pub fn matches(&self, node: &Node, path: &[u8]) -> bool {
        if self.matches_nothing
            || self.oldest.is_some_and(|o| node.mtime < o)
            || self.newest.is_some_and(|n| node.mtime > n)
        {
            return false;
        }
        self.matcher.matches(Path::new(OsStr::from_bytes(path)))
    }

    /// Whether an entry below the folder at absolute `dir` could match (false only when every
    /// pattern is anchored and none can reach below `dir`).
    pub fn may_match_below(&self, dir: &[u8]) -> bool {
        if self.floating {
            return true;
        }
        let names: Vec<&[u8]> = dir
            .split(|b| *b == b'/')
            .filter(|c| !c.is_empty())
            .collect();
        self.anchored
            .iter()
            .any(|comps| reaches_below(comps, &names))
    }
}

/// Whether an anchored pattern of `comps` can match a path strictly below the folder whose
/// names are `names`.
fn reaches_below(comps: &[Comp], names: &[&[u8]]) -> bool {
    for (i, name) in names.iter().enumerate() {
        match comps.get(i) {
            None => return false,
            Some(Comp::Any) => return true,
            Some(Comp::Glob(g)) => {
                if !g.is_match(Path::new(OsStr::from_bytes(name))) {
                    return false;
                }
            }
        }
    }
    comps.len() > names.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(p: &[&str], ic: bool) -> NameQuery {
        let v: Vec<String> = p.iter().map(|s| s.to_string()).collect();
        NameQuery::new(&v, ic, None, None).unwrap()
    }

    fn file(mtime: i64) -> Node {
        Node {
            name: b"x".to_vec(),
            mtime: Timespec {
                sec: mtime,
                nsec: 0,
            },
            ..Node::default()
        }
    }

    #[test]
    fn base_names_and_paths() {
        let n = file(0);
        let x = q(&["*.txt"], false);
        assert!(!x.path_dependent());
        assert!(x.matches(&n, b"/a/b/c.txt"));
        assert!(x.matches(&n, b"/c.txt"));
        assert!(!x.matches(&n, b"/a/c.txt/d"));
        assert!(!x.matches(&n, b"/a/C.TXT"));
        assert!(q(&["*.txt"], true).matches(&n, b"/a/C.TXT"));
        let p = q(&["docs/*.md"], false);
        assert!(p.path_dependent());
        assert!(p.matches(&n, b"/x/docs/a.md"));
        assert!(!p.matches(&n, b"/x/docs/sub/a.md"));
        let a = q(&["/home/*/x"], false);
        assert!(a.matches(&n, b"/home/u/x"));
        assert!(!a.matches(&n, b"/srv/home/u/x"));
        // Bytes that are not UTF-8 match too.
        assert!(q(&["*.bin"], false).matches(&n, b"/d/\xff\xfe.bin"));
        assert!(q(&["\u{fffd}"], false).matches(&n, b"/\xef\xbf\xbd"));
        assert!(NameQuery::new(&["[".to_string()], false, None, None).is_err());
        // `/` is the root, never printed: it matches nothing (it matched every entry).
        for root in ["/", "//"] {
            let r = q(&[root], false);
            assert!(!r.matches(&n, b"/a") && !r.matches(&n, b"/a/b"), "{root}");
            assert!(!r.may_match_below(b"/a"), "{root}");
        }
        assert!(q(&["/", "*.txt"], false).matches(&n, b"/a/c.txt"));
    }

    #[test]
    fn time_window() {
        let v = vec!["*".to_string()];
        let t = |s| Some(Timespec { sec: s, nsec: 0 });
        let w = NameQuery::new(&v, false, t(10), t(20)).unwrap();
        assert!(!w.matches(&file(9), b"/x"));
        assert!(w.matches(&file(10), b"/x"));
        assert!(w.matches(&file(20), b"/x"));
        assert!(!w.matches(&file(21), b"/x"));
        assert!(matches!(
            NameQuery::new(&v, false, t(20), t(10)),
            Err(FindError::TimeWindow)
        ));
    }

    #[test]
    fn child_match_prunes_anchored_patterns_only() {
        let a = q(&["/home/*/docs/*.txt"], false);
        assert!(a.may_match_below(b"/"));
        assert!(a.may_match_below(b"/home"));
        assert!(a.may_match_below(b"/home/u"));
        assert!(a.may_match_below(b"/home/u/docs"));
        assert!(!a.may_match_below(b"/home/u/docs/deeper"));
        assert!(!a.may_match_below(b"/etc"));
        assert!(!a.may_match_below(b"/home/u/other"));
        let s = q(&["/srv/**/x"], false);
        assert!(s.may_match_below(b"/srv/a/b/c"));
        assert!(!s.may_match_below(b"/etc"));
        assert!(q(&["/etc", "*.conf"], false).may_match_below(b"/var/x"));
        assert!(!q(&["/etc"], false).may_match_below(b"/etc"));
        assert!(q(&["/ETC/x"], true).may_match_below(b"/etc"));
    }
}

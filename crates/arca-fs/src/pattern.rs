//! Include and exclude patterns on absolute paths, as restic users know them: a pattern
//! starting with `/` is anchored at the root, any other matches at any depth; `*` stays
//! within one name, `**` crosses directories; a pattern matching a directory covers its
//! contents.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// A compiled set of patterns.
#[derive(Debug, Clone)]
pub struct PathMatcher {
    set: GlobSet,
    patterns: Vec<String>,
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
        let glob = |full: &str, original: &str| glob(full, original, ignore_case);
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            let trimmed = p.trim_end_matches('/');
            if trimmed.is_empty() && !p.is_empty() {
                // "/" matches everything.
                b.add(glob("/**", p)?);
                continue;
            }
            if trimmed.is_empty() {
                return Err(PatternError {
                    pattern: p.clone(),
                    detail: "empty pattern".into(),
                });
            }
            let full = if trimmed.starts_with('/') {
                trimmed.to_string()
            } else {
                format!("**/{trimmed}")
            };
            b.add(glob(&full, p)?);
        }
        let set = b.build().map_err(|e| PatternError {
            pattern: patterns.join(" "),
            detail: e.to_string(),
        })?;
        Ok(Self {
            set,
            patterns: patterns.to_vec(),
        })
    }

    /// Whether there are no patterns.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether the absolute path itself matches a pattern.
    pub fn matches(&self, path: &Path) -> bool {
        self.set.is_match(path)
    }

    /// Whether the path or one of its ancestors matches a pattern.
    pub fn matches_or_inside(&self, path: &Path) -> bool {
        path.ancestors()
            .any(|a| a != Path::new("/") && a != Path::new("") && self.set.is_match(a))
            || (self.set.is_match(Path::new("/")) && path.starts_with("/"))
    }

    /// Whether a match could lie below directory `dir` (used to prune restore walks): true
    /// unless every pattern is anchored at a path that diverges from `dir`.
    pub fn may_match_below(&self, dir: &Path) -> bool {
        self.patterns.iter().any(|p| {
            if !p.starts_with('/') {
                return true;
            }
            // Compare the literal prefix of the pattern with the directory.
            let literal: Vec<&[u8]> = p
                .split('/')
                .filter(|c| !c.is_empty())
                .take_while(|c| !c.contains(['*', '?', '[', '{']))
                .map(str::as_bytes)
                .collect();
            let dir_comps: Vec<&[u8]> = dir
                .components()
                .filter_map(|c| match c {
                    std::path::Component::Normal(n) => Some(OsStr::as_bytes(n)),
                    _ => None,
                })
                .collect();
            literal.iter().zip(dir_comps.iter()).all(|(a, b)| a == b)
        })
    }
}

fn glob(full: &str, original: &str, ignore_case: bool) -> Result<globset::Glob, PatternError> {
    GlobBuilder::new(full)
        .literal_separator(true)
        .case_insensitive(ignore_case)
        .backslash_escape(true)
        .build()
        .map_err(|e| PatternError {
            pattern: original.to_string(),
            detail: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &[&str]) -> PathMatcher {
        PathMatcher::new(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
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
    fn non_utf8_paths_match() {
        let name = OsStr::from_bytes(b"/d/\xff\xfe.tmp");
        assert!(m(&["*.tmp"]).matches(Path::new(name)));
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

//! One path component matched against a Go glob (`filepath.Match`, which restic's
//! `--files-from` uses), on bytes: names and patterns need not be UTF-8.
//!
//! `*` matches any run of characters, `?` one character, `[...]` one character of a class
//! (ranges `a-z`; `^` right after `[` negates; `!` and braces are plain characters), and `\`
//! escapes the next character. A character is a UTF-8 scalar value, or one byte that is not
//! part of one.

/// A character: a Unicode scalar value, or `NOT_UTF8 + byte` for a byte that is not UTF-8.
type Unit = u32;

const NOT_UTF8: Unit = 0x11_0000;

/// The characters of `b`.
fn units(b: &[u8]) -> Vec<Unit> {
    let mut out = Vec::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        out.extend(chunk.valid().chars().map(Unit::from));
        out.extend(chunk.invalid().iter().map(|&x| NOT_UTF8 + Unit::from(x)));
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Char(Unit),
    AnyOne,
    AnyRun,
    Class {
        negated: bool,
        ranges: Vec<(Unit, Unit)>,
    },
}

/// A compiled component pattern.
#[derive(Debug, Clone)]
pub(crate) struct Glob {
    tokens: Vec<Token>,
}

impl Glob {
    /// Compiles `pattern`; `None` when it is malformed (an unclosed class, a trailing `\`).
    pub(crate) fn new(pattern: &[u8]) -> Option<Glob> {
        let p = units(pattern);
        let esc = Unit::from(b'\\');
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < p.len() {
            let c = p[i];
            i += 1;
            tokens.push(match c {
                c if c == esc => {
                    let n = *p.get(i)?;
                    i += 1;
                    Token::Char(n)
                }
                c if c == Unit::from(b'*') => Token::AnyRun,
                c if c == Unit::from(b'?') => Token::AnyOne,
                c if c == Unit::from(b'[') => {
                    let negated = p.get(i) == Some(&Unit::from(b'^'));
                    if negated {
                        i += 1;
                    }
                    let mut ranges = Vec::new();
                    loop {
                        let mut lo = *p.get(i)?;
                        // A `]` ends the class, unless it comes first.
                        if lo == Unit::from(b']') && !ranges.is_empty() {
                            i += 1;
                            break;
                        }
                        i += 1;
                        if lo == esc {
                            lo = *p.get(i)?;
                            i += 1;
                        }
                        let mut hi = lo;
                        if p.get(i) == Some(&Unit::from(b'-'))
                            && p.get(i + 1).is_some_and(|&n| n != Unit::from(b']'))
                        {
                            hi = p[i + 1];
                            i += 2;
                            if hi == esc {
                                hi = *p.get(i)?;
                                i += 1;
                            }
                        }
                        ranges.push((lo, hi));
                    }
                    Token::Class { negated, ranges }
                }
                c => Token::Char(c),
            });
        }
        Some(Glob { tokens })
    }

    /// Whether the name `name` (one component, no `/`) matches.
    pub(crate) fn matches(&self, name: &[u8]) -> bool {
        let n = units(name);
        // Backtracking to the last `*` only: linear in practice, never exponential.
        let (t, mut ti, mut ni) = (&self.tokens, 0, 0);
        let mut star: Option<(usize, usize)> = None;
        while ni < n.len() {
            let one = match t.get(ti) {
                Some(Token::AnyRun) => {
                    star = Some((ti, ni));
                    ti += 1;
                    continue;
                }
                Some(Token::Char(c)) => *c == n[ni],
                Some(Token::AnyOne) => true,
                Some(Token::Class { negated, ranges }) => {
                    ranges.iter().any(|&(lo, hi)| lo <= n[ni] && n[ni] <= hi) != *negated
                }
                None => false,
            };
            if one {
                ti += 1;
                ni += 1;
            } else if let Some((st, sn)) = star {
                // The last `*` takes one more character.
                ti = st + 1;
                ni = sn + 1;
                star = Some((st, sn + 1));
            } else {
                return false;
            }
        }
        t[ti..].iter().all(|x| *x == Token::AnyRun)
    }
}

/// Whether `s` has a wildcard or class that is not escaped.
pub(crate) fn has_wildcard(s: &[u8]) -> bool {
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 1,
            b'*' | b'?' | b'[' => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

/// `s` with its escapes (`\x`) removed.
pub(crate) fn unescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut it = s.iter();
    while let Some(&c) = it.next() {
        match c {
            b'\\' => out.push(*it.next().unwrap_or(&b'\\')),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, n: &str) -> bool {
        Glob::new(p.as_bytes()).unwrap().matches(n.as_bytes())
    }

    #[test]
    fn matches_as_go_filepath_match() {
        assert!(m("*.conf", "a.conf") && m("*.conf", ".conf") && !m("*.conf", "a.con"));
        assert!(m("a*b*c", "aXbYbZc") && !m("a*b*c", "aXbYbZ"));
        assert!(m("?", "é") && !m("?", "ab") && !m("??", "é"));
        assert!(m("[a-c]x", "bx") && !m("[a-c]x", "dx"));
        assert!(m("[^a-c]x", "dx") && !m("[^a-c]x", "ax"));
        // `!` and braces are plain characters.
        assert!(m("x[!a]", "x!") && m("x[!a]", "xa") && !m("x[!a]", "xb"));
        assert!(m("q*{a,b}", "q{a,b}") && !m("q*{a,b}", "qa"));
        assert!(m("[]a]", "]") && m("[]a]", "a"));
        assert!(m("st\\*r", "st*r") && !m("st\\*r", "star"));
        assert!(m("[\\]]", "]"));
        assert!(m("***", "") && m("*", "") && !m("?", ""));
        assert!(Glob::new(b"[ab").is_none() && Glob::new(b"ab\\").is_none());
    }

    #[test]
    fn names_and_patterns_that_are_not_utf8() {
        let g = Glob::new(b"caf\xe9*").unwrap();
        assert!(g.matches(b"caf\xe9.txt") && !g.matches("café.txt".as_bytes()));
        assert!(Glob::new(b"?.txt").unwrap().matches(b"\xff.txt"));
        assert!(Glob::new(b"[\xfe-\xff]").unwrap().matches(b"\xff"));
        assert!(!Glob::new(b"[a-z]").unwrap().matches(b"\xff"));
    }

    #[test]
    fn many_stars_stay_fast() {
        let p = "*a".repeat(30) + "b";
        let name = "a".repeat(5000);
        assert!(!m(&p, &name));
    }

    #[test]
    fn wildcards_and_escapes() {
        assert!(has_wildcard(b"a*") && has_wildcard(b"[x]") && !has_wildcard(b"a\\*"));
        assert_eq!(unescape(b"a\\*b\\\\"), b"a*b\\");
    }
}

//! Splits an option value into words like a POSIX shell does (whitespace separates words;
//! single quotes, double quotes and backslashes quote), without expanding anything.

/// Splits `s` into words: whitespace separates words, `'...'` quotes everything, `"..."`
/// quotes everything but `\"`, `\\`, `\$` and `` \` ``, and a backslash outside quotes takes
/// the next character literally. Nothing is expanded (`~`, `$VAR`, globs stay as they are).
pub(crate) fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    // Whether a word has started (so that `''` yields an empty word).
    let mut started = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(n) => {
                    word.push(n);
                    started = true;
                }
                None => return Err("ends with a lone backslash".into()),
            },
            '\'' => {
                started = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(n) => word.push(n),
                        None => return Err("unclosed single quote".into()),
                    }
                }
            }
            '"' => {
                started = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(n @ ('"' | '\\' | '$' | '`')) => word.push(n),
                            Some('\n') => {}
                            Some(n) => {
                                word.push('\\');
                                word.push(n);
                            }
                            None => return Err("unclosed double quote".into()),
                        },
                        Some(n) => word.push(n),
                        None => return Err("unclosed double quote".into()),
                    }
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::split_words;

    fn ok(s: &str) -> Vec<String> {
        split_words(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn splits_like_a_shell() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("   \t\n ", &[]),
            ("ssh host -s sftp", &["ssh", "host", "-s", "sftp"]),
            ("  ssh\t -p  2222   host ", &["ssh", "-p", "2222", "host"]),
            (
                "-i '/path with/spaces key'",
                &["-i", "/path with/spaces key"],
            ),
            (
                r#"-o "ProxyCommand=nc %h %p""#,
                &["-o", "ProxyCommand=nc %h %p"],
            ),
            (r"a\ b c", &["a b", "c"]),
            (r"a\\b", &[r"a\b"]),
            (r#""a \"q\" \\ \$x \n""#, &[r#"a "q" \ $x \n"#]),
            (r"'a \ b'", &[r"a \ b"]),
            ("''", &[""]),
            (r#"x "" y"#, &["x", "", "y"]),
            (r#"pre'quo ted'"dq"post"#, &["prequo teddqpost"]),
            ("~/key $HOME *", &["~/key", "$HOME", "*"]),
            ("a\\\nb", &["ab"]),
            ("é 'ü x'", &["é", "ü x"]),
        ];
        for (input, want) in cases {
            assert_eq!(ok(input), *want, "{input:?}");
        }
    }

    #[test]
    fn refuses_unbalanced_quoting() {
        for (input, why) in [
            ("ssh 'host", "single quote"),
            ("ssh \"host", "double quote"),
            ("ssh \"host\\", "double quote"),
            ("ssh host\\", "backslash"),
        ] {
            let e = split_words(input).expect_err(input);
            assert!(e.contains(why), "{input:?}: {e}");
        }
    }
}

//! Repository locations as restic spells them (`/path`, `local:/path`, `s3:...`, `sftp:...`),
//! parsed into what each backend needs to connect.

use std::fmt;
use std::path::PathBuf;

/// Where a repository lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A folder on this machine (`/path` or `local:/path`).
    Local(PathBuf),
    /// An S3-compatible bucket.
    S3(S3Location),
    /// A folder on another machine, over SFTP.
    Sftp(SftpLocation),
}

/// `s3:https://host[:port]/bucket[/prefix]` or `s3:host/bucket[/prefix]` (https implied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    /// `http(s)://host[:port]`.
    pub endpoint: String,
    /// Bucket name.
    pub bucket: String,
    /// Folder inside the bucket, without leading or trailing `/` (empty: the bucket's root).
    pub prefix: String,
}

/// `sftp:[user@]host:/path` or `sftp://[user@]host[:port]//path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SftpLocation {
    /// Login name, when given (otherwise the ssh configuration decides).
    pub user: Option<String>,
    /// Host name or ssh alias (IPv6 addresses without brackets).
    pub host: String,
    /// Port, when given (otherwise the ssh configuration decides).
    pub port: Option<u16>,
    /// Folder on the server: absolute, or relative to the login folder.
    pub path: String,
}

/// A location that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid repository location {location:?}: {why}")]
pub struct LocationError {
    /// The location as given.
    pub location: String,
    /// What is wrong, and the expected form.
    pub why: String,
}

impl Location {
    /// Parses a location; schemes arca does not know are refused with the list it knows.
    pub fn parse(s: &str) -> Result<Location, LocationError> {
        let err = |why: &str| LocationError {
            location: s.to_string(),
            why: why.to_string(),
        };
        if s.is_empty() {
            return Err(err("empty"));
        }
        if let Some(rest) = s.strip_prefix("local:") {
            if rest.is_empty() {
                return Err(err("expected local:/path"));
            }
            return Ok(Location::Local(PathBuf::from(rest)));
        }
        if let Some(rest) = s.strip_prefix("s3:") {
            return parse_s3(rest).map(Location::S3).map_err(|w| err(&w));
        }
        if let Some(rest) = s.strip_prefix("sftp:") {
            return parse_sftp(rest).map(Location::Sftp).map_err(|w| err(&w));
        }
        // A scheme this build does not serve is refused, not taken for a folder named
        // `file:` or `S3:host` (init created one in the current folder).
        if let Some((scheme, rest)) = s.split_once(':')
            && scheme.len() > 1
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        {
            let lower = scheme.to_ascii_lowercase();
            if ["local", "s3", "sftp"].contains(&lower.as_str()) {
                return Err(err(&format!(
                    "schemes are written in lowercase: {lower}:{rest} (a folder whose name \
                     begins so is written ./{s})"
                )));
            }
            let unsupported = [
                "rest", "http", "https", "b2", "azure", "gs", "swift", "rclone", "s3s", "ftp",
                "file", "smb", "webdav",
            ];
            if unsupported.contains(&lower.as_str()) || rest.starts_with("//") {
                return Err(err(&format!(
                    "backend {scheme:?} is not supported; use a folder, local:/path, \
                     s3:https://host/bucket/prefix or sftp:user@host:/path (a folder whose \
                     name begins so is written ./{s})"
                )));
            }
        }
        Ok(Location::Local(PathBuf::from(s)))
    }

    /// Whether the repository is on this machine.
    pub fn is_local(&self) -> bool {
        matches!(self, Location::Local(_))
    }
}

fn parse_s3(rest: &str) -> Result<S3Location, String> {
    const FORM: &str = "expected s3:https://host[:port]/bucket[/prefix] or s3:host/bucket[/prefix]";
    let (scheme, rest) = if let Some(r) = rest.strip_prefix("https://") {
        ("https", r)
    } else if let Some(r) = rest.strip_prefix("http://") {
        ("http", r)
    } else if rest.contains("://") {
        return Err(format!(
            "only http and https endpoints are supported; {FORM}"
        ));
    } else {
        ("https", rest)
    };
    let (host, path) = rest.split_once('/').ok_or_else(|| FORM.to_string())?;
    if host.is_empty() {
        return Err(format!("no host; {FORM}"));
    }
    if host.contains('@') {
        // Sent as part of the address, they broke the request signature ("the server refused
        // the credentials" while the environment's were right) and were shown in every
        // message.
        return Err(
            "credentials cannot be part of the location: set AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) instead"
                .to_string(),
        );
    }
    let path = path.trim_matches('/');
    let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
    if bucket.is_empty() {
        return Err(format!("no bucket; {FORM}"));
    }
    if let Err(why) = valid_bucket(bucket) {
        return Err(format!(
            "bucket name {bucket:?} is not valid: {why} (3 to 63 lowercase letters, digits, '.', \
             '-', '_')"
        ));
    }
    let prefix = prefix.trim_matches('/');
    if prefix
        .split('/')
        .any(|p| p.is_empty() || p == "." || p == "..")
        && !prefix.is_empty()
    {
        return Err(format!("prefix {prefix:?} has an empty, '.' or '..' part"));
    }
    Ok(S3Location {
        endpoint: format!("{scheme}://{host}"),
        bucket: bucket.to_string(),
        prefix: prefix.to_string(),
    })
}

/// Whether `b` can name a bucket; if not, what is wrong with it.
fn valid_bucket(b: &str) -> Result<(), String> {
    if let Some(c) = b
        .chars()
        .find(|&c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_')))
    {
        return Err(format!("{c:?} is not allowed"));
    }
    if !(3..=63).contains(&b.len()) {
        return Err(format!("{} characters", b.len()));
    }
    Ok(())
}

/// `s` with each `%XX` replaced by the byte it stands for; a `%` not followed by two hex
/// digits, or bytes that are not UTF-8, are refused (as a URL parser does).
fn percent_decode(s: &str) -> Result<String, String> {
    if !s.contains('%') {
        return Ok(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    format!(
                        "invalid escape {:?} in {s:?} (a '%' is written %25)",
                        &s[i..(i + 3).min(s.len())]
                    )
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} decodes to bytes that are not UTF-8"))
}

fn parse_sftp(rest: &str) -> Result<SftpLocation, String> {
    const FORM: &str = "expected sftp:[user@]host:/path or sftp://[user@]host[:port]//path";
    let split_user = |s: &str| -> (Option<String>, String) {
        match s.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_string()), h.to_string()),
            None => (None, s.to_string()),
        }
    };
    let loc = if let Some(url) = rest.strip_prefix("//") {
        // sftp://[user@]host[:port]/path: one slash starts a path relative to the login
        // folder, two an absolute one.
        let (authority, path) = url.split_once('/').ok_or_else(|| FORM.to_string())?;
        let (user, hostport) = split_user(authority);
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("unclosed '[' in host; {FORM}"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(format!("unexpected {after:?} after host; {FORM}")),
            };
            (h.to_string(), port.map(str::to_string))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p.to_string())),
                None => (hostport, None),
            }
        };
        let port = match port {
            Some(p) => Some(
                p.parse::<u16>()
                    .map_err(|_| format!("invalid port {p:?}"))?,
            ),
            None => None,
        };
        // A URL: its user and path are percent-decoded, as restic's (`a%20b` is `a b`).
        let user = user.map(|u| percent_decode(&u)).transpose()?;
        SftpLocation {
            user,
            host,
            port,
            path: percent_decode(path)?,
        }
    } else {
        let (authority, path) = rest.split_once(':').ok_or_else(|| FORM.to_string())?;
        let (user, host) = split_user(authority);
        SftpLocation {
            user,
            host,
            port: None,
            path: path.to_string(),
        }
    };
    if loc.host.is_empty() {
        return Err(format!("no host; {FORM}"));
    }
    if loc.host.starts_with('-') || loc.user.as_deref().is_some_and(|u| u.starts_with('-')) {
        return Err("host and user must not start with '-'".to_string());
    }
    if loc.user.as_deref() == Some("") {
        return Err(format!("empty user name; {FORM}"));
    }
    if loc.path.trim_matches('/').is_empty() {
        return Err(format!("no folder; {FORM}"));
    }
    // Only `~/folder` is understood (a folder below the login folder). `~` or `~/` alone made
    // a folder named `~` there, which `rm -rf ~` would then be typed to remove, and `~user`
    // a folder named `~user` (hunt 30).
    let path = trim_trailing_slashes(&loc.path);
    if path == "~" || (path.starts_with('~') && !path.starts_with("~/")) {
        return Err(format!(
            "{:?}: `~` alone or `~user` is not expanded over SFTP; name a folder below the \
             login folder (sftp:host:~/repo, or sftp:host:repo) or give its full path",
            loc.path
        ));
    }
    Ok(SftpLocation {
        path: trim_trailing_slashes(&loc.path),
        ..loc
    })
}

fn trim_trailing_slashes(p: &str) -> String {
    let t = p.trim_end_matches('/');
    if t.is_empty() { "/".into() } else { t.into() }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3(s) => write!(f, "{s}"),
            Location::Sftp(s) => write!(f, "{s}"),
        }
    }
}

impl fmt::Display for S3Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s3:{}/{}", self.endpoint, self.bucket)?;
        if !self.prefix.is_empty() {
            write!(f, "/{}", self.prefix)?;
        }
        Ok(())
    }
}

impl fmt::Display for SftpLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A URL: a '%' of the user or path is escaped, so that the text parses back to them.
        f.write_str("sftp://")?;
        if let Some(u) = &self.user {
            write!(f, "{}@", u.replace('%', "%25"))?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        write!(f, "/{}", self.path.replace('%', "%25"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(endpoint: &str, bucket: &str, prefix: &str) -> Location {
        Location::S3(S3Location {
            endpoint: endpoint.into(),
            bucket: bucket.into(),
            prefix: prefix.into(),
        })
    }

    fn sftp(user: Option<&str>, host: &str, port: Option<u16>, path: &str) -> Location {
        Location::Sftp(SftpLocation {
            user: user.map(Into::into),
            host: host.into(),
            port,
            path: path.into(),
        })
    }

    #[test]
    fn locations_as_restic_spells_them() {
        let cases = [
            ("/srv/repo", Location::Local("/srv/repo".into())),
            ("repo", Location::Local("repo".into())),
            // A colon alone makes no scheme of a folder's name.
            ("backup:2024", Location::Local("backup:2024".into())),
            ("./S3:host", Location::Local("./S3:host".into())),
            ("local:S3:x", Location::Local("S3:x".into())),
            ("local:/srv/repo", Location::Local("/srv/repo".into())),
            (
                "s3:https://127.0.0.1:9000/bucket/some/prefix/",
                s3("https://127.0.0.1:9000", "bucket", "some/prefix"),
            ),
            (
                "s3:http://minio.lan/bucket",
                s3("http://minio.lan", "bucket", ""),
            ),
            (
                "s3:s3.amazonaws.com/my-bucket/arca",
                s3("https://s3.amazonaws.com", "my-bucket", "arca"),
            ),
            (
                "sftp:alice@backup.lan:/srv/repo",
                sftp(Some("alice"), "backup.lan", None, "/srv/repo"),
            ),
            ("sftp:nas:repo/", sftp(None, "nas", None, "repo")),
            (
                "sftp://alice@backup.lan:2222//srv/repo",
                sftp(Some("alice"), "backup.lan", Some(2222), "/srv/repo"),
            ),
            ("sftp://nas/repo", sftp(None, "nas", None, "repo")),
            // A URL's user and path are percent-decoded, as restic's; the other form is not.
            (
                "sftp://a%40b@nas//srv/my%20repo",
                sftp(Some("a@b"), "nas", None, "/srv/my repo"),
            ),
            (
                "sftp:nas:/srv/my%20repo",
                sftp(None, "nas", None, "/srv/my%20repo"),
            ),
            (
                "sftp://bob@[::1]:2222//srv/repo",
                sftp(Some("bob"), "::1", Some(2222), "/srv/repo"),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Location::parse(text).unwrap(), want, "{text}");
        }
        for (text, shown) in [
            ("s3:http://h:9/bkt/p", "s3:http://h:9/bkt/p"),
            ("sftp:u@h:/r", "sftp://u@h//r"),
            ("sftp://[::1]:22//r", "sftp://[::1]:22//r"),
            ("sftp:h:/100%", "sftp://h//100%25"),
            ("sftp://h//a%2520b", "sftp://h//a%2520b"),
        ] {
            let loc = Location::parse(text).unwrap();
            assert_eq!(loc.to_string(), shown);
            // What is shown parses back to the same location.
            assert_eq!(Location::parse(shown).unwrap(), loc, "{shown}");
        }
    }

    #[test]
    fn bad_locations_say_what_is_wrong() {
        for (text, why) in [
            ("", "empty"),
            ("local:", "local:/path"),
            ("s3:https://host", "expected s3:"),
            ("s3:https://host/", "no bucket"),
            ("s3:https:///bucket", "no host"),
            ("s3:http://id:secret@host:9000/bucket", "AWS_ACCESS_KEY_ID"),
            ("s3:id@host/bucket", "credentials cannot be part"),
            (
                "s3:https://host/Bad_Bucket",
                "not valid: 'B' is not allowed",
            ),
            ("s3:ftp://host/bucket", "only http"),
            ("file:///tmp/r", "\"file\" is not supported"),
            ("S3:host/bucket", "lowercase: s3:host/bucket"),
            ("SFTP:h:/r", "lowercase: sftp:h:/r"),
            ("webdav://h/r", "not supported"),
            ("x-y://h/r", "not supported"),
            ("s3:https://h/bucket/a//b", "empty, '.' or '..'"),
            ("sftp:host", "expected sftp:"),
            ("sftp:host:", "no folder"),
            ("sftp:host:~", "not expanded"),
            ("sftp:host:~/", "not expanded"),
            ("sftp:host:~bob/repo", "not expanded"),
            ("sftp://host/~", "not expanded"),
            ("sftp://host:99999//r", "invalid port"),
            ("sftp:-oProxyCommand=x:/r", "must not start with '-'"),
            ("sftp:@host:/r", "empty user"),
            ("sftp://host//r%2", "invalid escape"),
            ("sftp://host//r%zz", "invalid escape"),
            ("sftp://host//r%ff", "not UTF-8"),
            ("b2:bucket/path", "not supported"),
            ("rest:http://h/", "not supported"),
        ] {
            let e = Location::parse(text).expect_err(text);
            assert!(e.to_string().contains(why), "{text}: {e}");
            assert!(e.to_string().contains(&format!("{text:?}")), "{text}: {e}");
        }
    }
}

//! Remote repositories: S3-compatible object storage through opendal and SFTP through the
//! system's OpenSSH client, behind the synchronous `arca_backend::Backend` trait.
//!
//! [`Location::parse`] reads the location as restic spells it; [`open`] builds the backend.
//! Both backends write atomically (an S3 PUT is; SFTP writes a temporary name, then renames),
//! classify failures into [`arca_backend::ErrorKind`] so the retrying decorator retries only
//! what can heal, and bound the requests in flight (`--connections`).

use std::sync::Arc;

use arca_backend::{Backend, BackendError, ErrorKind, LocalBackend};

pub mod location;
mod runtime;
mod s3;
mod sftp;

pub use location::{Location, LocationError, S3Location, SftpLocation};
pub use s3::{BucketLookup, S3Backend, S3Options};
pub use sftp::{SftpBackend, SftpOptions};

/// Options of the remote backends, from `--connections` and `-o key=value`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteOptions {
    /// Requests in flight at most; `None` takes the backend's default.
    pub connections: Option<usize>,
    /// `-o key=value` options, in the order given.
    pub extended: Vec<(String, String)>,
}

/// Default requests in flight to an S3 server.
pub const S3_CONNECTIONS: usize = 16;
/// Default requests in flight on the SFTP session.
pub const SFTP_CONNECTIONS: usize = 8;

/// The `-o` keys arca knows, with what they take.
pub const EXTENDED_OPTIONS: &[(&str, &str)] = &[
    (
        "s3.bucket-lookup",
        "auto|dns|path: virtual-hosted or path-style requests (auto: dns on AWS, path elsewhere)",
    ),
    (
        "s3.region",
        "signing region (default: AWS_DEFAULT_REGION, AWS_REGION, the profile, or us-east-1)",
    ),
    (
        "s3.storage-class",
        "storage class of new objects, e.g. STANDARD_IA",
    ),
    (
        "s3.profile",
        "profile of ~/.aws/config and ~/.aws/credentials (default: AWS_PROFILE)",
    ),
    (
        "s3.timeout",
        "how long a request may go unanswered before it is abandoned and retried; an upload \
         gets this plus time for its bytes at a slow link's pace (default 120s)",
    ),
    (
        "s3.checksum",
        "crc32c|md5|off: a checksum on every upload, which the server checks, refusing a body \
         damaged on the way (then sent again) (default crc32c, which a server without S3's \
         flexible checksums ignores; md5 is checked by every S3 and costs CPU)",
    ),
    (
        "sftp.command",
        "the whole command that starts the SFTP session, e.g. 'ssh -p 2222 host -s sftp'",
    ),
    (
        "sftp.args",
        "extra arguments for ssh, e.g. '-i ~/.ssh/backup -o ConnectTimeout=5'",
    ),
    (
        "sftp.timeout",
        "how long the server may say nothing while a request waits before the session is given \
         up and the request retried (default 120s)",
    ),
];

impl RemoteOptions {
    /// Parses `-o key=value` arguments, refusing unknown keys. Spaces around the key and the
    /// value are left out, as restic does (`-o " s3.region = eu-west-1"` was refused).
    pub fn parse_extended(args: &[String]) -> Result<Vec<(String, String)>, String> {
        args.iter()
            .map(|a| {
                let (k, v) = a
                    .split_once('=')
                    .map(|(k, v)| (k.trim(), v.trim()))
                    .ok_or_else(|| format!("option {a:?}: expected key=value"))?;
                if !EXTENDED_OPTIONS.iter().any(|(known, _)| *known == k) {
                    let known: Vec<&str> = EXTENDED_OPTIONS.iter().map(|(k, _)| *k).collect();
                    return Err(format!(
                        "option {a:?}: unknown key {k:?} (known: {})",
                        known.join(", ")
                    ));
                }
                Ok((k.to_string(), v.to_string()))
            })
            .collect()
    }

    /// The last value given for `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.extended
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Opens the backend of a location (nothing is created; `Backend::create` does that).
pub fn open(location: &Location, opts: &RemoteOptions) -> Result<Arc<dyn Backend>, BackendError> {
    Ok(match location {
        Location::Local(p) => Arc::new(LocalBackend::new(p)),
        Location::S3(s) => Arc::new(S3Backend::open(s, &S3Options::from_remote(s, opts)?)?),
        Location::Sftp(s) => Arc::new(SftpBackend::open(s, &SftpOptions::from_remote(opts)?)?),
    })
}

/// `30`, `30s` or `5m`: a duration of at least a second.
pub(crate) fn parse_seconds(v: &str) -> Option<std::time::Duration> {
    let v = v.trim();
    let (n, unit) = match v.strip_suffix('m') {
        Some(n) => (n, 60),
        None => (v.strip_suffix('s').unwrap_or(v), 1),
    };
    let secs = n.parse::<u64>().ok()?.checked_mul(unit)?;
    (secs > 0).then(|| std::time::Duration::from_secs(secs))
}

/// An error about the location's configuration (not retried).
pub(crate) fn config_error(location: &str, msg: String) -> BackendError {
    BackendError::new("configure", location, ErrorKind::Other, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_around_an_options_key_and_value_are_left_out() {
        let parsed = RemoteOptions::parse_extended(&[
            " s3.region = eu-west-1 ".to_string(),
            "sftp.args=-i key".to_string(),
        ]);
        assert_eq!(
            parsed,
            Ok(vec![
                ("s3.region".to_string(), "eu-west-1".to_string()),
                ("sftp.args".to_string(), "-i key".to_string()),
            ])
        );
        let e = RemoteOptions::parse_extended(&[" nope =1".to_string()]).unwrap_err();
        assert!(e.contains("unknown key \"nope\""), "{e}");
    }
}

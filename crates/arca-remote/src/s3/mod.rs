//! S3-compatible object storage (AWS S3, MinIO, Ceph RGW, B2, Wasabi, R2) through opendal:
//! signed requests, ranged reads, paginated listings; every PUT is atomic by nature.

use std::time::Duration;

use arca_backend::{
    Backend, BackendError, BackendHints, ErrorKind, FileInfo, FileType, Result, RootKind,
};
use opendal::Operator;
use opendal::layers::TimeoutLayer;
use opendal::services::S3;

use crate::runtime::{Gate, block_on, enter};

mod bucket;
use crate::{RemoteOptions, S3_CONNECTIONS, S3Location, config_error};

/// How requests name the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BucketLookup {
    /// Virtual-hosted (`bucket.host`) on AWS, path-style elsewhere.
    #[default]
    Auto,
    /// Virtual-hosted: `https://bucket.host/key`.
    Dns,
    /// Path-style: `https://host/bucket/key` (MinIO, Ceph and most self-hosted servers).
    Path,
}

/// Options of an S3 repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Options {
    /// Requests in flight at most.
    pub connections: usize,
    /// Bucket addressing.
    pub bucket_lookup: BucketLookup,
    /// Signing region; `None`: `AWS_REGION`, `AWS_DEFAULT_REGION`, else `us-east-1`.
    pub region: Option<String>,
    /// Storage class of new objects.
    pub storage_class: Option<String>,
    /// Profile of the AWS configuration files; `None`: `AWS_PROFILE`.
    pub profile: Option<String>,
    /// `s3.timeout`: longest time a request may take before it is abandoned (and retried);
    /// an upload gets this plus its size at [`SLOWEST_UPLOAD`] bytes a second.
    pub timeout: Duration,
    /// Longest wait for the server's first answer (the first requests are small: the config,
    /// a listing); a server that accepts connections and stays silent, or an address whose
    /// packets are dropped, is reported after this instead of after `timeout`.
    pub first_answer: Duration,
    /// `s3.checksum`: the checksum every upload carries for the server to check its body
    /// against, refusing a body damaged on the way: `crc32c` (the default: next to free, and
    /// a server without S3's flexible checksums ignores it), `md5` (`Content-MD5`, which
    /// every S3 checks, at about 2 s of CPU per GiB here), or `None` (`off`).
    pub checksum: Option<&'static str>,
    /// Access key id and secret given explicitly (tests); `None`: the usual AWS environment
    /// variables and configuration files.
    pub credentials: Option<(String, String)>,
}

impl S3Options {
    /// From `--connections` and the `s3.*` options.
    pub fn from_remote(loc: &S3Location, o: &RemoteOptions) -> Result<Self> {
        let bucket_lookup = match o.get("s3.bucket-lookup") {
            None | Some("auto") => BucketLookup::Auto,
            Some("dns") => BucketLookup::Dns,
            Some("path") => BucketLookup::Path,
            Some(v) => {
                return Err(config_error(
                    &loc.to_string(),
                    format!("s3.bucket-lookup {v:?}: expected auto, dns or path"),
                ));
            }
        };
        let nonempty = |k: &str| o.get(k).filter(|v| !v.is_empty()).map(str::to_string);
        let timeout = match o.get("s3.timeout") {
            None => DEFAULT_TIMEOUT,
            Some(v) => crate::parse_seconds(v).ok_or_else(|| {
                config_error(
                    &loc.to_string(),
                    format!("s3.timeout {v:?}: expected seconds (30, 30s, 5m) of at least 1 s"),
                )
            })?,
        };
        let checksum = match o.get("s3.checksum") {
            Some("off") => None,
            None | Some("crc32c") => Some("crc32c"),
            Some("md5") => Some("md5"),
            Some(v) => {
                return Err(config_error(
                    &loc.to_string(),
                    format!("s3.checksum {v:?}: expected crc32c, md5 or off"),
                ));
            }
        };
        Ok(Self {
            checksum,
            connections: o.connections.unwrap_or(S3_CONNECTIONS).max(1),
            bucket_lookup,
            region: nonempty("s3.region"),
            storage_class: nonempty("s3.storage-class"),
            profile: nonempty("s3.profile"),
            timeout,
            first_answer: Duration::from_secs(30),
            credentials: None,
        })
    }
}

/// `s3.timeout` when not given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The slowest pace, in bytes a second, an upload is given time for on top of
/// [`S3Options::timeout`] (256 kbit/s): a PUT sends its whole body before the server answers,
/// so one deadline of `timeout` for it failed every pack upload on a link slower than the
/// pack size per `timeout` (16 MiB in 120 s, about 1.1 Mbit/s per connection), retried
/// until the backup gave up.
pub const SLOWEST_UPLOAD: u64 = 32 * 1024;

/// How the message of an upload [`S3Backend::write`] gave up on begins.
const UPLOAD_TOO_SLOW: &str = "the server did not take the upload of";

/// What a listing of the location ([`S3Backend::first_object`]) says is there: a prefix
/// holding objects is something, not a repository; none is nothing. A listing that failed (no
/// bucket) cannot tell.
fn root_kind_of(first: &Result<opendal::Result<Option<opendal::Entry>>>) -> RootKind {
    match first {
        Ok(Ok(Some(_))) => RootKind::Folder,
        Ok(Ok(None)) => RootKind::Nothing,
        _ => RootKind::Unknown,
    }
}

/// The message of a first request that got no answer within [`S3Options::first_answer`].
const NO_FIRST_ANSWER: &str = "no first answer from the server";

/// A repository in an S3 bucket, under a prefix.
#[derive(Debug)]
pub struct S3Backend {
    op: Operator,
    /// `op` without the timeout layer's bound on a body's transfer: uploads, which
    /// [`S3Backend::write`] bounds by their size instead.
    put: Operator,
    loc: S3Location,
    shown: String,
    gate: Gate,
    opts: S3Options,
    region: String,
    dns: bool,
    /// Set once the server has answered a request: from then on a refused connection is a
    /// restart or an outage to wait out (retried), not a wrong address to report at once.
    reached: std::sync::atomic::AtomicBool,
    /// Set when a first request got no answer in time: asking the same silent server what
    /// its bucket holds (to word the error) waited as long again.
    silent: std::sync::atomic::AtomicBool,
    /// Connections closed before any answer ever came, in a row: a network that resets now
    /// and then (retried), or, three times over, plain HTTP sent to a TLS port (reported).
    hangups: std::sync::atomic::AtomicU32,
    /// What the listing made by a failed read of the config found at the location, kept for
    /// the [`Backend::root_kind`] asked next, which would otherwise list again.
    seen: std::sync::Mutex<Option<RootKind>>,
}

impl S3Backend {
    /// Prepares the client (no request is sent: credentials and the bucket are checked by the
    /// first request).
    pub fn open(loc: &S3Location, opts: &S3Options) -> Result<Self> {
        let shown = loc.to_string();
        let _rt = enter(&shown)?;
        // The process-wide HTTP client (reqwest); installing it again is a no-op.
        opendal::install_default();
        let region = opts
            .region
            .clone()
            .or_else(|| env_nonempty("AWS_REGION"))
            .or_else(|| env_nonempty("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| "us-east-1".to_string());
        let root = if loc.prefix.is_empty() {
            "/".to_string()
        } else {
            format!("/{}/", loc.prefix)
        };
        let mut b = S3::default()
            .bucket(&loc.bucket)
            .endpoint(&loc.endpoint)
            .region(&region)
            .root(&root);
        let dns = match opts.bucket_lookup {
            BucketLookup::Dns => true,
            BucketLookup::Path => false,
            BucketLookup::Auto => is_aws(&loc.endpoint),
        };
        if dns {
            b = b.enable_virtual_host_style();
        }
        if let Some(p) = &opts.profile {
            b = b.profile(p);
        }
        if let Some((id, secret)) = &opts.credentials {
            b = b.access_key_id(id).secret_access_key(secret);
        }
        if let Some(c) = &opts.storage_class {
            b = b.default_storage_class(c);
        }
        if let Some(c) = opts.checksum {
            b = b.checksum_algorithm(c);
        }
        let op = Operator::new(b).map_err(|e| config_error(&shown, e.message().to_string()))?;
        let put = op.clone().layer(
            TimeoutLayer::new()
                .with_timeout(opts.timeout)
                .with_io_timeout(Duration::MAX / 4),
        );
        let op = op.layer(
            TimeoutLayer::new()
                .with_timeout(opts.timeout)
                .with_io_timeout(opts.timeout),
        );
        Ok(Self {
            op,
            put,
            loc: loc.clone(),
            shown,
            gate: Gate::new(opts.connections),
            opts: opts.clone(),
            region,
            dns,
            reached: std::sync::atomic::AtomicBool::new(false),
            silent: std::sync::atomic::AtomicBool::new(false),
            hangups: std::sync::atomic::AtomicU32::new(0),
            seen: std::sync::Mutex::new(None),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.shown)
    }

    /// Runs one request under the connection limit, mapping its error.
    fn run<T>(
        &self,
        op: &'static str,
        path: &str,
        f: impl std::future::IntoFuture<Output = opendal::Result<T>>,
    ) -> Result<T> {
        self.run_raw(f)?.map_err(|e| self.error(op, path, &e))
    }

    /// As [`Self::run`], leaving opendal's error to the caller.
    /// The first object at the location (the bucket or prefix), if any: one request of one
    /// key (two when the prefix's own folder entry comes first). Awaiting `list_with(..)
    /// .limit(1)` walked the whole bucket one key per request, for minutes on a busy bucket,
    /// and `init` then reported that the server never answered (hunt 23).
    fn first_object(&self) -> Result<opendal::Result<Option<opendal::Entry>>> {
        let op = self.op.clone();
        self.run_raw(async move {
            use futures_util::TryStreamExt;
            let mut lister = op.lister_with("").limit(1).recursive(true).await?;
            for _ in 0..3 {
                match lister.try_next().await? {
                    Some(e) if e.path() == "/" || e.path().is_empty() => continue,
                    other => return Ok(other),
                }
            }
            Ok(None)
        })
    }

    /// Keeps what is at the location for the next [`Backend::root_kind`].
    fn remember(&self, kind: RootKind) {
        if let Ok(mut s) = self.seen.lock() {
            *s = Some(kind);
        }
    }

    fn run_raw<T>(
        &self,
        f: impl std::future::IntoFuture<Output = opendal::Result<T>>,
    ) -> Result<opendal::Result<T>> {
        let _pass = self.gate.enter();
        let fut = f.into_future();
        let limit = (!self.reached.load(std::sync::atomic::Ordering::Relaxed))
            .then_some(self.opts.first_answer);
        let r = block_on(&self.shown, async move {
            match limit {
                None => fut.await,
                Some(l) => tokio::time::timeout(l, fut).await.unwrap_or_else(|_| {
                    self.silent
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    Err(
                        opendal::Error::new(opendal::ErrorKind::Unexpected, NO_FIRST_ANSWER)
                            .set_temporary(),
                    )
                }),
            }
        })?;
        // Any answer, an error status included, shows the server is there.
        let answered = match &r {
            Ok(_) => true,
            Err(e) => unreachable(e).is_none() && !e.is_temporary(),
        };
        if answered {
            self.reached
                .store(true, std::sync::atomic::Ordering::Relaxed);
            self.hangups.store(0, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(r)
    }

    /// Creates the bucket (init on a bucket that does not exist yet).
    fn create_bucket(&self) -> Result<()> {
        let url = if self.dns {
            format!("{}/", self.contacted())
        } else {
            format!("{}/{}", self.loc.endpoint, self.loc.bucket)
        };
        let o = &self.opts;
        let req = bucket::CreateBucket {
            url,
            region: &self.region,
            profile: o.profile.as_deref(),
            credentials: o
                .credentials
                .as_ref()
                .map(|(a, b)| (a.as_str(), b.as_str())),
            timeout: o.timeout,
        };
        block_on(&self.shown, bucket::create_bucket(req))?.map_err(|why| {
            BackendError::new(
                "create bucket",
                self.shown.clone(),
                ErrorKind::Other,
                format!(
                    "bucket {:?} does not exist and could not be created: {why}",
                    self.loc.bucket
                ),
            )
        })
    }

    /// The address requests go to, for messages: with virtual-hosted requests
    /// (`s3.bucket-lookup=dns`, or AWS) the bucket is part of the host name, and that host is
    /// the one that does not resolve or answer.
    fn contacted(&self) -> String {
        if !self.dns {
            return self.loc.endpoint.clone();
        }
        let (scheme, host) = self
            .loc
            .endpoint
            .split_once("://")
            .unwrap_or(("https", &self.loc.endpoint));
        format!("{scheme}://{}.{host}", self.loc.bucket)
    }

    /// What a missing bucket is said to be.
    fn no_bucket(&self) -> String {
        format!(
            "bucket {:?} does not exist at {} (init creates it; else check the location)",
            self.loc.bucket, self.loc.endpoint
        )
    }

    /// The server gave no answer within `waited`: name it, and what to check.
    fn no_answer(&self, waited: Duration) -> String {
        format!(
            "no answer from {} within {} s: check the address and that the server is up (a \
             firewall that drops the traffic looks the same)",
            self.contacted(),
            waited.as_secs()
        )
    }

    /// No credentials were found: when a profile was named (the user did set it), that it
    /// holds none; else where they are looked for.
    fn no_credentials(&self) -> String {
        let named = self
            .opts
            .profile
            .clone()
            .map(|p| (p, "-o s3.profile"))
            .or_else(|| {
                std::env::var("AWS_PROFILE")
                    .ok()
                    .filter(|p| !p.trim().is_empty())
                    .map(|p| (p, "AWS_PROFILE"))
            });
        match named {
            Some((p, from)) => format!(
                "no S3 credentials: the profile {p:?} ({from}) has none in ~/.aws/credentials \
                 or ~/.aws/config (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE), or is not there"
            ),
            None => "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or \
                     AWS_PROFILE)"
                .into(),
        }
    }

    fn error(&self, op: &'static str, path: &str, e: &opendal::Error) -> BackendError {
        let code = s3_code(e.message());
        let location = self.url(path);
        let (kind, msg) = match (e.kind(), code.as_deref()) {
            // Not NotFound: a listing of a bucket gone would read as empty, a file in it as
            // missing. Only opening a repository (reading its config) makes it NotFound, in
            // `read`.
            (_, Some("NoSuchBucket")) => (ErrorKind::Other, self.no_bucket()),
            // Names with '_' are valid for older AWS buckets only; most servers refuse them.
            (_, Some("InvalidBucketName")) => (
                ErrorKind::Other,
                format!(
                    "the server refused the bucket name {:?} as not valid (InvalidBucketName): \
                     most servers take only lowercase letters, digits, '.' and '-'",
                    self.loc.bucket
                ),
            ),
            _ if e.to_string().contains("failed to load signing credential") => {
                (ErrorKind::PermissionDenied, self.no_credentials())
            }
            (_, Some(c @ ("InvalidAccessKeyId" | "SignatureDoesNotMatch"))) => (
                ErrorKind::PermissionDenied,
                format!(
                    "the server refused the credentials ({c}): check AWS_ACCESS_KEY_ID and \
                     AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
                ),
            ),
            (opendal::ErrorKind::PermissionDenied, c) => (
                ErrorKind::PermissionDenied,
                format!(
                    "access denied ({}): check the credentials and the bucket's policy",
                    c.unwrap_or("403")
                ),
            ),
            (opendal::ErrorKind::NotFound, _) => (ErrorKind::NotFound, "not found".to_string()),
            (opendal::ErrorKind::RangeNotSatisfied, _) => (
                ErrorKind::ShortRead,
                "the object ends before the range".into(),
            ),
            (opendal::ErrorKind::RateLimited, _) => (
                ErrorKind::Transient,
                format!("throttled ({})", code.as_deref().unwrap_or("429")),
            ),
            (opendal::ErrorKind::ConfigInvalid, _) => (
                ErrorKind::Other,
                format!("invalid configuration: {}", one_line(e)),
            ),
            (_, Some("SlowDown")) => (ErrorKind::Transient, "throttled (SlowDown)".into()),
            // The body did not match the checksum the upload carried (`s3.checksum`): damaged
            // on the way, and refused; sent again, it arrives whole.
            (_, Some(c @ ("BadDigest" | "InvalidDigest" | "XAmzContentChecksumMismatch"))) => (
                ErrorKind::Transient,
                format!("the server refused the upload: its body was damaged on the way ({c})"),
            ),
            // The server sent fewer bytes than asked for: opendal checks the length.
            (_, None) if e.message().contains("too little data") => (
                ErrorKind::ShortRead,
                "the object ends before the range".into(),
            ),
            (_, Some("InvalidRange")) => (
                ErrorKind::ShortRead,
                "the object ends before the range".into(),
            ),
            // The server answered before: it is restarting or the network is down for a
            // while; retried as other transient failures are.
            _ if let Some(why) = unreachable(e)
                && self.reached.load(std::sync::atomic::Ordering::Relaxed) =>
            {
                (
                    ErrorKind::Transient,
                    format!("cannot reach {} ({why})", self.contacted()),
                )
            }
            // Connections closed before any answer ever came: once, a network that resets
            // (retried); three times in a row, most likely plain HTTP sent to a TLS port,
            // which was retried for a minute.
            _ if !self.reached.load(std::sync::atomic::Ordering::Relaxed)
                && self.loc.endpoint.starts_with("http://")
                && causes(e)
                    .join(": ")
                    .to_ascii_lowercase()
                    .contains("connection closed before message completed") =>
            {
                let n = self
                    .hangups
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    + 1;
                (
                    if n >= 3 {
                        ErrorKind::Other
                    } else {
                        ErrorKind::Transient
                    },
                    format!(
                        "cannot reach {}: the server closed the connection without an answer \
                         (if it speaks TLS, write s3:https://...)",
                        self.contacted()
                    ),
                )
            }
            _ if let Some(why) = unreachable(e) => (
                ErrorKind::Other,
                format!(
                    "cannot reach {} ({why}): check the address and that the server is up",
                    self.contacted()
                ),
            ),
            // The server never answered: a wrong address, not an outage to wait out.
            _ if e.message() == NO_FIRST_ANSWER => {
                (ErrorKind::Other, self.no_answer(self.opts.first_answer))
            }
            _ if e.message().starts_with(UPLOAD_TOO_SLOW) => {
                (ErrorKind::Transient, e.message().to_string())
            }
            // The timeout layer's own error ("io operation timeout reached"): say who did not
            // answer, and for how long.
            _ if e.message().contains("timeout reached") => {
                (ErrorKind::Transient, self.no_answer(self.opts.timeout))
            }
            _ if e.is_temporary() => (ErrorKind::Transient, one_line(e)),
            _ => (ErrorKind::Other, one_line(e)),
        };
        BackendError::new(op, location, kind, msg)
    }

    fn read_into(&self, path: &str, offset: u64, len: u64, out: &mut Vec<u8>) -> Result<()> {
        if len == 0 {
            // S3 has no empty range; check the object is long enough instead.
            let size = self.run("stat", path, self.op.stat(path))?.content_length();
            out.clear();
            return if offset <= size {
                Ok(())
            } else {
                Err(self.short(path, offset, len, size))
            };
        }
        // The body is copied into `out` piece by piece as it arrives, while each piece is
        // still in the cache (collecting it whole first, then copying, costs a second pass
        // over memory and twice the memory per request).
        out.clear();
        out.reserve(len as usize);
        let op = &self.op;
        let body = &mut *out;
        self.run("read", path, async move {
            op.reader(path)
                .await?
                .read_into(body, offset..offset + len)
                .await
        })?;
        if (out.len() as u64) < len {
            return Err(self.short(path, offset, len, offset + out.len() as u64));
        }
        Ok(())
    }

    fn short(&self, path: &str, offset: u64, len: u64, size: u64) -> BackendError {
        BackendError::new(
            "read",
            self.url(path),
            ErrorKind::ShortRead,
            format!("wanted {len} bytes at offset {offset}, the object ends at {size}"),
        )
    }
}

/// How long an upload of `len` bytes may take: `timeout` plus its bytes at
/// [`SLOWEST_UPLOAD`].
fn upload_deadline(timeout: Duration, len: usize) -> Duration {
    timeout.saturating_add(Duration::from_secs(len as u64 / SLOWEST_UPLOAD))
}

fn env_nonempty(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

/// Whether the endpoint is AWS's (which wants virtual-hosted requests).
fn is_aws(endpoint: &str) -> bool {
    let host = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, h)| h)
        .split([':', '/'])
        .next()
        .unwrap_or("");
    host == "amazonaws.com" || host.ends_with(".amazonaws.com")
}

/// The S3 error code (`NoSuchBucket`, `SlowDown`, ...) in an opendal error message.
fn s3_code(message: &str) -> Option<String> {
    let start = message.find("code: \"")? + "code: \"".len();
    let len = message[start..].find('"')?;
    Some(message[start..start + len].to_string()).filter(|c| !c.is_empty())
}

/// The error's message on one line, without opendal's response dump.
fn one_line(e: &opendal::Error) -> String {
    let m = e.message();
    let m = match s3_code(m) {
        Some(code) => {
            let text = m
                .find("message: \"")
                .map(|s| &m[s + "message: \"".len()..])
                .and_then(|r| r.split('"').next())
                .unwrap_or("");
            format!("{code}: {text}")
        }
        None => m.lines().next().unwrap_or("").to_string(),
    };
    let mut s = format!("{} ({})", m.trim(), e.kind());
    for cause in causes(e) {
        s.push_str(": ");
        s.push_str(&cause);
    }
    s
}

/// The messages of an error's causes, outermost first, each once.
fn causes(e: &opendal::Error) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut next = std::error::Error::source(e);
    while let Some(c) = next {
        let text = c.to_string();
        if !out.iter().any(|o| o.contains(&text)) {
            out.push(text);
        }
        next = c.source();
    }
    out
}

/// Why a connection could not be made, when that is what failed: the server is down or the
/// name does not resolve, which retrying will not fix.
fn unreachable(e: &opendal::Error) -> Option<String> {
    let chain = causes(e).join(": ").to_ascii_lowercase();
    [
        ("connection refused", "connection refused"),
        ("dns error", "the host name does not resolve"),
        ("failed to lookup address", "the host name does not resolve"),
        ("no route to host", "no route to host"),
        ("network is unreachable", "the network is unreachable"),
        (
            "invalid peer certificate",
            "the server's TLS certificate is not trusted",
        ),
        // What rustls says when a plain-HTTP server answers a TLS hello (s3:host/... implies
        // https).
        (
            "invalidcontenttype",
            "the server does not answer in TLS; for a plain-HTTP server write \
             s3:http://host:port/bucket",
        ),
        ("certificate", "TLS certificate problem"),
    ]
    .into_iter()
    .find(|(needle, _)| chain.contains(needle))
    .map(|(_, why)| why.to_string())
}

impl Backend for S3Backend {
    fn location(&self) -> String {
        self.shown.clone()
    }

    fn create(&self) -> Result<()> {
        // A repository may only be created where nothing is: listing one key tells.
        let list = || self.first_object();
        let first = match list()? {
            Err(e) if s3_code(e.message()).as_deref() == Some("NoSuchBucket") => {
                self.create_bucket()?;
                list()?
            }
            other => other,
        }
        .map_err(|e| self.error("list", "", &e))?;
        if let Some(e) = first {
            let what = if e.path() == "config" {
                "a repository already exists there"
            } else {
                "the location already holds other objects (use an empty bucket or prefix)"
            };
            return Err(BackendError::new(
                "create",
                self.shown.clone(),
                ErrorKind::AlreadyExists,
                what.to_string(),
            ));
        }
        Ok(())
    }

    fn list(&self, t: FileType) -> Result<Vec<FileInfo>> {
        if t == FileType::Config {
            return arca_backend::list_config(self);
        }
        let dir = format!("{}/", t.dir());
        let entries = self.run("list", &dir, self.op.list_with(&dir).recursive(true))?;
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            let name = e.name();
            // Only where the file is read and deleted: the listing is recursive, and a stray
            // copy elsewhere under the folder would be listed as a second file of that id.
            if !arca_backend::is_file_id(name)
                || e.metadata().is_dir()
                || e.path().trim_start_matches('/') != t.path(name)
            {
                continue;
            }
            // S3 listings carry every object's size.
            let size = e.metadata().content_length();
            out.push(FileInfo {
                name: name.to_string(),
                size,
            });
        }
        Ok(out)
    }

    fn read(&self, t: FileType, name: &str) -> Result<Vec<u8>> {
        let path = t.path(name);
        let e = match self.run_raw(self.op.read(&path))? {
            Ok(buf) => return Ok(buf.to_vec()),
            Err(e) => e,
        };
        let no_bucket =
            |e: &opendal::Error| s3_code(e.message()).as_deref() == Some("NoSuchBucket");
        // No config because there is no bucket: no repository at the location, as a missing
        // prefix (restic's exit code 10; it was 1), saying it is the bucket that is missing.
        // The answer to the read may not tell (no body): a listing does.
        // The listing also tells what is at the location: kept for root_kind, asked next on
        // this error path (it listed again: two listings for one message).
        let missing_bucket = t == FileType::Config
            && (no_bucket(&e)
                || (e.kind() == opendal::ErrorKind::NotFound && {
                    let first = self.first_object();
                    self.remember(root_kind_of(&first));
                    first?.is_err_and(|pe| no_bucket(&pe))
                }));
        if missing_bucket {
            // No bucket, no listing that could tell more.
            self.remember(RootKind::Unknown);
            return Err(BackendError::new(
                "read",
                self.url(&path),
                ErrorKind::NotFound,
                self.no_bucket(),
            ));
        }
        Err(self.error("read", &path, &e))
    }

    fn read_range(&self, t: FileType, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.read_into(&t.path(name), offset, len, &mut out)?;
        Ok(out)
    }

    fn read_range_into(
        &self,
        t: FileType,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        self.read_into(&t.path(name), offset, len, buf)
    }

    /// A prefix holding objects is something there, not a repository; none is nothing. A
    /// listing that fails (no bucket: the read of the config said so) cannot tell. What the
    /// failed read of the config found is used, once, without another request.
    fn root_kind(&self) -> RootKind {
        if self.silent.load(std::sync::atomic::Ordering::Relaxed) {
            return RootKind::Unknown;
        }
        let seen = self.seen.lock().map(|mut s| s.take()).unwrap_or(None);
        seen.unwrap_or_else(|| root_kind_of(&self.first_object()))
    }

    fn hints(&self) -> BackendHints {
        BackendHints {
            local: false,
            connections: Some(self.gate.limit()),
            ..Default::default()
        }
    }

    fn write(&self, t: FileType, name: &str, data: &[u8]) -> Result<()> {
        let path = t.path(name);
        let body = opendal::Buffer::from(data.to_vec());
        let limit = upload_deadline(self.opts.timeout, data.len());
        let put = self.put.write(&path, body);
        let bounded = async move {
            tokio::time::timeout(limit, put).await.unwrap_or_else(|_| {
                Err(opendal::Error::new(
                    opendal::ErrorKind::Unexpected,
                    format!(
                        "{UPLOAD_TOO_SLOW} {} bytes within {} s (s3.timeout, plus time for the \
                         bytes at 256 kbit/s)",
                        data.len(),
                        limit.as_secs()
                    ),
                )
                .set_temporary())
            })
        };
        self.run_raw(bounded)?
            .map_err(|e| self.error("write", &path, &e))
            .map(|_| ())
    }

    fn delete(&self, t: FileType, name: &str) -> Result<()> {
        // S3 deletes a missing key without complaint; the trait wants NotFound.
        let path = t.path(name);
        self.run("stat", &path, self.op.stat(&path))?;
        self.remove(t, name)
    }

    fn remove(&self, t: FileType, name: &str) -> Result<()> {
        let path = t.path(name);
        self.run("delete", &path, self.op.delete(&path))
    }

    fn stat(&self, t: FileType, name: &str) -> Result<FileInfo> {
        let path = t.path(name);
        let m = self.run("stat", &path, self.op.stat(&path))?;
        Ok(FileInfo {
            name: name.to_string(),
            size: m.content_length(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_endpoints_are_recognised() {
        assert!(is_aws("https://s3.amazonaws.com"));
        assert!(is_aws("https://s3.eu-west-1.amazonaws.com:443/"));
        assert!(!is_aws("http://127.0.0.1:9000"));
        assert!(!is_aws("https://notamazonaws.com"));
    }

    #[test]
    fn s3_error_codes_are_found() {
        let m =
            r#"S3Error { code: "SlowDown", message: "Reduce your request rate.", resource: "" }"#;
        assert_eq!(s3_code(m).as_deref(), Some("SlowDown"));
        assert_eq!(s3_code("connection reset"), None);
    }

    #[test]
    fn a_plain_http_server_behind_an_https_location_is_named() {
        let e = opendal::Error::new(opendal::ErrorKind::Unexpected, "send http request")
            .set_source(std::io::Error::other(
                "received corrupt message of type InvalidContentType",
            ));
        let why = unreachable(&e).unwrap();
        assert!(why.contains("s3:http://"), "{why}");
    }

    /// A server that accepts the connection and never answers ran into the timeout layer,
    /// whose message was all the user saw: "io operation timeout reached (Unexpected)".
    #[test]
    fn a_request_timeout_names_the_silent_server() {
        let loc = S3Location {
            endpoint: "http://127.0.0.1:9".into(),
            bucket: "bkt".into(),
            prefix: "r".into(),
        };
        let opts = S3Options::from_remote(&loc, &RemoteOptions::default()).unwrap();
        let b = S3Backend::open(&loc, &opts).unwrap();
        let e = opendal::Error::new(
            opendal::ErrorKind::Unexpected,
            "io operation timeout reached",
        )
        .set_temporary();
        let err = b.error("read", "config", &e);
        assert_eq!(err.kind, ErrorKind::Transient);
        let text = err.to_string();
        assert!(
            text.contains("no answer from http://127.0.0.1:9 within 120 s"),
            "{text}"
        );
        assert!(text.contains("bkt/r/config"), "{text}");
    }

    /// With virtual-hosted requests the bucket is part of the host: messages named the
    /// endpoint, a host that resolved and answered, while `bkt.minio.lan` was the one that did
    /// not.
    #[test]
    fn virtual_hosted_requests_name_the_host_contacted() {
        let loc = S3Location {
            endpoint: "http://minio.lan:9000".into(),
            bucket: "bkt".into(),
            prefix: "r".into(),
        };
        let o = RemoteOptions {
            extended: vec![("s3.bucket-lookup".into(), "dns".into())],
            ..RemoteOptions::default()
        };
        let opts = S3Options::from_remote(&loc, &o).unwrap();
        let b = S3Backend::open(&loc, &opts).unwrap();
        assert_eq!(b.contacted(), "http://bkt.minio.lan:9000");
        let e = opendal::Error::new(
            opendal::ErrorKind::Unexpected,
            "io operation timeout reached",
        )
        .set_temporary();
        let text = b.error("read", "config", &e).to_string();
        assert!(
            text.contains("no answer from http://bkt.minio.lan:9000 within"),
            "{text}"
        );
        let path = S3Options::from_remote(&loc, &RemoteOptions::default()).unwrap();
        let b = S3Backend::open(&loc, &path).unwrap();
        assert_eq!(b.contacted(), "http://minio.lan:9000");
    }

    /// A server that accepts connections and never answers was waited for 120 s (the whole
    /// request timeout) before the first command failed.
    #[test]
    fn a_silent_server_is_given_up_on_at_the_first_request() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while let Ok((c, _)) = l.accept() {
                held.push(c);
            }
        });
        let loc = S3Location {
            endpoint: format!("http://127.0.0.1:{port}"),
            bucket: "bkt".into(),
            prefix: "r".into(),
        };
        let mut opts = S3Options::from_remote(&loc, &RemoteOptions::default()).unwrap();
        assert_eq!(opts.first_answer, Duration::from_secs(30));
        opts.first_answer = Duration::from_secs(1);
        opts.credentials = Some(("id".into(), "secret".into()));
        let b = S3Backend::open(&loc, &opts).unwrap();
        let start = std::time::Instant::now();
        let err = b.read(FileType::Config, "").unwrap_err();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(err.kind, ErrorKind::Other, "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&format!(
                "no answer from http://127.0.0.1:{port} within 1 s"
            )),
            "{text}"
        );
        // Wording the error does not ask the silent server again (opening a repository
        // waited twice).
        let start = std::time::Instant::now();
        assert!(matches!(b.root_kind(), RootKind::Unknown));
        assert!(start.elapsed() < Duration::from_millis(500));
    }

    /// A server that closes every connection before answering (plain HTTP sent to a TLS
    /// port) was retried for a minute as an outage, then named three times over; after three
    /// such hang-ups in a row it is reported, pointing at s3:https://.
    #[test]
    fn a_server_that_hangs_up_at_once_is_reported_at_once() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            while let Ok((mut c, _)) = l.accept() {
                let mut buf = [0u8; 1024];
                let _ = std::io::Read::read(&mut c, &mut buf);
                drop(c);
            }
        });
        let loc = S3Location {
            endpoint: format!("http://127.0.0.1:{port}"),
            bucket: "bkt".into(),
            prefix: "r".into(),
        };
        let mut opts = S3Options::from_remote(&loc, &RemoteOptions::default()).unwrap();
        opts.credentials = Some(("id".into(), "secret".into()));
        let b = S3Backend::open(&loc, &opts).unwrap();
        // Once or twice, a network that resets (retried); the third time in a row, final.
        for kind in [ErrorKind::Transient, ErrorKind::Transient, ErrorKind::Other] {
            let err = b.read(FileType::Config, "").unwrap_err();
            assert_eq!(err.kind, kind, "{err}");
            let text = err.to_string();
            assert!(text.contains("s3:https://"), "{text}");
        }
    }

    #[test]
    fn options_are_checked() {
        let loc = S3Location {
            endpoint: "http://h".into(),
            bucket: "b".into(),
            prefix: String::new(),
        };
        let mut o = RemoteOptions::default();
        let s = S3Options::from_remote(&loc, &o).unwrap();
        assert_eq!(s.connections, S3_CONNECTIONS);
        assert_eq!(s.bucket_lookup, BucketLookup::Auto);
        o.connections = Some(3);
        o.extended = vec![
            ("s3.bucket-lookup".into(), "path".into()),
            ("s3.region".into(), "eu-west-1".into()),
        ];
        let s = S3Options::from_remote(&loc, &o).unwrap();
        assert_eq!(
            (s.connections, s.bucket_lookup, s.region.as_deref()),
            (3, BucketLookup::Path, Some("eu-west-1"))
        );
        o.extended = vec![("s3.bucket-lookup".into(), "sideways".into())];
        let e = S3Options::from_remote(&loc, &o).unwrap_err();
        assert!(e.to_string().contains("sideways"), "{e}");
    }
}

//! The SFTP requests behind the backend: large transfers split into concurrent requests,
//! and the client's errors sorted into what the backend reports and when a session is lost.

use std::io::SeekFrom;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use arca_backend::ErrorKind;
use futures_util::{StreamExt, TryStreamExt, stream};
use openssh_sftp_client::Error as SftpError;
use openssh_sftp_client::error::SftpErrorKind;
use openssh_sftp_client::file::File;
use tokio::io::AsyncSeek;

/// Bytes per read or write request: OpenSSH's sftp-server caps both at 255 KiB
/// (`limits@openssh.com`), and the client splits anything larger anyway.
pub(super) const CHUNK: usize = 255 * 1024;

/// Requests of one call in flight at once (ssh's channel window, 2 MiB, bounds what moves in
/// parallel anyway).
const WINDOW: usize = 16;

/// Why an SFTP operation failed, before it becomes a [`BackendError`].
pub(super) enum Fail {
    Sftp(SftpError),
    /// The file ends at this offset, before the requested range does.
    Short(u64),
    Kind(ErrorKind, String),
}

impl From<SftpError> for Fail {
    fn from(e: SftpError) -> Self {
        Fail::Sftp(e)
    }
}

/// What an SFTP client error means for us.
pub(super) enum Class {
    /// The server answered with this status.
    Status(ErrorKind, String),
    /// The connection or the session is gone.
    Lost(String),
    Other(String),
}

pub(super) fn class(e: &SftpError) -> Class {
    match e {
        SftpError::SftpError(code, msg) => {
            let text = msg.get().0.to_string();
            let kind = match code {
                SftpErrorKind::NoSuchFile => ErrorKind::NotFound,
                SftpErrorKind::PermDenied => ErrorKind::PermissionDenied,
                _ => ErrorKind::Other,
            };
            let text = match code {
                // Said as the other backends say it: the server's words (OpenSSH's "No such
                // file", for a file in the way too) add nothing, and a missing repository,
                // which leaves a bare "not found" out, read "… does not exist: No such file".
                SftpErrorKind::NoSuchFile => "not found".to_string(),
                SftpErrorKind::Failure => format!(
                    "the server reported a failure ({text:?}; OpenSSH's server reports a full \
                     disk, an exceeded quota or an existing name this way)"
                ),
                SftpErrorKind::OpUnsupported => {
                    format!("the server does not support this operation ({text:?})")
                }
                _ => text,
            };
            Class::Status(kind, text)
        }
        SftpError::RecursiveErrors(r) => class(&r.original_error),
        SftpError::RecursiveErrors3(r) => class(&r.err1),
        SftpError::IOError(_)
        | SftpError::BackgroundTaskFailure(_)
        | SftpError::AwaitableError(_)
        | SftpError::TaskJoinError(_)
        | SftpError::InvalidResponse(_)
        | SftpError::InvalidResponseId { .. }
        | SftpError::FormatError(_) => Class::Lost(e.to_string()),
        e => Class::Other(e.to_string()),
    }
}

pub(super) use arca_backend::is_file_id as is_id;

/// `dir/name`, where an empty `dir` is the login folder and `/` the root.
pub(super) fn join(dir: &str, name: &str) -> String {
    match dir {
        "" => name.to_string(),
        d if d.ends_with('/') => format!("{d}{name}"),
        d => format!("{d}/{name}"),
    }
}

/// A name for a temporary file no other writer picks.
pub(super) fn temp_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut b = [0u8; 8];
    if getrandom::getrandom(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        b = (t ^ n.rotate_left(40) ^ u64::from(std::process::id()).rotate_left(20)).to_le_bytes();
    }
    format!(".tmp-{}", hex::encode(b))
}

/// Whether `name` is a temporary file (see [`temp_name`]) whose last modification, when the
/// server gave it, lies more than `older_than` before `now` (one without a time is left).
pub(super) fn is_stale_temp(
    name: &str,
    modified: Option<SystemTime>,
    now: SystemTime,
    older_than: Duration,
) -> bool {
    name.starts_with(".tmp-")
        && modified.is_some_and(|t| now.duration_since(t).is_ok_and(|age| age > older_than))
}

pub(super) fn seek(f: &mut File, at: u64) -> Result<(), Fail> {
    Pin::new(f)
        .start_seek(SeekFrom::Start(at))
        .map_err(|e| Fail::Kind(ErrorKind::Other, format!("seek to {at}: {e}")))
}

/// Reads into `out` from `at` until it is full or the file ends; returns the bytes read.
pub(super) async fn read_upto(f: &mut File, at: u64, out: &mut [u8]) -> Result<usize, Fail> {
    let mut filled = 0;
    while filled < out.len() {
        seek(f, at + filled as u64)?;
        let want = u32::try_from(out.len() - filled).unwrap_or(u32::MAX);
        match f.read(want, Default::default()).await? {
            Some(b) if !b.is_empty() => {
                let n = b.len().min(out.len() - filled);
                out[filled..filled + n].copy_from_slice(&b[..n]);
                filled += n;
            }
            _ => break,
        }
    }
    Ok(filled)
}

/// One read request at `at` into `out`; returns the bytes read (0 at the end of the file).
pub(super) async fn read_once(f: &mut File, at: u64, out: &mut [u8]) -> Result<usize, Fail> {
    seek(f, at)?;
    let want = u32::try_from(out.len()).unwrap_or(u32::MAX);
    Ok(match f.read(want, Default::default()).await? {
        Some(b) => {
            let n = b.len().min(out.len());
            out[..n].copy_from_slice(&b[..n]);
            n
        }
        None => 0,
    })
}

/// Fills `out` from offset `at` with concurrent requests; [`Fail::Short`] if the file ends
/// first.
pub(super) async fn read_exact(file: &File, at: u64, out: &mut [u8]) -> Result<(), Fail> {
    let parts = out.chunks_mut(CHUNK).enumerate().map(|(i, part)| {
        let mut f = file.clone();
        let off = at + (i * CHUNK) as u64;
        async move {
            let n = read_upto(&mut f, off, part).await?;
            if n < part.len() {
                return Err(Fail::Short(off + n as u64));
            }
            Ok(())
        }
    });
    stream::iter(parts)
        .buffer_unordered(WINDOW)
        .try_collect::<()>()
        .await
}

/// Writes `data` at offset 0 with concurrent requests.
pub(super) async fn write_all(file: &File, data: &[u8]) -> Result<(), Fail> {
    let parts = data.chunks(CHUNK).enumerate().map(|(i, part)| {
        let mut f = file.clone();
        async move {
            seek(&mut f, (i * CHUNK) as u64)?;
            f.write_all(part).await?;
            Ok::<(), Fail>(())
        }
    });
    stream::iter(parts)
        .buffer_unordered(WINDOW)
        .try_collect::<()>()
        .await
}

/// Whether an error is the server's "no such file" answer.
pub(super) fn not_found(e: &Fail) -> bool {
    matches!(e, Fail::Sftp(e) if matches!(class(e), Class::Status(ErrorKind::NotFound, _)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_names() {
        assert_eq!(join("/srv/repo", "data/ab/x"), "/srv/repo/data/ab/x");
        assert_eq!(join("/", "config"), "/config");
        assert_eq!(join("repo", "config"), "repo/config");
        assert_eq!(join("sftp://h//srv/r", "keys/k"), "sftp://h//srv/r/keys/k");
        let (a, b) = (temp_name(), temp_name());
        assert_ne!(a, b);
        assert!(a.starts_with(".tmp-") && a.len() == 5 + 16, "{a}");
        assert!(is_id(&"0a".repeat(32)) && !is_id("config") && !is_id(&"g".repeat(64)));
        let now = SystemTime::now();
        let hour = Duration::from_secs(3600);
        let old = Some(now - 2 * hour);
        assert!(is_stale_temp(&a, old, now, hour));
        assert!(!is_stale_temp(&a, Some(now - hour / 2), now, hour));
        assert!(!is_stale_temp(&a, Some(now + hour), now, hour));
        assert!(!is_stale_temp(&a, None, now, hour));
        assert!(!is_stale_temp(&"0a".repeat(32), old, now, hour));
    }
}

//! Downloads: one file of a snapshot as it is, or a folder as a tar or zip archive, streamed
//! by `arca_browse::dump` on a blocking thread into the response (memory stays bounded).

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use arca_browse::dump::{Archive, Dump, DumpError, Target};
use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::Uri;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::{mpsc, oneshot};

use crate::data::{clean_path, find_snapshot};
use crate::query::RawQuery;
use crate::state::{ApiError, App};

/// Bytes gathered before a chunk goes to the response.
const CHUNK: usize = 64 << 10;

/// A writer handing chunks to the response body; fails once the client is gone.
struct ChanWriter {
    tx: mpsc::Sender<Result<Bytes, io::Error>>,
    buf: Vec<u8>,
}

impl ChanWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the download was abandoned"))
    }
}

impl Write for ChanWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

fn dump_error(e: DumpError) -> ApiError {
    let status = match &e {
        DumpError::NotFound { .. } => StatusCode::NOT_FOUND,
        DumpError::NotAFolder { .. }
        | DumpError::NotAFile { .. }
        | DumpError::CannotHold { .. }
        | DumpError::InvalidPath { .. } => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let message = match &e {
        // The web's words, not the command line's `--archive`.
        DumpError::NotAFile { path, kind } => format!(
            "{} is a {kind}, not a file: download it with format=tar or format=zip",
            path.display()
        ),
        DumpError::CannotHold { tar_can: true, .. } => {
            format!("{e} (download it with format=tar)")
        }
        _ => e.to_string(),
    };
    ApiError::with(status, message)
}

/// `Content-Disposition` naming `name` (an ASCII fallback and the exact UTF-8 name).
fn disposition(name: &[u8]) -> String {
    let ascii: String = String::from_utf8_lossy(name)
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let exact = percent_encoding::percent_encode(name, percent_encoding::NON_ALPHANUMERIC);
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{exact}")
}

/// What the blocking side found before streaming.
struct Ready {
    name: Vec<u8>,
    length: Option<u64>,
    archive: Option<Archive>,
}

/// `GET /api/snapshots/{id}/download?path=P&format=raw|tar|zip` (also under `/snapshots/`,
/// where errors come as a page).
pub async fn download(
    State(app): State<Arc<App>>,
    UrlPath(spec): UrlPath<String>,
    uri: Uri,
    q: RawQuery,
) -> Response {
    let api = uri.path().starts_with("/api/");
    let fail = |e: ApiError| -> Response {
        if api {
            e.into_response()
        } else {
            crate::pages::error_page(&app, &e)
        }
    };
    let archive = match q.text("format").as_deref() {
        None | Some("raw") => None,
        Some("tar") => Some(Archive::Tar),
        Some("zip") => Some(Archive::Zip),
        Some(other) => {
            return fail(ApiError::bad(format!(
                "invalid format {other:?} (raw, tar, zip)"
            )));
        }
    };
    let path = match clean_path(q.bytes("path").unwrap_or(b"/")) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, io::Error>>(4);
    let (ready_tx, ready_rx) = oneshot::channel::<Result<Ready, ApiError>>();
    let a = Arc::clone(&app);
    tokio::task::spawn_blocking(move || {
        let prepared = (|| {
            let repo = a.repo()?;
            // Held until the download ends, as the CLI's `dump` holds one: a prune started
            // meanwhile could delete what the stream has yet to read (hunt 29).
            let lock = a
                .lock(&repo, arca_repo::LockKind::Shared, "dump", &|| false)
                .map_err(ApiError::failed)?;
            let index = a.index(&repo)?;
            let (id, snap) = find_snapshot(&repo, &spec)?;
            Ok::<_, ApiError>((repo, lock, index, id, snap))
        })();
        let (repo, _lock, index, id, snap) = match prepared {
            Ok(p) => p,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        let dump = Dump::new(&repo, &index);
        let target = match dump.resolve(snap.tree, Path::new(OsStr::from_bytes(&path))) {
            Ok(t) => t,
            Err(e) => {
                let _ = ready_tx.send(Err(dump_error(e)));
                return;
            }
        };
        let (name, length) = match &target {
            Target::Root(_) => (format!("snapshot-{}", id.short()).into_bytes(), None),
            Target::Entry { node, .. } => (
                node.name.clone(),
                (node.kind() == arca_format::NodeKind::File).then_some(node.size),
            ),
        };
        // Alone in an archive that cannot hold it, it would be an empty archive.
        if let Some(Err(e)) = archive.map(|kind| target.check_archive(kind)) {
            let _ = ready_tx.send(Err(dump_error(e)));
            return;
        }
        if archive.is_none()
            && !matches!(&target, Target::Entry { node, .. } if node.kind() == arca_format::NodeKind::File)
        {
            // Let the library word the refusal.
            if let Err(e) = dump.write(&target, None, io::sink()) {
                let _ = ready_tx.send(Err(dump_error(e)));
                return;
            }
        }
        if ready_tx
            .send(Ok(Ready {
                name,
                length: if archive.is_none() { length } else { None },
                archive,
            }))
            .is_err()
        {
            return;
        }
        let mut w = ChanWriter {
            tx: tx.clone(),
            buf: Vec::with_capacity(CHUNK),
        };
        if let Err(e) = dump.write(&target, archive, &mut w) {
            // Headers are gone: break the response so the browser reports a failed download.
            let _ = tx.blocking_send(Err(io::Error::other(e.to_string())));
        }
    });
    let ready = match ready_rx.await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return fail(e),
        Err(_) => return fail(ApiError::failed("internal error: the download stopped")),
    };
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut name = ready.name;
    let kind = match ready.archive {
        None => "application/octet-stream",
        Some(Archive::Tar) => {
            name.extend_from_slice(b".tar");
            "application/x-tar"
        }
        Some(Archive::Zip) => {
            name.extend_from_slice(b".zip");
            "application/zip"
        }
    };
    let mut r = Body::from_stream(stream).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    if let Ok(v) = HeaderValue::from_str(&disposition(&name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    if let Some(n) = ready.length {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disposition_names() {
        assert_eq!(
            disposition(b"a b.txt"),
            "attachment; filename=\"a b.txt\"; filename*=UTF-8''a%20b%2Etxt"
        );
        assert_eq!(
            disposition("✓\"x".as_bytes()),
            "attachment; filename=\"__x\"; filename*=UTF-8''%E2%9C%93%22x"
        );
    }
}

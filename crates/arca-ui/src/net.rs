//! Listening: the `--listen` address, the random token, TLS (rustls) and the accept loop that
//! hands connections to the router, with handshakes on their own tasks so a slow client delays
//! nobody, a time limit on each request's head and a bound on the connections open at once.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::serve::Listener;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;

use crate::UiError;

/// Parses `--listen`: `IP:PORT`, `[IPv6]:PORT`, `HOST:PORT` (resolved) or a bare `PORT` (on
/// 127.0.0.1).
pub fn parse_listen(s: &str) -> Result<SocketAddr, UiError> {
    let bad = |detail: String| UiError::BadListen {
        value: s.to_string(),
        detail,
    };
    let t = s.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    if !t.contains(':') {
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("the port must be at most 65535".into()));
        }
        return Err(bad("expected ADDRESS:PORT, e.g. 127.0.0.1:8000".into()));
    }
    if let Some(port) = t.strip_prefix("localhost:") {
        let port: u16 = port
            .parse()
            .map_err(|_| bad(format!("invalid port {port:?}")))?;
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    t.to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("the name resolves to no address".into()))
}

/// 32 random bytes in hex (the access and CSRF tokens).
pub fn random_hex() -> String {
    let mut b = [0u8; 32];
    if getrandom::getrandom(&mut b).is_err() {
        // No system randomness (never seen on Linux): the standard library's per-process
        // random hash keys, mixed with the time, still give a token nobody can guess.
        use std::hash::{BuildHasher, Hasher};
        for (i, part) in b.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0),
            );
            part.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    hex::encode(b)
}

/// The TLS acceptor of a PEM certificate chain and private key.
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, UiError> {
    let err = |what, path: &Path, detail: String| UiError::Tls {
        what,
        path: path.to_path_buf(),
        detail,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| err("certificate", cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| err("certificate", cert, e.to_string()))?;
    if certs.is_empty() {
        return Err(err(
            "certificate",
            cert,
            "no certificate in the file".into(),
        ));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| err("key", key, e.to_string()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err("certificate", cert, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| err("key", key, e.to_string()))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Connections whose TLS handshake finished, from the accept loop.
struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept loop ended (the server stops): wait for the shutdown.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Accepts TCP connections and runs each handshake on its own task (10 s at most).
async fn tls_accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, peer) = match tcp.accept().await {
            Ok(c) => c,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            let hs = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream));
            if let Ok(Ok(tls)) = hs.await {
                let _ = ready.send((tls, peer)).await;
            }
        });
    }
}

/// A connection must send its request's head (line and headers) within this long, from
/// when it opens or its previous response went out: a client that sends nothing, or half a
/// request, is dropped instead of holding a socket and memory for ever.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// [`HEADER_TIMEOUT`], or the milliseconds of `ARCA_TEST_UI_HEADER_TIMEOUT_MS` (tests).
fn header_timeout() -> Duration {
    std::env::var("ARCA_TEST_UI_HEADER_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(HEADER_TIMEOUT, Duration::from_millis)
}

/// Connections served at once, at most; more wait to be accepted. Bounds what idle
/// connections cost (about 40 KB each) whoever opens them.
const MAX_CONNECTIONS: usize = 512;

/// Connections still open when the server stops get this long to finish their request.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves `router` until `stop` fires.
pub async fn serve(
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    match tls {
        None => serve_on(tcp, router, stop).await,
        Some(acceptor) => {
            let local = match tcp.local_addr() {
                Ok(a) => a,
                Err(_) => return,
            };
            let (tx, rx) = mpsc::channel(16);
            let accept = tokio::spawn(tls_accept_loop(tcp, acceptor, tx));
            serve_on(TlsListener { local, ready: rx }, router, stop).await;
            accept.abort();
        }
    }
}

/// The HTTP/1 connections of `listener`, each on its own task with [`HEADER_TIMEOUT`], at
/// most [`MAX_CONNECTIONS`] at once, until `stop` fires; then the open ones get [`DRAIN`]
/// to finish.
async fn serve_on<L>(mut listener: L, router: Router, stop: tokio::sync::oneshot::Receiver<()>)
where
    L: Listener,
{
    use hyper_util::rt::{TokioIo, TokioTimer};
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let head_within = header_timeout();
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(stop);
    loop {
        let slot = tokio::select! {
            s = Arc::clone(&slots).acquire_owned() => s,
            _ = &mut stop => break,
        };
        let Ok(slot) = slot else { break };
        let io = tokio::select! {
            (io, _) = listener.accept() => io,
            _ = &mut stop => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(head_within)
            .serve_connection(TokioIo::new(io), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
        });
    }
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        let p = |s: &str| {
            parse_listen(s)
                .map(|a| a.to_string())
                .map_err(|e| e.to_string())
        };
        assert_eq!(p("8000"), Ok("127.0.0.1:8000".into()));
        assert_eq!(p("127.0.0.1:0"), Ok("127.0.0.1:0".into()));
        assert_eq!(p("[::1]:9000"), Ok("[::1]:9000".into()));
        assert_eq!(p("localhost:7000"), Ok("127.0.0.1:7000".into()));
        assert_eq!(p("0.0.0.0:443"), Ok("0.0.0.0:443".into()));
        assert!(p("nonsense").is_err_and(|e| e.contains("invalid --listen \"nonsense\"")));
        assert!(p("localhost:99999").is_err());
        assert!(p("99999").is_err_and(|e| e.contains("at most 65535")));
        assert_eq!(random_hex().len(), 64);
        assert_ne!(random_hex(), random_hex());
    }
}

//! Listening: the `--listen` address, the random token, TLS (rustls) and the accept loop that
//! hands connections to the router, with handshakes on their own tasks so a slow client delays
//! nobody, a time limit on each handshake and each request's head, and a bound on the
//! connections open at once (handshakes in progress included).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
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

/// A source of connections, each handed over with the connection slot it holds (see
/// [`MAX_CONNECTIONS`]); the slot is taken before the connection is accepted.
trait SlotListener: Send + 'static {
    /// The connection's stream.
    type Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static;

    /// The next connection and its slot; `None` once no more can come.
    fn accept(
        &mut self,
    ) -> impl std::future::Future<Output = Option<(Self::Io, OwnedSemaphorePermit)>> + Send;
}

/// Plain TCP: a slot first, then the next connection.
struct PlainListener {
    tcp: TcpListener,
    slots: Arc<Semaphore>,
}

impl SlotListener for PlainListener {
    type Io = TcpStream;

    async fn accept(&mut self) -> Option<(TcpStream, OwnedSemaphorePermit)> {
        let slot = Arc::clone(&self.slots).acquire_owned().await.ok()?;
        Some((accept_tcp(&self.tcp).await, slot))
    }
}

/// The next TCP connection; errors (a connection reset before it was accepted, no file
/// descriptor left) are waited out rather than ending the server.
async fn accept_tcp(tcp: &TcpListener) -> TcpStream {
    loop {
        match tcp.accept().await {
            Ok((stream, _)) => return stream,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset
                ) => {}
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Connections whose TLS handshake finished, with their slots, from [`tls_accept_loop`].
struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, OwnedSemaphorePermit)>,
}

impl SlotListener for TlsListener {
    type Io = TlsStream<TcpStream>;

    async fn accept(&mut self) -> Option<(TlsStream<TcpStream>, OwnedSemaphorePermit)> {
        self.ready.recv().await
    }
}

/// Takes a slot, accepts a TCP connection and runs its handshake on its own task, holding
/// the slot throughout: handshakes in progress count against [`MAX_CONNECTIONS`] as served
/// connections do, so connections that never finish (or never start) a handshake cannot
/// pile up. The handshake and the hand-over to the server get `handshake` together; a
/// connection that takes longer is dropped and its slot freed.
async fn tls_accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, OwnedSemaphorePermit)>,
    slots: Arc<Semaphore>,
    handshake: Duration,
) {
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let stream = accept_tcp(&tcp).await;
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            let _ = tokio::time::timeout(handshake, async move {
                if let Ok(tls) = acceptor.accept(stream).await {
                    let _ = ready.send((tls, slot)).await;
                }
            })
            .await;
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

/// Connections open at once, at most, TLS handshakes in progress included; more wait to be
/// accepted. Bounds what idle connections cost (about 40 KB and a file descriptor each)
/// whoever opens them.
const MAX_CONNECTIONS: usize = 512;

/// A TLS handshake (and the hand-over of its connection) must be done within this long.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections still open when the server stops get this long to finish their request.
const DRAIN: Duration = Duration::from_secs(10);

/// The bounds of [`serve_with`] (tests use small ones).
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// Connections open at once, handshakes included.
    max_connections: usize,
    /// Time for a TLS handshake.
    handshake: Duration,
    /// Time for a request's head.
    head: Duration,
}

/// Serves `router` until `stop` fires.
pub async fn serve(
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let limits = Limits {
        max_connections: MAX_CONNECTIONS,
        handshake: HANDSHAKE_TIMEOUT,
        head: header_timeout(),
    };
    serve_with(tcp, tls, router, stop, limits).await;
}

/// [`serve`] within `limits`.
async fn serve_with(
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    stop: tokio::sync::oneshot::Receiver<()>,
    limits: Limits,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    match tls {
        None => serve_on(PlainListener { tcp, slots }, router, stop, limits.head).await,
        Some(acceptor) => {
            let (tx, rx) = mpsc::channel(16);
            let accept = tokio::spawn(tls_accept_loop(tcp, acceptor, tx, slots, limits.handshake));
            serve_on(TlsListener { ready: rx }, router, stop, limits.head).await;
            accept.abort();
        }
    }
}

/// The HTTP/1 connections of `listener`, each on its own task holding its slot, with `head`
/// as the time for a request's head, until `stop` fires; then the open ones get [`DRAIN`] to
/// finish.
async fn serve_on<L>(
    mut listener: L,
    router: Router,
    stop: tokio::sync::oneshot::Receiver<()>,
    head: Duration,
) where
    L: SlotListener,
{
    use hyper_util::rt::{TokioIo, TokioTimer};
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let next = tokio::select! {
            c = listener.accept() => c,
            _ = &mut stop => break,
        };
        let Some((io, slot)) = next else {
            // No more connections can come: wait for the stop.
            let _ = (&mut stop).await;
            break;
        };
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(head)
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

    /// A self-signed certificate for 127.0.0.1 and its key (tests only: no client checks it).
    const TEST_CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBkDCCATagAwIBAgIUd7E6b9ove+72W8wz4+ZPGGDsO2IwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEzMDAxMjIzNFoYDzIxMjYxMTA2
MDEyMjM0WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAATT8ipbjIygiJGPuavBJ8EZdtx76QC7pwI6EdYUz1lyu/XmEshlP+TC
Eu1jPuZyCIYRhBkcTotbX3MCwl6+2xSHo2QwYjAdBgNVHQ4EFgQUX3jo/cQ0UJht
k7NWCz0jycGPgeEwHwYDVR0jBBgwFoAUX3jo/cQ0UJhtk7NWCz0jycGPgeEwDwYD
VR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAABMAoGCCqGSM49BAMCA0gAMEUC
IBoLHMUhKZUK12hooaXrpkbrBjdQ7/5E3hTA52vwTCQDAiEA/FUeVReHPn3lHoCu
zev5ELNIVe5Au6JargtPzc6zAAg=
-----END CERTIFICATE-----
";
    const TEST_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQguo26MwZ3CdbzeB+3
wA2bK7c9cBCLqCVuJLIwkBQPAhehRANCAATT8ipbjIygiJGPuavBJ8EZdtx76QC7
pwI6EdYUz1lyu/XmEshlP+TCEu1jPuZyCIYRhBkcTotbX3MCwl6+2xSH
-----END PRIVATE KEY-----
";

    /// With TLS, a connection takes its slot before it is accepted and keeps it through the
    /// handshake: connections that never send a ClientHello used to be accepted without
    /// bound (each a file descriptor, up to the process's limit), as their handshakes ran
    /// outside the bound. Here, with two slots held by such connections, a third one is not
    /// even accepted until a handshake of theirs times out; so the server drops it only after
    /// two handshake times instead of one.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn tls_handshakes_count_against_the_connection_bound() {
        use std::io::Read;
        use std::time::Instant;
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, TEST_CERT).unwrap();
        std::fs::write(&key, TEST_KEY).unwrap();
        let acceptor = tls_acceptor(&cert, &key).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = std_listener.local_addr().unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let tcp = {
            let _guard = rt.enter();
            TcpListener::from_std(std_listener).unwrap()
        };
        let handshake = Duration::from_millis(1000);
        let limits = Limits {
            max_connections: 2,
            handshake,
            head: Duration::from_secs(30),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel();
        rt.spawn(serve_with(
            tcp,
            Some(acceptor),
            Router::new(),
            stopped,
            limits,
        ));
        // Two connections that never start a handshake hold both slots.
        let idle: Vec<_> = (0..2)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let mut third = std::net::TcpStream::connect(addr).unwrap();
        third
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        // The server closes it when its own handshake time is over (end of file).
        let mut buf = [0u8; 16];
        let n = third.read(&mut buf).unwrap();
        let waited = started.elapsed();
        assert_eq!(n, 0);
        assert!(
            waited >= handshake + handshake / 2,
            "the third connection was accepted while both slots were held (closed after {waited:?})"
        );
        assert!(waited < handshake * 6, "closed after {waited:?}");
        drop(idle);
        let _ = stop.send(());
        rt.shutdown_timeout(Duration::from_secs(2));
    }
}

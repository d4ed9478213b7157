//! arca's local web interface (`arca ui`): an HTTP server on loopback (beyond it only with TLS)
//! whose pages and JSON API (`/api/`) run the same library calls as the command line.
//!
//! Every request needs the access token printed at start (`?token=` once, then a cookie; or
//! `Authorization: Bearer`); state-changing requests are POSTs that also need the page's CSRF
//! token in `X-Arca-CSRF` (or a Bearer token) and a same-origin `Origin`. Long operations
//! (restore, backup, check, forget, prune) run as server-side jobs ([`jobs`]) that a page reload
//! finds again. Assets are embedded; nothing is fetched from elsewhere. See docs/UI.md.

mod api;
mod assets;
mod auth;
mod browser;
mod data;
mod download;
mod forms;
mod html;
pub mod jobs;
mod net;
mod pages;
mod profiles;
mod query;
mod state;
mod tasks;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arca_backend::Backend;
use arca_repo::CacheMode;
use zeroize::Zeroizing;

pub use browser::OpenPage;
pub use net::parse_listen;

/// The command line's check of a profile file, as `arca -P FILE backup` reads it (its
/// sections, each section's options): the error, naming the file and what is wrong. The
/// page reads the `[backup]` section itself; the command line knows its commands.
pub type ProfileCheck = Arc<dyn Fn(&std::path::Path) -> Result<(), String> + Send + Sync>;

/// How to serve.
pub struct UiOptions {
    /// `--listen ADDR` (default: 127.0.0.1 on a free port).
    pub listen: Option<String>,
    /// `--tls-cert` and `--tls-key`: PEM files of the certificate chain and its private key.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The repository's backend (the command line's stack: retries, meter, faults).
    pub backend: Arc<dyn Backend>,
    /// The local cache of a remote repository for reading (check and prune read uncached).
    pub cache: CacheMode,
    /// Where restores keep their power-cut markers (arca-restore's `durable`), as the
    /// command line's own restores do (`None`: beside a cache folder, else under the default
    /// cache root).
    pub restore_markers: Option<PathBuf>,
    /// The password, when the command line has one; else the page asks for it.
    pub password: Option<Zeroizing<String>>,
    /// Take no locks (`--no-lock`).
    pub no_lock: bool,
    /// `--retry-lock`: while another process holds a conflicting lock, try again for this
    /// long before a job fails (`None`: fail at once).
    pub retry_lock: Option<std::time::Duration>,
    /// The folder of the profiles (`*.toml`) whose `[backup]` sections the page runs
    /// (default: `$XDG_CONFIG_HOME/arca`, else `~/.config/arca`).
    pub profiles_dir: Option<PathBuf>,
    /// Checks each profile as the command line would (unknown sections...); `None`: only the
    /// page's own checks of `[backup]`, `[global]` and `[repository]`.
    pub profile_check: Option<ProfileCheck>,
    /// The access token (default: 32 random bytes in hex).
    pub token: Option<String>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UiError {
    /// The `--listen` value is not an address.
    #[error("invalid --listen {value:?}: {detail}")]
    BadListen {
        /// The value given.
        value: String,
        /// What is wrong.
        detail: String,
    },
    /// A non-loopback address without TLS.
    #[error(
        "refusing to listen on {addr} without TLS: anyone on the network could reach the \
         repository; give --tls-cert and --tls-key, or listen on 127.0.0.1"
    )]
    NeedsTls {
        /// The address.
        addr: SocketAddr,
    },
    /// Binding the address failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The certificate or key cannot be used.
    #[error("TLS {what} {}: {detail}", path.display())]
    Tls {
        /// `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// The server's runtime could not start.
    #[error("cannot start the server: {0}")]
    Runtime(std::io::Error),
    /// The page that opens the browser could not be written.
    #[error("cannot write the page that opens the browser, {}: {source}", path.display())]
    OpenPage {
        /// The folder or file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A running server (on its own threads); stopped by [`Server::stop`] or when dropped.
pub struct Server {
    addr: SocketAddr,
    url: String,
    token: String,
    warning: Option<String>,
    app: Arc<state::App>,
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    open_page: Option<OpenPage>,
    /// SIGINT, SIGTERM and SIGHUP, caught from the start: a signal that came between the
    /// address being printed and [`Server::wait_for_signal`] killed the process.
    signals: Vec<tokio::signal::unix::Signal>,
}

impl Server {
    /// Binds the address and starts serving.
    pub fn start(opts: UiOptions) -> Result<Server, UiError> {
        let addr = match &opts.listen {
            Some(l) => parse_listen(l)?,
            None => SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        // `::ffff:127.0.0.1` is 127.0.0.1 (the Host check canonicalizes too).
        let loopback = addr.ip().to_canonical().is_loopback();
        if !loopback && opts.tls.is_none() {
            return Err(UiError::NeedsTls { addr });
        }
        let tls = opts
            .tls
            .as_ref()
            .map(|(c, k)| net::tls_acceptor(c, k))
            .transpose()?;
        let std_listener =
            std::net::TcpListener::bind(addr).map_err(|source| UiError::Bind { addr, source })?;
        let bound = std_listener
            .local_addr()
            .map_err(|source| UiError::Bind { addr, source })?;
        std_listener
            .set_nonblocking(true)
            .map_err(|source| UiError::Bind { addr, source })?;
        let token = opts.token.clone().unwrap_or_else(net::random_hex);
        let scheme = if tls.is_some() { "https" } else { "http" };
        let host = match bound {
            SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
            SocketAddr::V4(a) => a.to_string(),
        };
        let url = format!("{scheme}://{host}/?token={token}");
        let warning = (!loopback).then(|| {
            format!(
                "WARNING: arca ui is listening on {bound}, beyond this machine. Anyone who can \
                 reach it and has the token can read and restore every file of the repository, \
                 and remove snapshots. Share the token with nobody; stop the server when done."
            )
        });
        let app = Arc::new(state::App::new(
            &opts,
            auth::Security::new(token.clone(), bound, tls.is_some()),
        ));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("arca-ui")
            .enable_all()
            .build()
            .map_err(UiError::Runtime)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let router = api::router(Arc::clone(&app));
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(std_listener)
                .map_err(|source| UiError::Bind { addr, source })?
        };
        runtime.spawn(net::serve(listener, tls, router, rx));
        let signals = {
            use tokio::signal::unix::{SignalKind, signal};
            let _in = runtime.enter();
            [
                SignalKind::interrupt(),
                SignalKind::terminate(),
                SignalKind::hangup(),
            ]
            .into_iter()
            .filter_map(|k| signal(k).ok())
            .collect()
        };
        Ok(Server {
            addr: bound,
            url,
            token,
            warning,
            app,
            runtime: Some(runtime),
            shutdown: Some(tx),
            open_page: None,
            signals,
        })
    }

    /// The address listened on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL to open, token included.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The access token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Writes the page that opens this server in a browser ([`OpenPage`]: a file only this
    /// user can read, under `$XDG_RUNTIME_DIR` or the system's temporary folder, that sends the
    /// browser on to [`Server::url`]) and returns its `file://` address: hand that to the
    /// browser, never the URL itself, whose token any local user could read in the process's
    /// arguments. The file is removed when the server stops (a second call replaces it).
    pub fn write_open_page(&mut self) -> Result<String, UiError> {
        let page = OpenPage::create(&self.url)?;
        let url = page.file_url();
        self.open_page = Some(page);
        Ok(url)
    }

    /// The file written by [`Server::write_open_page`], while it exists.
    pub fn open_page(&self) -> Option<&Path> {
        self.open_page.as_ref().map(OpenPage::path)
    }

    /// The loud warning to print when listening beyond loopback.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// Blocks until SIGINT, SIGTERM or SIGHUP (a closed terminal or a dropped ssh session:
    /// it killed the server outright, leaving its jobs' repository locks and the browser
    /// page behind; hunt 24).
    pub fn wait_for_signal(&mut self) {
        let signals = &mut self.signals;
        if let Some(rt) = &self.runtime {
            rt.block_on(any_signal(signals));
        }
    }

    /// After [`Server::wait_for_signal`]: calls `then` on a runtime thread when one more
    /// signal comes (a second Ctrl-C while [`Server::stop`] waits for the jobs), with the
    /// jobs still running ("#ID TITLE"); `then` typically says so and exits the process.
    pub fn on_next_signal(&mut self, then: impl FnOnce(Vec<String>) + Send + 'static) {
        let mut signals = std::mem::take(&mut self.signals);
        let app = Arc::clone(&self.app);
        if let Some(rt) = &self.runtime {
            rt.spawn(async move {
                any_signal(&mut signals).await;
                then(app.jobs.running());
            });
        }
    }

    /// Stops serving, asks the running jobs to stop and waits for them (at most `grace`).
    /// Gives the jobs still running then ("#ID TITLE"): they are abandoned, with the
    /// repository locks they hold.
    pub fn stop(mut self, grace: Duration) -> Vec<String> {
        self.shutdown_now(grace)
    }

    fn shutdown_now(&mut self, grace: Duration) -> Vec<String> {
        // The page carries the token: it goes first.
        self.open_page = None;
        if self.runtime.is_none() {
            // Stopped already (`stop`, then the drop): the jobs were waited for then.
            return self.app.jobs.running();
        }
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.app.jobs.cancel_all();
        self.app.jobs.wait_idle(grace);
        let left = self.app.jobs.running();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
        left
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown_now(Duration::from_secs(10));
    }
}

/// Waits for SIGINT, SIGTERM or SIGHUP (Ctrl-C alone when no handler could be installed).
async fn any_signal(signals: &mut [tokio::signal::unix::Signal]) {
    if signals.is_empty() {
        let _ = tokio::signal::ctrl_c().await;
        return;
    }
    let any = signals.iter_mut().map(|s| Box::pin(s.recv()));
    futures_util::future::select_all(any).await;
}

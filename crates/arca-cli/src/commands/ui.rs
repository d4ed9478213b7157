//! `arca ui`: serve the local web interface of the repository (see `arca_ui` and docs/UI.md):
//! print the address with its access token, open a browser, serve until Ctrl-C.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;
use arca_ui::{Server, UiOptions};
use clap::Args;

use crate::cli::Global;
use crate::util;

/// clap's check of `--listen`: a bad address is a usage error (exit 2), as elsewhere.
fn listen_arg(s: &str) -> Result<String, String> {
    arca_ui::parse_listen(s)
        .map(|_| s.to_string())
        .map_err(|e| match e {
            arca_ui::UiError::BadListen { detail, .. } => detail,
            other => other.to_string(),
        })
}

/// Options of `arca ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    /// Address to listen on, e.g. 127.0.0.1:8000 [default: 127.0.0.1 on a free port]; an
    /// address beyond this machine needs --tls-cert and --tls-key
    #[arg(long, value_name = "ADDR", value_parser = listen_arg)]
    pub listen: Option<String>,
    /// Do not open a browser
    #[arg(long)]
    pub no_open: bool,
    /// Serve HTTPS with this certificate chain (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// Opens `url` with `xdg-open` when there is one; never fails.
fn open_browser(url: &str) -> bool {
    let child = Command::new("xdg-open")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(mut c) => {
            // Reap it when it ends (xdg-open returns once the browser is asked).
            let _ = std::thread::Builder::new()
                .name("xdg-open".into())
                .spawn(move || c.wait());
            true
        }
        Err(_) => false,
    }
}

pub fn run(g: &Global, a: &UiArgs) -> Result<u8> {
    let (backend, _stats) = util::backend(g)?;
    // A password from the options, the environment or the terminal; without one the page
    // asks for it (and says so when it is wrong).
    let password = util::password(g).ok();
    let server = Server::start(UiOptions {
        listen: a.listen.clone(),
        tls: a.tls_cert.clone().zip(a.tls_key.clone()),
        backend,
        cache: util::cache_mode(g),
        password,
        no_lock: g.no_lock,
        profiles_dir: None,
        token: None,
    })?;
    if let Some(w) = server.warning() {
        let bar = "!".repeat(78);
        eprintln!("{bar}\n{w}\n{bar}");
    }
    let location = g.repo.as_deref().unwrap_or_default();
    super::out(&format!("arca ui: serving {location}; open this address:"))?;
    super::out(&format!("    {}", server.url()))?;
    if !g.quiet {
        super::out("Press Ctrl-C to stop.")?;
    }
    if !a.no_open && !open_browser(server.url()) && !g.quiet {
        eprintln!(
            "arca ui: no browser could be opened (xdg-open is missing): open the address above"
        );
    }
    server.wait_for_signal();
    eprintln!("arca ui: stopping (running jobs are asked to stop)");
    server.stop(Duration::from_secs(60));
    Ok(0)
}

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

/// Opens `page`, the `file://` address of the server's redirect page
/// ([`Server::write_open_page`]), with `opener` (`xdg-open`) when there is one; never fails.
/// Never the server's URL itself: its token would be in the arguments of `xdg-open` and of
/// the browser, where every local user can read it.
fn open_browser(opener: &[&str], page: &str) -> bool {
    let Some((program, args)) = opener.split_first() else {
        return false;
    };
    let child = Command::new(program)
        .args(args)
        .arg(page)
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
    // asks for it (and says so when it is wrong). A password file or command that fails is
    // said (it looked as if no password had been given).
    let password = match util::password(g) {
        Ok(p) => Some(p),
        Err(e) => {
            let given = g.password_file.is_some()
                || g.password_command.is_some()
                || std::env::var_os("ARCA_PASSWORD").is_some_and(|v| !v.is_empty());
            if given {
                eprintln!("arca ui: {e:#}; the page will ask for the password");
            }
            None
        }
    };
    let retry_lock = g
        .retry_lock
        .as_deref()
        .map(util::parse_duration)
        .transpose()?;
    let mut server = Server::start(UiOptions {
        restore_markers: arca_repo::cache::restore_markers(g.cache_dir.as_deref()),
        listen: a.listen.clone(),
        tls: a.tls_cert.clone().zip(a.tls_key.clone()),
        backend,
        cache: util::cache_mode(g),
        password,
        no_lock: g.no_lock,
        retry_lock,
        profiles_dir: None,
        profile_check: Some(std::sync::Arc::new(|file: &std::path::Path| {
            crate::profile::check_for_backup(file).map_err(|e| format!("{e:#}"))
        })),
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
    if !a.no_open {
        match server.write_open_page() {
            Ok(page) => {
                if !open_browser(&["xdg-open"], &page) && !g.quiet {
                    eprintln!(
                        "arca ui: no browser could be opened (xdg-open is missing): open the \
                         address above"
                    );
                }
            }
            Err(e) => eprintln!("arca ui: no browser opened: {e}; open the address above"),
        }
    }
    server.wait_for_signal();
    eprintln!(
        "arca ui: stopping (running jobs are asked to stop, for at most a minute; Ctrl-C again \
         to quit at once)"
    );
    // A second signal quits at once (it was ignored for the whole minute).
    server.on_next_signal(|running| {
        eprintln!("arca ui: quitting at once{}", abandoned(&running));
        std::process::exit(130);
    });
    let left = server.stop(Duration::from_secs(60));
    if !left.is_empty() {
        eprintln!(
            "arca ui: the jobs did not stop within a minute{}",
            abandoned(&left)
        );
        return Ok(1);
    }
    Ok(0)
}

/// What to say of the jobs `running` abandoned when the server quits: named, with the locks
/// they leave in the repository.
fn abandoned(running: &[String]) -> String {
    if running.is_empty() {
        return String::new();
    }
    format!(
        "; abandoned: {}. Their repository locks remain: once no arca process uses the \
         repository, remove them with `arca unlock`",
        running.join(", ")
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;

    /// The browser is given the `file://` address of a page only this user can read, never
    /// the URL with the token, which any local user could read in `ps` while `xdg-open` (and
    /// the browser it starts) runs; the page goes when the server stops.
    #[test]
    fn the_browser_never_gets_the_token_in_its_arguments() {
        let tmp = tempfile::tempdir().unwrap();
        let token = "0123456789abcdef0123456789abcdef";
        let mut server = Server::start(UiOptions {
            restore_markers: None,
            listen: None,
            tls: None,
            backend: Arc::new(arca_backend::LocalBackend::new(tmp.path().join("repo"))),
            cache: arca_repo::CacheMode::Off,
            password: None,
            no_lock: true,
            retry_lock: None,
            profiles_dir: Some(tmp.path().to_path_buf()),
            profile_check: None,
            token: Some(token.into()),
        })
        .unwrap();
        let page = server.write_open_page().unwrap();
        // A stand-in for xdg-open that writes down its arguments.
        let args_file = tmp.path().join("args");
        let script = format!("printf '%s\\n' \"$@\" > '{}'", args_file.display());
        assert!(open_browser(&["sh", "-c", &script, "xdg-open"], &page));
        // The shell creates the file before printf writes to it: the arguments are there once
        // the line ends (waiting a fixed 100 ms after the file appeared could read it empty).
        let until = Instant::now() + Duration::from_secs(60);
        let mut args = String::new();
        while !args.ends_with('\n') && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
            args = std::fs::read_to_string(&args_file).unwrap_or_default();
        }
        assert!(!args.contains(token), "{args}");
        assert_eq!(args.trim_end(), page);
        let file = server.open_page().unwrap().to_path_buf();
        assert_eq!(page, format!("file://{}", file.display()));
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().unwrap()), 0o700);
        let html = std::fs::read_to_string(&file).unwrap();
        assert!(
            html.contains(&format!("content=\"0;url={}\"", server.url())),
            "{html}"
        );
        server.stop(Duration::from_secs(5));
        assert!(!file.exists());
        assert!(!file.parent().unwrap().exists());
    }
}

//! One SFTP session: the ssh child process, the protocol client over its pipes, and the tail
//! of what ssh printed, turned into an error that says what to fix when the session fails.

use std::fmt;
use std::io::IsTerminal;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arca_backend::{BackendError, ErrorKind};
use openssh_sftp_client::{Sftp, SftpOptions as ClientOptions};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

/// Bytes of ssh's stderr kept for messages.
const TAIL: usize = 4096;

/// How long a failed start waits for ssh to exit and finish writing its stderr.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// How long a session that nobody can type into (no terminal) may take from ssh's start to
/// the SFTP server's hello: a login script that waits for input, or a stuck `sftp-server`,
/// made every command hang for good. With a terminal, a password may be being typed.
const HELLO_WAIT: Duration = Duration::from_secs(120);

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The last few KiB ssh wrote to its stderr.
#[derive(Debug, Default)]
struct Tail(Mutex<Vec<u8>>);

impl Tail {
    fn push(&self, bytes: &[u8]) {
        let mut t = lock(&self.0);
        t.extend_from_slice(bytes);
        if t.len() > TAIL {
            let cut = t.len() - TAIL;
            t.drain(..cut);
        }
    }

    /// The last `n` meaningful lines, joined (banners of `@` and known-host notices left
    /// out); empty when ssh said nothing.
    fn last_lines(&self, n: usize) -> String {
        let text = String::from_utf8_lossy(&lock(&self.0)).into_owned();
        let lines: Vec<&str> = text
            .lines()
            .map(|l| l.trim().trim_start_matches("ssh: "))
            .filter(|l| {
                !l.is_empty() && !l.starts_with('@') && !l.starts_with("Warning: Permanently added")
            })
            .collect();
        lines[lines.len().saturating_sub(n)..].join(" / ")
    }
}

async fn capture(mut from: impl AsyncRead + Unpin, into: Arc<Tail>) {
    let mut buf = [0u8; 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => into.push(&buf[..n]),
        }
    }
}

/// Whether ssh must not prompt: nobody could answer (no terminal on stdin or stderr, no
/// askpass program).
pub(super) fn non_interactive() -> bool {
    !std::io::stdin().is_terminal()
        && !std::io::stderr().is_terminal()
        && std::env::var_os("SSH_ASKPASS").is_none()
}

/// A running SFTP session.
pub(super) struct Session {
    /// The protocol client; share it freely, requests are multiplexed.
    pub(super) sftp: Sftp,
    /// When the server last sent anything ([`Heard`]).
    heard: Arc<AtomicU64>,
    child: Mutex<Child>,
    stderr: Arc<Tail>,
    lost: AtomicBool,
}

/// Milliseconds since the first call: a clock for [`Heard`].
fn now_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The server's output, noting when it last said anything: a request is given up when the
/// server stays silent for the time limit, not when a slow link takes long (a whole pack read
/// over a slow but working link was cut: hunt 24).
struct Heard<R> {
    inner: R,
    at: Arc<AtomicU64>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Heard<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.at.store(now_ms(), Ordering::Relaxed);
        }
        r
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("pid", &lock(&self.child).id())
            .field("lost", &self.lost.load(Ordering::Relaxed))
            .finish()
    }
}

impl Session {
    /// Runs `argv` (ssh and its arguments, ending in `-s sftp` or an equivalent) and speaks
    /// SFTP over its stdin and stdout. `reconnect`: a session worked before, so failing to
    /// reach the server is transient (except for host key and login refusals). Must run on
    /// the network runtime.
    pub(super) async fn start(
        argv: &[String],
        location: &str,
        reconnect: bool,
    ) -> Result<Session, BackendError> {
        let err = |kind, msg: String| BackendError::new("connect", location, kind, msg);
        let Some((program, args)) = argv.split_first() else {
            return Err(err(ErrorKind::Other, "empty ssh command".into()));
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if non_interactive() {
            // Nobody can type into ssh anyway: keep the terminal's Ctrl-C (if any) for arca,
            // which then stops in order instead of losing its session mid-write.
            cmd.process_group(0);
        }
        let mut child = cmd.spawn().map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "; install the OpenSSH client or name the command with -o sftp.command=..."
            } else {
                ""
            };
            err(
                ErrorKind::Other,
                format!("cannot run {program:?}: {e}{hint}"),
            )
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(err(ErrorKind::Other, "ssh's pipes are missing".into()));
        };
        let tail = Arc::new(Tail::default());
        let reader = tokio::spawn(capture(stderr, tail.clone()));
        let heard = Arc::new(AtomicU64::new(now_ms()));
        let stdout = Heard {
            inner: stdout,
            at: heard.clone(),
        };
        let hello = Sftp::new(stdin, stdout, ClientOptions::new());
        let started = if non_interactive() {
            match tokio::time::timeout(hello_wait(), hello).await {
                Ok(r) => r,
                Err(_) => {
                    let _ = child.start_kill();
                    let _ = tokio::time::timeout(EXIT_WAIT, reader).await;
                    let said = tail.last_lines(3);
                    let said = if said.is_empty() {
                        "ssh said nothing".to_string()
                    } else {
                        format!("ssh: {said}")
                    };
                    return Err(err(
                        ErrorKind::Other,
                        format!(
                            "the server did not start SFTP within {} s ({said}): a login \
                             script that waits for input, or a stuck sftp-server",
                            hello_wait().as_secs_f64()
                        ),
                    ));
                }
            }
        } else {
            hello.await
        };
        match started {
            Ok(sftp) => Ok(Session {
                sftp,
                heard,
                child: Mutex::new(child),
                stderr: tail,
                lost: AtomicBool::new(false),
            }),
            Err(e) => {
                let status = match tokio::time::timeout(EXIT_WAIT, child.wait()).await {
                    Ok(Ok(status)) => Some(status),
                    _ => {
                        let _ = child.start_kill();
                        None
                    }
                };
                let _ = tokio::time::timeout(EXIT_WAIT, reader).await;
                let said = tail.last_lines(3);
                let (kind, msg) = explain_start_failure(&said, status, &e.to_string(), reconnect);
                Err(err(kind, msg))
            }
        }
    }

    /// How long the server has said nothing.
    pub(super) fn silent_for(&self) -> Duration {
        Duration::from_millis(now_ms().saturating_sub(self.heard.load(Ordering::Relaxed)))
    }

    /// Whether the session may still serve requests.
    pub(super) fn alive(&self) -> bool {
        !self.lost.load(Ordering::Relaxed) && matches!(lock(&self.child).try_wait(), Ok(None))
    }

    /// Marks the session dead (its connection failed); the next request starts another.
    pub(super) fn mark_lost(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }

    /// What ssh said, or how it ended, for the message of a lost session.
    pub(super) fn last_words(&self) -> String {
        let said = self.stderr.last_lines(2);
        let status = match lock(&self.child).try_wait() {
            Ok(Some(s)) => Some(s),
            _ => None,
        };
        match (said.is_empty(), status) {
            (false, _) => format!("ssh: {said}"),
            (true, Some(s)) => format!("ssh {}", exit_text(s)),
            (true, None) => "ssh said nothing".into(),
        }
    }
}

fn exit_text(s: ExitStatus) -> String {
    match s.code() {
        Some(c) => format!("exited with status {c}"),
        None => format!("ended: {s}"),
    }
}

/// The kind and message of a session that failed to start, from ssh's last words (`said`),
/// its exit status and the SFTP client's error.
fn explain_start_failure(
    said: &str,
    status: Option<ExitStatus>,
    client_error: &str,
    reconnect: bool,
) -> (ErrorKind, String) {
    let lower = said.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    let ssh = if said.is_empty() {
        match status {
            Some(s) => format!("ssh {} without a message", exit_text(s)),
            None => "ssh said nothing".into(),
        }
    } else {
        format!("ssh: {said}")
    };
    if has(&[
        "host key verification failed",
        "remote host identification has changed",
        "host key for",
        "no matching host key",
    ]) {
        // A key never seen is not a changed one (the advice to remove the old key named a
        // key that did not exist: hunt 23).
        let changed = has(&["has changed", "identification has changed"]);
        let advice = if changed {
            "If the key legitimately changed, remove the old one with `ssh-keygen -R <host>` and \
             connect once with ssh to check and accept the new one"
        } else {
            "It is not known yet: connect once with ssh to check and accept it"
        };
        return (
            ErrorKind::PermissionDenied,
            format!(
                "the server's host key is not trusted ({ssh}). {advice}; arca never accepts \
                 host keys itself"
            ),
        );
    }
    if has(&["permission denied", "too many authentication failures"]) {
        return (
            ErrorKind::PermissionDenied,
            format!(
                "ssh could not log in ({ssh}); check the user name, the key (load it into \
                 ssh-agent, or pass -o sftp.args='-i KEYFILE') and the server's \
                 authorized_keys"
            ),
        );
    }
    let kind = if reconnect {
        ErrorKind::Transient
    } else {
        ErrorKind::Other
    };
    if has(&["could not resolve hostname", "name or service not known"]) {
        return (
            kind,
            format!(
                "cannot resolve the server's name ({ssh}); check the location, or the \
                 HostName in your ssh configuration"
            ),
        );
    }
    if has(&[
        "connection refused",
        "connection timed out",
        "operation timed out",
        "no route to host",
        "network is unreachable",
        "connection reset",
        "connection closed by",
        "kex_exchange_identification",
    ]) {
        return (
            kind,
            format!("cannot reach the SSH server ({ssh}); is it running, and the port right?"),
        );
    }
    if has(&["subsystem request failed"]) {
        return (
            ErrorKind::Other,
            format!(
                "the server does not offer SFTP ({ssh}); enable `Subsystem sftp` in its \
                 sshd_config"
            ),
        );
    }
    // The first four bytes of text printed on the session were read as the length of the
    // server's hello (`nologin`'s "This account..." as 1416128883): say it was text.
    if let Some(text) = printed_text(client_error) {
        return (
            ErrorKind::Other,
            format!(
                "the server printed text where SFTP should start (\"{text}...\"; {ssh}): the \
                 account's login shell refuses logins (nologin), or a login script prints text"
            ),
        );
    }
    if status.is_none_or(|s| s.success()) && said.is_empty() {
        return (
            ErrorKind::Other,
            format!(
                "the server did not answer in SFTP ({client_error}); a login script that \
                 prints text on the server breaks SFTP"
            ),
        );
    }
    (
        kind,
        format!("the SFTP session did not start ({ssh}; {client_error})"),
    )
}

/// [`HELLO_WAIT`], or what `ARCA_TEST_SFTP_HELLO_MS` says (tests).
fn hello_wait() -> Duration {
    std::env::var("ARCA_TEST_SFTP_HELLO_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(HELLO_WAIT, Duration::from_millis)
}

/// The text whose first four bytes the SFTP client took for a hello's length, when the
/// error says so and they are printable.
fn printed_text(client_error: &str) -> Option<String> {
    let after = client_error.split("hello message of length ").nth(1)?;
    let n: u32 = after
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    // The length was read from the wire most significant byte first.
    let mut b = n.to_le_bytes();
    b.reverse();
    b.iter()
        .all(|c| c.is_ascii_graphic() || *c == b' ')
        .then(|| String::from_utf8_lossy(&b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_taken_for_a_hello_is_named() {
        let e =
            "sftp server returned hello message of length 1416128883, which is longer than 4096.";
        let (k, msg) = explain_start_failure("", None, e, false);
        assert_eq!(k, ErrorKind::Other);
        assert!(
            msg.contains("printed text where SFTP should start (\"This...\""),
            "{msg}"
        );
        assert!(msg.contains("nologin"), "{msg}");
        assert_eq!(printed_text("hello message of length 5000"), None);
    }

    #[test]
    fn tail_keeps_the_last_bytes_and_meaningful_lines() {
        let t = Tail::default();
        let noise: &[u8] = b"\n@@@@@@@@\n@ WARNING @\nWarning: Permanently added 'h' to the list\n";
        let lines: &[u8] = b"one\n\ntwo\nthree\n";
        t.push(&vec![b'x'; TAIL * 2]);
        t.push(noise);
        t.push(lines);
        assert_eq!(lock(&t.0).len(), TAIL);
        assert_eq!(t.last_lines(2), "two / three");
        let xs = "x".repeat(TAIL - noise.len() - lines.len());
        assert_eq!(t.last_lines(10), format!("{xs} / one / two / three"));
    }

    #[test]
    fn start_failures_say_what_to_fix() {
        let cases = [
            (
                "Host key for [127.0.0.1]:2222 has changed and you have requested strict \
                 checking. / Host key verification failed.",
                ErrorKind::PermissionDenied,
                "host key is not trusted",
            ),
            (
                "No ED25519 host key is known for [127.0.0.1]:2222 and you have requested \
                 strict checking. / Host key verification failed.",
                ErrorKind::PermissionDenied,
                "not known yet: connect once with ssh",
            ),
            (
                "root@127.0.0.1: Permission denied (publickey).",
                ErrorKind::PermissionDenied,
                "could not log in",
            ),
            (
                "ssh: Could not resolve hostname nas: Name or service not known",
                ErrorKind::Other,
                "cannot resolve",
            ),
            (
                "ssh: connect to host 127.0.0.1 port 9: Connection refused",
                ErrorKind::Other,
                "cannot reach",
            ),
            (
                "subsystem request failed on channel 0",
                ErrorKind::Other,
                "does not offer SFTP",
            ),
            ("", ErrorKind::Other, "did not answer in SFTP"),
            ("something odd", ErrorKind::Other, "did not start"),
        ];
        for (said, kind, text) in cases {
            let (k, msg) = explain_start_failure(said, None, "EOF", false);
            assert_eq!(k, kind, "{said}");
            assert!(msg.contains(text), "{said}: {msg}");
        }
        let (k, _) = explain_start_failure("Connection refused", None, "EOF", true);
        assert_eq!(k, ErrorKind::Transient);
        let (k, _) = explain_start_failure("Permission denied (publickey)", None, "EOF", true);
        assert_eq!(k, ErrorKind::PermissionDenied);
    }
}

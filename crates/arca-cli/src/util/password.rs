//! The repository password and new passwords: from a file, a command, the environment or a
//! prompt, read into storage that is wiped when dropped; and the KDF parameters of new keys.

use std::io::{self, IsTerminal};
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use arca_format::KdfParams;
use zeroize::Zeroizing;

use crate::cli::{Global, KdfArgs};

/// The most a password file or command may give before its first line ends.
const LONGEST_LINE: usize = 64 << 10;

/// Reads `r` into zeroizing storage up to its first `\n` (kept) or its end, and at most
/// [`LONGEST_LINE`] bytes; what follows the line in the last piece read is dropped. Reading
/// to the end took every byte of `--password-file /dev/zero` or `--password-command 'yes
/// pw'`, memory growing until the process was killed. The buffer grows by copying into a
/// larger zeroizing one, which wipes the smaller when dropped: no reallocation leaves a copy
/// of the secret in freed memory (as `read_to_string` or `read_to_end` would).
fn read_secret(mut r: impl io::Read) -> io::Result<Zeroizing<Vec<u8>>> {
    let mut out = Zeroizing::new(Vec::with_capacity(256));
    let mut chunk = Zeroizing::new([0u8; 256]);
    loop {
        let n = match r.read(&mut chunk[..]) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let piece = &chunk[..n];
        if let Some(end) = piece.iter().position(|b| *b == b'\n') {
            extend_secret(&mut out, &piece[..=end]);
            return Ok(out);
        }
        extend_secret(&mut out, piece);
        if out.len() > LONGEST_LINE {
            return Err(io::Error::other(format!(
                "no line end in its first {} KiB: the password is the first line",
                LONGEST_LINE >> 10
            )));
        }
    }
}

/// Reads `r` up to and including its first `\n` (or its end) into zeroizing storage, one byte
/// at a time so that nothing after the line is taken (and at most [`LONGEST_LINE`] bytes).
fn read_secret_line(mut r: impl io::Read) -> io::Result<Zeroizing<Vec<u8>>> {
    let mut out = Zeroizing::new(Vec::with_capacity(256));
    let mut b = [0u8; 1];
    loop {
        match r.read(&mut b) {
            Ok(0) => return Ok(out),
            Ok(_) => {
                extend_secret(&mut out, &b);
                if b[0] == b'\n' {
                    return Ok(out);
                }
                if out.len() > LONGEST_LINE {
                    return Err(io::Error::other(format!(
                        "no line end in its first {} KiB: the password is the first line",
                        LONGEST_LINE >> 10
                    )));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Appends `more` to secret `out`; when it must grow, the bytes move to a larger zeroizing
/// buffer and the smaller one is wiped, so no reallocation leaves a copy behind.
pub fn extend_secret(out: &mut Zeroizing<Vec<u8>>, more: &[u8]) {
    if out.len() + more.len() > out.capacity() {
        let mut bigger = Zeroizing::new(Vec::with_capacity(
            (out.len() + more.len()).max(out.capacity().saturating_mul(2)),
        ));
        bigger.extend_from_slice(out);
        *out = bigger;
    }
    out.extend_from_slice(more);
}

/// The first line of `text` (without its `\n` or `\r\n`) in zeroizing storage.
fn first_line(text: &str) -> Zeroizing<String> {
    Zeroizing::new(text.lines().next().unwrap_or("").to_string())
}

/// The password in a password file: its first line, never empty. Every copy of the file's
/// content is wiped when dropped.
pub fn read_password_file(p: &Path) -> Result<Zeroizing<String>> {
    // A pipe or terminal (`--password-file /dev/stdin`, `<(echo pw)`) may carry more than the
    // password, such as the data of `backup --stdin`: read it a byte at a time so that
    // nothing after the first line is taken (read by pieces, the data's first bytes were
    // lost). A regular file is read by pieces.
    let regular = std::fs::metadata(p).is_ok_and(|m| m.is_file());
    let bytes = std::fs::File::open(p)
        .and_then(|f| {
            if regular {
                read_secret(f)
            } else {
                read_secret_line(f)
            }
        })
        .with_context(|| format!("cannot read password file {}", arca_format::text::shown(p)))?;
    let text = std::str::from_utf8(&bytes).map_err(|_| {
        anyhow!(
            "password file {} holds bytes that are not UTF-8: passwords are text",
            arca_format::text::shown(p)
        )
    })?;
    let first = first_line(text);
    // No key has an empty password (init and key add refuse one).
    if first.is_empty() {
        // Empty, or blank lines only? What follows the first line is looked at, bounded.
        // Only a regular file is opened again: a pipe would give up more of what it carries.
        let mut rest = vec![];
        if regular {
            let _ = std::fs::File::open(p).and_then(|f| {
                io::Read::read_to_end(&mut io::Read::take(f, LONGEST_LINE as u64), &mut rest)
            });
        }
        if bytes.is_empty() || (regular && rest.iter().all(|b| b.is_ascii_whitespace())) {
            bail!("password file {} is empty", arca_format::text::shown(p));
        }
        bail!(
            "password file {}: its first line is empty (the password is the first line)",
            arca_format::text::shown(p)
        );
    }
    Ok(first)
}

/// Set when standard input carries data (`backup --stdin`, a `-` file argument such as
/// `--files-from -`): a password is then never read from it.
pub static STDIN_IS_DATA: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks for a password: on the terminal when standard input is one, else (as restic) the
/// first line of standard input, unless that carries data. `missing` says how to give it
/// otherwise.
pub fn ask_password(question: &str, missing: &str) -> Result<Zeroizing<String>> {
    let stdin = io::stdin();
    if !stdin.is_terminal() && !STDIN_IS_DATA.load(std::sync::atomic::Ordering::Relaxed) {
        let line = read_secret_line(stdin.lock())
            .map_err(|e| anyhow!("{missing}; cannot read it from standard input: {e}"))?;
        let p = first_line(std::str::from_utf8(&line).map_err(|_| {
            anyhow!("{missing}; standard input holds bytes that are not UTF-8: passwords are text")
        })?);
        if p.is_empty() {
            bail!("{missing}; standard input is not a terminal and gave none");
        }
        return Ok(p);
    }
    if !stdin.is_terminal() && !Path::new("/dev/tty").exists() {
        bail!("{missing}; standard input holds the data to back up");
    }
    crate::prompt::password(question)
        .map(Zeroizing::new)
        .map_err(|e| anyhow!("{missing}; cannot prompt: {e}"))
}

/// How to give the repository password, for errors.
const GIVE_PASSWORD: &str = "no password given (set ARCA_PASSWORD or ARCA_PASSWORD_FILE, or \
                             use --password-file or --password-command)";

/// The first line a shell command prints (`--password-command`); its failure names it.
pub fn password_from_command(cmd: &str) -> Result<Zeroizing<String>> {
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        // Standard input carrying the data to back up (`backup --stdin`, a `-` list) is not
        // the command's to read: a command that read some (`ssh host cat pw` without `-n`)
        // silently cut the start off the backup (hunt 25).
        .stdin(
            if STDIN_IS_DATA.load(std::sync::atomic::Ordering::Relaxed) {
                std::process::Stdio::null()
            } else {
                std::process::Stdio::inherit()
            },
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot run password command {cmd:?}"))?;
    // Read here rather than by `output()`, whose buffer is freed without being wiped; only
    // the first line, then the pipe is closed: a command printing on (`yes pw`) ends on
    // SIGPIPE, which is no failure.
    let read = child.stdout.take().map(read_secret).transpose();
    let status = child
        .wait()
        .with_context(|| format!("cannot run password command {cmd:?}"))?;
    let stdout = read
        .with_context(|| format!("cannot read the output of password command {cmd:?}"))?
        .unwrap_or_default();
    // Killed by SIGPIPE, or a shell saying so of its last command (128 + 13), once the line
    // was read and the pipe closed.
    let piped_on = stdout.ends_with(b"\n")
        && (std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGPIPE)
            || status.code() == Some(128 + libc::SIGPIPE));
    if !status.success() && !piped_on {
        bail!("password command {cmd:?} failed ({status})");
    }
    // Taken as text, as a password file or ARCA_PASSWORD: bytes that are not UTF-8 were
    // replaced by U+FFFD, so that different passwords opened the same repository.
    let text = std::str::from_utf8(&stdout).map_err(|_| {
        anyhow!(
            "password command {cmd:?} printed bytes that are not UTF-8: passwords are text \
             (encode binary secrets, e.g. with base64)"
        )
    })?;
    let first = first_line(text);
    if first.is_empty() {
        bail!("password command {cmd:?} printed no password");
    }
    Ok(first)
}

/// The repository password: `--password-file`/`ARCA_PASSWORD_FILE`, then
/// `--password-command`/`ARCA_PASSWORD_COMMAND`, then `ARCA_PASSWORD`, then a prompt on the
/// terminal.
pub fn password(g: &Global) -> Result<Zeroizing<String>> {
    if let Some(f) = &g.password_file {
        return read_password_file(f);
    }
    if let Some(c) = &g.password_command {
        return password_from_command(c);
    }
    if let Some(p) = env_password("ARCA_PASSWORD")? {
        return Ok(p);
    }
    ask_password("enter password for repository: ", GIVE_PASSWORD)
}

/// The password in environment variable `name`: none when it is unset or empty (as every
/// `ARCA_*` variable), an error when it is not UTF-8 (it was ignored, and the error then said
/// no password was given).
pub fn env_password(name: &str) -> Result<Option<Zeroizing<String>>> {
    match std::env::var(name) {
        Ok(p) if p.is_empty() => Ok(None),
        Ok(p) => Ok(Some(Zeroizing::new(p))),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            bail!("{name} holds bytes that are not UTF-8: passwords are text")
        }
    }
}

/// Refuses new password `p` when it is empty or only whitespace (as restic refuses an empty
/// one): such a key is as good as none; or when it holds a line break. `source` names where it came from. Only new
/// passwords are checked: an existing key opens with whatever password it was given.
pub fn refuse_blank(p: &str, what: &str, source: &str) -> Result<()> {
    if p.is_empty() {
        bail!("empty {what} from {source} refused: a key needs a password");
    }
    if p.trim().is_empty() {
        bail!("{what} from {source} refused: it is only whitespace (a key needs a password)");
    }
    // A password file, a command and the prompt give the first line only: such a key would
    // open from an environment variable alone.
    if p.contains(['\n', '\r']) {
        bail!(
            "{what} from {source} refused: it holds a line break (a password file, a password \
             command and the prompt give only a first line)"
        );
    }
    Ok(())
}

/// A new password: from `file`, `ARCA_NEW_PASSWORD`, or prompted twice. One that is empty
/// or only whitespace is refused, naming where it came from.
pub fn new_password(file: Option<&Path>, env_var: &str, what: &str) -> Result<Zeroizing<String>> {
    let (p, source) = if let Some(f) = file {
        (
            read_password_file(f)?,
            format!("password file {}", arca_format::text::shown(f)),
        )
    } else if let Some(p) = env_password(env_var)? {
        (p, env_var.to_string())
    } else {
        let missing = if env_var == "ARCA_PASSWORD" {
            GIVE_PASSWORD.replace("no password", &format!("no {what}"))
        } else {
            format!(
                "no {what} given (set {env_var} or use --new-password-file; ARCA_PASSWORD \
                 gives the current one)"
            )
        };
        let a = ask_password(&format!("enter {what}: "), &missing)?;
        // Read from standard input (not a terminal), it is not asked twice, as restic's.
        if io::stdin().is_terminal() {
            let b = ask_password(&format!("enter {what} again: "), &missing)?;
            if *a != *b {
                bail!("passwords do not match");
            }
            (a, "the prompt".to_string())
        } else {
            (a, "standard input".to_string())
        }
    };
    refuse_blank(&p, what, &source)?;
    Ok(p)
}

/// KDF parameters from the hidden options.
pub fn kdf(k: &KdfArgs) -> KdfParams {
    KdfParams {
        memory_kib: k.kdf_memory_kib,
        iterations: k.kdf_iterations,
        // Argon2 needs 8 KiB per lane; tests ask for tiny memory costs.
        parallelism: k.kdf_parallelism.clamp(1, (k.kdf_memory_kib / 8).max(1)),
    }
}

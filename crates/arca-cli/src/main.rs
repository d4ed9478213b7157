//! The `arca` binary: parses the command line and hands over to the library crates.
//! Exit codes: 0 success, 1 fatal error, 3 finished but some entries failed.

/// `eprintln!` for the whole crate (defined before the modules, it shadows the standard one
/// in all of them): a line stderr cannot take is dropped. The standard macro panics when
/// stderr's reader is gone (`arca backup 2>&1 | head -1`, a logger that died): a backup
/// exited 101 without saving its snapshot, a restore stopped halfway.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod cli;
mod commands;
mod hoist;
mod lock_signals;
mod malloc;
mod profile;
mod progress;
mod prompt;
mod util;

use std::process::ExitCode;

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes on one line, each cause once: library errors already name their
/// source in their own message.
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for c in e.chain() {
        let text = c.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

/// Lets the process open as many files as the hard limit allows: restore keeps a few hundred
/// small files open per reading thread, and a soft limit of 1024 (common on desktops) would
/// refuse some of them. A failure leaves the limit as it was (the readers adapt to it).
fn raise_open_files_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let want = hard.min(1 << 20);
        if soft < want {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, want, hard);
        }
    }
}

/// The stack of the thread a command runs on (reserved; used as deep walks need it).
const STACK_SIZE: usize = 1 << 30;

/// [`STACK_SIZE`], or a quarter of the address space a limit (`ulimit -v`) allows when that is
/// less (at least 64 MiB): the reservation alone would otherwise take what every other thread
/// and buffer needs, and no command could start under a limit of about 1 GiB.
fn stack_size() -> usize {
    malloc::address_space_limit().map_or(STACK_SIZE, |limit| {
        usize::try_from(limit / 4)
            .unwrap_or(STACK_SIZE)
            .clamp(64 << 20, STACK_SIZE)
    })
}

/// The cause in a panic message of the standard library's thread spawning ("failed to spawn
/// thread: Os { .., message: \"...\" }"), if the message is one.
fn spawn_failure(msg: &str) -> Option<&str> {
    // Rayon's pool reports the same failure in its own words.
    let rest = msg.strip_prefix("failed to spawn thread").or_else(|| {
        msg.split_once("ThreadPoolBuildError { kind: IOError")
            .map(|(_, r)| r)
    })?;
    Some(match rest.split_once("message: \"") {
        Some((_, m)) => m.split('"').next().unwrap_or(m),
        None => rest.trim_start_matches(':').trim(),
    })
}

/// Turns the panic of a thread that could not be started (the system refused it: a memory,
/// address-space or process limit) into an error message and exit code 1, removing the locks
/// the command holds, instead of a panic report and locks left behind. Other panics keep the
/// standard report.
fn install_panic_hook() {
    let standard = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied());
        if let Some(cause) = msg.and_then(spawn_failure) {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("arca: {}", malloc::thread_refused(cause));
            }
            arca_repo::release_held(std::time::Duration::from_secs(5));
            std::process::exit(1);
        }
        standard(info);
    }));
}

/// The options whose value `-` reads a list from standard input.
const STDIN_LISTS: &[&[u8]] = &[
    b"--files-from",
    b"--files-from-verbatim",
    b"--files-from-raw",
    b"--exclude-file",
    b"--iexclude-file",
    b"--include-file",
    b"--iinclude-file",
];

/// Whether `--json` is among the options (before a `--`).
fn wants_json(args: &[std::ffi::OsString]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|a| a.as_encoded_bytes() != b"--")
        .any(|a| a.as_encoded_bytes() == b"--json")
}

/// Prints fatal error `e` (exit `code`): under `--json` one JSON line (restic's
/// `exit_error`), else `arca: ` and the error on one line.
fn report_fatal(json: bool, code: u8, e: &anyhow::Error) {
    if json {
        let line = serde_json::json!({
            "message_type": "exit_error",
            "code": code,
            "message": one_line(e),
        });
        eprintln!("{line}");
    } else {
        eprintln!("arca: {}", one_line(e));
    }
}

fn main() -> ExitCode {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let args = match profile::expand(raw.clone()) {
        Ok(a) => a,
        Err(e) => {
            // Under --json too: it printed plain text there.
            report_fatal(wants_json(&raw), 1, &e);
            return ExitCode::from(1);
        }
    };
    // `backup --stdin` and a `-` list file (`--files-from -`, `--exclude-file=-`) read data
    // from standard input: a password is then not read from it. Any other `-` is a value
    // (`find -`, `tag --add -`): it took the piped password away.
    let stdin_readers: Vec<String> = args
        .iter()
        .enumerate()
        .take_while(|(_, a)| a.as_encoded_bytes() != b"--")
        .filter_map(|(i, a)| {
            let a = a.as_encoded_bytes();
            let list_option = |o: &[u8]| STDIN_LISTS.contains(&o);
            if a == b"--stdin" {
                return Some("--stdin".to_string());
            }
            let option = if a == b"-" && i > 0 && list_option(args[i - 1].as_encoded_bytes()) {
                args[i - 1].as_encoded_bytes()
            } else {
                a.strip_suffix(b"=-").filter(|o| list_option(o))?
            };
            Some(format!("{} -", String::from_utf8_lossy(option)))
        })
        .collect();
    // Standard input is read once: a second reader would find it empty.
    if stdin_readers.len() > 1 {
        let e = anyhow::anyhow!(
            "standard input can be read for one option only, and {} all read it",
            stdin_readers.join(", ")
        );
        report_fatal(wants_json(&args), 2, &e);
        return ExitCode::from(2);
    }
    util::STDIN_IS_DATA.store(
        !stdin_readers.is_empty(),
        std::sync::atomic::Ordering::Relaxed,
    );
    // A fatal error under `--json` is a JSON line too (restic's `exit_error`).
    let json = wants_json(&args);
    util::JSON_ERRORS.store(json, std::sync::atomic::Ordering::Relaxed);
    let cli = cli::parse(hoist::hoist_flags(args));
    raise_open_files_limit();
    // A server that fails is retried for up to a minute: say so, or it looks like a hang.
    arca_backend::on_retry(|n| {
        progress::warn(&format!(
            "warning: {}; retrying in {:.1} s (attempt {} of {})",
            n.error,
            n.delay.as_secs_f64(),
            n.attempt,
            n.attempts
        ));
    });
    malloc::return_large_buffers();
    install_panic_hook();
    // The command runs on a thread with a large stack: walks of snapshot trees recurse once
    // per folder level, and a tree thousands of levels deep (which backup stores) overflowed
    // the main thread's 8 MiB. Only the pages used are ever allocated.
    let ran = std::thread::Builder::new()
        .name("arca".into())
        .stack_size(stack_size())
        .spawn(move || commands::run(cli))
        .map_err(|e| anyhow::anyhow!("{}", malloc::thread_refused(e)))
        .and_then(|t| {
            // A panic has printed its message already; it exits as a panic does (101).
            t.join().unwrap_or_else(|_| std::process::exit(101))
        });
    match ran {
        Ok(code) => ExitCode::from(code),
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let code = failure_code(&e);
            report_fatal(json, code, &e);
            ExitCode::from(code)
        }
    }
}

/// The exit code of a failed command, restic's for the failures scripts tell apart: 10 no
/// repository at the location, 11 the repository is locked, 12 wrong password; else 1.
fn failure_code(e: &anyhow::Error) -> u8 {
    use arca_repo::RepoError;
    for cause in e.chain() {
        if cause.downcast_ref::<commands::Interrupted>().is_some()
            || cause.downcast_ref::<commands::Stopped>().is_some()
        {
            return commands::INTERRUPTED;
        }
        if cause.downcast_ref::<commands::Usage>().is_some() {
            return 2;
        }
        match cause.downcast_ref::<RepoError>() {
            Some(
                RepoError::NoRepository { .. }
                | RepoError::NotARepository { .. }
                | RepoError::ForeignRepository { .. },
            ) => return 10,
            Some(RepoError::Locked { .. }) => return 11,
            Some(RepoError::WrongPassword { .. }) => return 12,
            _ => {}
        }
    }
    1
}

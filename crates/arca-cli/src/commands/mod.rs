//! One module per command; each returns the process exit code.

mod backup;
pub mod cache;
mod cat;
mod check;
pub mod copy;
pub mod diff;
pub mod dump;
pub mod find;
pub mod forget;
pub mod generate;
mod init;
mod key;
pub mod list;
pub mod lock;
mod ls;
pub mod mount;
pub mod prune;
pub mod recover;
pub mod repair;
mod restore;
pub mod rewrite;
mod snapshots;
pub mod stats;
mod subfolder;
mod table;
pub mod tag;
pub mod ui;
pub mod version;

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use arca_repo::SnapshotFilter;

use crate::cli::{Cli, Command, FilterArgs};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<u8> {
    let g = &cli.global;
    if changes_something(&cli.command) {
        FINISH_WITHOUT_STDOUT.store(true, Ordering::Relaxed);
    }
    match &cli.command {
        Command::Init(a) => init::run(g, a),
        Command::Backup(a) => backup::run(g, a),
        Command::Snapshots(a) => snapshots::run(g, a),
        Command::Ls(a) => ls::run(g, a),
        Command::Restore(a) => restore::run(g, a),
        Command::Check(a) => check::run(g, a),
        Command::Key(a) => key::run(g, a),
        Command::Cat(a) => cat::run(g, a),
        Command::Forget(a) => forget::run(g, a),
        Command::Prune(a) => prune::run(g, a),
        Command::Repair(a) => repair::run(g, a),
        Command::Recover(a) => recover::run(g, a),
        Command::Unlock(a) => lock::run(g, a),
        Command::List(a) => list::run(g, a),
        Command::Find(a) => find::run(g, a),
        Command::Diff(a) => diff::run(g, a),
        Command::Dump(a) => dump::run(g, a),
        Command::Stats(a) => stats::run(g, a),
        Command::Copy(a) => copy::run(g, a),
        Command::Tag(a) => tag::run(g, a),
        Command::Rewrite(a) => rewrite::run(g, a),
        Command::Mount(a) => mount::run(g, a),
        Command::Ui(a) => ui::run(g, a),
        Command::Cache(a) => cache::run(g, a),
        Command::Version(a) => version::run(a),
        Command::Completions(a) => generate::completions(a),
        Command::Man(a) => generate::man(a),
    }
}

/// Exit code of a command stopped by Ctrl-C (as restic and shells report SIGINT).
pub(crate) const INTERRUPTED: u8 = 130;

/// Set by the first SIGINT or SIGTERM to a command that stops on signals itself (see
/// [`cancel_on_signals`]): waits outside its pipeline (`--retry-lock`) look at it.
pub(crate) static SIGNALLED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// A command stopped by a signal while it waited, before its own work began.
#[derive(Debug)]
pub(crate) struct Interrupted(pub &'static str);

/// A usage error found after the options were parsed (options that exclude each other, a
/// command given nothing to do): exit 2, as clap's own (they exited 1, as failures do).
#[derive(Debug)]
pub(crate) struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Returns [`Usage`] error `msg` (as `bail!` returns a failure).
macro_rules! usage {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::commands::Usage(format!($($arg)*))))
    };
}
pub(crate) use usage;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted while {}", self.0)
    }
}

impl std::error::Error for Interrupted {}

/// A command that Ctrl-C (SIGINT, SIGTERM, SIGHUP) stopped once it wound down: what it
/// leaves, told as every fatal error is (exit 130; under `--json` an `exit_error` line, where
/// it was plain text).
#[derive(Debug)]
pub(crate) struct Stopped(pub String);

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Stopped {}

/// A flag set by the first SIGINT or SIGTERM; a second one while the command winds down
/// ends the process with `exit_code` once the locks it holds are removed (it left them
/// behind), and a third at once.
fn cancel_on_signals(exit_code: u8) -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    crate::lock_signals::handled_by_command();
    let cancel = Arc::new(AtomicBool::new(false));
    let last = Arc::new(AtomicBool::new(false));
    let sigs = crate::lock_signals::stop_signals();
    for &sig in &sigs {
        signal_hook::flag::register_conditional_shutdown(
            sig,
            i32::from(exit_code),
            Arc::clone(&last),
        )?;
        signal_hook::flag::register(sig, Arc::clone(&cancel))?;
    }
    let mut signals = signal_hook::iterator::Signals::new(&sigs)?;
    std::thread::Builder::new()
        .name("arca-cancel".into())
        .stack_size(64 << 10)
        .spawn(move || {
            for (n, _) in signals.forever().enumerate() {
                SIGNALLED.store(true, Ordering::SeqCst);
                if n >= 1 {
                    last.store(true, Ordering::SeqCst);
                    // Said, as one interruption's report is (it ended in silence).
                    eprintln!(
                        "arca: interrupted again: stopped at once, without finishing what was \
                         under way; run the command again (what it had saved is kept and not \
                         sent again)"
                    );
                    arca_repo::release_held(std::time::Duration::from_secs(5));
                    std::process::exit(i32::from(exit_code));
                }
            }
        })
        .map_err(|e| anyhow::anyhow!("{}", crate::malloc::thread_refused(e)))?;
    Ok(cancel)
}

/// The table of `--profile`: per stage, its threads and their summed busy and waiting times.
fn print_stages(stages: &[arca_repo::profile::StageProfile]) -> Result<()> {
    out("stage          threads      busy   waiting for input   waiting to hand on")?;
    for s in stages {
        out(&format!(
            "{:<14} {:>7} {:>8.2} s {:>17.2} s {:>18.2} s",
            s.name, s.threads, s.busy, s.wait_in, s.wait_out
        ))?;
    }
    Ok(())
}

/// The phases of `--profile`: `phases: index 0.01 s, ...`.
fn print_phases(phases: &[(&'static str, f64)]) -> Result<()> {
    let list: Vec<String> = phases
        .iter()
        .map(|(n, s)| format!("{n} {s:.2} s"))
        .collect();
    out(&format!("phases: {}", list.join(", ")))
}

/// The stages of `--profile` as JSON.
fn stages_json(stages: &[arca_repo::profile::StageProfile]) -> serde_json::Value {
    stages
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name,
                "threads": s.threads,
                "busy_seconds": s.busy,
                "wait_input_seconds": s.wait_in,
                "wait_output_seconds": s.wait_out,
            })
        })
        .collect()
}

/// The snapshot filter from `--host`, `--tag` and `--path`. A path is made absolute and
/// normalized as `backup` stores it (`src/`, `./src` and `//x/src` name `/x/src`). A lone
/// `--host ''` is no host filter, as restic reads it (its way to unset a default host): no
/// snapshot has an empty host name (`backup --host ''` records this machine's), so it selected
/// nothing, and `forget --host '' --keep-last 1` removed nothing, silently.
fn filter(f: &FilterArgs) -> SnapshotFilter {
    // Names that are not UTF-8 are recorded with U+FFFD (FORMAT.md), and so compared.
    let path = |p: &std::path::PathBuf| {
        arca_backup::sources::absolute(p).map_or_else(
            |_| p.to_string_lossy().into_owned(),
            |a| a.to_string_lossy().into_owned(),
        )
    };
    SnapshotFilter {
        hosts: match f.hosts.as_slice() {
            [only] if only.is_empty() => vec![],
            hosts => hosts.to_vec(),
        },
        tags: SnapshotFilter::tag_lists(&f.tags),
        paths: f.paths.iter().map(path).collect(),
    }
}

/// Every snapshot passing `filter`, oldest first, and how many snapshot files were left out
/// (damaged, or a newer arca's): each is named once on stderr, as listings name it.
fn list_all(
    repo: &arca_repo::Repository,
    filter: &SnapshotFilter,
) -> Result<(Vec<(arca_format::Id, arca_format::Snapshot)>, usize)> {
    let (list, damaged) = repo.list_snapshots_report(filter)?;
    for (id, e) in &damaged {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("arca: {}", arca_repo::damaged_snapshot_message(id, e));
        }
    }
    Ok((list, damaged.len()))
}

/// Exit 3, with a last line, for `find` and `ls` when `skipped` folder listings could not be
/// read and were left out (each named as it was met); everything else was `done`.
fn left_out_listings(skipped: usize, done: &str) -> u8 {
    crate::progress::warn(&format!(
        "arca: {} could not be read and {} left out (see above); everything else was {done}",
        crate::util::count(skipped, "folder listing"),
        if skipped == 1 { "was" } else { "were" }
    ));
    3
}

/// The exit code of a command that went over every snapshot (`tag`, `rewrite`, `forget`,
/// `find`, `stats`)
/// when `left_out` snapshot files could not be read: 3, as `copy`'s, with a last line saying
/// so (the files were named as they were found), so that a script sees that not every
/// snapshot was handled; 0 when none was left out.
fn left_out_exit(left_out: usize) -> u8 {
    if left_out == 0 {
        return 0;
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "arca: {} could not be read and {} left out (named above)",
            crate::util::count(left_out, "snapshot file"),
            if left_out == 1 { "was" } else { "were" }
        );
    }
    3
}

/// Standard output, locked, whose write errors say that they are standard output's (a full
/// disk behind `> file` read as a bare "No space left on device"); the error keeps its kind, so
/// a closed pipe is still recognised.
pub(crate) struct Stdout(std::io::StdoutLock<'static>);

impl Stdout {
    pub(crate) fn lock() -> Self {
        Self(std::io::stdout().lock())
    }
}

fn stdout_error(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("cannot write to standard output: {e}"))
}

impl std::io::Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        write_stdout(&mut self.0, &[buf], false).map_err(stdout_error)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        write_stdout(&mut self.0, &[], true).map_err(stdout_error)
    }
}

/// Whether the command changes the repository or a target: once standard output is closed
/// (`| head -1`, `| grep -q`), it finishes its work and drops what it would print. Stopping
/// at the first line left `forget` having removed nothing, `forget --prune` without its
/// prune, and `tag` and `copy` half done, with exit 0 (restic dies by SIGPIPE, exit 141).
/// Commands that only read stop, exit 0.
static FINISH_WITHOUT_STDOUT: AtomicBool = AtomicBool::new(false);
/// Standard output was found closed by a command that finishes without it.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

fn changes_something(c: &Command) -> bool {
    !matches!(
        c,
        Command::Snapshots(_)
            | Command::Ls(_)
            | Command::Check(_)
            | Command::Cat(_)
            | Command::List(_)
            | Command::Find(_)
            | Command::Diff(_)
            | Command::Dump(_)
            | Command::Stats(_)
            | Command::Version(_)
            | Command::Completions(_)
            | Command::Man(_)
    )
}

/// Writes to stdout unless it was found closed by a command that finishes without it
/// ([`FINISH_WITHOUT_STDOUT`]); a closed pipe is otherwise an error the caller maps to exit 0.
fn write_stdout(o: &mut impl std::io::Write, parts: &[&[u8]], flush: bool) -> std::io::Result<()> {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let wrote = parts
        .iter()
        .try_for_each(|p| o.write_all(p))
        .and_then(|()| if flush { o.flush() } else { Ok(()) });
    match wrote {
        Err(e)
            if e.kind() == std::io::ErrorKind::BrokenPipe
                && FINISH_WITHOUT_STDOUT.load(Ordering::Relaxed) =>
        {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        other => other,
    }
}

/// Writes a line to stdout (see [`write_stdout`]).
fn out(line: &str) -> Result<()> {
    out_bytes(line.as_bytes())
}

/// Writes raw bytes and a newline to stdout (paths that are not UTF-8).
fn out_bytes(line: &[u8]) -> Result<()> {
    write_stdout(&mut std::io::stdout().lock(), &[line, b"\n"], false)
        .context("cannot write to standard output")
}

//! Shared CLI helpers: opening the repository, passwords, size and duration parsing and
//! human formatting.

use std::io::{self, IsTerminal};
use std::sync::{Arc, OnceLock};

use anyhow::{Result, anyhow};
use arca_backend::{
    Backend, BackendStats, Fault, FaultBackend, FileType, MeteredBackend, Op, RetryBackend,
    RetryPolicy, RetryStats, Rule, Throttle, Trigger,
};
use arca_remote::{Location, RemoteOptions};
use arca_repo::{CacheMode, Repository};

use crate::cli::Global;

mod args;
mod lock;
mod password;

pub use args::{
    ReuseDir, TextPattern, at_least_one, backend_option_arg, duration_arg, group_by_arg,
    keep_tag_arg, non_empty_arg, parse_duration, parse_size, parse_snapshot_time, size_arg,
    snapshot_time_arg, stdin_path_arg, subset_arg, thread_count,
};
pub use lock::{lock, take_lock};
pub use password::{
    STDIN_IS_DATA, ask_password, env_password, extend_secret, kdf, new_password, password,
    password_from_command, read_password_file, refuse_blank,
};

/// An open repository and the counters of its backend.
pub struct Opened {
    pub repo: Repository,
    pub stats: Arc<BackendStats>,
}

pub use arca_format::text::{count, human_bytes, human_duration, noun};

/// Set when `--json` is given: a fatal error is then one JSON line, all a reader parses, so
/// it does not point back at plain-text lines printed before it.
pub static JSON_ERRORS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Hidden test hook: fault-injection rules for the backend, see [`fault_rules`].
const TEST_FAULTS: &str = "ARCA_TEST_FAULTS";

/// Counters of the retrying decorator of the repository this process opened (a command opens
/// one), for [`stats_json`].
static RETRY_STATS: OnceLock<Arc<RetryStats>> = OnceLock::new();

/// Parses `ARCA_TEST_FAULTS`: comma-separated rules `OP:TYPE:WHEN[:FAULT][:seed=N]`, where OP
/// is `read|write|list|delete|stat|any`, TYPE `pack|index|snapshot|key|config|any`, WHEN
/// `10%`, `always`, `nth=N` or `from=N`, and FAULT `transient` (connection reset, the
/// default), `timeout`, `nospace`, `denied`, `corrupt`, `truncate` or `delay=DURATION` (the
/// request waits, then goes through). Example:
/// `write:pack:10%:seed=7,write:index:10%`.
pub fn fault_rules(spec: &str) -> Result<Vec<Rule>> {
    let mut rules = vec![];
    for r in spec.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let bad = |why: &str| anyhow!("invalid {TEST_FAULTS} rule {r:?}: {why}");
        let mut parts = r.split(':');
        let (op, t, when) = match (parts.next(), parts.next(), parts.next()) {
            (Some(o), Some(t), Some(w)) => (o, t, w),
            _ => return Err(bad("expected OP:TYPE:WHEN")),
        };
        let op = match op {
            "read" => Some(Op::Read),
            "write" => Some(Op::Write),
            "list" => Some(Op::List),
            "delete" => Some(Op::Delete),
            "stat" => Some(Op::Stat),
            "any" => None,
            _ => return Err(bad("unknown operation")),
        };
        let file_type = match t {
            "any" => None,
            t => Some(
                FileType::ALL
                    .into_iter()
                    .find(|f| f.to_string() == t)
                    .ok_or_else(|| bad("unknown file type"))?,
            ),
        };
        let num = |v: &str| v.parse::<u64>().map_err(|_| bad("bad number"));
        let mut seed = 1;
        let mut fault = Fault::Fail(io::ErrorKind::ConnectionReset);
        for p in parts {
            fault = match p {
                "transient" => Fault::Fail(io::ErrorKind::ConnectionReset),
                "timeout" => Fault::Fail(io::ErrorKind::TimedOut),
                "nospace" => Fault::NoSpace,
                "denied" => Fault::Fail(io::ErrorKind::PermissionDenied),
                "corrupt" => Fault::Corrupt,
                "truncate" => Fault::Truncate,
                _ => match (p.strip_prefix("seed="), p.strip_prefix("delay=")) {
                    (Some(v), _) => {
                        seed = num(v)?;
                        fault
                    }
                    (_, Some(d)) => Fault::Delay(parse_duration(d).map_err(|_| bad("bad delay"))?),
                    _ => return Err(bad("unknown fault")),
                },
            };
        }
        let trigger = if let Some(p) = when.strip_suffix('%') {
            let percent = p.parse().map_err(|_| bad("bad percentage"))?;
            Trigger::Percent { percent, seed }
        } else if let Some(n) = when.strip_prefix("nth=") {
            Trigger::Nth(num(n)?)
        } else if let Some(n) = when.strip_prefix("from=") {
            Trigger::From(num(n)?)
        } else if when == "always" {
            Trigger::Always
        } else {
            return Err(bad("unknown trigger"));
        };
        rules.push(Rule {
            op,
            file_type,
            trigger,
            fault,
        });
    }
    Ok(rules)
}

/// Builds the backend named by `-r`: the folder, bucket or SFTP folder (with injected faults under the hidden
/// `ARCA_TEST_FAULTS`), the meter and throttle over it, so every real request counts, retries
/// included, and the retrying decorator outermost.
pub fn backend(g: &Global) -> Result<(Arc<dyn Backend>, Arc<BackendStats>)> {
    let repo = g
        .repo
        .as_deref()
        .filter(|r| !r.is_empty())
        .ok_or_else(|| anyhow!("no repository given: use -r/--repo or set ARCA_REPOSITORY"))?;
    backend_at(g, repo, &g.options)
}

/// Builds the backend of the repository at `repo` with the backend options `options` and
/// otherwise `g`'s settings (connections, simulated link, test faults), as [`backend`] does
/// for `-r` (`copy` and `init --copy-chunker-params` open their source with it).
pub fn backend_at(
    g: &Global,
    repo: &str,
    options: &[String],
) -> Result<(Arc<dyn Backend>, Arc<BackendStats>)> {
    let location = Location::parse(repo)?;
    let remote = RemoteOptions {
        connections: g.connections.map(|c| c as usize),
        extended: RemoteOptions::parse_extended(options).map_err(|e| anyhow!(e))?,
    };
    let throttle = Throttle {
        latency: g
            .backend_latency
            .as_deref()
            .map(parse_duration)
            .transpose()?
            .unwrap_or_default(),
        bandwidth: g
            .backend_bandwidth
            .as_deref()
            .map(parse_size)
            .transpose()?
            .unwrap_or(0),
    };
    let mut store: Arc<dyn Backend> = arca_remote::open(&location, &remote)?;
    // Hidden test hook: "REFRESH_MS,LOST_MS", the lock refresh period and the time after
    // which a lock not refreshed is lost (see arca_repo::lock::check_held).
    if let Some(t) = std::env::var_os("ARCA_TEST_LOCK_TIMING") {
        let ms: Vec<u64> = t
            .to_string_lossy()
            .split(',')
            .filter_map(|x| x.trim().parse().ok())
            .collect();
        if let [refresh, lost] = ms[..] {
            arca_repo::lock::set_timing(
                std::time::Duration::from_millis(refresh),
                std::time::Duration::from_millis(lost),
            );
        }
    }
    if let Some(spec) = std::env::var_os(TEST_FAULTS) {
        let faulty = FaultBackend::new(store);
        for r in fault_rules(&spec.to_string_lossy())? {
            faulty.add(r);
        }
        store = Arc::new(faulty);
    }
    let metered = MeteredBackend::new(store, throttle);
    let stats = metered.stats();
    let retrying = RetryBackend::new(metered, RetryPolicy::default());
    // Only the first repository of the process reports its retries (there is only one).
    let _ = RETRY_STATS.set(retrying.stats());
    Ok((Arc::new(retrying), stats))
}

/// Opens the repository with the password, through the local cache of a remote repository
/// (`--cache-dir`, `--no-cache`).
pub fn open(g: &Global) -> Result<Opened> {
    open_with_cache(g, &cache_mode(g))
}

/// Opens the repository without a local cache: every file is read from the repository (for
/// `check`, which verifies the repository's copies).
pub fn open_uncached(g: &Global) -> Result<Opened> {
    open_with_cache(g, &CacheMode::Off)
}

/// The cache the options ask for: none with `--no-cache`, else `--cache-dir`/`ARCA_CACHE_DIR`
/// (an empty value counts as unset), else the default folder.
pub fn cache_mode(g: &Global) -> CacheMode {
    match &g.cache_dir {
        _ if g.no_cache => CacheMode::Off,
        Some(d) if !d.as_os_str().is_empty() => CacheMode::Dir(d.clone()),
        _ => CacheMode::Default,
    }
}

fn open_with_cache(g: &Global, cache: &CacheMode) -> Result<Opened> {
    let (b, stats) = backend(g)?;
    let pw = password(g)?;
    let repo = note_whitespace(Repository::open_cached(b, pw.as_bytes(), cache), &pw, "")?;
    Ok(Opened { repo, stats })
}

/// `opened`, with a note when it failed for a wrong password that begins or ends with
/// whitespace. Taken as written, spaces too (restic trims a password file's): a file whose
/// line an editor left ending in a space was told only "wrong password". `whose`: "" or
/// "source " (copy's).
pub fn note_whitespace<T>(
    opened: Result<T, arca_repo::RepoError>,
    pw: &str,
    whose: &str,
) -> Result<T, arca_repo::RepoError> {
    if let Err(arca_repo::RepoError::WrongPassword { .. }) = &opened
        && pw.trim() != pw
    {
        crate::progress::warn(&format!(
            "arca: note: the {whose}password given begins or ends with whitespace, which is \
             part of it"
        ));
    }
    opened
}

/// JSON of the backend counters, and of the retries and probes made after transient failures
/// (pack reads of a restore retry on their own and are not counted here).
pub fn stats_json(stats: &BackendStats) -> serde_json::Value {
    let s = stats.snapshot();
    let r = RETRY_STATS.get();
    serde_json::json!({
        "requests": s.requests,
        "bytes_read": s.bytes_read,
        "bytes_written": s.bytes_written,
        "retries": r.map_or(0, |r| r.retries()),
        "probes": r.map_or(0, |r| r.probes()),
    })
}

/// Whether progress should be drawn: on a terminal that can move its cursor (`TERM=dumb`,
/// Emacs' shell and some CI consoles, showed the escape codes and the spinner as garbage; restic
/// draws nothing there either).
pub fn interactive(g: &Global, json: bool) -> bool {
    !g.quiet && !json && io::stderr().is_terminal() && !dumb_terminal(std::env::var_os("TERM"))
}

/// Whether `TERM` names a terminal that cannot move its cursor.
fn dumb_terminal(term: Option<std::ffi::OsString>) -> bool {
    term.is_some_and(|t| t == "dumb")
}

pub use arca_format::text::mode_string;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn no_progress_is_drawn_on_a_dumb_terminal() {
        assert!(dumb_terminal(Some("dumb".into())));
        assert!(!dumb_terminal(Some("xterm-256color".into())));
        assert!(!dumb_terminal(None));
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("16MiB").unwrap(), 16 << 20);
        assert_eq!(parse_size("100MB").unwrap(), 100_000_000);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("").is_err());
        assert_eq!(parse_duration("20ms").unwrap(), Duration::from_millis(20));
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(
            parse_duration("1m0.5s").unwrap(),
            Duration::from_millis(60_500)
        );
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("1h1x").is_err());
        let r = fault_rules("write:pack:10%:seed=7, any:any:nth=3:nospace").unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].op, Some(Op::Write));
        assert_eq!(r[0].file_type, Some(FileType::Pack));
        assert_eq!(
            r[0].trigger,
            Trigger::Percent {
                percent: 10.0,
                seed: 7
            }
        );
        assert_eq!(r[0].fault, Fault::Fail(io::ErrorKind::ConnectionReset));
        assert_eq!((r[1].op, r[1].file_type), (None, None));
        assert_eq!(
            (r[1].trigger, r[1].fault),
            (Trigger::Nth(3), Fault::NoSpace)
        );
        for bad in [
            "write:pack",
            "fly:pack:always",
            "write:blob:always",
            "write:pack:often",
        ] {
            assert!(fault_rules(bad).is_err(), "{bad}");
        }
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(
            mode_string(arca_format::NodeKind::Dir, 0o1777),
            "drwxrwxrwt"
        );
        assert_eq!(
            mode_string(arca_format::NodeKind::File, 0o4755),
            "-rwsr-xr-x"
        );
    }
}

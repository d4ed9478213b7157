//! Shared CLI helpers: opening the repository, passwords, size and duration parsing and
//! human formatting.

use std::io::{self, IsTerminal};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use arca_backend::{
    Backend, BackendStats, Fault, FaultBackend, FileType, MeteredBackend, Op, RetryBackend,
    RetryPolicy, RetryStats, Rule, Throttle, Trigger,
};
use arca_format::KdfParams;
use arca_remote::{Location, RemoteOptions};
use arca_repo::{CacheMode, Repository};
use zeroize::Zeroizing;

use crate::cli::{Global, KdfArgs};

/// An open repository and the counters of its backend.
pub struct Opened {
    pub repo: Repository,
    pub stats: Arc<BackendStats>,
}

fn number_and_unit<'a>(s: &'a str, what: &str) -> Result<(f64, &'a str)> {
    arca_format::text::number_and_unit(s, what).map_err(|e| anyhow!(e))
}

/// Parses sizes like `16MiB`, `100MB`, `4096`, `1.5G`.
pub fn parse_size(s: &str) -> Result<u64> {
    arca_format::text::parse_size(s).map_err(|e| anyhow!(e))
}

/// clap's check of a SIZE option (kept as written, parsed where it is used): a bad value is
/// a usage error naming the option, with exit code 2.
pub fn size_arg(s: &str) -> Result<String, String> {
    arca_format::text::parse_size(s)
        .map(|_| s.to_string())
        .map_err(|e| {
            // A size too large is a size: say so (it was told sizes look like 4096).
            if e.ends_with("out of range") {
                "out of range: a size must stay below 1.8e19 bytes (18000000TB)".into()
            } else if e.ends_with(arca_format::text::NOT_WHOLE_BYTES) {
                format!(
                    "{s:?} {}: write a whole number of bytes (4096), or a unit (1.5K, 2MiB)",
                    arca_format::text::NOT_WHOLE_BYTES
                )
            } else {
                "expected a size such as 4096, 512KiB, 64MiB or 2G".into()
            }
        })
}

/// clap's check of `check --read-data-subset`, as [`size_arg`].
pub fn subset_arg(s: &str) -> Result<String, String> {
    arca_maintenance::check::DataSubset::parse(s)
        .map(|_| s.to_string())
        .map_err(|_| {
            "expected a group n/m (m up to 256), a percentage above 0% and at most 100%, or a \
             size such as 500M"
                .into()
        })
}

/// clap's check of `backup --stdin-filename`: a name, or names joined by `/` (restic's
/// `db/dump.sql` stores the file in a folder `db`); given back without empty components.
pub fn stdin_path_arg(s: std::ffi::OsString) -> Result<std::ffi::OsString, String> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let parts: Vec<&[u8]> = s
        .as_bytes()
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .collect();
    if parts.is_empty()
        || parts
            .iter()
            .any(|c| arca_format::tree::validate_name(c).is_err())
    {
        return Err(
            "expected a file name or a path of names (`db/dump.sql`), without `.` or `..`".into(),
        );
    }
    Ok(std::ffi::OsString::from_vec(parts.join(&b'/')))
}

/// A snapshot time (`backup --time`): `2006-01-02 15:04:05` or `2006-01-02 15:04` in local
/// time, or RFC 3339 with its own offset.
pub fn parse_snapshot_time(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    arca_format::text::parse_time(s, false)
}

/// clap's check of `backup --time`.
pub fn snapshot_time_arg(s: &str) -> Result<String, String> {
    parse_snapshot_time(s)
        .map(|_| s.to_string())
        .ok_or_else(|| {
            "expected a time such as \"2006-01-02 15:04:05\" (local) or 2006-01-02T15:04:05+07:00"
                .into()
        })
}

/// clap's reading of a `--group-by` list (host, paths, tags).
pub fn group_by_arg(
    s: &str,
) -> Result<arca_maintenance::forget::GroupBy, arca_maintenance::forget::ParseError> {
    s.parse()
}

/// clap's check of a `--keep-tag` list: at least one tag (an empty list kept nothing and
/// was refused only after the repository was opened, exit 1).
pub fn keep_tag_arg(s: &str) -> Result<String, String> {
    if s.split(',').all(|t| t.trim().is_empty()) {
        return Err("expected a tag, or tags separated by commas".into());
    }
    Ok(s.to_string())
}

/// clap's check of a backend option: KEY=VALUE with a known key (exit 2, before anything
/// is opened).
pub fn backend_option_arg(s: &str) -> Result<String, String> {
    RemoteOptions::parse_extended(&[s.to_string()])?;
    Ok(s.to_string())
}

/// clap's check of a count that must be at least 1.
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a whole number of at least 1".into()),
    }
}

/// Most threads (or reads, or uploads in flight) an option may ask for: far more than helps
/// on any machine, and few enough that the threads can be made (a spawn that fails aborts).
pub const MAX_THREADS: usize = 256;

/// clap's check of a thread count: 1 to [`MAX_THREADS`].
pub fn thread_count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number from 1 to {MAX_THREADS}")),
    }
}

/// clap's check of a DURATION option, as [`size_arg`].
pub fn duration_arg(s: &str) -> Result<String, String> {
    parse_duration(s)
        .map(|_| s.to_string())
        .map_err(|_| "expected a duration such as 100us, 20ms, 1.5s, 2m or 1h30m".into())
}

/// Parses durations like `20ms`, `1.5s`, `100us`, `2h`, and Go's sums such as `1h30m`; a
/// bare number alone is seconds. In a sum every number has its unit, as Go's
/// `time.ParseDuration` wants: `10ms5` was read as 10 ms and 5 s.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let whole = s.trim();
    let mut rest = whole;
    if rest.is_empty() {
        bail!("invalid duration {s:?}");
    }
    let mut secs = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let unit_len = rest[digits..]
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len() - digits);
        let term = &rest[..digits + unit_len];
        let (n, unit) = number_and_unit(term, "duration")?;
        secs += n * match unit.trim() {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            // Seconds without a unit only when the number is all there is (`5`, not `1m5`,
            // nor `5 10ms`).
            "" if term.len() != whole.len() => {
                bail!("invalid duration {s:?}: a number without a unit in a sum")
            }
            "" | "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            u => bail!("invalid duration unit {u:?} in {s:?}"),
        };
        rest = &rest[digits + unit_len..];
    }
    if !(0.0..1e9).contains(&secs) {
        bail!("duration {s:?} out of range");
    }
    Ok(Duration::from_secs_f64(secs))
}

pub use arca_format::text::{human_bytes, human_duration};

/// Reads `r` to its end into zeroizing storage. The buffer grows by copying into a larger
/// zeroizing one, which wipes the smaller when dropped: no reallocation leaves a copy of the
/// secret in freed memory (as `read_to_string` or `read_to_end` would).
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
        extend_secret(&mut out, &chunk[..n]);
    }
}

/// Reads `r` up to and including its first `\n` (or its end) into zeroizing storage, one byte
/// at a time so that nothing after the line is taken.
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
    let bytes = std::fs::File::open(p)
        .and_then(read_secret)
        .with_context(|| format!("cannot read password file {}", p.display()))?;
    let text = std::str::from_utf8(&bytes).map_err(|_| {
        anyhow!(
            "password file {} holds bytes that are not UTF-8: passwords are text",
            p.display()
        )
    })?;
    let first = first_line(text);
    // No key has an empty password (init and key add refuse one).
    if first.is_empty() {
        if text.bytes().all(|b| b.is_ascii_whitespace()) {
            bail!("password file {} is empty", p.display());
        }
        bail!(
            "password file {}: its first line is empty (the password is the first line)",
            p.display()
        );
    }
    Ok(first)
}

/// Set when `--json` is given: a fatal error is then one JSON line, all a reader parses, so
/// it does not point back at plain-text lines printed before it.
pub static JSON_ERRORS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

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
    // Read here rather than by `output()`, whose buffer is freed without being wiped.
    let read = child.stdout.take().map(read_secret).transpose();
    let status = child
        .wait()
        .with_context(|| format!("cannot run password command {cmd:?}"))?;
    let stdout = read
        .with_context(|| format!("cannot read the output of password command {cmd:?}"))?
        .unwrap_or_default();
    if !status.success() {
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

/// A new password: from `file`, `ARCA_NEW_PASSWORD`, or prompted twice.
pub fn new_password(file: Option<&Path>, env_var: &str, what: &str) -> Result<Zeroizing<String>> {
    let p = if let Some(f) = file {
        read_password_file(f)?
    } else if let Some(p) = env_password(env_var)? {
        p
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
        }
        a
    };
    if p.is_empty() {
        bail!("empty password refused");
    }
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
    let repo = Repository::open_cached(b, pw.as_bytes(), cache)?;
    Ok(Opened { repo, stats })
}

/// Takes a lock of `kind` for `command` unless `--no-lock` was given.
pub fn lock(
    g: &Global,
    repo: &Repository,
    kind: arca_repo::LockKind,
    command: &str,
) -> Result<Option<arca_repo::Lock>> {
    if g.no_lock {
        return Ok(None);
    }
    take_lock(g, repo, kind, command).map(Some)
}

/// Takes a lock of `kind` for `command` whatever `--no-lock` says (prune, forget and repair
/// always lock), trying again for as long as `--retry-lock` allows while another process
/// holds a conflicting one.
pub fn take_lock(
    g: &Global,
    repo: &Repository,
    kind: arca_repo::LockKind,
    command: &str,
) -> Result<arca_repo::Lock> {
    let patience = g.retry_lock.as_deref().map(parse_duration).transpose()?;
    let started = std::time::Instant::now();
    let mut pause = Duration::from_secs(1);
    // The holder the waiting line named, if it was printed.
    let mut said: Option<String> = None;
    loop {
        crate::lock_signals::arm(crate::commands::INTERRUPTED);
        match repo.lock_for(kind, command) {
            Err(arca_repo::RepoError::Locked { location, holder })
                if patience.is_some_and(|p| started.elapsed() < p) =>
            {
                let left = patience
                    .unwrap_or_default()
                    .saturating_sub(started.elapsed());
                if said.is_none() && !g.quiet {
                    eprintln!(
                        "repository {location} is locked {holder}; trying again for up to {} \
                         (--retry-lock)",
                        g.retry_lock.as_deref().unwrap_or_default()
                    );
                    said = Some(holder);
                }
                // In slices: Ctrl-C to a backup or restore waiting here stops it (they
                // handle signals themselves, and waited out the whole --retry-lock).
                let until = std::time::Instant::now() + spread(pause).min(left);
                while std::time::Instant::now() < until {
                    if crate::commands::SIGNALLED.load(std::sync::atomic::Ordering::SeqCst) {
                        return Err(crate::commands::Interrupted("waiting for the lock").into());
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                pause = (pause * 2).min(Duration::from_secs(30));
            }
            Err(arca_repo::RepoError::Locked { location, holder }) if patience.is_some() => {
                // The holder the waiting line named (and what to do about it) is not said
                // again; a new one is. Under --json the error line is all a reader parses:
                // it names the holder.
                let who = match &said {
                    Some(first)
                        if same_holder(first, &holder)
                            && !JSON_ERRORS.load(std::sync::atomic::Ordering::Relaxed) =>
                    {
                        "by the holder named above".to_string()
                    }
                    _ => holder,
                };
                // `--retry-lock 0` waited not at all: nothing to add.
                let holder = if patience.is_some_and(|p| p.is_zero()) {
                    who
                } else {
                    format!(
                        "{who}, still after trying again for {} (--retry-lock)",
                        g.retry_lock.as_deref().unwrap_or_default()
                    )
                };
                return Err(arca_repo::RepoError::Locked { location, holder }.into());
            }
            other => return lock_outcome(other, kind, command),
        }
    }
}

/// Whether two descriptions of the lock in the way name the same holder: they differ in the
/// time it was last refreshed, which a live holder renews while others wait.
fn same_holder(a: &str, b: &str) -> bool {
    let who = |h: &str| h.split(", refreshed ").next().unwrap_or(h).to_string();
    who(a) == who(b)
}

/// `pause` spread at random over [pause/2, 3 pause/2): two processes that took their locks
/// at the same moment (each saw the other's and backed out) try again at different times,
/// instead of in step, colliding again at every attempt until both gave up.
fn spread(pause: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    // A new RandomState is seeded at random per process (the standard library's source).
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    pause / 2 + pause.mul_f64((r >> 11) as f64 / (1u64 << 53) as f64)
}

/// What [`take_lock`] makes of one attempt: a read-only repository's refusal names
/// `--no-lock`.
fn lock_outcome(
    taken: arca_repo::Result<arca_repo::Lock>,
    kind: arca_repo::LockKind,
    command: &str,
) -> Result<arca_repo::Lock> {
    // Commands that write the repository need it writable, lock or not.
    let writes = matches!(
        command,
        "backup" | "copy" | "tag" | "rewrite" | "recover" | "key"
    );
    match taken {
        Ok(l) => Ok(l),
        // A repository this process cannot write (a read-only mount, another user's files)
        // can still be read without a lock.
        Err(arca_repo::RepoError::Backend(b))
            if b.op == "write"
                && (b.kind == arca_backend::ErrorKind::PermissionDenied
                    || b.source.raw_os_error() == Some(libc::EROFS)) =>
        {
            // An exclusive lock is for a command that changes the repository (forget,
            // prune, repair): it said only "Read-only file system".
            Err(if writes || kind == arca_repo::LockKind::Exclusive {
                anyhow!("{b} (the repository cannot be written, and {command} writes to it)")
            } else {
                anyhow!("{b} (cannot take a lock: to only read the repository, run with --no-lock)")
            })
        }
        // A full disk: reading still works without a lock; writing needs room first.
        Err(arca_repo::RepoError::Backend(b))
            if b.op == "write" && b.kind == arca_backend::ErrorKind::NoSpace =>
        {
            Err(if writes || kind == arca_repo::LockKind::Exclusive {
                anyhow!("{b} (the repository's disk is full: free some space first)")
            } else {
                anyhow!(
                    "{b} (the repository's disk is full: free some space, or run with \
                     --no-lock to only read the repository)"
                )
            })
        }
        Err(e) => Err(e.into()),
    }
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

/// A pattern option's value: text, and a glob. A value that is not UTF-8 is refused naming the
/// option and the value (clap said only "invalid UTF-8 was detected in one or more
/// arguments").
#[derive(Clone, Copy, Debug)]
pub struct TextPattern;

impl clap::builder::TypedValueParser for TextPattern {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let text = value.to_str().map(str::to_string).ok_or_else(|| {
            let option = arg
                .map(|a| a.to_string())
                .unwrap_or_else(|| "a pattern".into());
            // Not InvalidUtf8: that kind is clap's own unnamed error, which `cli` rewrites.
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "{option} {:?}: a pattern must be text (UTF-8); match a name that is not \
                     with a wildcard in place of its other bytes (e.g. `caf*`)\n",
                    value.to_string_lossy()
                ),
            )
        })?;
        // A pattern that is not a glob is a bad value, exit 2 as the others (it was 1).
        match arca_fs::pattern::PathMatcher::new(std::slice::from_ref(&text)) {
            Ok(_) => Ok(text),
            Err(e) => {
                let option = arg.map(|a| a.to_string()).unwrap_or_default();
                Err(clap::Error::raw(
                    clap::error::ErrorKind::ValueValidation,
                    format!("{option}: {e}\n"),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_progress_is_drawn_on_a_dumb_terminal() {
        assert!(dumb_terminal(Some("dumb".into())));
        assert!(!dumb_terminal(Some("xterm-256color".into())));
        assert!(!dumb_terminal(None));
    }

    /// A size that names no whole number of bytes is refused (`0.5` was 0 bytes, and
    /// `--exclude-larger-than 0.5` left out every file that is not empty); a fraction in a
    /// larger unit is truncated to whole bytes.
    #[test]
    fn sizes_are_whole_numbers_of_bytes() {
        for bad in ["0.5", "1.5B", "1.5b", "2.25", "0.0001K", "0.5 B"] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{bad:?}: {e}");
            assert!(
                size_arg(bad).unwrap_err().contains(&format!("{bad:?}")),
                "{bad:?}"
            );
        }
        assert_eq!(parse_size("1.5K").unwrap(), 1536);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("1.1K").unwrap(), 1126);
        assert_eq!(parse_size("1.0").unwrap(), 1);
        assert_eq!(parse_size("0").unwrap(), 0);
        assert_eq!(parse_size("0.0K").unwrap(), 0);
        assert_eq!(size_arg("1.5K").unwrap(), "1.5K");
    }

    /// As Go's `time.ParseDuration`: every number of a sum has its unit (`10ms5` was 10 ms
    /// and 5 s); a bare number alone stays seconds.
    #[test]
    fn durations_want_a_unit_after_each_number_of_a_sum() {
        for bad in [
            "10ms5", "1m5", "5 10ms", "1h-5m", "-5m", "", " ", "1h 5", ".", "1..5s", "ms", "5e3",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
            assert!(duration_arg(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration(" 5 ").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("0.5").unwrap(), Duration::from_millis(500));
        assert_eq!(
            parse_duration("1h2m3s4ms").unwrap(),
            Duration::from_millis(3_723_004)
        );
        assert_eq!(parse_duration(".5s").unwrap(), Duration::from_millis(500));
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

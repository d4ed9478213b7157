//! Who and where we are: host name, user name and ids, recorded in key files and snapshots.

/// Host name of this machine ("unknown" if it cannot be read).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|| "unknown".into())
}

/// Name of the effective user (its id when the name is unknown).
pub fn username() -> String {
    let uid = nix::unistd::geteuid();
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

/// Name of the effective group (its number when it has none).
pub fn groupname() -> String {
    let gid = nix::unistd::getegid();
    nix::unistd::Group::from_gid(gid)
        .ok()
        .flatten()
        .map(|g| g.name)
        .unwrap_or_else(|| gid.to_string())
}

/// Effective user and group ids.
pub fn ids() -> (u32, u32) {
    (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    )
}

/// Nanoseconds since the Unix epoch, now.
pub fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

/// When process `pid` started, in clock ticks after boot (field 22 of `/proc/PID/stat`; no
/// wall clock in it); `None` when it cannot be read.
pub fn process_start(pid: u32) -> Option<u64> {
    ProcStat::read(pid)?.start
}

/// What `/proc/PID/stat` says of a process, read once.
#[derive(Debug, Clone, Copy)]
pub struct ProcStat {
    /// Ended but not yet reaped by its parent (state `Z` or `X`): it exists for
    /// `kill(pid, 0)`, yet will never run again.
    pub ended: bool,
    /// When it started, in clock ticks after boot (field 22).
    pub start: Option<u64>,
}

impl ProcStat {
    /// `None` when the file cannot be read.
    pub fn read(pid: u32) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name, in parentheses, may hold spaces: fields are counted after it.
        let (_, rest) = stat.rsplit_once(')')?;
        let mut fields = rest.split_whitespace();
        let ended = matches!(fields.next(), Some("Z" | "X" | "x"));
        let start = fields.nth(18).and_then(|t| t.parse().ok());
        Some(Self { ended, start })
    }
}

/// This process's process-id space: the machine's boot id and the pid namespace
/// (`BOOT_ID pid:[INODE]`), empty when either cannot be read. Process ids mean something only
/// within one such space: two machines, or containers, may share a host name.
pub fn process_space() -> &'static str {
    // It does not change while the process runs: read once.
    static SPACE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SPACE.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id");
        let ns = std::fs::read_link("/proc/self/ns/pid");
        match (boot, ns) {
            (Ok(b), Ok(n)) if !b.trim().is_empty() => format!("{} {}", b.trim(), n.display()),
            _ => String::new(),
        }
    })
}

//! A throwaway OpenSSH server on 127.0.0.1 for tests: its own host key, client key,
//! sshd_config, known_hosts and ssh client config, killed (with its sessions) on drop.

// Self-contained (std and tempfile only) so other test crates can include it with
// `#[path = ".../arca-remote/tests/sshd/mod.rs"] mod sshd;`. Every wait is bounded; a missing
// `sshd` or `ssh-keygen` fails the test with a message saying what to install.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Host alias of the server in [`Sshd::ssh_config`].
pub const HOST: &str = "arca-test";

/// How long the server may take to accept connections.
const READY: Duration = Duration::from_secs(10);

/// A running test SSH server; dropping it kills the server and every session process.
pub struct Sshd {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// Temporary folder holding the keys and configuration (removed on drop); tests may put
    /// repositories in it.
    pub dir: PathBuf,
    /// ssh client configuration defining host [`HOST`] (the server, its known host key, the
    /// client key, strict host key checking, batch mode).
    pub ssh_config: PathBuf,
    /// The `sftp.command` value that opens an SFTP session on the server through
    /// [`Sshd::ssh_config`].
    pub command: String,
    /// Private key the server accepts.
    pub client_key: PathBuf,
    /// Private host key of the server (the public one is next to it, `.pub`).
    pub host_key: PathBuf,
    /// known_hosts file holding the server's key.
    pub known_hosts: PathBuf,
    /// The user the client logs in as (the one running the tests).
    pub user: String,
    sshd: PathBuf,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    _tmp: tempfile::TempDir,
}

fn find_sshd() -> PathBuf {
    for p in ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"] {
        if Path::new(p).is_file() {
            return PathBuf::from(p);
        }
    }
    if let Ok(out) = Command::new("sh").args(["-c", "command -v sshd"]).output() {
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && p.starts_with('/') {
            return PathBuf::from(p);
        }
    }
    panic!(
        "sshd (the OpenSSH server) is not installed, and the SFTP tests need it: \
         install it (Debian/Ubuntu: apt-get install -y openssh-server)"
    );
}

/// Makes an ed25519 key pair without a passphrase at `path` (and `path.pub`).
pub fn keygen(path: &Path) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "arca-test", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run ssh-keygen ({e}); install the OpenSSH client (openssh-client)")
        });
    assert!(
        out.status.success(),
        "ssh-keygen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `[127.0.0.1]:port type key` for a public key file.
pub fn known_hosts_line(port: u16, public_key: &Path) -> String {
    let text = fs::read_to_string(public_key).expect("read public key");
    let mut parts = text.split_whitespace();
    let (kind, key) = (parts.next().expect("key type"), parts.next().expect("key"));
    format!("[127.0.0.1]:{port} {kind} {key}\n")
}

fn current_user() -> String {
    let out = Command::new("id").arg("-un").output().expect("run id -un");
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!name.is_empty(), "cannot tell the current user name");
    name
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

impl Sshd {
    /// Starts a server on a free port; panics with the server's log if it does not come up.
    pub fn start() -> Sshd {
        let sshd = find_sshd();
        let tmp = tempfile::tempdir().expect("temporary folder");
        let dir = tmp.path().to_path_buf();
        let host_key = dir.join("host_ed25519");
        let client_key = dir.join("client_ed25519");
        keygen(&host_key);
        keygen(&client_key);
        let authorized = dir.join("authorized_keys");
        fs::copy(client_key.with_extension("pub"), &authorized).expect("authorized_keys");
        // sshd refuses to start without its privilege separation folder.
        if !Path::new("/run/sshd").exists() {
            let _ = fs::create_dir_all("/run/sshd");
        }
        let mut s = Sshd {
            port: 0,
            ssh_config: dir.join("ssh_config"),
            command: String::new(),
            known_hosts: dir.join("known_hosts"),
            config: dir.join("sshd_config"),
            log: dir.join("sshd.log"),
            user: current_user(),
            client_key,
            host_key,
            sshd,
            child: None,
            dir,
            _tmp: tmp,
        };
        // The free port may be taken between probing and binding: try a few.
        let mut last = String::new();
        for _ in 0..3 {
            s.port = free_port();
            s.write_files();
            match s.spawn() {
                Ok(()) => return s,
                Err(e) => last = e,
            }
        }
        panic!("sshd did not start: {last}");
    }

    fn write_files(&mut self) {
        let d = &self.dir;
        let server = format!(
            "ListenAddress 127.0.0.1\n\
             Port {port}\n\
             HostKey {host_key}\n\
             AuthorizedKeysFile {authorized}\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             PermitRootLogin prohibit-password\n\
             StrictModes no\n\
             UsePAM no\n\
             PidFile {pid}\n\
             MaxStartups 100:30:200\n\
             LogLevel VERBOSE\n\
             Subsystem sftp internal-sftp\n",
            port = self.port,
            host_key = self.host_key.display(),
            authorized = d.join("authorized_keys").display(),
            pid = d.join("sshd.pid").display(),
        );
        fs::write(&self.config, server).expect("sshd_config");
        fs::write(
            &self.known_hosts,
            known_hosts_line(self.port, &self.host_key.with_extension("pub")),
        )
        .expect("known_hosts");
        self.write_client_config(&self.ssh_config, &self.client_key, &self.known_hosts);
        self.command = Self::command_for(&self.ssh_config);
    }

    /// Writes an ssh client configuration for host [`HOST`] with this identity and
    /// known_hosts file (to try wrong keys or host keys).
    pub fn write_client_config(&self, path: &Path, identity: &Path, known_hosts: &Path) {
        let client = format!(
            "Host {HOST}\n\
             \x20   HostName 127.0.0.1\n\
             \x20   Port {port}\n\
             \x20   User {user}\n\
             \x20   IdentityFile {identity}\n\
             \x20   IdentitiesOnly yes\n\
             \x20   IdentityAgent none\n\
             \x20   UserKnownHostsFile {known}\n\
             \x20   GlobalKnownHostsFile /dev/null\n\
             \x20   StrictHostKeyChecking yes\n\
             \x20   UpdateHostKeys no\n\
             \x20   BatchMode yes\n\
             \x20   ConnectTimeout 5\n\
             \x20   ControlMaster no\n\
             \x20   ControlPath none\n",
            port = self.port,
            user = self.user,
            identity = identity.display(),
            known = known_hosts.display(),
        );
        fs::write(path, client).expect("ssh_config");
    }

    /// The `sftp.command` that connects to [`HOST`] with the client configuration `config`.
    pub fn command_for(config: &Path) -> String {
        format!("ssh -F '{}' {HOST} -s sftp", config.display())
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = fs::File::create(&self.log).map_err(|e| format!("log file: {e}"))?;
        let mut child = Command::new(&self.sshd)
            .args(["-D", "-e", "-f"])
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.sshd.display()))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let start = Instant::now();
        while start.elapsed() < READY {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("sshd exited ({status}): {}", self.log()));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
                self.child = Some(child);
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(format!(
            "sshd did not accept connections within {READY:?}: {}",
            self.log()
        ))
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Process ids of every process below the listening server (the sessions).
    fn session_pids(&self) -> Vec<u32> {
        let Some(root) = self.child.as_ref().map(Child::id) else {
            return vec![];
        };
        let mut parents: Vec<(u32, u32)> = vec![];
        if let Ok(rd) = fs::read_dir("/proc") {
            for e in rd.flatten() {
                let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
                    continue;
                };
                // pid (comm) state ppid ...; comm may hold spaces and parentheses.
                let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                    continue;
                };
                if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
                    parents.push((pid, ppid));
                }
            }
        }
        let mut found = vec![root];
        let mut i = 0;
        while i < found.len() {
            let p = found[i];
            found.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
            i += 1;
        }
        found.remove(0);
        found
    }

    fn kill(pids: &[u32]) {
        if pids.is_empty() {
            return;
        }
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(pids.iter().map(u32::to_string))
            .stderr(Stdio::null())
            .status();
    }

    /// Kills the processes serving the open sessions (the connections drop; the server
    /// keeps listening). Returns how many processes were killed.
    pub fn kill_sessions(&self) -> usize {
        let pids = self.session_pids();
        Self::kill(&pids);
        pids.len()
    }

    /// Stops the server and its sessions; the port refuses connections until
    /// [`Sshd::restart`].
    pub fn stop(&mut self) {
        let sessions = self.session_pids();
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        Self::kill(&sessions);
    }

    /// Starts the server again on the same port, with the same keys.
    pub fn restart(&mut self) {
        self.stop();
        let start = Instant::now();
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(e) if start.elapsed() > READY => panic!("sshd did not restart: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}

//! The `sftp.*` options and the ssh command line they make: the user's words, or
//! `ssh [-p PORT] [-l USER] [sftp.args...] -o ServerAliveInterval=60 -o ConnectTimeout=30
//! HOST -s sftp` (the two `-o` only where the user's ssh configuration does not set them).

use arca_backend::Result;

use super::session;
use super::words::split_words;
use crate::{RemoteOptions, SftpLocation, config_error, parse_seconds};

/// How long ssh may take to connect and exchange greetings with the server (TCP and SSH
/// handshake, not the login): without it, a host that swallows packets or a port that
/// accepts and stays silent made every command hang for good.
const CONNECT_TIMEOUT: &str = "ConnectTimeout=30";

/// How to start the SFTP session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SftpOptions {
    /// `sftp.command`: the whole command line (split like a shell would), replacing
    /// `ssh [-p port] [-l user] [args] host -s sftp`.
    pub command: Option<Vec<String>>,
    /// `sftp.args`: extra arguments for ssh.
    pub args: Vec<String>,
    /// Requests in flight at most.
    pub connections: usize,
    /// `sftp.timeout`: how long the server may say nothing while an operation waits
    /// ([`DEFAULT_TIMEOUT`] when not given).
    pub timeout: Option<std::time::Duration>,
}

/// How long the server may say nothing while an SFTP operation waits before the session is
/// given up (a hung disk on the server stops its sftp-server while sshd keeps answering
/// keepalives: commands hung for good; hunt 23).
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

impl SftpOptions {
    /// From `--connections` and the `sftp.*` options.
    pub fn from_remote(o: &RemoteOptions) -> Result<Self> {
        let split = |key: &str| -> Result<Option<Vec<String>>> {
            o.get(key)
                .map(|v| split_words(v).map_err(|why| config_error(key, format!("{v:?}: {why}"))))
                .transpose()
        };
        let command = split("sftp.command")?;
        let args = split("sftp.args")?.unwrap_or_default();
        if command.as_ref().is_some_and(Vec::is_empty) {
            return Err(config_error("sftp.command", "is empty".into()));
        }
        if command.is_some() && !args.is_empty() {
            return Err(config_error(
                "sftp.args",
                "cannot be combined with sftp.command; put the arguments into sftp.command".into(),
            ));
        }
        let connections = o.connections.unwrap_or(crate::SFTP_CONNECTIONS);
        if connections == 0 {
            return Err(config_error("--connections", "must be at least 1".into()));
        }
        let timeout = match o.get("sftp.timeout") {
            None => None,
            Some(v) => Some(parse_seconds(v).ok_or_else(|| {
                config_error(
                    "sftp.timeout",
                    format!("{v:?}: expected seconds (30, 30s, 5m) of at least 1 s"),
                )
            })?),
        };
        Ok(Self {
            command,
            args,
            connections,
            timeout,
        })
    }

    /// The command that starts the session for `loc`.
    pub(super) fn argv(&self, loc: &SftpLocation) -> Vec<String> {
        if let Some(c) = &self.command {
            return c.clone();
        }
        let mut v = vec!["ssh".to_string()];
        if let Some(p) = loc.port {
            v.extend(["-p".to_string(), p.to_string()]);
        }
        if let Some(u) = &loc.user {
            v.extend(["-l".to_string(), u.clone()]);
        }
        v.extend(self.args.iter().cloned());
        // Unless the user's ssh configuration (or arguments) sets them: a server that stops
        // answering ends the session in about three minutes instead of hanging every
        // request (ssh's default keeps waiting). A server that accepts the connection but
        // never says hello (or an address that swallows packets) is given up on after
        // ConnectTimeout instead of hanging forever. (Given on the command line, they beat
        // the user's ~/.ssh/config: a keepalive of 5 s there made a cut link fail after
        // four minutes instead of seconds.)
        let (alive, timeout) = user_settings(&v, &loc.host);
        if !alive {
            v.extend(["-o".to_string(), "ServerAliveInterval=60".to_string()]);
        }
        if !timeout {
            v.extend(["-o".to_string(), CONNECT_TIMEOUT.to_string()]);
        }
        if session::non_interactive() {
            v.extend(["-o".to_string(), "BatchMode=yes".to_string()]);
        }
        v.extend([loc.host.clone(), "-s".to_string(), "sftp".to_string()]);
        v
    }
}

/// Whether ssh, started as `argv` for `host`, already has a ServerAliveInterval and a
/// ConnectTimeout of its own (from the user's configuration or arguments), as `ssh -G` tells.
/// Asked once per command line; (false, false) when ssh cannot tell.
fn user_settings(argv: &[String], host: &str) -> (bool, bool) {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Answers = HashMap<Vec<String>, (bool, bool)>;
    static SEEN: OnceLock<Mutex<Answers>> = OnceLock::new();
    let key: Vec<String> = argv.iter().cloned().chain([host.to_string()]).collect();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(&known) = seen.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return known;
    }
    let Some((program, args)) = argv.split_first() else {
        return (false, false);
    };
    let out = std::process::Command::new(program)
        .args(args)
        .arg("-G")
        .arg(host)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let found = match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let value = |name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ').map(str::trim))
            };
            (
                value("serveraliveinterval").is_some_and(|v| v != "0"),
                value("connecttimeout").is_some_and(|v| v != "none"),
            )
        }
        _ => (false, false),
    };
    seen.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, found);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(kv: &[(&str, &str)]) -> Result<SftpOptions> {
        SftpOptions::from_remote(&RemoteOptions {
            connections: None,
            extended: kv
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    }

    fn has_ssh() -> bool {
        std::process::Command::new("ssh")
            .args(["-G", "localhost"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// The user's ssh configuration decides the keepalive and the connect timeout when it
    /// sets them; arca's defaults came after, on the command line, and beat it.
    #[test]
    fn the_users_ssh_config_wins() {
        if !has_ssh() {
            eprintln!("no ssh here: skipped");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join("config");
        std::fs::write(
            &cfg,
            "Host *\n  ServerAliveInterval 5\n  ConnectTimeout 7\n",
        )
        .expect("write");
        let args = format!("-F {}", cfg.display());
        let argv = opts(&[("sftp.args", args.as_str())])
            .expect("args")
            .argv(&loc(None, "nas", None));
        assert!(
            !argv.iter().any(|a| a.starts_with("ServerAliveInterval=")),
            "{argv:?}"
        );
        assert!(
            !argv.iter().any(|a| a.starts_with("ConnectTimeout=")),
            "{argv:?}"
        );
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "").expect("write");
        let args = format!("-F {}", empty.display());
        let argv = opts(&[("sftp.args", args.as_str())])
            .expect("args")
            .argv(&loc(None, "nas", None));
        assert!(
            argv.iter().any(|a| a == "ServerAliveInterval=60"),
            "{argv:?}"
        );
        assert!(argv.iter().any(|a| a == CONNECT_TIMEOUT), "{argv:?}");
    }

    fn loc(user: Option<&str>, host: &str, port: Option<u16>) -> SftpLocation {
        SftpLocation {
            user: user.map(Into::into),
            host: host.into(),
            port,
            path: "/srv/repo".into(),
        }
    }

    #[test]
    fn options_from_remote() {
        let o = opts(&[("sftp.command", "ssh -F 'my config' nas -s sftp")]).expect("command");
        assert_eq!(
            o.command,
            Some(vec![
                "ssh".into(),
                "-F".into(),
                "my config".into(),
                "nas".into(),
                "-s".into(),
                "sftp".into()
            ])
        );
        assert_eq!(o.connections, crate::SFTP_CONNECTIONS);
        assert_eq!(
            o.argv(&loc(Some("u"), "h", Some(2))),
            o.command.clone().expect("command"),
            "sftp.command replaces everything"
        );
        let o = opts(&[("sftp.args", "-i \"/k ey\" -o ConnectTimeout=5")]).expect("args");
        assert_eq!(o.args, ["-i", "/k ey", "-o", "ConnectTimeout=5"]);
        let argv = o.argv(&loc(Some("alice"), "::1", Some(2222)));
        let batch: &[&str] = if session::non_interactive() {
            &["-o", "BatchMode=yes"]
        } else {
            &[]
        };
        let want: Vec<&str> = [
            "ssh",
            "-p",
            "2222",
            "-l",
            "alice",
            "-i",
            "/k ey",
            "-o",
            "ConnectTimeout=5",
            "-o",
            "ServerAliveInterval=60",
        ]
        .into_iter()
        // The user's ConnectTimeout stands alone where ssh says it is set.
        .chain(
            if has_ssh() {
                &[][..]
            } else {
                &["-o", CONNECT_TIMEOUT][..]
            }
            .iter()
            .copied(),
        )
        .chain(batch.iter().copied())
        .chain(["::1", "-s", "sftp"])
        .collect();
        assert_eq!(argv, want);
        let argv = opts(&[]).expect("none").argv(&loc(None, "nas", None));
        assert_eq!(argv.first().map(String::as_str), Some("ssh"));
        assert_eq!(&argv[argv.len() - 3..], ["nas", "-s", "sftp"]);
        assert!(!argv.iter().any(|a| a.contains("StrictHostKeyChecking")));

        for (kv, why) in [
            (&[("sftp.command", "ssh 'x")][..], "unclosed"),
            (&[("sftp.command", "  ")][..], "empty"),
            (
                &[("sftp.command", "ssh h -s sftp"), ("sftp.args", "-v")][..],
                "cannot be combined",
            ),
        ] {
            let e = opts(kv).expect_err(why);
            assert!(e.to_string().contains(why), "{e}");
        }
        let zero = SftpOptions::from_remote(&RemoteOptions {
            connections: Some(0),
            extended: vec![],
        });
        assert!(zero.is_err());
    }
}

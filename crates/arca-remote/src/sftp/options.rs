//! The `sftp.*` options and the ssh command line they make: the user's words, or
//! `ssh [-p PORT] [-l USER] [sftp.args...] -o ServerAliveInterval=60 -o ConnectTimeout=30
//! HOST -s sftp`.

use arca_backend::Result;

use super::session;
use super::words::split_words;
use crate::{RemoteOptions, SftpLocation, config_error};

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
}

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
        Ok(Self {
            command,
            args,
            connections,
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
        // After the user's arguments: for ssh the first value of an option wins. A server
        // that stops answering ends the session in about three minutes instead of hanging
        // every request (ssh's default keeps waiting). A server that accepts the connection
        // but never says hello (or an address that swallows packets) is given up on after
        // ConnectTimeout instead of hanging forever.
        v.extend(["-o".to_string(), "ServerAliveInterval=60".to_string()]);
        v.extend(["-o".to_string(), CONNECT_TIMEOUT.to_string()]);
        if session::non_interactive() {
            v.extend(["-o".to_string(), "BatchMode=yes".to_string()]);
        }
        v.extend([loc.host.clone(), "-s".to_string(), "sftp".to_string()]);
        v
    }
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
            "-o",
            CONNECT_TIMEOUT,
        ]
        .into_iter()
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

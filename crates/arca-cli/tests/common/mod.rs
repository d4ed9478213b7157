//! The CLI test harness: a temporary repository and target, and the `arca` binary run with
//! a cheap password hash.

#![allow(dead_code, clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use arca_testkit::{random_bytes, text_bytes};

pub const BIN: &str = env!("CARGO_BIN_EXE_arca");

/// `init` options for 64 KiB average chunks, so that a few MB make many blobs.
pub const SMALL_CHUNKS: [&str; 6] = [
    "--chunk-min",
    "16KiB",
    "--chunk-avg",
    "64KiB",
    "--chunk-max",
    "256KiB",
];

pub struct Env {
    pub tmp: tempfile::TempDir,
    pub repo: PathBuf,
    /// A remote location used instead of `repo`, and the environment it needs.
    pub location: Option<String>,
    pub vars: Vec<(&'static str, String)>,
}

impl Env {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        Self {
            tmp,
            repo,
            location: None,
            vars: vec![],
        }
    }
    /// A repository at a remote `location` (`s3:...`, `sftp:...`), with `vars` set.
    pub fn remote(location: String, vars: Vec<(&'static str, String)>) -> Self {
        Self {
            location: Some(location),
            vars,
            ..Self::new()
        }
    }
    pub fn path(&self, p: &str) -> PathBuf {
        self.tmp.path().join(p)
    }
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        match &self.location {
            Some(l) => c.arg("-r").arg(l),
            None => c.arg("-r").arg(&self.repo),
        };
        c.args(args);
        // The local cache of remote repositories stays inside the test's folder.
        c.env("XDG_CACHE_HOME", self.tmp.path().join("cache"));
        c.envs(self.vars.iter().map(|(k, v)| (k, v)));
        c.env("ARCA_PASSWORD", "test password")
            .env_remove("ARCA_PASSWORD_FILE")
            .env_remove("ARCA_REPOSITORY")
            .env_remove("ARCA_CACHE_DIR");
        c.stdin(Stdio::null());
        c
    }
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "arca {args:?} failed: {}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    pub fn init(&self, extra: &[&str]) {
        let mut a = vec!["init", "--kdf-memory-kib", "256", "--kdf-iterations", "1"];
        a.extend_from_slice(extra);
        self.ok(&a);
    }
    /// The user that runs arca where a test needs an unprivileged one: `nobody` when the
    /// tests run as root (who may read anything), else the tests' own user (`None`). The test
    /// folder is opened to it.
    pub fn unprivileged(&self) -> Option<u32> {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(self.tmp.path(), fs::Permissions::from_mode(0o777)).unwrap();
        arca_testkit::is_root().then_some(65534)
    }
    /// Runs arca as `uid` (`None`: as the tests' own user).
    pub fn run_as(&self, uid: Option<u32>, args: &[&str]) -> Output {
        use std::os::unix::process::CommandExt;
        let mut c = self.cmd(args);
        if let Some(u) = uid {
            c.uid(u).gid(u);
        }
        c.output().unwrap()
    }
    /// A `check` holding its shared lock for 20 s (its listing of the snapshots stalls),
    /// returned once its lock file is there; the caller kills it.
    pub fn lock_holder(&self) -> std::process::Child {
        let child = self
            .cmd(&["check"])
            .env("ARCA_TEST_FAULTS", "list:snapshot:always:delay=20s")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        // A lock file, not the temporary file it is written as first.
        let locks = || {
            fs::read_dir(self.repo.join("locks")).map_or(0, |d| {
                d.flatten().filter(|f| f.file_name().len() == 64).count()
            })
        };
        while locks() == 0 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(15),
                "no lock"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child
    }

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_str(out.lines().last().unwrap()).unwrap()
    }
}

/// Unmounts (lazily) what a test mounted at its path, when dropped.
pub struct Unmount<'a>(pub &'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn sample(dir: &Path) {
    fs::create_dir_all(dir.join("docs/deep")).unwrap();
    fs::write(dir.join("docs/a.txt"), text_bytes(1, 50_000)).unwrap();
    fs::write(dir.join("docs/b.txt"), text_bytes(2, 70_000)).unwrap();
    fs::write(dir.join("docs/deep/c.bin"), random_bytes(3, 900_000)).unwrap();
    fs::write(dir.join("top.bin"), random_bytes(4, 300_000)).unwrap();
    fs::write(
        dir.join(std::ffi::OsStr::new("odd name\nwith newline")),
        b"x",
    )
    .unwrap();
}

/// Runs `cmd` with the soft and hard `resource` limit set to `value`, as `ulimit` sets them.
/// SIGXFSZ is ignored, so that a write past a file size limit (`RLIMIT_FSIZE`) fails (EFBIG)
/// as a write to a full disk fails, without mounting one.
pub fn run_limited(mut cmd: Command, resource: nix::sys::resource::Resource, value: u64) -> Output {
    use nix::sys::signal::{SigHandler, Signal, signal};
    use std::os::unix::process::CommandExt;
    // SAFETY: sigaction and setrlimit are async-signal-safe, and nothing else runs between
    // fork and exec.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            signal(Signal::SIGXFSZ, SigHandler::SigIgn).map_err(std::io::Error::from)?;
            nix::sys::resource::setrlimit(resource, value, value).map_err(std::io::Error::from)
        });
    }
    cmd.output().unwrap()
}

/// Lets `cmd` be hung up: SIGHUP back to its default action in the child. Tests run under
/// `nohup` pass SIGHUP on ignored, and arca keeps ignoring a hang-up it was started to ignore
/// (as `nohup` asks), so a test that hangs a command up waited for it in vain.
pub fn hangup_default(cmd: &mut Command) -> &mut Command {
    use nix::sys::signal::{SigHandler, Signal, signal};
    use std::os::unix::process::CommandExt;
    // SAFETY: sigaction is async-signal-safe, and setting a disposition to SIG_DFL installs
    // no handler; nothing else runs between fork and exec.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            signal(Signal::SIGHUP, SigHandler::SigDfl)
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    cmd
}

/// Where `e`'s repository is, as `--from-repo` takes it.
pub fn location(e: &Env) -> String {
    e.location
        .clone()
        .unwrap_or_else(|| e.repo.to_str().unwrap().to_string())
}

/// `arca -r DST ARGS --from-repo SRC` with the source's password in `ARCA_FROM_PASSWORD` and
/// the source's environment (S3 credentials) too.
pub fn from_cmd(dst: &Env, src: &Env, args: &[&str]) -> Command {
    let from = location(src);
    let mut c = dst.cmd(&[args, &["--from-repo", &from]].concat());
    c.envs(src.vars.iter().map(|(k, v)| (k, v)));
    c.env("ARCA_FROM_PASSWORD", "test password")
        .env_remove("ARCA_FROM_PASSWORD_FILE")
        .env_remove("ARCA_FROM_PASSWORD_COMMAND")
        .env_remove("ARCA_FROM_REPOSITORY");
    c
}

pub fn run_ok(mut c: Command) -> String {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{c:?} failed: {}\n{}",
        o.status,
        stderr(&o)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `copy --json` (with `extra` arguments); the summary.
pub fn copy_json(dst: &Env, src: &Env, extra: &[&str]) -> serde_json::Value {
    let out = run_ok(from_cmd(dst, src, &[&["copy", "--json"], extra].concat()));
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

//! A running `arca mount` for the FUSE tests (mount_cli.rs, mount_prune_cli.rs): started,
//! waited for, and always unmounted and ended when dropped; FUSE tests are skipped, saying
//! why, where /dev/fuse or fusermount3 is missing (and fail instead when ARCA_REQUIRE_E2E is
//! set, as in CI).

#![allow(dead_code, clippy::unwrap_used)]

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use crate::common::Env;

/// How long anything may take: mounting, a refresh, an unmount, the process ending.
pub const LIMIT: Duration = Duration::from_secs(10);

macro_rules! require_fuse {
    () => {
        if !arca_testkit::faultfs::require_fuse() {
            return;
        }
    };
}

/// Whether a file system is mounted at `mnt` (an absolute path without symlinks).
pub fn mounted(mnt: &Path) -> bool {
    let want = mnt.to_str().unwrap();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(want))
}

/// A running `arca mount`; dropping it always unmounts and ends the process, so a failed
/// test leaves no mount behind.
pub struct Mount {
    pub child: Child,
    pub mnt: PathBuf,
    pub err: Arc<Mutex<String>>,
}

impl Mount {
    /// Starts `arca mount MNT EXTRA...` and waits until the mount is there.
    pub fn start(e: &Env, mnt: &Path, extra: &[&str]) -> Mount {
        Self::start_via(e, mnt, mnt, extra)
    }

    /// Starts `arca mount ARG EXTRA...` and waits until `mnt` (where ARG leads) is mounted.
    pub fn start_via(e: &Env, arg: &Path, mnt: &Path, extra: &[&str]) -> Mount {
        let mut args = vec!["mount", arg.to_str().unwrap()];
        args.extend_from_slice(extra);
        let mut child = e
            .cmd(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&err);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(l) = line else { break };
                let mut s = sink.lock().unwrap();
                s.push_str(&l);
                s.push('\n');
            }
        });
        let mut m = Mount {
            child,
            mnt: mnt.to_path_buf(),
            err,
        };
        let t = Instant::now();
        while !mounted(&m.mnt) {
            if let Some(st) = m.child.try_wait().unwrap() {
                panic!("arca mount ended with {st}: {}", m.stderr());
            }
            assert!(t.elapsed() < LIMIT, "not mounted in time: {}", m.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
        m
    }

    pub fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// Waits (bounded) for `arca mount` to end, then for its stderr to be read to the end.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let t = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                // The reader thread ends with the pipe; give it a moment to store the rest.
                std::thread::sleep(Duration::from_millis(100));
                return st;
            }
            assert!(
                t.elapsed() < LIMIT,
                "arca mount did not end: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (bounded) until stderr contains `text`.
    pub fn wait_stderr(&self, text: &str) {
        let t = Instant::now();
        while !self.stderr().contains(text) {
            assert!(t.elapsed() < LIMIT, "no {text:?} in {}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if mounted(&self.mnt) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.mnt)
                .status();
        }
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A fresh empty mountpoint in the test's folder, as an absolute path without symlinks.
pub fn mountpoint(e: &Env) -> PathBuf {
    let m = e.path("mnt");
    fs::create_dir(&m).unwrap();
    m.canonicalize().unwrap()
}

//! Direct writes that fail: a block used by two files of a restore, whose `O_DIRECT` write to
//! one of them fails, is counted as what was done (written once, copied to the other), and
//! no file is given content from a write that failed. The fault is a preloaded `pwrite64`
//! that fails the direct writes (`O_DIRECT` descriptors) to the file named in
//! `FAIL_DIRECT_WRITES_TO` with EIO, as a failing disk does (buffered writes succeed).
//! Needs a C compiler: skipped without one. The btrfs case (later uses copied, reflinked,
//! from the first) needs root and mkfs.btrfs, and is skipped without them.

#![allow(clippy::unwrap_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use arca_testkit::random_bytes;
use common::*;

const SHIM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    const char *want = getenv("FAIL_DIRECT_WRITES_TO");
    int fl = fcntl(fd, F_GETFL);
    if (want && fl >= 0 && (fl & O_DIRECT)) {
        char link[64], path[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, path, sizeof path - 1);
        if (k > 0) {
            path[k] = 0;
            size_t a = strlen(path), b = strlen(want);
            if (a >= b && strcmp(path + a - b, want) == 0) {
                errno = EIO;
                return -1;
            }
        }
    }
    return real(fd, buf, n, off);
}
"#;

/// The fault's library, built in `dir`; `None` without a C compiler.
fn shim(dir: &Path) -> Option<PathBuf> {
    let src = dir.join("faildirect.c");
    let lib = dir.join("faildirect.so");
    fs::write(&src, SHIM).unwrap();
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&src)
        .arg("-ldl")
        .status()
        .is_ok_and(|s| s.success());
    built.then_some(lib)
}

/// A restore whose direct writes to one file failed.
struct Run {
    /// The run's JSON summary, exit code and stderr.
    real: serde_json::Value,
    code: Option<i32>,
    err: String,
    /// The content of both files.
    block: Vec<u8>,
    /// The restored source folder.
    here: PathBuf,
    /// Unmounts the target's btrfs, if one was made (before the folders go).
    _mount: Option<Loop>,
    /// Holds the folders.
    _env: Env,
}

/// Unmounts (lazily) the loop-mounted file system at its path, when dropped.
struct Loop(PathBuf);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Where the restore goes: a folder of the test's, or (`btrfs`) a btrfs made in an image
/// file and mounted there; `None` (with why) where that cannot be done.
fn target(e: &Env, btrfs: bool) -> Result<(PathBuf, Option<Loop>), &'static str> {
    let target = e.path("t");
    if !btrfs {
        return Ok((target, None));
    }
    if !arca_testkit::is_root() {
        return Err("mounting a btrfs needs root");
    }
    let image = e.path("btrfs.img");
    fs::File::create(&image)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let made = Command::new("mkfs.btrfs")
        .arg("-q")
        .arg(&image)
        .output()
        .is_ok_and(|o| o.status.success());
    if !made {
        return Err("no mkfs.btrfs");
    }
    fs::create_dir_all(&target).unwrap();
    let mounted = Command::new("mount")
        .args(["-o", "loop"])
        .arg(&image)
        .arg(&target)
        .output()
        .is_ok_and(|o| o.status.success());
    if !mounted {
        return Err("cannot mount a btrfs image");
    }
    Ok((target.clone(), Some(Loop(target))))
}

/// Backs up `d1/a` and `d2/b`, one block of the same content in both, and restores them
/// with direct writes, the direct writes to `fail` failing, into a folder or (`btrfs`) a
/// btrfs. `None` when it cannot be done here (said on stderr).
fn restore_failing(fail: &str, btrfs: bool) -> Option<Run> {
    let e = Env::new();
    let Some(lib) = shim(&e.path("")) else {
        eprintln!("no C compiler: skipped");
        return None;
    };
    let (target, mount) = match target(&e, btrfs) {
        Ok(t) => t,
        Err(why) => {
            eprintln!("{why}: skipped");
            return None;
        }
    };
    e.init(&[]);
    let src = e.path("src");
    fs::create_dir_all(src.join("d1")).unwrap();
    fs::create_dir_all(src.join("d2")).unwrap();
    // Below the smallest chunk (one block), with a middle of whole pages large enough to go
    // direct.
    let block = random_bytes(33, 250_000);
    fs::write(src.join("d1/a"), &block).unwrap();
    fs::write(src.join("d2/b"), &block).unwrap();
    e.ok(&["backup", "-q", src.to_str().unwrap()]);
    let t = target.to_str().unwrap();
    let mut cmd = e.cmd(&[
        "restore",
        "latest",
        "--target",
        t,
        "--json",
        "--direct-io",
        "always",
    ]);
    cmd.env("LD_PRELOAD", &lib)
        .env("FAIL_DIRECT_WRITES_TO", fail);
    let o = cmd.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let real: serde_json::Value = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["message_type"] == "summary")
        .unwrap_or_else(|| panic!("no summary: {out}"));
    let here = target.join(src.strip_prefix("/").unwrap());
    Some(Run {
        real,
        code: o.status.code(),
        err: stderr(&o),
        block,
        here,
        _mount: mount,
        _env: e,
    })
}

/// The first use of the block written, the direct write of its second use failing: the
/// second is not counted as copied (it was, at once, and stayed so when its write failed).
#[test]
fn a_copy_whose_direct_write_fails_is_not_counted() {
    let Some(Run {
        real,
        code,
        err,
        block,
        here,
        _mount: _m,
        _env: _keep,
    }) = restore_failing("/d2/b", false)
    else {
        return;
    };
    assert_eq!(code, Some(3), "{err}\n{real}");
    assert!(
        err.contains(&here.join("d2/b").display().to_string()),
        "{err}"
    );
    assert_eq!(real["blocks_decoded"], 1, "{real}");
    assert_eq!(real["bytes_written"], block.len() as u64, "{real}");
    assert_eq!(real["bytes_copied"], 0, "{real}");
    assert_eq!(real["blocks_copied"], 0, "{real}");
    assert_eq!(fs::read(here.join("d1/a")).unwrap(), block);
}

/// The direct write of the block's first use fails: the other use, which landed, is the
/// block's write (it was counted as a copy of the failed one). Where extents are shared
/// (btrfs), the other use was copied from the range the failed write never filled: zeros in a
/// file restored without error.
#[test]
fn a_use_after_a_failed_direct_write_is_the_blocks_write() {
    for btrfs in [true, false] {
        let Some(Run {
            real,
            code,
            err,
            block,
            here,
            _mount: _m,
            _env: _keep,
        }) = restore_failing("/d1/a", btrfs)
        else {
            continue;
        };
        // The use that landed holds the block (on btrfs it held zeros, without an error).
        assert!(
            fs::read(here.join("d2/b")).unwrap() == block,
            "btrfs {btrfs}: d2/b"
        );
        // The first use of a block with further uses is written through the page cache,
        // which the fault spares: every file is restored, the second use copied.
        assert_eq!(code, Some(0), "btrfs {btrfs}: {err}\n{real}");
        assert_eq!(real["blocks_decoded"], 1, "{real}");
        // Written once and copied once (bytes_written counts both).
        assert_eq!(real["bytes_written"], 2 * block.len() as u64, "{real}");
        assert_eq!(real["bytes_copied"], block.len() as u64, "{real}");
        assert_eq!(real["blocks_copied"], 1, "{real}");
        assert!(
            fs::read(here.join("d1/a")).unwrap() == block,
            "btrfs {btrfs}: d1/a"
        );
    }
}

"""Byte-for-byte and metadata-for-metadata comparison of a restored tree with its source.

Checked for every entry: presence (nothing missing, nothing extra), file type, permission bits,
uid, gid, and mtime in nanoseconds (for files, directories and symlinks; a tool whose restore
cannot do better gets a documented tolerance, or no check of the mtimes it does not restore:
kopia's subdirectories, rustic's root);
the full content of regular files (compared byte for byte against the source, not via hashes);
symlink targets.
Not checked: atime, ctime (cannot be restored), xattrs/ACLs (the datasets have none), hard links
(the datasets have none).
"""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

BLOCK = 1 << 20
MAX_LISTED = 20


@dataclass
class VerifyResult:
    ok: bool = True
    files: int = 0
    dirs: int = 0
    symlinks: int = 0
    bytes: int = 0
    problems: int = 0
    examples: list = field(default_factory=list)

    def add(self, msg: str) -> None:
        self.ok = False
        self.problems += 1
        if len(self.examples) < MAX_LISTED:
            self.examples.append(msg)

    def brief(self) -> str:
        if self.ok:
            return f"ok ({self.files} files, {self.bytes} bytes, {self.dirs} dirs, {self.symlinks} symlinks)"
        return f"{self.problems} differences, e.g. " + "; ".join(self.examples[:2])

    def to_dict(self) -> dict:
        return {"ok": self.ok, "files": self.files, "dirs": self.dirs, "symlinks": self.symlinks,
                "bytes": self.bytes, "problems": self.problems, "examples": self.examples}


NOATIME = getattr(os, "O_NOATIME", 0)


def _open_noatime(path: str, flags: int) -> int:
    """Opens a path without updating its atime; plain open when not allowed (EPERM: not the
    owner). Both sides: verifying must change neither the source (a later no-change backup
    compares with it) nor the restored tree (the next restore scenario starts from it, and a
    tool that restores atimes would be timed fixing the verifier's reads)."""
    try:
        return os.open(path, flags | NOATIME)
    except PermissionError:
        return os.open(path, flags)


def _listdir_noatime(path: str) -> list:
    fd = _open_noatime(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def _same_content(a: str, b: str) -> bool:
    fa = _open_noatime(a, os.O_RDONLY)
    try:
        fb = _open_noatime(b, os.O_RDONLY)
        try:
            while True:
                x = os.read(fa, BLOCK)
                y = os.read(fb, BLOCK)
                if x != y:
                    return False
                if not x:
                    return True
        finally:
            os.close(fb)
    finally:
        os.close(fa)


def _meta(res: VerifyResult, rel: str, se: os.stat_result, sa: os.stat_result, tol_ns: int | None) -> None:
    """Mode bits, owner and (unless tol_ns is None) mtime within tol_ns."""
    if stat.S_IMODE(se.st_mode) != stat.S_IMODE(sa.st_mode):
        res.add(f"{rel}: mode {oct(stat.S_IMODE(sa.st_mode))} != {oct(stat.S_IMODE(se.st_mode))}")
    if (se.st_uid, se.st_gid) != (sa.st_uid, sa.st_gid):
        res.add(f"{rel}: owner {sa.st_uid}:{sa.st_gid} != {se.st_uid}:{se.st_gid}")
    if tol_ns is not None and abs(se.st_mtime_ns - sa.st_mtime_ns) > tol_ns:
        res.add(f"{rel}: mtime {sa.st_mtime_ns} != {se.st_mtime_ns} "
                f"(off by {(sa.st_mtime_ns - se.st_mtime_ns) / 1e9:+.9f} s)")


def verify_tree(expected: str, actual: str, *, mtime_tolerance_ns: int = 0,
                dir_mtimes: bool = True, root_mtime: bool = True, threads: int = 4) -> VerifyResult:
    """dir_mtimes=False skips the mtimes of the directories below the root, root_mtime=False
    the mtime of the root itself (for a tool that does not restore them; everything else is
    still checked)."""
    res = VerifyResult()
    if not os.path.isdir(actual):
        res.add(f"restored root {actual} is missing")
        return res
    pending = []  # (rel, expected path, actual path) content comparisons
    dir_checks = []  # directory metadata, checked last

    def walk(rel: str) -> None:
        pe = os.path.join(expected, rel) if rel else expected
        pa = os.path.join(actual, rel) if rel else actual
        names_e = set(_listdir_noatime(pe))
        names_a = set(_listdir_noatime(pa))
        for n in sorted(names_a - names_e):
            res.add(f"{os.path.join(rel, n)}: unexpected extra entry")
        for n in sorted(names_e - names_a):
            res.add(f"{os.path.join(rel, n)}: missing")
        for n in sorted(names_e & names_a):
            r = os.path.join(rel, n) if rel else n
            a, b = os.path.join(pe, n), os.path.join(pa, n)
            se, sa = os.lstat(a), os.lstat(b)
            if stat.S_IFMT(se.st_mode) != stat.S_IFMT(sa.st_mode):
                res.add(f"{r}: type {stat.filemode(sa.st_mode)[0]} != {stat.filemode(se.st_mode)[0]}")
                continue
            if stat.S_ISDIR(se.st_mode):
                res.dirs += 1
                walk(r)
                dir_checks.append((r, a, b))
            elif stat.S_ISREG(se.st_mode):
                res.files += 1
                res.bytes += se.st_size
                _meta(res, r, se, sa, mtime_tolerance_ns)
                if se.st_size != sa.st_size:
                    res.add(f"{r}: size {sa.st_size} != {se.st_size}")
                else:
                    pending.append((r, a, b))
            elif stat.S_ISLNK(se.st_mode):
                res.symlinks += 1
                if os.readlink(a) != os.readlink(b):
                    res.add(f"{r}: symlink -> {os.readlink(b)!r} != {os.readlink(a)!r}")
                _meta(res, r, se, sa, mtime_tolerance_ns)
            else:
                _meta(res, r, se, sa, mtime_tolerance_ns)

    walk("")

    def compare_batch(batch):
        return [r for r, a, b in batch if not _same_content(a, b)]

    nb = max(1, min(len(pending), threads * 16))
    batches = [pending[i::nb] for i in range(nb)]
    with ThreadPoolExecutor(threads) as pool:
        for differing in pool.map(compare_batch, batches):
            for r in differing:
                res.add(f"{r}: content differs")
    for r, a, b in dir_checks:
        _meta(res, r + "/", os.lstat(a), os.lstat(b), mtime_tolerance_ns if dir_mtimes else None)
    _meta(res, "(root)/", os.lstat(expected), os.lstat(actual),
          mtime_tolerance_ns if root_mtime else None)
    return res

"""Running and measuring one command.

Each measured command runs as a child process (its own session). Wall time is time.monotonic()
from spawn to exit; CPU (user + sys) comes from os.wait4's per-child rusage, which on Linux also
covers the child's own waited-for descendants. Before reaping, the exited child is kept as a zombie
(waitid WNOWAIT) so that /proc/<pid>/io still gives its I/O counters (including those of its reaped
children): rchar (bytes passed to read-type syscalls, page cache or not) and read_bytes (bytes the
block layer actually fetched for it).

Peak RSS: a process forked from this (large) Python process inherits its RSS high-water mark, and
the kernel carries it across exec into ru_maxrss. So the command runs under GNU time
(`/usr/bin/time -f %M`), a small C program that forks the tool from its own small address space
and reports the tool's own ru_maxrss.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field


@dataclass
class Measurement:
    argv: list
    exit_code: int
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_kib: int | None  # peak RSS of the tool itself (GNU time %M); None if unavailable
    rchar: int | None = None
    read_bytes: int | None = None
    wchar: int | None = None
    write_bytes: int | None = None
    cache_dropped: bool = False
    timed_out: bool = False
    summary: dict | None = None  # last JSON object printed on stdout, if any
    stderr_tail: str = ""
    log: str = ""  # path of the full stdout/stderr log
    extra: dict = field(default_factory=dict)

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cpu_s"] = round(self.cpu_s, 3)
        for k in ("wall_s", "user_s", "sys_s"):
            d[k] = round(d[k], 4)
        return d


_DROP = "/proc/sys/vm/drop_caches"
GNU_TIME = "/usr/bin/time"


def ensure_gnu_time(log=print) -> bool:
    if os.access(GNU_TIME, os.X_OK):
        return True
    if os.geteuid() == 0 and shutil.which("apt-get"):
        log("installing GNU time (apt-get install time) for peak RSS")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if subprocess.run(["apt-get", "install", "-y", "-qq", "time"], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, stdout=subprocess.DEVNULL)
            subprocess.run(["apt-get", "install", "-y", "-qq", "time"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return os.access(GNU_TIME, os.X_OK)


def drop_caches() -> bool:
    """sync, then drop the page cache, dentries and inodes. False when not permitted."""
    os.sync()
    try:
        with open(_DROP, "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def _read_io(pid: int) -> dict:
    try:
        with open(f"/proc/{pid}/io") as f:
            return {k: int(v) for k, v in (line.split(":") for line in f if ":" in line)}
    except (OSError, ValueError):
        return {}


def last_json_object(text: str) -> dict | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def run(argv: list, *, env: dict | None = None, cwd: str | None = None, log_path: str,
        drop: bool = False, timeout: float | None = None) -> Measurement:
    """Run argv to completion and measure it. stdout+stderr go to log_path (stderr also kept
    separately for the tail shown in reports)."""
    dropped = drop_caches() if drop else False
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    out_path, err_path = log_path + ".out", log_path + ".err"
    rss_path = log_path + ".rss"
    spawn = list(argv)
    if os.access(GNU_TIME, os.X_OK):
        spawn = [GNU_TIME, "-f", "%M", "-o", rss_path, "--", *argv]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(spawn, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True)
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer:
            timer.daemon = True
            timer.start()
        while True:
            try:
                os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
                break
            except InterruptedError:
                continue
        wall = time.monotonic() - t0
        io = _read_io(proc.pid)
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if timer:
            timer.cancel()
    with open(out_path, "rb") as f:
        stdout = f.read().decode("utf-8", "replace")
    with open(err_path, "rb") as f:
        stderr = f.read().decode("utf-8", "replace")
    with open(log_path, "w") as f:
        f.write(f"$ {' '.join(map(str, argv))}\n# cwd={cwd} exit={proc.returncode} "
                f"wall={wall:.3f}s\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n")
    os.unlink(out_path)
    os.unlink(err_path)
    maxrss = None
    try:
        with open(rss_path) as f:
            maxrss = int(f.read().split()[-1])
        os.unlink(rss_path)
    except (OSError, ValueError, IndexError):
        pass
    return Measurement(
        argv=[str(a) for a in argv], exit_code=proc.returncode, wall_s=wall,
        user_s=ru.ru_utime, sys_s=ru.ru_stime, maxrss_kib=maxrss,
        rchar=io.get("rchar"), read_bytes=io.get("read_bytes"), wchar=io.get("wchar"),
        write_bytes=io.get("write_bytes"), cache_dropped=dropped, timed_out=timed_out.is_set(),
        summary=last_json_object(stdout), stderr_tail=stderr.strip()[-600:], log=log_path)


def run_quiet(argv: list, *, env=None, cwd=None, check=True, timeout=None) -> subprocess.CompletedProcess:
    """An unmeasured helper command (init, listing snapshots, ...)."""
    p = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed ({p.returncode}): "
                           f"{p.stderr.strip()[-800:]}")
    return p


def median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def dir_bytes(path: str) -> int:
    """Apparent size (sum of st_size) of all files below path."""
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for n in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                pass
    return total

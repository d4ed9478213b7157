"""S3 on loopback (`bench/run --s3`, `--s3-only`): arca, restic and rustic against one S3
server on this machine, plain and behind an injected latency, next to arca on a local folder in
the same run.

The server (`--s3-server`) is Versity's S3 gateway, versitygw (Go, Apache-2.0: a production
S3 gateway; its posix backend keeps each object as a file, with 1 MiB I/O buffers), built from
source on first use and cached under bench/out/peers/bin; or s3s-fs (Rust, S3 over a folder,
SigV4 checked: the server the test suite starts, which reads objects 4 KiB at a time through
tokio's blocking pool and so spends several CPU seconds per GB served, on the cores the tools
use). Its root folder lies under bench/out/work on the same disk as the local repositories, so
that local against S3 compares the protocol's cost, not two disks. "Behind latency" goes through `delayproxy` (a TCP proxy in front
of the same server: `--s3-latency` per request round trip, a `--s3-bandwidth` link per
direction), because this kernel has no netem qdisc (see bench/README.md).

Per dataset (only small and many have S3 scenarios):
  small  first backup        N runs: arca local, and every S3 tool on plain S3
         full restore        N runs each, same tools, plain S3
         full restore behind the latency   N runs per S3 tool (same repositories, via the proxy)
  many   first backup        1 run each (setup; recorded), local arca and plain S3
         no-change backup    N runs: arca local; every S3 tool behind the latency
Every command starts with the page cache dropped (the server's files too). Every restore is
verified. Results: `results["s3"]` of the run and docs/bench/s3.json (the docs' "S3 on
loopback" section is rendered from that file, like the capping section)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import time

from . import datasets as ds_mod
from .measure import dir_bytes, drop_caches, median, run_quiet
from .measure import run as run_measured
from .tools import (PEERS_DIR, ROOT, S3_ACCESS_KEY, S3_CAPABLE, S3_SECRET_KEY, S3Location,
                    _find, cargo_install, go_build, s3_variant)
from .verify import verify_tree

S3S_FS_VERSION = "0.14.1"  # crates.io: s3s-fs (installed with --features binary when missing)
VERSITYGW_MODULE = "github.com/versity/versitygw"
VERSITYGW_VERSION = "v1.8.0"  # Go module (built with go_build into bench/out/peers/bin)
SERVERS = ("versitygw", "s3s-fs")
SERVER_TEXT = {
    "versitygw": "Versity's S3 gateway, Go, Apache-2.0, with --keep-alive; its posix backend "
                 "keeps each object as a file with its metadata in xattrs and reads it with "
                 "1 MiB buffers",
    "s3s-fs": "S3 over a folder, SigV4 checked; it reads objects 4 KiB at a time through "
              "tokio's blocking pool, which costs CPU: bench/README.md",
}
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADING = "## S3 on loopback"

SCENARIOS = {
    "backup_first": "first backup",
    "restore_full": "full restore",
    "restore_full_lat": "full restore behind {lat}",
    "backup_nochange": "no-change backup",
    "backup_nochange_lat": "no-change backup behind {lat}",
}
# What each dataset runs (the S3 tools; local arca runs the same without "_lat").
PLAN = {
    "small": {"first_runs": None, "phases": ["restore_full", "restore_full_lat"]},
    "many": {"first_runs": 1, "phases": ["backup_nochange_lat"]},
}
# The targets: arca over S3 against a baseline measured in the same run.
#   baseline ("local", scenario): arca on a local folder, that scenario
#   baseline ("link",): the bytes the restore read from the server at the link's bandwidth
TARGETS = [
    {"dataset": "small", "scenario": "backup_first", "baseline": ("local", "backup_first"),
     "limit": 1.5},
    {"dataset": "small", "scenario": "restore_full", "baseline": ("local", "restore_full"),
     "limit": 1.5},
    {"dataset": "small", "scenario": "restore_full_lat", "baseline": ("link",), "limit": 1.3},
    {"dataset": "many", "scenario": "backup_nochange_lat",
     "baseline": ("local", "backup_nochange"), "limit": 1.2},
]
EXTRA_KEYS = ("other_cpu_s", "server_cpu_s", "server_rchar", "server_wchar", "proxy_cpu_s",
              "proxy_down_bytes", "proxy_up_bytes", "proxy_responses", "proxy_connections")


# ------------------------------------------------------------------ pure helpers (unit-tested)
def link_seconds(nbytes, bandwidth: float):
    """Time `nbytes` take at `bandwidth` bytes/s (None when unknown)."""
    if nbytes is None or not bandwidth:
        return None
    return nbytes / bandwidth


def _med(res: dict, scenario: str, tool: str, key: str = "wall_s"):
    cell = (res.get("scenarios", {}).get(scenario) or {}).get(tool)
    if not cell or not cell.get("ok"):
        return None
    return (cell.get("median") or {}).get(key)


def target_rows(s3res: dict) -> list:
    """One row per target whose dataset ran: baseline, arca S3, ratio, met, and every S3 tool's
    wall time with its own ratio to its own baseline kind (link time: its own bytes)."""
    bw = s3res["meta"]["bandwidth"]
    by_name = {d["name"]: d for d in s3res["datasets"]}
    s3_tools = [t["name"] for t in s3res["tools"] if t["name"].endswith("-s3")]
    rows = []
    for tg in TARGETS:
        res = by_name.get(tg["dataset"])
        if res is None:
            continue
        sc = tg["scenario"]

        def base_for(tool):
            if tg["baseline"][0] == "local":
                return _med(res, tg["baseline"][1], "arca")
            return link_seconds(_med(res, sc, tool, "proxy_down_bytes"), bw)

        row = {"dataset": tg["dataset"], "scenario": sc, "limit": tg["limit"],
               "baseline_kind": tg["baseline"][0], "tools": {}}
        for t in s3_tools:
            wall, base = _med(res, sc, t), base_for(t)
            cell = (res["scenarios"].get(sc) or {}).get(t)
            row["tools"][t] = {"wall": wall, "baseline": base,
                               "ratio": wall / base if wall and base else None,
                               "failed": bool(cell and not cell.get("ok")),
                               "down_bytes": _med(res, sc, t, "proxy_down_bytes")}
        a = row["tools"].get("arca-s3") or {}
        row["baseline"], row["arca"], row["ratio"] = (a.get("baseline"), a.get("wall"),
                                                       a.get("ratio"))
        if row["baseline"] is None and tg["baseline"][0] == "local":
            row["baseline"] = _med(res, tg["baseline"][1], "arca")
        row["met"] = None if row["ratio"] is None else row["ratio"] <= tg["limit"]
        rows.append(row)
    return rows


def busy_share(med: dict, cores: int):
    """Share of the machine's CPU (all cores over the wall time) the command, the server, the
    proxy and everything else used together; None when unknown."""
    wall = med.get("wall_s")
    if not wall or med.get("cpu_s") is None or med.get("other_cpu_s") is None or not cores:
        return None
    used = sum(med.get(k) or 0 for k in ("cpu_s", "server_cpu_s", "proxy_cpu_s", "other_cpu_s"))
    return used / (wall * cores)


def splice_section(doc: str, section: str, heading: str = HEADING) -> str:
    """docs/BENCHMARKS.md with its `heading` section (up to the next `## `) replaced by
    `section`, or, if absent, inserted before the capping section / the methodology / the end."""
    lines = doc.splitlines(keepends=True)
    new = section if section.endswith("\n") else section + "\n"
    start = next((i for i, l in enumerate(lines) if l.rstrip("\n") == heading
                  or l.startswith(heading + " ")), None)
    if start is not None:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
                   len(lines))
        return "".join(lines[:start]) + new + "".join(lines[end:])
    for marker in ("## Capping", "## How each figure is obtained"):
        at = next((i for i, l in enumerate(lines) if l.startswith(marker)), None)
        if at is not None:
            return "".join(lines[:at]) + new + "".join(lines[at:])
    return doc + ("" if doc.endswith("\n") else "\n") + "\n" + new


# ------------------------------------------------------------------ server and proxy
def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _proc_usage(pid: int) -> dict:
    """CPU seconds and I/O counters of a running process (and its reaped children)."""
    out = {}
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        out["cpu_s"] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                k, v = line.split(":")
                out[k] = int(v)
    except (OSError, ValueError, IndexError):
        pass
    return out


def machine_busy_s() -> float | None:
    """CPU seconds all cores spent busy since boot (/proc/stat: user, nice, system, irq,
    softirq; not idle, iowait, or steal, the hypervisor's)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def ensure_s3s_fs(log) -> tuple:
    """(binary, version) of s3s-fs, installing the pinned version into bench/out/peers/cargo when
    none is found; (None, why) when that fails."""
    binary = _find("s3s-fs", os.path.expanduser("~/.cargo/bin/s3s-fs"),
                   os.path.join(PEERS_DIR, "cargo", "bin", "s3s-fs"))
    if not binary:
        log(f"s3s-fs not found: installing s3s-fs@{S3S_FS_VERSION} (cargo install, a few minutes)")
        err = cargo_install("s3s-fs", S3S_FS_VERSION, os.path.join(PEERS_DIR, "cargo"), log,
                            os.path.join(PEERS_DIR, "s3s-fs.log"), features=["binary"])
        if err:
            return None, err
        binary = os.path.join(PEERS_DIR, "cargo", "bin", "s3s-fs")
    p = run_quiet([binary, "--version"], check=False)
    return binary, (p.stdout.strip() or "s3s-fs (unknown version)")


def ensure_versitygw(log) -> tuple:
    """(binary, version) of versitygw, building the pinned release into bench/out/peers/bin when
    it is not there yet; (None, why) when that fails."""
    binary = os.path.join(PEERS_DIR, "bin", "versitygw")
    if not os.access(binary, os.X_OK):
        err = go_build(VERSITYGW_MODULE, VERSITYGW_VERSION, "./cmd/versitygw", binary, log,
                       os.path.join(PEERS_DIR, "versitygw.log"))
        if err:
            return None, err
    return binary, f"versitygw {VERSITYGW_VERSION} (posix backend)"


def ensure_server(kind: str, log) -> tuple:
    """(binary, version) of the S3 server `kind` (one of SERVERS), or (None, why)."""
    return ensure_versitygw(log) if kind == "versitygw" else ensure_s3s_fs(log)


def _die_with_parent() -> None:
    """preexec_fn: SIGTERM this child when the harness dies (even by SIGKILL)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class S3Server:
    """The S3 server `kind` (versitygw or s3s-fs) on 127.0.0.1:<free port>, serving the buckets
    (folders) of `root`."""

    def __init__(self, binary: str, root: str, log_path: str, kind: str = "versitygw"):
        self.binary, self.root, self.log_path, self.kind = binary, root, log_path, kind
        self.proc = None
        self.port = None

    def _argv(self) -> list:
        if self.kind == "versitygw":
            # Objects as plain files, their metadata in xattrs (ext4 has user xattrs). Without
            # --keep-alive it answers every request with "Connection: close", which no real S3
            # endpoint does: behind the proxy every request would pay a handshake.
            return [self.binary, "--keep-alive", "--port", f"127.0.0.1:{self.port}", "--access",
                    S3_ACCESS_KEY, "--secret", S3_SECRET_KEY, "posix", self.root]
        return [self.binary, "--host", "127.0.0.1", "--port", str(self.port), "--access-key",
                S3_ACCESS_KEY, "--secret-key", S3_SECRET_KEY, self.root]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        os.makedirs(self.root, exist_ok=True)
        for attempt in range(5):
            self.port = free_port()
            with open(self.log_path, "a") as log:
                self.proc = subprocess.Popen(
                    self._argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                    env=dict(os.environ, RUST_LOG="error"), preexec_fn=_die_with_parent)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                    return
                except OSError:
                    time.sleep(0.05)
            self.stop()  # port taken in the meantime, or did not start: try another port
        raise RuntimeError(f"{self.kind} did not start (log: {self.log_path})")

    def usage(self) -> dict:
        return _proc_usage(self.proc.pid) if self.proc and self.proc.poll() is None else {}

    def alive(self) -> bool:
        return bool(self.proc) and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def bucket_dir(self, bucket: str) -> str:
        return os.path.join(self.root, bucket)

    def wipe(self, s3: S3Location) -> None:
        """Delete a repository (its key prefix) on the server's disk, sidecar files included."""
        import base64

        shutil.rmtree(os.path.join(self.root, s3.bucket, s3.prefix), ignore_errors=True)
        os.makedirs(self.bucket_dir(s3.bucket), exist_ok=True)
        if self.kind != "s3s-fs":
            return
        enc = base64.urlsafe_b64encode(s3.bucket.encode()).decode().rstrip("=")
        head = f".bucket-{enc}.object-"
        for n in os.listdir(self.root):
            if not n.startswith(head):
                continue
            key_b64 = n[len(head):].split(".", 1)[0]
            try:
                key = base64.urlsafe_b64decode(key_b64 + "=" * (-len(key_b64) % 4)).decode()
            except ValueError:
                continue
            if key.startswith(s3.prefix + "/"):
                os.unlink(os.path.join(self.root, n))


class DelayProxy:
    """`python -m arcabench.delayproxy` in front of the server (see delayproxy.py)."""

    def __init__(self, upstream_port: int, latency: str, bandwidth: str, log_path: str):
        from .delayproxy import parse_duration

        self.upstream_port, self.latency, self.bandwidth = upstream_port, latency, bandwidth
        self.one_way = f"{parse_duration(latency) / 2 * 1000:g}ms"
        self.log_path = log_path
        self.proc = None
        self.port = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=BENCH, PYTHONDONTWRITEBYTECODE="1")
        self._log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "arcabench.delayproxy", "--upstream",
             f"127.0.0.1:{self.upstream_port}", "--delay", self.one_way, "--rate",
             self.bandwidth], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            text=True, env=env, start_new_session=True)
        line = self.proc.stdout.readline()
        try:
            self.port = json.loads(line)["port"]
        except (ValueError, KeyError, TypeError):
            self.stop()
            raise RuntimeError(f"delay proxy did not start (log: {self.log_path})")

    def stats(self) -> dict:
        if not self.proc or self.proc.poll() is not None:
            return {}
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        out = json.loads(self.proc.stdout.readline())
        out["cpu_s"] = _proc_usage(self.proc.pid).get("cpu_s")
        return out

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # the proxy exits when its stdin closes
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if getattr(self, "_log", None):
            self._log.close()


def link_check(server: S3Server, proxy: DelayProxy, work: str, size: int = 100_000_000) -> dict:
    """Calibrate the link: PUT a `size`-byte object straight to the server, then GET it and a
    1-byte object through the proxy with curl (SigV4), 3 times each: the big GET should take
    size / bandwidth plus two round trips (handshake, request), the tiny one two round trips."""
    curl = shutil.which("curl")
    if not curl:
        return {"note": "curl not found: link not checked"}
    bucket = os.path.join(server.root, "linkcheck")
    os.makedirs(bucket, exist_ok=True)
    files = {k: os.path.join(work, f"linkcheck-{k}") for k in ("big", "tiny")}
    with open(files["big"], "wb") as f:
        for _ in range(size // (1 << 20)):
            f.write(os.urandom(1 << 20))
        f.write(os.urandom(size % (1 << 20)))
    with open(files["tiny"], "wb") as f:
        f.write(b"x")
    sig = [curl, "-sS", "-f", "-o", "/dev/null", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
           f"{S3_ACCESS_KEY}:{S3_SECRET_KEY}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    out = {}
    try:
        for k, path in files.items():
            subprocess.run([*sig, "-T", path, f"{server.endpoint}/linkcheck/{k}"], check=True,
                           capture_output=True, timeout=120)
        for k in files:
            times = []
            for _ in range(3):
                p = subprocess.run([*sig, "-w", "%{time_total}", f"{proxy.endpoint}/linkcheck/{k}"],
                                   check=True, capture_output=True, text=True, timeout=120)
                times.append(float(p.stdout.strip()))
            out[f"{k}_get_s"] = median(times)
        out["big_bytes"] = size
        out["mb_per_s"] = size / 1e6 / out["big_get_s"]
    except (subprocess.SubprocessError, OSError, ValueError) as e:
        out["note"] = f"link check failed: {e}"[:300]
    finally:
        for path in files.values():
            os.unlink(path)
        shutil.rmtree(bucket, ignore_errors=True)
    return out


def _delta(after: dict, before: dict, key: str):
    if after.get(key) is None or before.get(key) is None:
        return None
    return after[key] - before[key]


# ------------------------------------------------------------------ the runs
class S3Bench:
    def __init__(self, bench, server: S3Server, proxy: DelayProxy, latency: str, runs: int,
                 log):
        self.bench, self.server, self.proxy = bench, server, proxy
        self.latency, self.runs, self.log = latency, runs, log

    def location(self, t, name: str, behind: bool) -> str:
        """The repository argument of tool t for dataset `name` (S3 tools: plain or via the
        proxy; both reach the same bucket and prefix on the same server)."""
        if t.name == "arca":
            return os.path.join(self.bench.work, "repos-s3", name, "arca")
        return t.s3_repo(self._loc(t, name, behind))

    def _loc(self, t, name, behind=False) -> S3Location:
        ep = self.proxy.endpoint if behind else self.server.endpoint
        return S3Location(ep, t.base, name)

    def _wipe(self, t, name) -> None:
        if t.name == "arca":
            repo = self.location(t, name, False)
            shutil.rmtree(repo, ignore_errors=True)
            os.makedirs(os.path.dirname(repo), exist_ok=True)
        else:
            self.server.wipe(self._loc(t, name))

    def repo_bytes(self, t, name) -> int:
        if t.name == "arca":
            return dir_bytes(self.location(t, name, False))
        return dir_bytes(os.path.join(self.server.root, t.base, name))

    def measure(self, res, scenario, t, run_no, argv, cwd, *, behind, verify=None):
        s0 = self.server.usage()
        p0 = self.proxy.stats() if behind else {}
        # As Bench._measure, with the cache drop outside the machine's CPU count.
        dropped = drop_caches()
        self.bench.note_drop(dropped)
        busy0 = machine_busy_s()
        m = run_measured(argv, env=t.env(), cwd=cwd, timeout=self.bench.timeout,
                         log_path=os.path.join(self.bench.logs, "s3", res["name"], t.name,
                                               f"{scenario}-{run_no}.log"))
        busy1 = machine_busy_s()
        m.cache_dropped = dropped
        s1 = self.server.usage()
        p1 = self.proxy.stats() if behind else {}
        extra = {"backend": "local" if t.name == "arca" else
                 (f"S3 behind {self.latency}" if behind else "S3"),
                 "server_cpu_s": _delta(s1, s0, "cpu_s"), "server_rchar": _delta(s1, s0, "rchar"),
                 "server_wchar": _delta(s1, s0, "wchar")}
        if busy0 is not None and busy1 is not None:
            # Everything else the machine ran meanwhile (other processes, the kernel's writeback
            # of the tool's writes): noise from outside the measurement.
            extra["other_cpu_s"] = max(0.0, busy1 - busy0 - m.cpu_s - (extra["server_cpu_s"] or 0)
                                       - ((_delta(p1, p0, "cpu_s") or 0) if behind else 0))
        if behind:
            extra.update(proxy_cpu_s=_delta(p1, p0, "cpu_s"),
                         proxy_down_bytes=_delta(p1, p0, "down_bytes"),
                         proxy_up_bytes=_delta(p1, p0, "up_bytes"),
                         proxy_responses=_delta(p1, p0, "responses"),
                         proxy_connections=_delta(p1, p0, "connections"))
        if not t.name.startswith("arca"):
            # The peers' rchar counts socket reads (or not, by syscall); the server's file reads
            # are what they fetched.
            extra["repo_read_bytes"] = extra["server_rchar"]
            extra["repo_read_method"] = (f"{self.server.kind} rchar delta (object bytes read by "
                                         "the server)")
        v = verify() if verify else None
        if not self.server.alive():
            self.bench._record(res, scenario, t, m, verify=v, extra=extra,
                               failure=f"the S3 server ({self.server.kind}) died")
            return m
        self.bench._record(res, scenario, t, m, verify=v, extra=extra)
        return m

    def first_backup(self, res, t, src, run_no, alive) -> None:
        name = res["name"]
        self._wipe(t, name)
        repo = self.location(t, name, False)
        try:
            t.init(repo)
        except Exception as e:  # noqa: BLE001 - any init failure is reported
            self.bench._record(res, "backup_first", t, None, failure=f"init failed: {e}"[:400])
            alive[t.name] = False
            return
        argv, cwd = t.backup_argv(repo, src)
        self.measure(res, "backup_first", t, run_no, argv, cwd, behind=False)
        if not res["scenarios"]["backup_first"][t.name]["ok"]:
            alive[t.name] = False

    def backup(self, res, scenario, t, src, run_no, behind) -> None:
        argv, cwd = t.backup_argv(self.location(t, res["name"], behind), src)
        self.measure(res, scenario, t, run_no, argv, cwd, behind=behind)

    def restore(self, res, scenario, t, src, run_no, behind) -> None:
        target = os.path.join(self.bench.work, "restore", t.name)
        restored_root = target + os.path.abspath(src)
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(target)
        repo = self.location(t, res["name"], behind)
        try:
            snap = t.latest(repo)
        except Exception as e:  # noqa: BLE001
            self.bench._record(res, scenario, t, None, failure=f"cannot resolve snapshot: {e}")
            return
        argv, cwd = t.restore_argv(repo, snap, target)
        self.measure(res, scenario, t, run_no, argv, cwd, behind=behind,
                     verify=lambda: verify_tree(src, restored_root,
                                                mtime_tolerance_ns=t.mtime_tolerance_ns,
                                                dir_mtimes=t.verify_dir_mtimes,
                                                root_mtime=t.verify_root_mtime))
        subprocess.run(["rm", "-rf", "--one-file-system", target], check=False)

    def run_dataset(self, spec, data_dir, manifest, tools) -> dict:
        """tools: local arca (name "arca") and the S3 variants."""
        plan = PLAN[spec.name]
        runs = self.runs
        src = os.path.join(self.bench.work, "src", spec.name)
        self.log(f"[s3/{spec.name}] working copy -> {src}")
        ds_mod.copy_tree(data_dir, src)
        res = self.bench._new_result(spec, manifest, src, runs)
        alive = {t.name: True for t in tools}
        s3_tools = [t for t in tools if t.name != "arca"]
        t0 = time.monotonic()
        first_runs = plan["first_runs"] or runs
        self.log(f"[s3/{spec.name}] first backup ({first_runs} run(s); S3 tools on plain S3)")
        for run_no in range(1, first_runs + 1):
            for t in tools:
                self.first_backup(res, t, src, run_no, alive)
        for t in tools:
            if alive[t.name]:
                res["repo"].setdefault(t.name, {})["after_first_backup"] = \
                    self.repo_bytes(t, spec.name)
        for phase in plan["phases"]:
            behind = phase.endswith("_lat")
            local = phase[:-len("_lat")] if behind else phase
            self.log(f"[s3/{spec.name}] {SCENARIOS[phase].format(lat=self.latency)}")
            if phase.startswith("backup"):
                for run_no in range(1, runs + 1):  # interleaved, as the main backups
                    for t in tools:
                        if alive[t.name]:
                            sc = local if t.name == "arca" else phase
                            self.backup(res, sc, t, src, run_no, behind and t.name != "arca")
            else:
                for t in (tools if not behind else s3_tools):
                    for run_no in range(1, runs + 1):
                        if alive[t.name]:
                            self.restore(res, phase, t, src, run_no, behind)
        for t in tools:
            r = res["repo"].setdefault(t.name, {})
            r["final"] = self.repo_bytes(t, spec.name)
            r["cache_bytes"] = t.cache_bytes()
            if not self.bench.keep:
                self._wipe(t, spec.name)
        if not self.bench.keep:
            subprocess.run(["rm", "-rf", "--one-file-system", src], check=False)
        res["seconds"] = round(time.monotonic() - t0, 1)
        self.bench.finalize(res)
        for cells in res["scenarios"].values():
            for cell in cells.values():
                for k in EXTRA_KEYS:
                    cell["median"][k] = median([r.get(k) for r in cell["runs"]])
        return res


def run(*, bench, tools, specs, data, names, runs, latency, bandwidth, log, meta,
        server_kind: str = "versitygw") -> dict:
    """The S3 section: start the server and the proxy, run every dataset of PLAN among `names`
    with arca (local and S3) and the S3-capable peers among `tools`, stop everything. Returns the
    results (also when something failed: its notes say what)."""
    from .delayproxy import parse_rate
    from .tools import Arca

    work = bench.work
    s3res = {"meta": dict(meta, latency=latency, bandwidth=parse_rate(bandwidth),
                          bandwidth_text=bandwidth, runs=runs,
                          date=time.strftime("%Y-%m-%d %H:%M:%S %Z")),
             "tools": [], "datasets": [], "notes": []}
    s3res["meta"]["git"] = run_quiet(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                     check=False).stdout.strip()
    names = [n for n in names if n in PLAN]
    base = [t for t in tools if t.available and t.name in S3_CAPABLE]
    if not names or not base:
        s3res["notes"].append("nothing to run: the S3 part needs the small or many dataset and "
                              f"one of {', '.join(S3_CAPABLE)}")
        return s3res
    home = os.path.join(work, "home-s3")
    chosen = []
    arca = next((t for t in base if isinstance(t, Arca)), None)
    if arca:
        local = copy.copy(arca)
        local.home = os.path.join(home, "arca")
        chosen.append(local)
    chosen += [s3_variant(t, home) for t in base]
    for t in chosen:
        s3res["tools"].append({"name": t.name, "label": t.label, "base": t.base,
                               "version": t.version, "peer": t.peer})

    binary, version = ensure_server(server_kind, log)
    if not binary:
        s3res["notes"].append(f"S3 part skipped: {server_kind} not available ({version})")
        log(f"SKIPPING the S3 part: {version}")
        return s3res
    s3res["meta"]["server"] = version
    s3res["meta"]["server_kind"] = server_kind
    logs = os.path.join(bench.logs, "s3")
    os.makedirs(logs, exist_ok=True)
    server = S3Server(binary, os.path.join(work, "s3"), os.path.join(logs, f"{server_kind}.log"),
                      server_kind)
    proxy = None
    t0 = time.monotonic()
    s3res["meta"]["loadavg_start"] = os.getloadavg()[0]
    s3res["meta"]["cores"] = os.cpu_count()
    try:
        server.start()
        proxy = DelayProxy(server.port, latency, bandwidth, os.path.join(logs, "delayproxy.log"))
        proxy.start()
        s3res["meta"]["link"] = (f"delayproxy: {proxy.one_way} each way ({latency} per round "
                                 f"trip), {bandwidth}/s per direction")
        log(f"S3: {version} on {server.endpoint} (root {server.root}); behind {latency}: proxy on "
            f"{proxy.endpoint} ({proxy.one_way} each way, {bandwidth}/s)")
        lc = s3res["meta"]["link_check"] = link_check(server, proxy, work)
        if "mb_per_s" in lc:
            log(f"link check through the proxy: {lc['big_bytes'] / 1e6:.0f} MB GET in "
                f"{lc['big_get_s']:.3f} s ({lc['mb_per_s']:.1f} MB/s), 1-byte GET on a new "
                f"connection in {lc['tiny_get_s'] * 1000:.1f} ms")
        else:
            log(lc.get("note", "link check: no result"))
        sb = S3Bench(bench, server, proxy, latency, runs, log)
        for n in names:
            data_dir, manifest = data[n]
            res = sb.run_dataset(specs[n], data_dir, manifest, chosen)
            s3res["datasets"].append(res)
            log(f"[s3/{n}] done in {res['seconds']:.0f} s")
    finally:
        if proxy:
            proxy.stop()
        server.stop()
        if not bench.keep:
            shutil.rmtree(server.root, ignore_errors=True)
    s3res["meta"]["seconds"] = round(time.monotonic() - t0, 1)
    s3res["meta"]["loadavg_end"] = os.getloadavg()[0]
    for row in target_rows(s3res):
        if row["ratio"] is not None:
            log(f"S3 target {row['dataset']}/{row['scenario']}: {row['ratio']:.2f}x "
                f"(limit {row['limit']}x): {'met' if row['met'] else 'NOT met'}")
    return s3res


# ------------------------------------------------------------------ report
def _fs(x) -> str:
    if x is None:
        return "–"
    return f"{x:.2f} s" if x < 10 else f"{x:.1f} s"


def _pct(x) -> str:
    return "–" if x is None else f"{x * 100:.0f}%"


def _n(x) -> str:
    return "–" if x is None else f"{x:,.0f}"


def _mb(b) -> str:
    if b is None:
        return "–"
    if b >= 10e6:
        return f"{b / 1e6:,.0f} MB"
    return f"{b / 1e6:.1f} MB" if b >= 1e6 else f"{b / 1e3:.0f} kB"


def _link_text(lc: dict) -> str:
    if "mb_per_s" not in lc:
        return ""
    return (f"; checked with curl through it: a {lc['big_bytes'] / 1e6:.0f} MB GET in "
            f"{lc['big_get_s']:.2f} s ({lc['mb_per_s']:.0f} MB/s with the two round trips of "
            f"connection and request), a 1-byte GET on a new connection in "
            f"{lc['tiny_get_s'] * 1000:.0f} ms")


def render(s3res: dict | None) -> list:
    """The "S3 on loopback" section of docs/BENCHMARKS.md (nothing without results)."""
    if not s3res or not s3res.get("datasets"):
        return []
    meta = s3res["meta"]
    lat = meta["latency"]
    labels = {t["name"]: t["label"] for t in s3res["tools"]}
    s3_tools = [t["name"] for t in s3res["tools"] if t["name"].endswith("-s3")]
    peers = [t for t in s3_tools if t != "arca-s3"]
    out = [HEADING, ""]
    out.append(
        f"`bench/run {meta.get('argv', '')}`, {meta['date']} (git {meta.get('git', '?')}), "
        f"median of {meta['runs']} run(s), {meta.get('seconds', 0):.0f} s in all. One S3 server, "
        f"{meta.get('server', 's3s-fs')} ({SERVER_TEXT[meta.get('server_kind', 's3s-fs')]}) on "
        "127.0.0.1, its folder on the same disk as the local repositories; every tool with its own bucket and "
        "its own local cache, kept between the steps (as a user's would be). **Behind "
        f"{lat}**: the same server through {meta.get('link', 'a delaying proxy')} "
        "(`arcabench/delayproxy.py`: this kernel has no netem qdisc)"
        + _link_text(meta.get("link_check") or {}) + ". Page cache dropped before "
        "every command, restores verified byte for byte. Versions: "
        + ", ".join(f"{t['label']} = {t['version']}" for t in s3res["tools"]
                    if t["name"].endswith("-s3")) + ". Machine: "
        + ((meta.get("machine") or {}).get("CPU") or "?")
        + (f"; restores onto {meta['restore_targets']}" if meta.get("restore_targets") else "")
        + (f"; 1-minute load average {meta['loadavg_start']:.1f} at the start, "
           f"{meta['loadavg_end']:.1f} at the end" if meta.get("loadavg_end") is not None else "")
        + ".")
    out += ["", "**Targets** (remote repositories issue): ratio = arca over S3 / baseline; "
            "baseline = arca on a local folder in the same run, or, for the restore behind "
            f"{lat}, the bytes that reached it from the server at the link's "
            f"{meta['bandwidth_text']}/s. "
            "Peers: wall time (their own ratio to the same kind of baseline).", ""]
    head = ["scenario", "baseline", "arca S3", "ratio", "target", "met?"] + \
        [labels[t] for t in peers]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in target_rows(s3res):
        sc = f"{row['dataset']}: {SCENARIOS[row['scenario']].format(lat=lat)}" + \
            ("" if row["scenario"].endswith("_lat") else " (plain S3)")
        a = row["tools"].get("arca-s3") or {}
        if row["baseline_kind"] == "local":
            base = f"arca local {_fs(row['baseline'])}"
        else:
            base = (f"{_fs(row['baseline'])} ({_mb(a.get('down_bytes'))} at "
                    f"{meta['bandwidth_text']}/s)")
        arca = "✗ failed" if a.get("failed") else _fs(row["arca"])
        ratio = "–" if row["ratio"] is None else f"{row['ratio']:.2f}×"
        met = "–" if row["met"] is None else ("yes" if row["met"] else "**no**")
        cells = [sc, base, arca, ratio, f"≤ {row['limit']}×", met]
        for p in peers:
            c = row["tools"].get(p) or {}
            if c.get("failed"):
                cells.append("✗ failed")
            elif c.get("wall") is None:
                cells.append("–")
            else:
                cells.append(_fs(c["wall"]) + (f" ({c['ratio']:.2f}×)" if c.get("ratio") else ""))
        out.append("| " + " | ".join(cells) + " |")
    cores = meta.get("cores") or os.cpu_count()
    by_name = {d["name"]: d for d in s3res["datasets"]}
    for row in target_rows(s3res):
        if row["met"] is not False:
            continue
        med = ((by_name[row["dataset"]]["scenarios"].get(row["scenario"]) or {})
               .get("arca-s3") or {}).get("median") or {}
        share = busy_share(med, cores)
        if share is not None and share >= 0.85:
            out += ["", f"*{row['dataset']}, {SCENARIOS[row['scenario']].format(lat=lat)}: "
                    f"not met, and CPU-bound: the {cores} cores were {share * 100:.0f}% busy "
                    f"({med['wall_s']:.2f} s wall: arca {med['cpu_s']:.2f} s CPU, the S3 server "
                    f"{med.get('server_cpu_s') or 0:.2f} s, the proxy "
                    f"{med.get('proxy_cpu_s') or 0:.2f} s, everything else "
                    f"{med['other_cpu_s']:.2f} s). On loopback the server shares the tool's "
                    "cores; see the table below.*"]
    out += ["", f"**Every measured command** (medians): wall, the tool's CPU, the server's CPU "
            f"(and the proxy's, behind {lat}), the CPU the rest of the machine used meanwhile "
            "(other processes, the kernel's writeback: noise), how busy all that kept the "
            f"machine ({cores} cores over the wall time), the object bytes the server read "
            "(restores: its "
            "`rchar`) or wrote (backups: its `wchar`), and behind "
            f"{lat} the bytes that crossed the link each way and the HTTP "
            "requests (response status lines) and TCP connections on it; arca's own count of "
            "backend requests and bytes read, from its JSON summary.", "",
            "| dataset | scenario | tool | wall | CPU | server CPU | other CPU | machine busy | "
            "server read or wrote "
            "| down / up (link) | requests (link) | connections | arca: requests, bytes read |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for res in s3res["datasets"]:
        for sc in SCENARIOS:
            cells = res["scenarios"].get(sc) or {}
            for t in [x["name"] for x in s3res["tools"]]:
                c = cells.get(t)
                if not c:
                    continue
                med = c["median"]
                if not c["ok"]:
                    fail = (c.get("failure") or "failed").replace("|", "\\|")[:160]
                    out.append(f"| {res['name']} | {SCENARIOS[sc].format(lat=lat)} | {labels[t]} "
                               f"| ✗ {fail} | | | | | | | | | |")
                    continue
                link = "–" if med.get("proxy_down_bytes") is None else \
                    f"{_mb(med['proxy_down_bytes'])} / {_mb(med.get('proxy_up_bytes'))}"
                own = ""
                if t.startswith("arca") and med.get("requests") is not None:
                    run0 = c["runs"][len(c["runs"]) // 2]
                    br = ((run0.get("summary") or {}).get("backend") or {}).get("bytes_read")
                    own = f"{med['requests']:,.0f}, {_mb(br)}"
                pc = f" (+{med['proxy_cpu_s']:.1f} s proxy)" if med.get("proxy_cpu_s") else ""
                io = (f"read {_mb(med.get('server_rchar'))}" if sc.startswith("restore")
                      else f"wrote {_mb(med.get('server_wchar'))}")
                out.append(
                    f"| {res['name']} | {SCENARIOS[sc].format(lat=lat)} | {labels[t]} | "
                    f"{_fs(med['wall_s'])} | {_fs(med.get('cpu_s'))} | "
                    f"{_fs(med.get('server_cpu_s')) if t != 'arca' else '–'}{pc} | "
                    f"{_fs(med.get('other_cpu_s'))} | {_pct(busy_share(med, cores))} | "
                    f"{io if t != 'arca' else '–'} | {link} | "
                    f"{_n(med.get('proxy_responses'))} | {_n(med.get('proxy_connections'))} | "
                    f"{own or '–'} |")
    out += _arca_profiles(s3res)
    for n in s3res.get("notes") or []:
        out += ["", f"*Note: {n}.*"]
    out.append("")
    return out


def _arca_profiles(s3res) -> list:
    """arca's own profile (JSON summary) of its S3 restores: per stage busy/waiting, fetchers."""
    out = []
    lat = s3res["meta"]["latency"]
    for res in s3res["datasets"]:
        for sc in ("restore_full", "restore_full_lat"):
            for t in ("arca", "arca-s3"):
                c = (res["scenarios"].get(sc) or {}).get(t)
                if not c or not c.get("ok") or not c["runs"]:
                    continue
                r = sorted(c["runs"], key=lambda r: r["wall_s"])[len(c["runs"]) // 2]
                sm = r.get("summary") or {}
                prof = sm.get("profile") or {}
                if not prof.get("stages"):
                    continue
                stages = "; ".join(
                    f"{st['name']} ×{st['threads']}: busy {st['busy_seconds']:.2f} s, waiting for "
                    f"input {st['wait_input_seconds']:.2f} s, to hand on "
                    f"{st['wait_output_seconds']:.2f} s" for st in prof["stages"])
                tun = prof.get("tuning") or {}
                mb = max((sm.get("bytes_restored") or 0) / 1e6, 1e-9)
                out += ["", f"*arca, {res['name']}, {SCENARIOS[sc].format(lat=lat)}"
                        f"{' (local)' if t == 'arca' else ''}, {r['wall_s']:.2f} s*: {stages}. "
                        f"{sm.get('requests', 0):,} reads "
                        f"({sm.get('requests', 0) / mb:.2f} per MB) "
                        f"of {sm.get('packs_read', 0)} packs, {_mb(sm.get('fetched_bytes'))} "
                        f"fetched for {_mb(sm.get('bytes_restored'))}; fetchers "
                        f"{tun.get('fetchers')}, read gap {_mb(tun.get('read_gap'))}, largest "
                        f"read {_mb(tun.get('max_read'))}, memory {_mb(tun.get('memory'))}."]
    return out


def render_file(path: str) -> list:
    try:
        with open(path) as f:
            return render(json.load(f))
    except (OSError, ValueError):
        return []

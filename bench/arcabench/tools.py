"""The backup tools under test: arca, restic, borg (and arca behind a throttled backend).

Settings chosen to be comparable (see bench/README.md, "Fairness"):
- zstd level 3 everywhere: arca's default, restic `--compression auto` (its default zstd level,
  repository format 2, which restic 0.14 only creates with `--repository-version 2`), borg
  `--compression zstd,3` (borg 1.2's default is lz4).
- Encryption on everywhere: arca always, restic always, borg `repokey-blake2`.
- Every tool keeps its normal local cache (restic: index/tree cache, borg: chunks and files
  cache, arca: whatever it keeps), in a private HOME per tool under the run's work dir, persisted
  across the phases of a run as for a real user. The page cache is dropped before each phase.
- Each tool restores with its default behaviour into an existing target (no overwrite flags).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

from .measure import run_quiet

PASSWORD = "arca-bench-password"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _apt_install(pkgs: list, log) -> bool:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        log(f"cannot install {' '.join(pkgs)}: need root and apt-get")
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    log(f"installing {' '.join(pkgs)} (apt-get)")
    for attempt in range(2):
        if attempt or not os.listdir("/var/lib/apt/lists") or len(os.listdir("/var/lib/apt/lists")) < 4:
            subprocess.run(["apt-get", "update", "-qq"], env=env, stdout=subprocess.DEVNULL)
        p = subprocess.run(["apt-get", "install", "-y", "-qq", *pkgs], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode == 0:
            return True
    log(f"apt-get install {' '.join(pkgs)} failed: {p.stderr.strip()[-400:]}")
    return False


class Tool:
    name = "?"
    label = "?"
    peer = True  # counts for "best peer"
    primary = False  # arca itself (the ratio's numerator)
    scenarios = None  # None = all; else the subset this variant runs
    mtime_tolerance_ns = 0  # precision of stored mtimes

    def __init__(self, home_root: str):
        self.home = os.path.join(home_root, self.name)
        self.available = False
        self.note = ""
        self.version = ""
        self.startup_rchar = 0  # rchar of `<tool> --version`: interpreter/module reads, not repo

    def measure_startup(self, argv: list) -> None:
        from .measure import run

        log = os.path.join(self.home, "startup.log")
        m = run(argv, env=self.env(), log_path=log)
        self.startup_rchar = (m.rchar or 0) if m.exit_code == 0 else 0
        shutil.rmtree(self.home, ignore_errors=True)

    # ---- setup
    def ensure(self, log, build: bool = True) -> bool:
        raise NotImplementedError

    def env(self) -> dict:
        os.makedirs(self.home, exist_ok=True)
        env = dict(os.environ)
        env.update(HOME=self.home, XDG_CACHE_HOME=os.path.join(self.home, ".cache"),
                   XDG_CONFIG_HOME=os.path.join(self.home, ".config"), LC_ALL="C.UTF-8")
        return env

    def cache_bytes(self) -> int:
        from .measure import dir_bytes

        return dir_bytes(self.home) if os.path.isdir(self.home) else 0

    # ---- repository
    def init(self, repo: str) -> None:
        raise NotImplementedError

    def backup_argv(self, repo: str, src: str) -> tuple[list, str | None]:
        raise NotImplementedError

    def restore_argv(self, repo: str, snapshot: str, target: str) -> tuple[list, str | None]:
        raise NotImplementedError

    def snapshots(self, repo: str) -> list:
        """Snapshot references, oldest first."""
        raise NotImplementedError

    def latest(self, repo: str) -> str:
        return "latest"

    # ---- figures
    def repo_bytes_read(self, m) -> tuple[int | None, str]:
        """Bytes read from the repository by one measured command, and how that was obtained."""
        if m.rchar is None:
            return None, "unavailable"
        return max(0, m.rchar - self.startup_rchar), "rchar - startup rchar"

    def backend_requests(self, m) -> int | None:
        return None

    def known_failure(self, scenario: str, m) -> str | None:
        """A documented limitation of the tool that explains this failed command, if any."""
        return None


class Restic(Tool):
    name = "restic"
    label = "restic"

    def ensure(self, log, build=True):
        if not shutil.which("restic") and not _apt_install(["restic"], log):
            self.note = "restic not installed and apt-get install failed"
            return False
        out = run_quiet(["restic", "version"]).stdout
        self.version = out.split(" compiled")[0].strip()
        self.measure_startup(["restic", "version"])
        self.available = True
        return True

    def env(self):
        env = super().env()
        env.update(RESTIC_PASSWORD=PASSWORD, RESTIC_CACHE_DIR=os.path.join(self.home, "cache"),
                   RESTIC_PROGRESS_FPS="0.2")
        env.pop("RESTIC_REPOSITORY", None)
        return env

    def init(self, repo):
        run_quiet(["restic", "-r", repo, "init", "--repository-version", "2"], env=self.env())

    def backup_argv(self, repo, src):
        return ["restic", "-r", repo, "--compression", "auto", "backup", "--json", src], None

    def restore_argv(self, repo, snapshot, target):
        return ["restic", "-r", repo, "restore", snapshot, "--target", target], None

    def snapshots(self, repo):
        out = run_quiet(["restic", "-r", repo, "snapshots", "--json"], env=self.env()).stdout
        snaps = json.loads(out) or []
        return [s["id"] for s in sorted(snaps, key=lambda s: s["time"])]

    def known_failure(self, scenario, m):
        if (scenario in ("restore_partial", "restore_noop", "restore_metadata")
                and m.exit_code == 1 and "file exists" in m.stderr_tail):
            return ("restic 0.14 restore into an existing tree fails on every existing "
                    "symlink ('symlink ...: file exists', exit 1); it rewrites all file contents")
        return None


class Borg(Tool):
    name = "borg"
    label = "borg"

    def ensure(self, log, build=True):
        if not shutil.which("borg") and not _apt_install(["borgbackup"], log):
            self.note = "borg not installed and apt-get install failed"
            return False
        self.version = run_quiet(["borg", "--version"]).stdout.strip()
        self.measure_startup(["borg", "--version"])
        self.available = True
        return True

    def env(self):
        env = super().env()
        env.update(BORG_PASSPHRASE=PASSWORD, BORG_BASE_DIR=self.home,
                   BORG_DISPLAY_PASSPHRASE="no", BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK="yes",
                   BORG_RELOCATED_REPO_ACCESS_IS_OK="yes", BORG_DELETE_I_KNOW_WHAT_I_AM_DOING="YES")
        env.pop("BORG_REPO", None)
        return env

    def init(self, repo):
        run_quiet(["borg", "init", "--encryption=repokey-blake2", repo], env=self.env())

    def backup_argv(self, repo, src):
        return ["borg", "create", "--compression", "zstd,3",
                f"{repo}::bench-{{now:%Y-%m-%dT%H:%M:%S.%f}}", src], None

    def restore_argv(self, repo, snapshot, target):
        # borg extracts below the current directory, stripping the leading '/', which gives the
        # same TARGET/abs/path layout as restic and arca.
        return ["borg", "extract", f"{repo}::{snapshot}"], target

    def snapshots(self, repo):
        out = run_quiet(["borg", "list", "--json", repo], env=self.env()).stdout
        archives = json.loads(out)["archives"]
        return [a["name"] for a in sorted(archives, key=lambda a: a["start"])]

    def latest(self, repo):
        # borg 1.2 has no 'latest' alias: resolved with one unmeasured `borg list` beforehand.
        return self.snapshots(repo)[-1]


class Arca(Tool):
    name = "arca"
    label = "arca"
    peer = False
    primary = True
    global_flags: list = []

    def __init__(self, home_root, binary: str | None = None):
        super().__init__(home_root)
        self.binary = binary or os.environ.get("ARCA_BIN") or os.path.join(ROOT, "target", "release", "arca")

    def ensure(self, log, build=True, build_log: str | None = None):
        if build:
            log("building arca: cargo build --release -p arca-cli")
            cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
            with open(build_log or os.devnull, "w") as f:
                p = subprocess.run([cargo, "build", "--release", "-p", "arca-cli"], cwd=ROOT,
                                   stdout=f, stderr=subprocess.STDOUT)
            if p.returncode != 0:
                self.note = (f"arca binary not built: `cargo build --release -p arca-cli` failed "
                             f"(exit {p.returncode}; log: {build_log})")
                return False
        if not os.access(self.binary, os.X_OK):
            self.note = f"arca binary not built ({self.binary} missing)"
            return False
        p = run_quiet([self.binary, "--version"], check=False)
        self.version = (p.stdout.strip() or p.stderr.strip()).splitlines()[0] if p.returncode == 0 else "arca (no --version)"
        try:
            rev = run_quiet(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False).stdout.strip()
            dirty = run_quiet(["git", "-C", ROOT, "status", "--porcelain", "--", "crates"],
                              check=False).stdout.strip()
            if rev:
                self.version += f" (git {rev}{'+dirty' if dirty else ''})"
        except OSError:
            pass
        self.available = True
        return True

    def env(self):
        env = super().env()
        env.update(ARCA_PASSWORD=PASSWORD)
        for k in ("ARCA_REPOSITORY", "ARCA_PASSWORD_FILE"):
            env.pop(k, None)
        return env

    def _base(self, repo):
        return [self.binary, "-r", repo, *self.global_flags]

    def init(self, repo):
        run_quiet([*self._base(repo), "init"], env=self.env())

    def backup_argv(self, repo, src):
        return [*self._base(repo), "backup", "--json", src], None

    def restore_argv(self, repo, snapshot, target):
        return [*self._base(repo), "restore", snapshot, "--target", target, "--json"], None

    def snapshots(self, repo):
        out = run_quiet([self.binary, "-r", repo, "snapshots", "--json"], env=self.env()).stdout
        snaps = json.loads(out)
        return [s["id"] for s in sorted(snaps, key=lambda s: s["time"])]

    def repo_bytes_read(self, m):
        backend = (m.summary or {}).get("backend") or {}
        if isinstance(backend.get("bytes_read"), int):
            return backend["bytes_read"], "arca JSON summary backend.bytes_read"
        return m.rchar, "rchar (arca JSON summary lacked backend.bytes_read)"

    def backend_requests(self, m):
        backend = (m.summary or {}).get("backend") or {}
        return backend.get("requests")


class ArcaRemote(Arca):
    """arca with its backend wrapped in the throttle (per-request latency + bandwidth cap)."""

    name = "arca-remote"
    primary = False
    scenarios = ("backup_first", "restore_full", "backup_generation", "restore_newest",
                 "restore_oldest")

    def __init__(self, home_root, binary=None, latency="20ms", bandwidth="100MB"):
        super().__init__(home_root, binary)
        self.latency, self.bandwidth = latency, bandwidth
        self.label = f"arca remote ({latency}, {bandwidth}/s)"
        self.global_flags = ["--backend-latency", latency, "--backend-bandwidth", bandwidth]

    def ensure(self, log, build=False, build_log=None):
        return super().ensure(log, build=False)


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMG]i?B?|B)?\s*", text, re.I)
    if not m:
        raise ValueError(text)
    num, unit = float(m.group(1)), (m.group(2) or "").upper().rstrip("B")
    mult = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "KI": 2**10, "MI": 2**20, "GI": 2**30}[unit]
    return int(num * mult)

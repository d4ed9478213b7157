"""The backup tools under test: arca (and arca behind a throttled backend) and its peers.

Peers: Debian's restic 0.14 and borg 1.2 (apt; the quick default set), and the strongest current
ones, built from source on first use and cached under bench/out/peers/: rustic (cargo install),
restic 0.19 and kopia (go build). Versions are pinned below.

Settings chosen to be comparable (see bench/README.md, "Fairness"):
- zstd level 3 everywhere, or the tool's closest setting: arca's default, restic
  `--compression auto` (its default zstd level, repository format 2, which restic 0.14 only
  creates with `--repository-version 2`), rustic `init --set-compression 3`, kopia global policy
  `--compression=zstd` (klauspost zstd's default level, the equivalent of level 3), borg
  `--compression zstd,3` (borg 1.2's default is lz4).
- Encryption on everywhere: arca, restic, rustic and kopia always, borg `repokey-blake2`.
- Every tool keeps its normal local cache (restic/rustic: index/tree cache, kopia: content and
  metadata cache, borg: chunks and files cache, arca: whatever it keeps), in a private HOME per
  tool under the run's work dir, persisted across the phases of a run as for a real user. The
  page cache is dropped before each phase.
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

# Peers built from source, pinned. Built on first use (only when requested and missing) and cached
# under PEERS_DIR: cargo installs into PEERS_DIR/cargo/bin, go builds into PEERS_DIR/bin, the Go
# module cache is PEERS_DIR/gopath, each build's log is PEERS_DIR/<tool>.log.
RUSTIC_VERSION = "0.11.4"  # crates.io: rustic-rs
RESTIC_LATEST_VERSION = "0.19.1"  # github.com/restic/restic
KOPIA_VERSION = "0.23.1"  # github.com/kopia/kopia
PEERS_DIR = os.path.join(ROOT, "bench", "out", "peers")
BUILD_TIMEOUT = 3 * 3600


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


def _find(prog: str, *fallbacks: str) -> str | None:
    for c in (shutil.which(prog), *fallbacks):
        if c and os.access(c, os.X_OK):
            return c
    return None


def _build_step(argv: list, log_path: str, *, env=None, cwd=None, capture=False):
    """One build command, its output appended to log_path. Returns (exit code, stdout if
    capture). A missing program or a timeout counts as a failure, never an exception."""
    with open(log_path, "a") as f:
        f.write(f"$ {' '.join(argv)}\n")
        f.flush()
        try:
            p = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE if capture else f, stderr=f, text=True,
                               timeout=BUILD_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as e:
            f.write(f"{e!r}\n")
            return 127, ""
        if capture:
            f.write(p.stdout)
        f.write(f"# exit {p.returncode}\n")
        return p.returncode, p.stdout if capture else ""


def go_build(module: str, version: str, package: str, binary: str, log, log_path: str,
             peers_dir: str = PEERS_DIR, build_flags: list = ()) -> str | None:
    """Build `package` (relative to the module root) of Go module@version into `binary`.

    `go install module/cmd@version` does not work everywhere: some Go module proxies refuse the
    `@v/list` endpoint that it queries. `go mod download -json module@version` fetches exactly
    that version (and prints its source "Dir"), and `go build` in that directory uses the
    module's own go.mod/go.sum. Returns None on success, else the reason."""
    go = _find("go", "/usr/local/go/bin/go", os.path.expanduser("~/go/bin/go"))
    if not go:
        return "no Go toolchain (`go` not found)"
    os.makedirs(os.path.dirname(binary), exist_ok=True)
    # GOWORK=off: no go.work of a parent directory applies; -buildvcs=false: the module cache
    # lies inside this git checkout, whose state must not be stamped into (or break) the build.
    env = dict(os.environ, GOPATH=os.path.join(peers_dir, "gopath"), GOFLAGS="-modcacherw",
               GOWORK="off", CGO_ENABLED=os.environ.get("CGO_ENABLED", "0"))
    log(f"building {module}@{version} with go (a few minutes); log: {log_path}")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    os.makedirs(peers_dir, exist_ok=True)
    with open(log_path, "w") as f:
        f.write(f"# {module}@{version} -> {binary}\n")
    rc, out = _build_step([go, "mod", "download", "-json", f"{module}@{version}"], log_path,
                          env=env, cwd=peers_dir, capture=True)
    try:
        src = json.loads(out)["Dir"] if rc == 0 else None
    except (ValueError, KeyError):
        src = None
    if not src:
        return f"`go mod download {module}@{version}` failed (exit {rc}; log: {log_path})"
    rc, _ = _build_step([go, "build", "-trimpath", "-buildvcs=false", *build_flags, "-o", binary,
                         package], log_path, env=env, cwd=src)
    if rc != 0 or not os.access(binary, os.X_OK):
        return f"`go build {package}` of {module}@{version} failed (exit {rc}; log: {log_path})"
    return None


def cargo_install(crate: str, version: str, root: str, log, log_path: str,
                  features: list = ()) -> str | None:
    """`cargo install --locked --root ROOT crate@version`. Returns None on success, else why."""
    cargo = _find("cargo", os.path.expanduser("~/.cargo/bin/cargo"))
    if not cargo:
        return "no Rust toolchain (`cargo` not found)"
    log(f"building {crate}@{version} with cargo install (15 min or more on 2 cores); "
        f"log: {log_path}")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "w") as f:
        f.write(f"# {crate}@{version} -> {root}/bin\n")
    # Run from / with no target-dir override: cargo install builds in its own temporary target
    # directory, apart from arca's target/, and no .cargo/config.toml of this checkout applies.
    env = {k: v for k, v in os.environ.items()
           if k not in ("CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR")}
    feat = ["--features", ",".join(features)] if features else []
    rc, _ = _build_step([cargo, "install", "--locked", "--root", root, *feat,
                         f"{crate}@{version}"], log_path, env=env, cwd="/")
    if rc != 0:
        return f"`cargo install {crate}@{version}` failed (exit {rc}; log: {log_path})"
    return None


def _time_key(stamp: str) -> tuple:
    """Sort key of an RFC 3339 timestamp with any number of fractional digits (Go trims trailing
    zeros, so plain string order is wrong within a second), in UTC or with an offset."""
    from datetime import datetime

    m = re.fullmatch(r"(.*?T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?", stamp.strip())
    if not m:
        return (stamp, 0)
    base = datetime.fromisoformat(m.group(1) + (m.group(3) or "+00:00").replace("Z", "+00:00"))
    return (base.timestamp(), int(((m.group(2) or "") + "000000000")[:9]))


def _version_line(argv: list) -> str:
    try:
        p = run_quiet(argv, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (p.stdout.strip() or p.stderr.strip()).splitlines()[0] if p.returncode == 0 and \
        (p.stdout.strip() or p.stderr.strip()) else ""


class Tool:
    name = "?"
    label = "?"
    peer = True  # counts for "best peer"
    primary = False  # arca itself (the ratio's numerator)
    scenarios = None  # None = all; else the subset this variant runs
    mtime_tolerance_ns = 0  # precision of restored mtimes (verification tolerance)
    verify_dir_mtimes = True  # False: the tool does not restore directory mtimes (see verify_note)
    verify_root_mtime = True  # False: nor the mtime of the backed-up directory itself
    verify_note = ""  # what the verification relaxes for this tool, and why (shown in the report)

    def __init__(self, home_root: str):
        self.home = os.path.join(home_root, self.name)
        self.extra_env = {}  # added to env() last (S3 credentials of the S3 variants)
        self.base = self.name  # the tool this is a variant of (S3 variants: arca, rustic, ...)
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
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AWS_", "OPENDAL")) or k == "AWS_CA_BUNDLE"}
        env.update(HOME=self.home, XDG_CACHE_HOME=os.path.join(self.home, ".cache"),
                   XDG_CONFIG_HOME=os.path.join(self.home, ".config"), LC_ALL="C.UTF-8")
        env.update(self.extra_env)
        return env

    # ---- S3 (see s3_variant)
    def s3_repo(self, s3: "S3Location") -> str:
        """The repository argument for a repository on an S3 server (arca's and restic's URL)."""
        return f"s3:{s3.endpoint}/{s3.bucket}/{s3.prefix}"

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

    # ---- maintenance (forget + prune; arca, restic and rustic: see arcabench/maintenance.py)
    prune_note = ""  # how the tool's prune is run, and its defaults (shown in the report)

    def forget_argv(self, repo: str, keep_last: int) -> tuple[list, str | None] | None:
        """Remove every snapshot but the newest `keep_last` (None: the tool has no such part
        in the harness)."""
        return None

    def prune_argv(self, repo: str, dry_run: bool = False) -> tuple[list, str | None] | None:
        """Delete the data no snapshot uses, now (the space is free when it exits)."""
        return None

    def check_argv(self, repo: str) -> tuple[list, str | None] | None:
        """The tool's own repository check (structure, not every byte)."""
        return None

    # ---- figures
    def repo_bytes_read(self, m) -> tuple[int | None, str]:
        """Bytes read by the process of one measured command, the same measure for every tool
        (arca included): its rchar minus the rchar of `<tool> --version` (interpreter and
        module reads). That is the repository, the tool's local cache and config, and any file
        of the restore target it reads back (partial, no-op and metadata-only restores)."""
        if m.rchar is None:
            return None, "unavailable"
        return max(0, m.rchar - self.startup_rchar), "rchar - startup rchar"

    def backend_bytes_read(self, m) -> int | None:
        """Bytes read from the repository as the tool itself counts them (arca's JSON summary);
        None for tools that do not report it."""
        return None

    def backend_requests(self, m) -> int | None:
        return None

    def known_failure(self, scenario: str, m) -> str | None:
        """A documented limitation of the tool that explains this failed command, if any."""
        return None


class SourceBuilt:
    """Mixin for a peer built from pinned source on first use and cached under PEERS_DIR."""

    pinned = ""  # the version that must appear in `binary version_args`' output
    version_args: tuple = ("version",)
    binary = ""

    def _installed_version(self) -> str:
        if not os.access(self.binary, os.X_OK):
            return ""
        return _version_line([self.binary, *self.version_args])

    def _build(self, log) -> str | None:
        raise NotImplementedError

    def ensure_built(self, log) -> bool:
        """True when the pinned binary is there, after building it if needed (else self.note)."""
        have = self._installed_version()
        if self.pinned in have.split() or f"v{self.pinned}" in have.split():
            return True
        if have:
            log(f"{self.name}: {self.binary} is '{have}', not {self.pinned}: rebuilding")
        else:
            log(f"{self.name}: {self.binary} not built yet")
        err = self._build(log)
        if err:
            self.note = f"{self.name} {self.pinned} not built: {err}"
            return False
        have = self._installed_version()
        if self.pinned not in have.split() and f"v{self.pinned}" not in have.split():
            self.note = (f"{self.name} {self.pinned} not built: {self.binary} reports "
                         f"'{have or 'nothing'}'")
            return False
        return True


class Restic(Tool):
    """Debian's restic (apt, 0.14 on Debian 12): part of the quick default set."""

    name = "restic"
    label = "restic"
    binary = "restic"

    def ensure(self, log, build=True):
        if not shutil.which("restic") and not _apt_install(["restic"], log):
            self.note = "restic not installed and apt-get install failed"
            return False
        self._finish_setup()
        # Say which restic this is next to restic-latest: "restic 0.14".
        m = re.match(r"restic (\d+\.\d+)", self.version)
        if m:
            self.label = f"restic {m.group(1)}"
        return True

    def _finish_setup(self):
        out = run_quiet([self.binary, "version"]).stdout
        self.version = out.split(" compiled")[0].strip()
        self.measure_startup([self.binary, "version"])
        self.available = True

    def env(self):
        env = super().env()
        env.update(RESTIC_PASSWORD=PASSWORD, RESTIC_CACHE_DIR=os.path.join(self.home, "cache"),
                   RESTIC_PROGRESS_FPS="0.2")
        for k in ("RESTIC_REPOSITORY", "RESTIC_REPOSITORY_FILE", "RESTIC_PASSWORD_FILE",
                  "RESTIC_PASSWORD_COMMAND", "RESTIC_COMPRESSION", "RESTIC_PACK_SIZE",
                  "RESTIC_HOST"):
            env.pop(k, None)
        return env

    def init(self, repo):
        run_quiet([self.binary, "-r", repo, "init", "--repository-version", "2"], env=self.env())

    def backup_argv(self, repo, src):
        return [self.binary, "-r", repo, "--compression", "auto", "backup", "--json", src], None

    def restore_argv(self, repo, snapshot, target):
        return [self.binary, "-r", repo, "restore", snapshot, "--target", target], None

    def snapshots(self, repo):
        out = run_quiet([self.binary, "-r", repo, "snapshots", "--json"], env=self.env()).stdout
        snaps = json.loads(out) or []
        return [s["id"] for s in sorted(snaps, key=lambda s: s["time"])]

    prune_note = ("`forget --keep-last 5`, then `prune` (defaults: --max-unused 5% of the "
                  "repository size; deletes at once)")

    def forget_argv(self, repo, keep_last):
        return [self.binary, "-r", repo, "forget", "--keep-last", str(keep_last)], None

    def prune_argv(self, repo, dry_run=False):
        return [self.binary, "-r", repo, "prune", *(["--dry-run"] if dry_run else [])], None

    def check_argv(self, repo):
        return [self.binary, "-r", repo, "check"], None

    def known_failure(self, scenario, m):
        if (scenario in ("restore_partial", "restore_noop", "restore_metadata")
                and m.exit_code == 1 and "file exists" in m.stderr_tail):
            return ("restic 0.14 restore into an existing tree fails on every existing "
                    "symlink ('symlink ...: file exists', exit 1); it rewrites all file contents")
        return None


class ResticLatest(SourceBuilt, Restic):
    """restic RESTIC_LATEST_VERSION built from source with Go (PEERS_DIR/bin/restic)."""

    name = "restic-latest"
    pinned = RESTIC_LATEST_VERSION
    label = "restic " + ".".join(RESTIC_LATEST_VERSION.split(".")[:2])

    def __init__(self, home_root, peers_dir: str = PEERS_DIR):
        super().__init__(home_root)
        self.peers_dir = peers_dir
        self.binary = os.path.join(peers_dir, "bin", "restic")

    def _build(self, log):
        return go_build("github.com/restic/restic", f"v{self.pinned}", "./cmd/restic", self.binary,
                        log, os.path.join(self.peers_dir, "restic.log"), self.peers_dir)

    def ensure(self, log, build=True):
        if not self.ensure_built(log):
            return False
        self._finish_setup()
        return True

    def known_failure(self, scenario, m):
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
        m = re.match(r"borg (\d+\.\d+)", self.version)
        if m:
            self.label = f"borg {m.group(1)}"
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


class Rustic(SourceBuilt, Tool):
    """rustic (rustic-rs RUSTIC_VERSION, Rust, restic's repository format), built with
    `cargo install --locked --root PEERS_DIR/cargo rustic-rs@RUSTIC_VERSION`."""

    name = "rustic"
    pinned = RUSTIC_VERSION
    label = "rustic " + ".".join(RUSTIC_VERSION.split(".")[:2])
    version_args = ("--version",)
    # rustic stores no metadata for the backed-up path itself (`rustic ls -l latest` shows it,
    # like its parents, with owner '?' and no mtime), so the restored root directory gets the
    # restore time as mtime; every entry below it is restored exactly (rustic-rs/rustic#514).
    verify_root_mtime = False
    verify_note = ("verified without the mtime of the backed-up directory itself (rustic stores "
                   "no metadata for the backup's root path; everything below it is checked)")

    def __init__(self, home_root, peers_dir: str = PEERS_DIR):
        super().__init__(home_root)
        self.peers_dir = peers_dir
        self.binary = os.path.join(peers_dir, "cargo", "bin", "rustic")

    def _build(self, log):
        return cargo_install("rustic-rs", self.pinned, os.path.join(self.peers_dir, "cargo"), log,
                             os.path.join(self.peers_dir, "rustic.log"))

    def ensure(self, log, build=True):
        if not self.ensure_built(log):
            return False
        self.version = self._installed_version()
        self.measure_startup([self.binary, "--version"])
        self.available = True
        return True

    def env(self):
        env = super().env()
        for k in [k for k in env if k.startswith("RUSTIC_")]:
            del env[k]
        # No config profile is read: rustic looks for rustic.toml in $XDG_CONFIG_HOME/rustic
        # (private here), /etc/rustic (none) and the working directory (the commands run in the
        # tool's private home).
        env.update(RUSTIC_PASSWORD=PASSWORD, RUSTIC_CACHE_DIR=os.path.join(self.home, "cache"),
                   RUSTIC_NO_PROGRESS="true")
        return env

    def _run(self, argv):
        return run_quiet([self.binary, *argv], env=self.env(), cwd=self.home)

    @staticmethod
    def _repo_args(repo) -> list:
        # An S3 repository is a config profile (s3_repo) given by its path.
        if repo.startswith("profile:"):
            return ["-P", repo[len("profile:"):]]
        return ["-r", repo]

    def s3_repo(self, s3):
        """rustic reaches S3 through OpenDAL (`opendal:s3`), configured by options; they go into
        a config profile in the tool's private home, given with `-P /path/NAME.toml`."""
        os.makedirs(self.home, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9]+", "-", f"s3-{s3.endpoint}-{s3.bucket}-{s3.prefix}").strip("-")
        path = os.path.join(self.home, name + ".toml")
        opts = {"endpoint": s3.endpoint, "bucket": s3.bucket, "root": "/" + s3.prefix,
                "region": s3.region, "access_key_id": s3.access_key,
                "secret_access_key": s3.secret_key}
        with open(path, "w") as f:
            f.write('[repository]\nrepository = "opendal:s3"\n\n[repository.options]\n')
            f.writelines(f"{k} = {json.dumps(v)}\n" for k, v in opts.items())
        return "profile:" + path

    def init(self, repo):
        # zstd level 3 is rustic's default too (level 0 = zstd's default); set it explicitly.
        self._run([*self._repo_args(repo), "init", "--set-compression", "3"])

    def backup_argv(self, repo, src):
        return [self.binary, *self._repo_args(repo), "backup", "--json", src], self.home

    def restore_argv(self, repo, snapshot, target):
        return [self.binary, *self._repo_args(repo), "restore", snapshot, target], self.home

    prune_note = ("`forget --keep-last 5`, then `prune --instant-delete` (rustic's default "
                  "only marks unused packs, deleting them at a prune 23 h later, "
                  "--keep-delete 23h; --instant-delete deletes at once, as restic and arca do; "
                  "defaults otherwise: --max-unused 5% and --max-repack 10% of the repository "
                  "size)")

    def forget_argv(self, repo, keep_last):
        return [self.binary, *self._repo_args(repo), "forget", "--keep-last",
                str(keep_last)], self.home

    def prune_argv(self, repo, dry_run=False):
        return [self.binary, *self._repo_args(repo), *(["--dry-run"] if dry_run else []),
                "prune", "--instant-delete"], self.home

    def check_argv(self, repo):
        return [self.binary, *self._repo_args(repo), "check"], self.home

    def snapshots(self, repo):
        out = self._run([*self._repo_args(repo), "snapshots", "--json"]).stdout
        data = json.loads(out) or []
        snaps = []
        for item in data:  # grouped: [{"group_key": ..., "snapshots": [...]}] or [[key, [...]]]
            if isinstance(item, dict) and "snapshots" in item:
                snaps += item["snapshots"]
            elif isinstance(item, list) and len(item) == 2 and isinstance(item[1], list):
                snaps += item[1]
            elif isinstance(item, dict):
                snaps.append(item)
        return [s["id"] for s in sorted(snaps, key=lambda s: _time_key(s["time"]))]


class Kopia(SourceBuilt, Tool):
    """kopia KOPIA_VERSION built from source with Go (PEERS_DIR/bin/kopia)."""

    name = "kopia"
    pinned = KOPIA_VERSION
    label = "kopia " + ".".join(KOPIA_VERSION.split(".")[:2])
    version_args = ("--version",)
    # Symlink mtimes are restored with lutimes(2) at microsecond precision
    # (snapshot/restore/local_fs_output_unix.go); files and directories to the nanosecond.
    mtime_tolerance_ns = 1000
    # kopia's snapshot filesystem (snapshot/snapshotfs/repofs.go, loadLocked) replaces each
    # subdirectory's mtime by the newest mtime found below it (DirSummary.MaxModTime), so a
    # restored directory never gets its own mtime back (the snapshot root does).
    verify_dir_mtimes = False
    verify_note = ("verified with mtimes to ±1 µs (kopia sets symlink times with lutimes, µs) and "
                   "without directory mtimes (kopia restores a subdirectory's mtime as the newest "
                   "mtime inside it)")

    def __init__(self, home_root, peers_dir: str = PEERS_DIR):
        super().__init__(home_root)
        self.peers_dir = peers_dir
        self.binary = os.path.join(peers_dir, "bin", "kopia")
        self._source_paths = {}  # snapshot id -> source path (restore target layout)

    def _build(self, log):
        v = self.pinned
        flags = ["-ldflags",
                 f"-X github.com/kopia/kopia/repo.BuildVersion={v} "
                 f"-X github.com/kopia/kopia/repo.BuildInfo=v{v}"]
        return go_build("github.com/kopia/kopia", f"v{v}", ".", self.binary, log,
                        os.path.join(self.peers_dir, "kopia.log"), self.peers_dir,
                        build_flags=flags)

    def ensure(self, log, build=True):
        if not self.ensure_built(log):
            return False
        self.version = "kopia " + self._installed_version().split()[0]
        self.measure_startup([self.binary, "--version"])
        self.available = True
        return True

    @property
    def config(self) -> str:
        return os.path.join(self.home, "repository.config")

    def env(self):
        env = super().env()
        for k in [k for k in env if k.startswith("KOPIA_")]:
            del env[k]
        env.update(KOPIA_PASSWORD=PASSWORD, KOPIA_CHECK_FOR_UPDATES="false")
        return env

    def _k(self, *argv) -> list:
        return [self.binary, *argv, "--config-file", self.config]

    def init(self, repo):
        # A fresh repository: drop the previous one's connection and caches first.
        shutil.rmtree(self.home, ignore_errors=True)
        env = self.env()
        run_quiet(self._k("repository", "create", "filesystem", "--path", repo,
                          "--cache-directory", os.path.join(self.home, "cache"),
                          "--no-check-for-updates"), env=env)
        # zstd = klauspost zstd's default level (the equivalent of zstd level 3); kopia's
        # default is no compression.
        run_quiet(self._k("policy", "set", "--global", "--compression", "zstd"), env=env)
        # kopia applies its retention policy after every snapshot (default: latest 10, and 48
        # hourly, 7 daily, ...); keep every snapshot, as the other tools do, so that the oldest
        # generation can be restored.
        run_quiet(self._k("policy", "set", "--global", "--keep-latest", "1000000"), env=env)

    def backup_argv(self, repo, src):
        return self._k("snapshot", "create", src, "--json"), None

    def _list(self):
        out = run_quiet(self._k("snapshot", "list", "--json"), env=self.env()).stdout
        snaps = sorted(json.loads(out) or [], key=lambda s: _time_key(s["startTime"]))
        for s in snaps:
            self._source_paths[s["id"]] = s["source"]["path"]
        return snaps

    def snapshots(self, repo):
        return [s["id"] for s in self._list()]

    def latest(self, repo):
        # kopia has no 'latest' alias: resolved with one unmeasured `kopia snapshot list`.
        return self.snapshots(repo)[-1]

    def restore_argv(self, repo, snapshot, target):
        # kopia restores the snapshot root's contents into the given directory: give it
        # TARGET/absolute/source/path, the layout restic and arca produce.
        if snapshot not in self._source_paths:
            self._list()
        src = self._source_paths[snapshot]
        return self._k("snapshot", "restore", snapshot, target + src), None


def file_sha256(path: str) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def describe_arca_version(version: str, binary: str, rev: str, dirty: bool, built: bool) -> str:
    """arca's recorded version: `--version`, the measured binary's SHA-256 (first 12 hex) and
    path, and the checkout's git HEAD, said to be only that when the harness did not build
    the binary (--no-build or $ARCA_BIN)."""
    try:
        digest = file_sha256(binary)[:12]
    except OSError:
        digest = "unreadable"
    git = f"{rev}{'+dirty' if dirty else ''}" if rev else "unknown"
    if built:
        return f"{version} (git {git}, built by the harness; binary sha256 {digest}, {binary})"
    return (f"{version} (binary sha256 {digest}, {binary}; git {git} is the git HEAD of the "
            f"checkout, binary not built by the harness)")


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
        # Built by the harness only when cargo ran and the binary measured is the one it built.
        self.built_by_harness = bool(build) and os.path.abspath(self.binary) == os.path.abspath(
            os.path.join(ROOT, "target", "release", "arca"))
        rev, dirty = "", ""
        try:
            rev = run_quiet(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False).stdout.strip()
            dirty = run_quiet(["git", "-C", ROOT, "status", "--porcelain", "--", "crates"],
                              check=False).stdout.strip()
        except OSError:
            pass
        self.version = describe_arca_version(self.version, self.binary, rev, bool(dirty),
                                             self.built_by_harness)
        self.measure_startup([self.binary, "--version"])
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

    prune_note = ("`forget --keep-last 5`, then `prune --json` (defaults: --max-unused 5% of "
                  "the repository size, as restic, the packs with the largest unused share "
                  "repacked first; deletes at once)")

    def forget_argv(self, repo, keep_last):
        return [*self._base(repo), "forget", "--keep-last", str(keep_last)], None

    def prune_argv(self, repo, dry_run=False):
        return [*self._base(repo), "prune", "--json", *(["--dry-run"] if dry_run else [])], None

    def check_argv(self, repo):
        return [*self._base(repo), "check"], None

    def backend_bytes_read(self, m):
        backend = (m.summary or {}).get("backend") or {}
        return backend["bytes_read"] if isinstance(backend.get("bytes_read"), int) else None

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


# ---------------------------------------------------------------- S3
S3_ACCESS_KEY = "arcabench"
S3_SECRET_KEY = "arcabench-secret-key"
S3_REGION = "us-east-1"
S3_CAPABLE = ("arca", "restic-latest", "restic", "rustic")  # tools with an S3 variant


class S3Location:
    """Where a repository lives on an S3 server: endpoint URL, bucket, key prefix."""

    def __init__(self, endpoint: str, bucket: str, prefix: str):
        self.endpoint, self.bucket, self.prefix = endpoint.rstrip("/"), bucket, prefix.strip("/")
        self.region, self.access_key, self.secret_key = S3_REGION, S3_ACCESS_KEY, S3_SECRET_KEY


def s3_variant(tool: Tool, home_root: str) -> Tool:
    """The same tool (binary, settings) with its repositories on S3: named `<name>-s3`, with its
    own private home (and so its own cache) under home_root and the S3 credentials in its
    environment (AWS_* for arca and restic; rustic reads them from its profile, see
    Rustic.s3_repo). Its repository argument comes from `s3_repo(S3Location)`."""
    import copy

    v = copy.copy(tool)
    v.base = tool.name
    v.name = f"{tool.name}-s3"
    v.label = f"{tool.label} S3"
    v.peer = tool.peer
    v.primary = False
    v.home = os.path.join(home_root, v.name)
    v.extra_env = {"AWS_ACCESS_KEY_ID": S3_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
                   "AWS_DEFAULT_REGION": S3_REGION, "AWS_REGION": S3_REGION}
    return v


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMG]i?B?|B)?\s*", text, re.I)
    if not m:
        raise ValueError(text)
    num, unit = float(m.group(1)), (m.group(2) or "").upper().rstrip("B")
    mult = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "KI": 2**10, "MI": 2**20, "GI": 2**30}[unit]
    return int(num * mult)

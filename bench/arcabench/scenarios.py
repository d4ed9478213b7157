"""The benchmark scenarios, run per dataset and tool.

Standard datasets (small, medium, many):
  1. first backup            N runs, each into a freshly initialised repository
  2. no-change backup        N runs, nothing changed since the previous backup
  3. backup after mutation   N runs; before each, 2% of the files get 10% of their bytes
                             overwritten and 0.5% new files appear (one FAST'13 generation step)
  4. full restore            N runs of `latest` into an empty target
  5. partial restore         N runs; before each, of the files in the (correct) target 25% are
                             deleted and 25% get their first byte inverted; 50% stay untouched
  6. no-op restore           N runs into the already correct target
  7. metadata-only restore   N runs; before each, every mtime in the target is set to now
  The throttled arca variant runs 1 and 4 only (right after 1, on the unmutated data), with
  --remote-runs runs (default 1: its time is dominated by the injected latency).
Generations dataset: first backup, then 20 generation steps each followed by a backup (lock-step
for all tools, on the same tree); then N runs each of restoring the newest and the oldest
snapshot into an empty target.

Every phase drops the page cache first (when permitted). Every restore is verified against the
source tree (bytes and metadata); a wrong restore or a failing command is a failure, not a time.
Tools are interleaved run by run, backups and restores alike, so slow drifts of the machine hit
all; the order rotates: run i (generation i for the incremental backups) starts at tool
(i - 1 + d) mod n, d being the dataset's position in the bench run, so no tool is always the
first (e.g. the first to restore onto the fresh file system). The orders are in the results
(`order`). Restores run tool by tool within a run: full, partial, no-op, metadata-only (or
newest, oldest), then the target is removed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from . import datasets as ds_mod
from .measure import Measurement, dir_bytes, median, run
from .verify import verify_tree

SCENARIOS = {
    "backup_first": "first backup",
    "backup_nochange": "no-change backup",
    "backup_mutation": "backup after mutation",
    "backup_generation": "incremental backup (median of generations)",
    "restore_full": "full restore (empty target)",
    "restore_partial": "partial restore (25% deleted, 25% modified)",
    "restore_noop": "no-op restore (target correct)",
    "restore_metadata": "metadata-only restore (mtimes wrong)",
    "restore_newest": "restore newest generation",
    "restore_oldest": "restore oldest generation",
}
RESTORES = {k for k in SCENARIOS if k.startswith("restore_")}
REMOTE_SCENARIOS = {"backup_first", "restore_full", "backup_generation", "restore_newest",
                    "restore_oldest"}

REFERENCES = {
    "tar_extract": ("tar -xf of an uncompressed tar into an empty dir", "full restore"),
    "cp_a": ("cp -a of the source tree into an empty dir", "full restore"),
    "find_stat": ("find walk with stat of every entry", "no-op restore, no-change backup"),
    "read_all": ("read every file (find -exec cat > /dev/null)", "first backup, content hashing"),
}

# The arca CLI contract for `--json` summaries (last line of stdout).
ARCA_BACKUP_FIELDS = ("files_new", "files_changed", "files_unmodified", "data_added",
                      "data_added_packed", "total_bytes_processed", "duration_seconds")
ARCA_RESTORE_FIELDS = ("files_restored", "bytes_written", "duration_seconds", "errors")
ARCA_PRUNE_FIELDS = ("snapshots", "used_blobs", "unused_blobs", "packs_delete", "packs_repack",
                     "freed_bytes")


def contract_kind(scenario: str) -> str | None:
    """Which arca `--json` contract a scenario's command answers to (None: none)."""
    if scenario.startswith("backup_"):
        return "backup"
    if scenario.startswith("restore_"):
        return "restore"
    if scenario.startswith("prune"):
        return "prune"
    return None


def arca_contract_problems(summary: dict | None, restore: bool = False, kind: str | None = None) -> list:
    kind = kind or ("restore" if restore else "backup")
    if summary is None:
        return ["no JSON summary line on stdout"]
    problems = []
    if summary.get("message_type") != "summary":
        problems.append("message_type != 'summary'")
    fields = {"restore": ARCA_RESTORE_FIELDS, "backup": ARCA_BACKUP_FIELDS,
              "prune": ARCA_PRUNE_FIELDS}[kind]
    for f in fields:
        if not isinstance(summary.get(f), (int, float)) or isinstance(summary.get(f), bool):
            problems.append(f"{f} missing or not a number")
    if kind == "backup":
        sid = summary.get("snapshot_id")
        if not (isinstance(sid, str) and len(sid) == 64 and all(c in "0123456789abcdef" for c in sid)):
            problems.append("snapshot_id is not 64 hex digits")
    backend = summary.get("backend")
    if not isinstance(backend, dict):
        problems.append("backend object missing")
    else:
        for f in ("requests", "bytes_read", "bytes_written"):
            if not isinstance(backend.get(f), int):
                problems.append(f"backend.{f} missing or not an integer")
    return problems


def rotated(items: list, start: int) -> list:
    """items starting at index start mod len(items), wrapping round."""
    if not items:
        return []
    k = start % len(items)
    return list(items[k:]) + list(items[:k])


# Filesystems whose freed blocks must be handed back after a removal: (mountpoint, trim).
TRIMMED: list = []


def _rm(path: str) -> None:
    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", "--one-file-system", path], check=False)
        if os.path.lexists(path):  # e.g. read-only dirs
            subprocess.run(["chmod", "-R", "u+rwx", path], check=False, stderr=subprocess.DEVNULL)
            shutil.rmtree(path, ignore_errors=True)
        for mountpoint, trim in TRIMMED:
            if os.path.commonpath([os.path.abspath(path), mountpoint]) == mountpoint:
                trim()


class Bench:
    def __init__(self, *, work, logs, timeout, seed, log, remote_runs=1, keep=False):
        self.remote_runs = remote_runs
        self.dataset_no = 0  # position of the current dataset in this bench run (rotation)
        self.keep = keep
        self.work = work
        self.logs = logs
        self.timeout = timeout
        self.seed = seed
        self.log = log
        self.failures = []  # unexpected failures: make the run exit non-zero
        self.expected_failures = []  # documented tool limitations
        self.contract = []  # arca CLI contract violations
        self.caches_dropped = None  # True when every measured command's drop succeeded
        self.drops = {"ok": 0, "failed": 0}  # page-cache drops before measured commands

    def _note_failure(self, where: str, failure: str, known: str | None) -> None:
        """One entry per dataset/scenario/tool, counting the failed runs."""
        book = self.expected_failures if known else self.failures
        for e in book:
            if e["where"] == where:
                e["runs_failed"] += 1
                return
        book.append({"where": where, "failure": failure[:400], "known": known, "runs_failed": 1})

    # ------------------------------------------------------------------ plumbing
    def _measure(self, ds: str, tool: str, scenario: str, run_no: int, argv, cwd=None, env=None) -> Measurement:
        log_path = os.path.join(self.logs, ds, tool, f"{scenario}-{run_no}.log")
        m = run(argv, env=env, cwd=cwd, log_path=log_path, drop=True, timeout=self.timeout)
        self.note_drop(m.cache_dropped)
        return m

    def note_drop(self, dropped: bool) -> None:
        """Track the page-cache drop of every measured command (not only the first)."""
        self.drops["ok" if dropped else "failed"] += 1
        self.caches_dropped = self.drops["failed"] == 0

    @staticmethod
    def _mark_dead(res, t, why: str) -> None:
        """A tool whose first backup failed runs nothing more on this dataset: say so, so that
        the report marks its later cells as failed rather than leaving them empty."""
        res.setdefault("dead", {}).setdefault(t.name, why)

    def _cell(self, res: dict, scenario: str, tool: str) -> dict:
        return res["scenarios"].setdefault(scenario, {}).setdefault(
            tool, {"runs": [], "ok": True, "failure": None, "expected_failure": None})

    def _record(self, res, scenario, tool_obj, m: Measurement | None, *, verify=None,
                failure=None, extra=None):
        cell = self._cell(res, scenario, tool_obj.name)
        entry = m.to_dict() if m else {}
        if m is not None and failure is None:
            if m.timed_out:
                failure = f"timed out after {self.timeout:.0f} s"
            elif m.exit_code != 0:
                last = (m.stderr_tail.strip().splitlines() or [""])[-1][:200]
                failure = f"exit {m.exit_code}: {last}"
        if verify is not None:
            entry["verify"] = verify.to_dict()
            entry["restored_bytes"] = verify.bytes
            if not verify.ok and failure is None:
                failure = f"wrong restore: {verify.brief()}"
            elif not verify.ok:
                failure += f"; tree: {verify.brief()}"
        if m is not None:
            # One measure for every tool (arca included): the bytes the process read (rchar
            # minus the tool's startup), repository, caches and target files alike.
            rb, how = tool_obj.repo_bytes_read(m)
            entry["process_read_bytes"], entry["process_read_method"] = rb, how
            backend = getattr(tool_obj, "backend_bytes_read", lambda _m: None)(m)
            if backend is not None:
                entry["backend_read_bytes"] = backend  # arca's own count: repository only
            entry["requests"] = tool_obj.backend_requests(m)
            kind = contract_kind(scenario)
            if tool_obj.name.startswith("arca") and failure is None and kind:
                problems = arca_contract_problems(m.summary, kind=kind)
                if problems:
                    msg = f"{res['name']}/{scenario}/{tool_obj.name}: JSON summary: {'; '.join(problems)}"
                    if msg not in self.contract:
                        self.contract.append(msg)
                    failure = f"contract: JSON summary: {'; '.join(problems)}"
                elif scenario.startswith("restore_") and m.summary.get("errors"):
                    failure = f"arca reported errors={m.summary.get('errors')} in its summary"
        if extra:
            entry.update(extra)
        entry["failure"] = failure
        cell["runs"].append(entry)
        if failure:
            known = tool_obj.known_failure(scenario, m) if m is not None else None
            where = f"{res['name']}/{scenario}/{tool_obj.name}"
            if cell["ok"]:
                cell["ok"] = False
                cell["failure"] = failure
                cell["expected_failure"] = known
            elif cell["expected_failure"] and not known:
                cell["expected_failure"] = None
            self._note_failure(where, failure, known)
            self.log(f"  {where} run {len(cell['runs'])}: FAILED: {failure}" + (" (known limitation)" if known else ""))
        else:
            w = entry.get("wall_s")
            self.log(f"  {res['name']}/{scenario}/{tool_obj.name} run {len(cell['runs'])}: "
                     f"{w:.2f} s wall, {entry.get('cpu_s', 0):.2f} s cpu, "
                     f"{(entry.get('maxrss_kib') or 0) / 1024:.0f} MiB rss"
                     + (f", verified {verify.files} files" if verify else ""))
        return failure

    @staticmethod
    def finalize(res: dict) -> None:
        for cells in res["scenarios"].values():
            for cell in cells.values():
                runs = cell["runs"]
                med = {}
                for k in ("wall_s", "cpu_s", "user_s", "sys_s", "maxrss_kib", "repo_read_bytes",
                          "process_read_bytes", "backend_read_bytes", "requests", "rchar",
                          "wchar", "read_bytes", "restored_bytes", "sync_s", "synced_wall_s"):
                    med[k] = median([r.get(k) for r in runs])
                med["wall_min"] = min((r["wall_s"] for r in runs if "wall_s" in r), default=None)
                med["wall_max"] = max((r["wall_s"] for r in runs if "wall_s" in r), default=None)
                cell["median"] = med
                cell["n"] = len(runs)

    # ------------------------------------------------------------------ backups
    def _backup(self, res, scenario, t, repo, src, run_no, alive, extra=None):
        argv, cwd = t.backup_argv(repo, src)
        m = self._measure(res["name"], t.name, scenario, run_no, argv, cwd=cwd, env=t.env())
        failure = self._record(res, scenario, t, m, extra=extra)
        if failure and scenario in ("backup_first",):
            alive[t.name] = False
            self._mark_dead(res, t, f"first backup failed: {failure[:200]}")
        return m, failure

    def _first_backup(self, res, t, repo, src, run_no, alive):
        _rm(repo)
        os.makedirs(os.path.dirname(repo), exist_ok=True)
        try:
            t.init(repo)
        except Exception as e:  # noqa: BLE001 - any init failure is reported
            self._record(res, "backup_first", t, None, failure=f"init failed: {e}")
            alive[t.name] = False
            self._mark_dead(res, t, f"init failed: {str(e)[:200]}")
            return
        self._backup(res, "backup_first", t, repo, src, run_no, alive)

    # ------------------------------------------------------------------ restores
    def _restore_run(self, res, t, repo, src, phases, run_no, alive):
        """One run of each restore phase for one tool, in order, then the target is removed.
        phases: list of (scenario, snapshot-resolver, expected dir); the first phase restores
        into an empty target, the later ones start from the tree it left."""
        target = os.path.join(self.work, "restore", t.name)
        restored_root = target + os.path.abspath(src)
        for scenario, resolve, expected in phases:
            if not alive.get(t.name):
                break
            prep = {}
            if scenario in ("restore_full", "restore_newest", "restore_oldest"):
                _rm(target)
                os.makedirs(target)
            elif not os.path.isdir(restored_root):
                self._record(res, scenario, t, None, failure="no restored tree to start from "
                             "(the full restore before it failed)")
                continue
            elif scenario == "restore_partial":
                prep = ds_mod.damage(restored_root, run_no)
            elif scenario == "restore_metadata":
                prep = {"touched": ds_mod.touch_all(restored_root)}
            try:
                snap = resolve(t, repo)
            except Exception as e:  # noqa: BLE001
                self._record(res, scenario, t, None, failure=f"cannot resolve snapshot: {e}")
                continue
            argv, cwd = t.restore_argv(repo, snap, target)
            m = self._measure(res["name"], t.name, scenario, run_no, argv, cwd=cwd, env=t.env())
            # The writeback the restore left behind (no tool syncs): the wall time plus
            # this is the time until the restored tree is on disk.
            t0 = time.monotonic()
            os.sync()
            prep["sync_s"] = round(time.monotonic() - t0, 4)
            prep["synced_wall_s"] = round(m.wall_s + prep["sync_s"], 4)
            v = verify_tree(expected, restored_root, mtime_tolerance_ns=t.mtime_tolerance_ns,
                            dir_mtimes=t.verify_dir_mtimes, root_mtime=t.verify_root_mtime)
            sync = {k: prep.pop(k) for k in ("sync_s", "synced_wall_s")}
            self._record(res, scenario, t, m, verify=v,
                         extra={**sync, **({"prepared": prep} if prep else {})})
        _rm(target)

    def _restore_series(self, res, t, repo, src, phases, runs, alive):
        """`runs` runs of every phase for one tool (the throttled variant's own series)."""
        for run_no in range(1, runs + 1):
            self._restore_run(res, t, repo, src, phases, run_no, alive)

    def _restores_rotated(self, res, tools, repos, src, phases, runs, alive, runs_of=None):
        """The restores of all tools, run by run; run i starts at tool (i - 1 + offset) mod n
        (offset: the dataset's position in this bench run), so that no tool is always the
        first to restore onto the fresh file system. The order is recorded in the result."""
        runs_of = runs_of or (lambda t: runs)
        for run_no in range(1, runs + 1):
            order = [t for t in rotated(tools, run_no - 1 + self.dataset_no)
                     if run_no <= runs_of(t)]
            if not order:
                continue
            res.setdefault("order", {}).setdefault("restores", []).append(
                [t.name for t in order])
            self.log(f"[{res['name']}] restores, run {run_no}: "
                     + ", ".join(t.label for t in order))
            for t in order:
                self._restore_run(res, t, repos[t.name], src, phases, run_no, alive)

    # ------------------------------------------------------------------ references
    def references(self, res, src, runs):
        """Machine limits on the same tree, each timed with the page cache dropped."""
        name = res["name"]
        target = os.path.join(self.work, "restore", "reference")
        restored_root = target + os.path.abspath(src)
        tar = os.path.join(self.work, f"{name}.tar")
        rel = os.path.relpath(os.path.abspath(src), "/")
        subprocess.run(["tar", "--format=posix", "-C", "/", "-cf", tar, rel], check=True)
        refs = res["references"]
        for key in REFERENCES:
            cell = refs.setdefault(key, {"runs": [], "ok": True, "failure": None})
            for run_no in range(1, runs + 1):
                verify = None
                if key == "tar_extract":
                    _rm(target)
                    os.makedirs(target)
                    argv = ["tar", "-C", target, "-xpf", tar]
                elif key == "cp_a":
                    _rm(target)
                    os.makedirs(os.path.dirname(restored_root))
                    argv = ["cp", "-a", src, restored_root]
                elif key == "find_stat":
                    argv = ["sh", "-c", 'find "$1" -printf "%s %T@ %m\\n" > /dev/null', "sh", src]
                else:
                    argv = ["sh", "-c", 'find "$1" -type f -exec cat {} + > /dev/null', "sh", src]
                m = run(argv, log_path=os.path.join(self.logs, name, "reference", f"{key}-{run_no}.log"),
                        drop=True, timeout=self.timeout)
                self.note_drop(m.cache_dropped)
                entry = m.to_dict()
                failure = None if m.exit_code == 0 else f"exit {m.exit_code}: {m.stderr_tail[-200:]}"
                if key in ("tar_extract", "cp_a"):
                    verify = verify_tree(src, restored_root)
                    entry["verify"] = verify.to_dict()
                    if not verify.ok:
                        # A reference that does not reproduce the tree is noted, not fatal.
                        entry["note"] = f"not an exact copy: {verify.brief()}"
                entry["failure"] = failure
                cell["runs"].append(entry)
                if failure:
                    cell["ok"], cell["failure"] = False, failure
                    self._note_failure(f"{name}/reference/{key}", failure, None)
                self.log(f"  {name}/reference/{key} run {run_no}: {m.wall_s:.2f} s wall"
                         + (f" ({entry.get('note')})" if entry.get("note") else ""))
        _rm(target)
        os.unlink(tar)
        for cell in refs.values():
            cell["median"] = {k: median([r.get(k) for r in cell["runs"]])
                              for k in ("wall_s", "cpu_s", "maxrss_kib", "read_bytes")}

    # ------------------------------------------------------------------ datasets
    def _new_result(self, spec, manifest, src, runs):
        return {"name": spec.name, "spec": spec.__dict__, "manifest": manifest, "source": src,
                "runs": runs, "scenarios": {}, "references": {}, "repo": {}, "series": {},
                "notes": [], "started": time.strftime("%Y-%m-%dT%H:%M:%S")}

    def _prepare(self, spec, data_dir, manifest, runs, tools):
        """Working copy of the dataset, an empty result, repository paths, liveness flags."""
        src = os.path.join(self.work, "src", spec.name)
        self.log(f"[{spec.name}] working copy -> {src}")
        ds_mod.copy_tree(data_dir, src)
        res = self._new_result(spec, manifest, src, runs)
        repos = {t.name: os.path.join(self.work, "repos", spec.name, t.name) for t in tools}
        alive = {t.name: True for t in tools}
        return src, res, repos, alive

    def run_standard(self, spec, data_dir, manifest, runs, tools, with_refs=True):
        src, res, repos, alive = self._prepare(spec, data_dir, manifest, runs, tools)
        main = [t for t in tools if t.scenarios is None]
        remote = [t for t in tools if t.scenarios is not None]
        rruns = min(runs, self.remote_runs)
        t0 = time.monotonic()

        if with_refs:
            self.log(f"[{spec.name}] reference limits")
            self.references(res, src, runs)

        self.log(f"[{spec.name}] first backup")
        for run_no in range(1, runs + 1):
            for t in self._order(res, "backup_first", tools, run_no):
                if t in main or run_no <= rruns:
                    self._first_backup(res, t, repos[t.name], src, run_no, alive)
        for t in tools:
            if alive[t.name]:
                res["repo"].setdefault(t.name, {})["after_first_backup"] = dir_bytes(repos[t.name])

        latest = lambda tool, repo: tool.latest(repo)  # noqa: E731
        for t in remote:
            # Its only snapshot: the first backup, of the data before any mutation (local arca
            # restores its latest snapshot, after the mutations; the report says so).
            self.log(f"[{spec.name}] restores: {t.label}")
            self._restore_series(res, t, repos[t.name], src, [("restore_full", latest, src)],
                                 rruns, alive)
            res.setdefault("remote_restores", {})[t.name] = "first backup (data before the mutations)"

        self.log(f"[{spec.name}] no-change backup")
        for run_no in range(1, runs + 1):
            for t in self._order(res, "backup_nochange", main, run_no):
                if alive[t.name]:
                    self._backup(res, "backup_nochange", t, repos[t.name], src, run_no, alive)

        self.log(f"[{spec.name}] backup after mutation")
        for run_no in range(1, runs + 1):
            change = ds_mod.mutate(src, spec, self.seed, "mut", run_no)
            for t in self._order(res, "backup_mutation", main, run_no):
                if alive[t.name]:
                    self._backup(res, "backup_mutation", t, repos[t.name], src, run_no, alive,
                                 extra={"mutation": change})
        for t in main:
            if alive[t.name]:
                res["repo"].setdefault(t.name, {})["final"] = dir_bytes(repos[t.name])

        res["mutations_before_restores"] = runs
        self._restores_rotated(res, main, repos, src,
                               [("restore_full", latest, src), ("restore_partial", latest, src),
                                ("restore_noop", latest, src), ("restore_metadata", latest, src)],
                               runs, alive)
        self._cleanup(res, tools, repos, src, t0)
        return res

    def _order(self, res, phase, tools, run_no):
        """The tools in the order of this run of a phase (rotated, see _restores_rotated),
        recorded in the result."""
        order = rotated(tools, run_no - 1 + self.dataset_no)
        res.setdefault("order", {}).setdefault(phase, []).append([t.name for t in order])
        return order

    def _drop_repo(self, res, t, repos):
        if "cache_bytes" not in res["repo"].setdefault(t.name, {}):
            res["repo"][t.name]["cache_bytes"] = t.cache_bytes()
        if not self.keep:
            _rm(repos[t.name])
            _rm(t.home)

    def _cleanup(self, res, tools, repos, src, t0):
        for t in tools:
            self._drop_repo(res, t, repos)
        if not self.keep:
            _rm(src)
        res["seconds"] = round(time.monotonic() - t0, 1)
        self.dataset_no += 1
        self.finalize(res)

    def run_generations(self, spec, data_dir, manifest, runs, tools, with_refs=True,
                        restores=True, maintenance=None):
        """The generations dataset. `restores=False` skips the restores of the newest and
        oldest snapshot (`--maintenance-only`); `maintenance` (a maintenance.Maintenance)
        then runs forget + prune on each tool's repository before it is deleted."""
        src, res, repos, alive = self._prepare(spec, data_dir, manifest, runs, tools)
        t0 = time.monotonic()

        self.log(f"[{spec.name}] generation 0: first backup")
        for t in self._order(res, "backup_first", tools, 1):
            self._first_backup(res, t, repos[t.name], src, 1, alive)
        series = res["series"]
        changes = []
        for g in range(1, spec.generations + 1):
            change = ds_mod.mutate(src, spec, self.seed, "gen", g)
            changes.append(change)
            self.log(f"[{spec.name}] generation {g}: {change}")
            for t in self._order(res, "backup_generation", tools, g):
                if not alive[t.name]:
                    continue
                m, failure = self._backup(res, "backup_generation", t, repos[t.name], src, g, alive,
                                          extra={"generation": g})
                series.setdefault(t.name, []).append(
                    {"generation": g, "wall_s": m.wall_s, "cpu_s": m.cpu_s,
                     "repo_bytes": dir_bytes(repos[t.name]), "failed": bool(failure)})
        res["generation_changes"] = changes
        for t in tools:
            if alive[t.name]:
                res["repo"].setdefault(t.name, {})["final"] = dir_bytes(repos[t.name])

        if with_refs:
            self.log(f"[{spec.name}] reference limits (newest generation)")
            self.references(res, src, runs)

        latest = lambda tool, repo: tool.latest(repo)  # noqa: E731
        oldest = lambda tool, repo: tool.snapshots(repo)[0]  # noqa: E731
        if restores:
            self._restores_rotated(
                res, tools, repos, src,
                [("restore_newest", latest, src), ("restore_oldest", oldest, data_dir)], runs,
                alive, runs_of=lambda t: runs if t.scenarios is None else min(runs, self.remote_runs))
        for t in tools:
            if maintenance is not None and alive.get(t.name):
                maintenance.run_tool(t, repos[t.name], src)  # takes the repository over
            self._drop_repo(res, t, repos)
        if maintenance is not None:
            maintenance.run_all()  # all tools, interleaved run by run
        self._cleanup(res, tools, repos, src, t0)
        return res

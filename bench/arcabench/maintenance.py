"""Maintenance (`bench/run --maintenance-only`, and after the generations dataset of a
default run): forget + prune, arca against restic and rustic in the same run, and the index
at scale.

Generations part: after the first backup and the 20 generation backups (every tool, lock-step,
as in the main run), each tool's repository holds 21 snapshots. Per tool, the page cache
dropped before every command:
  forget --keep-last 5          measured; then the snapshots are listed: 5 must be left
  prune --dry-run               measured: planning only (what prune decides, changing nothing)
  prune                         measured: wall, CPU, peak RSS; repository bytes before/after
  restore newest                measured and verified against the source, as every restore
  check                         the tool's own check of the pruned repository (structure)
A prune that breaks the repository (restore wrong, check failing) is a failure, not a time.
rustic runs `prune --instant-delete`: by default it only marks unused packs and deletes them
at a prune 23 h later; restic and arca delete at once.

Index at scale: `crates/arca-maintenance/examples/index_scale.rs` writes a synthetic
repository of `--scale-blobs` blobs (default 10 million) and, in a fresh process with the page
cache dropped, times `Repository::load_index` (RSS before and after), `prune::plan` over it
(one snapshot using half the blobs) and the lookups of the used blobs; see that file.

Targets (the issue "Maintenance"): prune's wall time <= 0.5x the fastest peer's, and at least
as many bytes freed as that peer and as the peer that freed the most; index of 10 million blobs
loads in < 5 s at <= 32 bytes per blob (RSS growth), prune planning over it < 30 s.

Results: `results["maintenance"]` = {"generations": {...} or None, "scale": {...} or None};
with docs also docs/bench/maintenance.json (a part this run lacks is kept from the previous
file), from which the "Maintenance" section of docs/BENCHMARKS.md is rendered.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

from .measure import dir_bytes, median, run_quiet
from .scenarios import _rm
from .tools import ROOT
from .verify import verify_tree

HEADING = "## Maintenance: forget + prune"
KEEP_LAST = 5
PRUNE_TIME_LIMIT = 0.5  # arca's prune wall time / the best peer's
SUPPORTED = ("arca", "restic", "restic-latest", "rustic")  # tools with forget/prune here
SCENARIOS = {
    "forget": f"forget --keep-last {KEEP_LAST}",
    "prune_dry_run": "prune --dry-run (planning only)",
    "prune": "prune",
    "restore_after_prune": "restore newest after prune",
    "check": "check after prune",
}
# What must have succeeded for a tool's prune to count (a broken repository is a failure).
MUST_PASS = ("forget", "prune", "restore_after_prune", "check")
SCALE_BLOBS = 10_000_000
# (key in the figures, what, comparison, limit, unit)
SCALE_TARGETS = [
    ("load_s", "index load", "<", 5.0, "s"),
    ("rss_per_blob", "memory per blob (RSS growth over the load)", "<=", 32.0, "B"),
    ("plan_s", "prune planning over it", "<", 30.0, "s"),
]


# ------------------------------------------------------------------ pure helpers (unit-tested)
def _cell(ds: dict | None, scenario: str, tool: str) -> dict | None:
    return ((ds or {}).get("scenarios", {}).get(scenario) or {}).get(tool)


def _med(ds, scenario, tool, key="wall_s"):
    c = _cell(ds, scenario, tool)
    if not c or not c.get("ok"):
        return None
    return (c.get("median") or {}).get(key)


def tool_ok(ds: dict | None, tool: str) -> bool:
    """Whether forget, prune, the restore after it and the check all succeeded."""
    cells = [_cell(ds, sc, tool) for sc in MUST_PASS]
    return all(c is not None and c.get("ok") for c in cells)


def freed(ds: dict | None, tool: str):
    """Bytes prune freed in tool's repository (after forget - after prune), or None."""
    r = ((ds or {}).get("repo") or {}).get(tool) or {}
    if r.get("freed_runs"):
        return median(r["freed_runs"])
    if r.get("bytes_after_forget") is None or r.get("bytes_after_prune") is None:
        return None
    return r["bytes_after_forget"] - r["bytes_after_prune"]


def repo_figure(ds: dict | None, tool: str, key: str):
    """A repository size of tool's runs (bytes_before, bytes_after_forget, bytes_after_prune):
    the median over the runs (older results kept only the last run's value)."""
    r = ((ds or {}).get("repo") or {}).get(tool) or {}
    if r.get(key + "_runs"):
        return median(r[key + "_runs"])
    return r.get(key)


def prune_io(ds: dict | None, tool: str) -> tuple:
    """(rchar, wchar, how) of tool's prune: medians over its runs; older results without a
    wchar median give the first run's, and say so."""
    c = _cell(ds, "prune", tool) or {}
    med = c.get("median") or {}
    if med.get("rchar") is not None and med.get("wchar") is not None:
        return med["rchar"], med["wchar"], "median"
    runs = c.get("runs") or []
    if runs:
        return runs[0].get("rchar"), runs[0].get("wchar"), "first run"
    return None, None, None


def target_rows(part: dict) -> list:
    """The three targets of the generations part: prune time vs the fastest peer's, space freed
    vs that same peer's and vs the peer that freed most. Peers count only when their whole
    sequence succeeded; arca's figures count only when its whole sequence succeeded ("met" is
    False otherwise)."""
    ds = part.get("dataset")
    tools = [t for t in part.get("tools", []) if _cell(ds, "prune", t["name"])]
    peers = [t["name"] for t in tools if t.get("peer") and tool_ok(ds, t["name"])]
    labels = {t["name"]: t["label"] for t in part.get("tools", [])}
    if not any(t["name"] == "arca" for t in tools):
        return []
    arca_ok = tool_ok(ds, "arca")
    rows = []
    a_time = _med(ds, "prune", "arca") if arca_ok else None
    times = {p: _med(ds, "prune", p) for p in peers}
    times = {p: v for p, v in times.items() if v}
    best = min(times, key=times.get) if times else None
    ratio = a_time / times[best] if (a_time and best) else None
    rows.append({"target": "prune wall time", "arca": a_time, "arca_ok": arca_ok,
                 "best": best, "best_label": labels.get(best, best),
                 "best_value": times.get(best), "ratio": ratio,
                 "limit": f"≤ {PRUNE_TIME_LIMIT}×",
                 "met": None if ratio is None else ratio <= PRUNE_TIME_LIMIT,
                 "peers": times})
    a_freed = freed(ds, "arca") if arca_ok else None
    frees = {p: freed(ds, p) for p in peers}
    frees = {p: v for p, v in frees.items() if v is not None}
    most = max(frees, key=frees.get) if frees else None
    for target, peer, limit in (("space freed vs the fastest peer", best,
                                 "≥ 1× (the fastest peer)"),
                                ("space freed vs the peer that freed most", most,
                                 "≥ 1× (most freed)")):
        value = frees.get(peer)
        fratio = a_freed / value if (a_freed is not None and value) else None
        met = None
        if a_freed is not None and value is not None:
            met = a_freed >= value
        rows.append({"target": target, "arca": a_freed, "arca_ok": arca_ok,
                     "best": peer if value is not None else None,
                     "best_label": labels.get(peer, peer) if value is not None else None,
                     "best_value": value, "ratio": fratio, "limit": limit, "met": met,
                     "peers": frees})
    if not arca_ok and any(_cell(ds, sc, "arca") for sc in MUST_PASS):
        for r in rows:
            r["met"] = False
    return rows


def scale_figures(raw: dict) -> dict:
    """Derived figures of one index_scale run: bytes per blob (RSS growth over the load, the
    load's peak, the index's own structures) and the targets met."""
    out = dict(raw)
    n = raw.get("index_len") or raw.get("blobs") or 0
    if n and raw.get("rss_after_load") is not None and raw.get("rss_before") is not None:
        out["rss_per_blob"] = (raw["rss_after_load"] - raw["rss_before"]) / n
    if n and raw.get("hwm_after_load") is not None and raw.get("rss_before") is not None:
        out["peak_per_blob"] = (raw["hwm_after_load"] - raw["rss_before"]) / n
    if n and raw.get("index_memory_bytes") is not None:
        out["structure_per_blob"] = raw["index_memory_bytes"] / n
    if n and raw.get("hwm_after_plan") is not None and raw.get("rss_before") is not None:
        out["plan_peak_per_blob"] = (raw["hwm_after_plan"] - raw["rss_before"]) / n
    met = {}
    for key, _, cmp, limit, _unit in SCALE_TARGETS:
        v = out.get(key)
        met[key] = None if v is None else (v < limit if cmp == "<" else v <= limit)
    out["met"] = met
    return out


def _measured(name: str, part: dict | None) -> bool:
    """Whether a part holds figures (a scale part that could not run has only a note)."""
    if not part:
        return False
    return bool(part.get("figures")) if name == "scale" else bool(part.get("dataset"))


def merge_previous(new: dict, old: dict | None) -> dict:
    """maintenance.json for this run: its parts, and the previous file's for those it did not
    measure (absent, or only a note saying why)."""
    merged = dict(new)
    for part in ("generations", "scale"):
        if not _measured(part, merged.get(part)) and old and _measured(part, old.get(part)):
            merged[part] = old[part]
    return merged


def has_results(m: dict | None) -> bool:
    return bool(m) and bool(m.get("generations") or m.get("scale"))


def last_json_line(text: str) -> dict | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def _git() -> str:
    return run_quiet(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                     check=False).stdout.strip()


# ------------------------------------------------------------------ the generations part
class Maintenance:
    """Runs forget + prune on each tool's repository at the end of the generations dataset
    (called by Bench.run_generations before the repository is deleted)."""

    def __init__(self, bench, spec, manifest, log, meta: dict, only: set | None = None,
                 keep_last: int = KEEP_LAST, runs: int = 1):
        self.bench, self.spec, self.manifest, self.log = bench, spec, manifest, log
        self.only = only  # tool names allowed (smoke: arca); None = every supporting tool
        self.keep_last = keep_last
        self.runs = runs
        self.work = os.path.join(bench.work, "maintenance")
        self.queue = []  # (tool, pristine repository, pristine home, source tree)
        self.meta = dict(meta, keep_last=keep_last, generations=spec.generations, runs=runs,
                         date=time.strftime("%Y-%m-%d %H:%M:%S %Z"), git=_git(),
                         loadavg_start=os.getloadavg()[0], cores=os.cpu_count())
        self.res = None
        self.tools = []
        self.notes = []
        self.t0 = time.monotonic()

    def wants(self, t) -> bool:
        return (t.scenarios is None and t.name in SUPPORTED
                and (self.only is None or t.name in self.only)
                and t.forget_argv("repo", self.keep_last) is not None)

    def _measure(self, t, scenario, argv, cwd, run_no):
        return self.bench._measure("maintenance", t.name, scenario, run_no, argv, cwd=cwd,
                                   env=t.env())

    def run_tool(self, t, repo: str, src: str) -> None:
        """Takes over tool t's repository (moved aside with a copy of its home, the local
        cache) for `run_all`; the caller may delete the originals."""
        if not self.wants(t):
            if t.scenarios is None:
                self.notes.append(f"{t.label}: not in the maintenance part"
                                  + ("" if t.name in SUPPORTED else
                                     " (forget/prune are driven for arca, restic and rustic)"))
            return
        if self.res is None:
            self.res = self.bench._new_result(self.spec, self.manifest, src, self.runs)
            self.res["name"] = "maintenance"
            self.res["dataset"] = self.spec.name
        base = os.path.join(self.work, t.name)
        _rm(base)
        os.makedirs(base)
        pristine, home = os.path.join(base, "pristine"), os.path.join(base, "home")
        shutil.move(repo, pristine)
        if os.path.isdir(t.home):
            subprocess.run(["cp", "-a", t.home, home], check=True)
        self.tools.append({"name": t.name, "label": t.label, "peer": t.peer,
                           "version": t.version, "prune_note": t.prune_note})
        self.queue.append((t, pristine, home, src))

    def run_all(self) -> None:
        """`runs` runs, tools interleaved run by run; each run on a fresh copy of the tool's
        repository and home as they were after the last backup."""
        for run_no in range(1, self.runs + 1):
            for t, pristine, home, src in self.queue:
                repo = os.path.join(os.path.dirname(pristine), f"repo-{t.name}")
                _rm(repo)
                subprocess.run(["cp", "-a", pristine, repo], check=True)
                _rm(t.home)
                if os.path.isdir(home):
                    subprocess.run(["cp", "-a", home, t.home], check=True)
                self._sequence(t, repo, src, run_no)
                _rm(repo)
        for t, pristine, home, _ in self.queue:
            _rm(os.path.dirname(pristine))
        self.queue = []

    def _sequence(self, t, repo: str, src: str, run_no: int) -> None:
        b = self.bench
        res = self.res
        info = res["repo"].setdefault(t.name, {})
        self.log(f"[maintenance] {t.label}, run {run_no}: forget --keep-last {self.keep_last} "
                 "+ prune")
        try:
            before = t.snapshots(repo)
        except Exception as e:  # noqa: BLE001
            b._record(res, "forget", t, None, failure=f"cannot list snapshots: {e}"[:400])
            return
        info["snapshots_before"] = len(before)
        info["bytes_before"] = dir_bytes(repo)
        info.setdefault("bytes_before_runs", []).append(info["bytes_before"])
        # forget
        argv, cwd = t.forget_argv(repo, self.keep_last)
        m = self._measure(t, "forget", argv, cwd, run_no)
        failure = None
        if m.exit_code == 0 and not m.timed_out:
            try:
                after = t.snapshots(repo)
                info["snapshots_after"] = len(after)
                want = min(self.keep_last, len(before))
                if len(after) != want or after != before[-want:]:
                    failure = (f"forget left {len(after)} snapshots, expected the newest "
                               f"{want} of {len(before)}")
            except Exception as e:  # noqa: BLE001
                failure = f"cannot list snapshots after forget: {e}"[:400]
        if b._record(res, "forget", t, m, failure=failure):
            return
        info["bytes_after_forget"] = dir_bytes(repo)
        info.setdefault("bytes_after_forget_runs", []).append(info["bytes_after_forget"])
        # planning only, then the prune
        argv, cwd = t.prune_argv(repo, dry_run=True)
        m = self._measure(t, "prune_dry_run", argv, cwd, run_no)
        changed = dir_bytes(repo) != info["bytes_after_forget"]
        b._record(res, "prune_dry_run", t, m,
                  failure="prune --dry-run changed the repository's size" if changed else None)
        argv, cwd = t.prune_argv(repo)
        m = self._measure(t, "prune", argv, cwd, run_no)
        info["bytes_after_prune"] = dir_bytes(repo)
        info.setdefault("bytes_after_prune_runs", []).append(info["bytes_after_prune"])
        info["freed"] = info["bytes_after_forget"] - info["bytes_after_prune"]
        info.setdefault("freed_runs", []).append(info["freed"])
        if b._record(res, "prune", t, m, extra={"freed_bytes": info["freed"]}):
            return
        # the newest snapshot must still restore exactly, and the tool's check pass
        target = os.path.join(b.work, "restore", t.name)
        restored_root = target + os.path.abspath(src)
        subprocess.run(["rm", "-rf", "--one-file-system", target], check=False)
        os.makedirs(target)
        try:
            snap = t.latest(repo)
        except Exception as e:  # noqa: BLE001
            b._record(res, "restore_after_prune", t, None,
                      failure=f"cannot resolve the newest snapshot after prune: {e}"[:400])
            snap = None
        if snap is not None:
            argv, cwd = t.restore_argv(repo, snap, target)
            m = self._measure(t, "restore_after_prune", argv, cwd, run_no)
            v = verify_tree(src, restored_root, mtime_tolerance_ns=t.mtime_tolerance_ns,
                            dir_mtimes=t.verify_dir_mtimes, root_mtime=t.verify_root_mtime)
            b._record(res, "restore_after_prune", t, m, verify=v)
        subprocess.run(["rm", "-rf", "--one-file-system", target], check=False)
        argv, cwd = t.check_argv(repo)
        m = self._measure(t, "check", argv, cwd, run_no)
        b._record(res, "check", t, m)

    def result(self) -> dict | None:
        """The generations part of results["maintenance"] (None when no tool ran)."""
        if self.res is None:
            return None
        self.res["seconds"] = round(time.monotonic() - self.t0, 1)
        self.bench.finalize(self.res)
        meta = dict(self.meta, loadavg_end=os.getloadavg()[0])
        part = {"meta": meta, "tools": self.tools, "dataset": self.res, "notes": self.notes}
        for row in target_rows(part):
            if row["ratio"] is not None:
                self.log(f"maintenance target {row['target']}: {row['ratio']:.2f}x "
                         f"({row['limit']}): {'met' if row['met'] else 'NOT met'}")
        return part


# ------------------------------------------------------------------ the index at scale
def run_scale(*, blobs: int, work: str, logs: str, log, timeout: float, build: bool = True,
              meta: dict | None = None) -> dict:
    """Builds and runs the index_scale example; returns the scale part (with "note" set and
    no figures when it could not run)."""
    out = {"meta": dict(meta or {}, blobs=blobs, date=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                        git=_git(), cores=os.cpu_count(), loadavg_start=os.getloadavg()[0])}
    os.makedirs(logs, exist_ok=True)
    build_log = os.path.join(logs, "cargo-index-scale.log")
    binary = os.path.join(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"),
                          "release", "examples", "index_scale")
    if build:
        cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
        log("building the index_scale example: cargo build --release -p arca-maintenance "
            "--example index_scale")
        with open(build_log, "w") as f:
            try:
                p = subprocess.run([cargo, "build", "--release", "-p", "arca-maintenance",
                                    "--example", "index_scale"], cwd=ROOT, stdout=f,
                                   stderr=subprocess.STDOUT)
                rc = p.returncode
            except OSError as e:
                f.write(f"{e!r}\n")
                rc = 127
        if rc != 0:
            out["note"] = f"index_scale not built (exit {rc}; log: {build_log})"
            log("SKIPPING the index scale part: " + out["note"])
            return out
    if not os.access(binary, os.X_OK):
        out["note"] = f"{binary} missing"
        return out
    folder = os.path.join(work, "index-scale")
    run_log = os.path.join(logs, "index-scale.log")
    log(f"index scale: {blobs:,} blobs in {folder} (log: {run_log})")
    t0 = time.monotonic()
    with open(run_log, "w") as f:
        try:
            p = subprocess.run([binary, "--blobs", str(blobs), "--dir", folder],
                               stdout=subprocess.PIPE, stderr=f, text=True, timeout=timeout)
            stdout, rc = p.stdout, p.returncode
        except subprocess.TimeoutExpired:
            stdout, rc = "", "timeout"
        f.write("--- stdout\n" + stdout)
    shutil.rmtree(folder, ignore_errors=True)
    out["meta"]["seconds"] = round(time.monotonic() - t0, 1)
    out["meta"]["loadavg_end"] = os.getloadavg()[0]
    raw = last_json_line(stdout)
    if rc != 0 or raw is None:
        out["note"] = f"index_scale failed (exit {rc}; log: {run_log})"
        log("index scale FAILED: " + out["note"])
        return out
    out["figures"] = scale_figures(raw)
    fig = out["figures"]
    log(f"index scale: load {fig['load_s']:.2f} s, {fig.get('rss_per_blob', 0):.1f} B/blob "
        f"(RSS), peak {fig.get('peak_per_blob', 0):.1f} B/blob, planning {fig['plan_s']:.2f} s")
    return out


# ------------------------------------------------------------------ report
def _fs(x) -> str:
    if x is None:
        return "–"
    return f"{x:.2f} s" if x < 10 else f"{x:.1f} s"


def _mb(b) -> str:
    if b is None:
        return "–"
    if abs(b) >= 10e6:
        return f"{b / 1e6:,.0f} MB"
    return f"{b / 1e6:.1f} MB" if abs(b) >= 1e6 else f"{b / 1e3:.0f} kB"


def _count(n, what: str) -> str:
    """`n` and `what` (singular), in the plural unless n is 1: "1 index file", "2 new packs"."""
    return f"{n} {what}" + ("" if n == 1 else "s")


def _load_text(meta: dict) -> str:
    if meta.get("loadavg_end") is None:
        return ""
    return (f"; 1-minute load average {meta['loadavg_start']:.1f} at the start, "
            f"{meta['loadavg_end']:.1f} at the end ({meta.get('cores') or '?'} cores, shared "
            "with other work on the machine)")


def _fail(cell) -> str:
    return "✗ " + (cell.get("failure") or "failed").replace("|", "\\|")[:160]


def render_generations(part: dict) -> list:
    meta = part["meta"]
    ds = part["dataset"]
    tools = [t["name"] for t in part["tools"]]
    labels = {t["name"]: t["label"] for t in part["tools"]}
    out = [f"`bench/run {meta.get('argv', '')}`, {meta['date']} (git {meta.get('git', '?')}), "
           f"{ds.get('seconds', 0):.0f} s for this part. The `{ds.get('dataset', 'generations')}` "
           f"dataset: first backup and {meta['generations']} generation backups with every "
           "tool (lock-step, as in the main run), so each repository holds "
           f"{meta['generations'] + 1} snapshots; then per tool, the page cache dropped before "
           f"every command: `forget --keep-last {meta['keep_last']}`, `prune --dry-run` "
           "(planning only), `prune`, a restore of the newest snapshot verified byte for byte "
           "against the source, and the tool's own `check`. "
           + (f"Median of {meta.get('runs', 1)} runs, tools interleaved run by run, each run on "
              "a fresh copy of the tool's repository and local cache as the last backup left "
              "them. " if meta.get("runs", 1) > 1 else "One run. ")
           + "Versions: "
           + ", ".join(f"{t['label']} = {t['version']}" for t in part["tools"])
           + ". Machine: "
           + ((meta.get("machine") or {}).get("CPU") or "?") + _load_text(meta) + ".", ""]
    out += ["**Targets** (issue \"Maintenance\"): arca's prune wall time over the fastest "
            "peer's (≤ 0.5×); the bytes arca's prune freed over those of that same fastest peer "
            "(≥ 1×), and over those of the peer that freed the most (≥ 1×). A tool's prune "
            "counts only if the restore after it verified and its check passed.", "",
            "| target | arca | best peer | ratio | target | met? | all peers |",
            "|---|---|---|---|---|---|---|"]
    for row in target_rows(part):
        fmt = _fs if "time" in row["target"] else _mb
        arca = fmt(row["arca"]) if row["arca_ok"] else "✗ failed"
        best = f"{row['best_label']}: {fmt(row['best_value'])}" if row["best"] else "–"
        ratio = "–" if row["ratio"] is None else f"{row['ratio']:.2f}×"
        met = "–" if row["met"] is None else ("yes" if row["met"] else "**no**")
        peers = ", ".join(f"{labels.get(p, p)} {fmt(v)}" for p, v in row["peers"].items()) or "–"
        out.append(f"| {row['target']} | {arca} | {best} | {ratio} | {row['limit']} | {met} | "
                   f"{peers} |")
    mixed = any(r and not r.get("bytes_after_prune_runs") for r in (ds.get("repo") or {}).values())
    which = ("" if meta.get("runs", 1) <= 1 else
             "; every figure the median of the runs" if not mixed else
             "; times, CPU, RSS and bytes freed: medians of the runs; the repository sizes: "
             "the last run's, the prune bytes read / written: the first run's")
    out += ["", "**Every step** (wall time; CPU and peak RSS for prune; repository sizes are "
            "the apparent bytes of the repository folder, the tools' local caches apart"
            + which + ")", "",
            "| | " + " | ".join(labels[t] for t in tools) + " |",
            "|---|" + "---|" * len(tools)]

    def row(title, fn):
        out.append(f"| {title} | " + " | ".join(fn(t) for t in tools) + " |")

    def cell_fmt(sc, key="wall_s", fmt=_fs):
        def f(t):
            c = _cell(ds, sc, t)
            if c is None:
                return "–"
            if not c.get("ok"):
                return _fail(c)
            v = (c.get("median") or {}).get(key)
            return fmt(v)
        return f

    repo = ds.get("repo") or {}
    runs = meta.get("runs", 1)
    row(f"repository after {meta['generations']} generations",
        lambda t: f"{_mb(repo_figure(ds, t, 'bytes_before'))} "
                  f"({repo.get(t, {}).get('snapshots_before', '?')} snapshots)")
    row(SCENARIOS["forget"], cell_fmt("forget"))
    row("snapshots left", lambda t: str(repo.get(t, {}).get("snapshots_after", "–")))
    row(SCENARIOS["prune_dry_run"], cell_fmt("prune_dry_run"))
    row("**prune**", cell_fmt("prune"))
    row("prune CPU (user + sys)", cell_fmt("prune", "cpu_s"))
    row("prune peak RSS", cell_fmt("prune", "maxrss_kib",
                                   lambda v: "–" if v is None else f"{v / 1024:.0f} MiB"))
    hows = {prune_io(ds, t)[2] for t in tools} - {None}
    io_how = "first run" if "first run" in hows else ("median" if runs > 1 else "")
    row("prune bytes read / written (rchar / wchar" + (f"; {io_how}" if io_how else "") + ")",
        lambda t: "–" if not _cell(ds, "prune", t) else
        f"{_mb(prune_io(ds, t)[0])} / {_mb(prune_io(ds, t)[1])}")
    row("forget + prune", lambda t: _fs(_sum(ds, t, ("forget", "prune"))))
    row("repository after prune", lambda t: _mb(repo_figure(ds, t, "bytes_after_prune")))
    row("**freed by prune**",
        lambda t: "–" if freed(ds, t) is None else
        f"{_mb(freed(ds, t))} "
        f"({freed(ds, t) / max(repo_figure(ds, t, 'bytes_after_forget') or 0, 1) * 100:.0f}%)")
    row(SCENARIOS["restore_after_prune"], cell_fmt("restore_after_prune"))
    row("restore verified", lambda t: _verified(ds, t))
    row(SCENARIOS["check"], lambda t: "–" if not _cell(ds, "check", t) else
        ("passed" if _cell(ds, "check", t).get("ok") else _fail(_cell(ds, "check", t))))
    out.append("")
    out += ["How each tool prunes: " + "; ".join(
        f"{t['label']}: {t['prune_note']}" for t in part["tools"]) + ".", ""]
    out += _arca_prune(ds)
    for n in part.get("notes") or []:
        out += [f"*Note: {n}.*", ""]
    return out


def _first(ds, sc, t, key):
    c = _cell(ds, sc, t)
    runs = (c or {}).get("runs") or []
    return runs[0].get(key) if runs else None


def _sum(ds, t, scenarios):
    vals = [_med(ds, sc, t) for sc in scenarios]
    return None if any(v is None for v in vals) else sum(vals)


def _verified(ds, t) -> str:
    c = _cell(ds, "restore_after_prune", t)
    if not c:
        return "–"
    v = ((c.get("runs") or [{}])[0].get("verify") or {})
    if not c.get("ok"):
        return _fail(c)
    return f"yes ({v.get('files', '?'):,} files)" if isinstance(v.get("files"), int) else "yes"


def _arca_prune(ds) -> list:
    """arca's own account of its prune (its JSON summary), and planning vs the whole."""
    c = _cell(ds, "prune", "arca")
    if not c or not c.get("ok") or not c.get("runs"):
        return []
    run = sorted(c["runs"], key=lambda r: r.get("wall_s") or 0)[len(c["runs"]) // 2]
    sm = run.get("summary") or {}
    if not sm:
        return []
    be = sm.get("backend") or {}
    dry = _med(ds, "prune_dry_run", "arca")
    wall = run.get("wall_s")
    out = [f"*arca's prune (its median run), from its JSON summary*: "
           f"{_count(sm.get('snapshots', 0), 'snapshot')}, "
           f"{sm.get('trees', 0):,} trees walked; used {sm.get('used_blobs', 0):,} blobs "
           f"({_mb(sm.get('used_bytes'))}), unused {sm.get('unused_blobs', 0):,} "
           f"({_mb(sm.get('unused_bytes'))}); packs kept {sm.get('packs_keep')}, repacked "
           f"{sm.get('packs_repack')} ({_mb(sm.get('packs_repack_bytes'))}, "
           f"{sm.get('repack_blobs', 0):,} blobs, {_mb(sm.get('repack_used_bytes'))} copied), "
           f"deleted {sm.get('packs_delete')} ({_mb(sm.get('packs_delete_bytes'))}); "
           f"{_count(sm.get('packs_written', 0), 'new pack')} ({_mb(sm.get('bytes_written'))}), "
           f"{_count(sm.get('index_files_written', 0), 'index file')} written, "
           f"{sm.get('index_files_deleted', 0)} deleted; freed {_mb(sm.get('freed_bytes'))} "
           f"by its count. Backend: {be.get('requests', 0):,} requests, "
           f"{_mb(be.get('bytes_read'))} read, {_mb(be.get('bytes_written'))} written."]
    if dry is not None and wall:
        out[-1] += (f" Planning alone (`--dry-run`, its own process, cold cache) took "
                    f"{_fs(dry)} (median) of the prune's {_fs(wall)}: executing (repacking, writing the "
                    f"index, deleting) about {_fs(max(wall - dry, 0))}.")
    out.append("")
    return out


def render_scale(part: dict) -> list:
    meta = part.get("meta") or {}
    if not part.get("figures"):
        return [f"*Index at scale: not measured ({part.get('note', 'no figures')}).*", ""]
    f = part["figures"]
    out = [f"**Index at scale** (`crates/arca-maintenance/examples/index_scale.rs`, "
           f"{meta.get('date', '?')}, git {meta.get('git', '?')}): a synthetic repository of "
           f"{f['blobs']:,} data blobs in {f['data_packs']:,} packs of {f['blobs_per_pack']:,} "
           f"(8-24 KiB each; the data packs are sparse files of the indexed size, which "
           f"planning lists but never reads), listed by {f['index_files']} index files "
           f"({_mb(f['index_bytes'])}), and one snapshot whose {f['tree_blobs']} real trees "
           f"({_mb(f['tree_bytes'])}) use {f['snapshot_used_blobs']:,} of the blobs (pack p: "
           "its first (p mod 11)/10). Measured in a fresh process with arca's allocator settings, "
           "page cache "
           + ("dropped" if f.get("caches_dropped") else "NOT dropped (not permitted)")
           + "; RSS from /proc/self/status" + _load_text(meta) + ".", "",
           "| figure | measured | target | met? |", "|---|---|---|---|"]
    met = f.get("met") or {}

    def target_cell(key):
        for k, _, cmp, limit, unit in SCALE_TARGETS:
            if k == key:
                return f"{cmp} {limit:g} {unit}".replace("<=", "≤")
        return "–"

    def met_cell(key):
        m = met.get(key)
        return "–" if m is None else ("yes" if m else "**no**")

    out.append(f"| `Repository::load_index`: {f['index_files']} index files, "
               f"{f['index_len']:,} locations | {_fs(f['load_s'])} | {target_cell('load_s')} | "
               f"{met_cell('load_s')} |")
    if f.get("rss_per_blob") is not None:
        out.append(f"| memory per blob: RSS growth over the load "
                   f"({_mb(f['rss_after_load'] - f['rss_before'])}) | "
                   f"{f['rss_per_blob']:.1f} B | {target_cell('rss_per_blob')} | "
                   f"{met_cell('rss_per_blob')} |")
    if f.get("structure_per_blob") is not None:
        out.append(f"| of which the index's own arrays (`Index::memory_bytes`: 30-byte "
                   f"entries, bucket table, packs) | {f['structure_per_blob']:.1f} B | | |")
    if f.get("peak_per_blob") is not None:
        out.append(f"| peak during the load (VmHWM growth, "
                   f"{_mb(f['hwm_after_load'] - f['rss_before'])}) | "
                   f"{f['peak_per_blob']:.1f} B | | |")
    out.append(f"| `prune::plan` (default options): list {f['data_packs'] + f['tree_packs']:,} "
               f"packs, walk {f['plan_trees']} trees from cold tree packs, mark "
               f"{f['plan_used_blobs']:,} used blobs, decide per pack (keep "
               f"{f['packs_keep']:,}, repack {f['packs_repack']:,}, delete "
               f"{f['packs_delete']:,}) | {_fs(f['plan_s'])} | {target_cell('plan_s')} | "
               f"{met_cell('plan_s')} |")
    out.append(f"| of which the lookups alone: `Index::positions` for each of the "
               f"{f['lookups']:,} used blobs | {_fs(f['lookup_s'])} | | |")
    if f.get("rss_after_plan") is not None:
        out.append(f"| RSS after planning (index + marks + plan) | "
                   f"{_mb(f['rss_after_plan'])} | | |")
    out.append("")
    return out


def render(m: dict | None) -> list:
    """The "Maintenance" section of docs/BENCHMARKS.md (nothing without results)."""
    if not has_results(m):
        return []
    out = [HEADING, ""]
    if m.get("generations"):
        out += render_generations(m["generations"])
    if m.get("scale"):
        out += render_scale(m["scale"])
    return out


def render_file(path: str) -> list:
    try:
        with open(path) as f:
            return render(json.load(f))
    except (OSError, ValueError):
        return []


def headline(m: dict | None) -> list:
    lines = []
    if not has_results(m):
        return lines
    if m.get("generations"):
        for row in target_rows(m["generations"]):
            if row["ratio"] is None and row["met"] is None:
                continue
            ratio = "–" if row["ratio"] is None else f"{row['ratio']:.2f}×"
            lines.append(f"**Maintenance** — {row['target']}: arca vs "
                         f"{row['best_label'] or 'peers'} {ratio} (target {row['limit']}: "
                         f"{'met' if row['met'] else 'NOT met'})")
    f = (m.get("scale") or {}).get("figures")
    if f:
        met = f.get("met") or {}
        lines.append(
            f"**Index at scale** — {f['index_len']:,} locations: load {f['load_s']:.2f} s "
            f"({'met' if met.get('load_s') else 'NOT met'}), "
            f"{f.get('rss_per_blob', float('nan')):.1f} B/blob RSS "
            f"({'met' if met.get('rss_per_blob') else 'NOT met'}), prune planning "
            f"{f['plan_s']:.2f} s ({'met' if met.get('plan_s') else 'NOT met'})")
    return lines


HEADLINE_PREFIXES = ("- **Maintenance** —", "- **Index at scale** —")


def splice_headline(doc: str, lines: list) -> str:
    """docs/BENCHMARKS.md with its maintenance lines of the headline (`headline`'s) replaced
    by `lines`: where the old ones stood, else at the end of the headline list. A document
    without a headline is returned as it is. (A maintenance-only run replaces the Maintenance
    section; without this, the headline kept the previous run's maintenance figures.)"""
    rows = doc.splitlines(keepends=True)
    head = next((i for i, l in enumerate(rows) if l.rstrip("\n") == "## Headline"), None)
    if head is None:
        return doc
    end = next((i for i in range(head + 1, len(rows)) if rows[i].startswith("## ")), len(rows))
    body = rows[head + 1:end]
    at = next((i for i, l in enumerate(body) if l.startswith(HEADLINE_PREFIXES)), None)
    kept = [l for l in body if not l.startswith(HEADLINE_PREFIXES)]
    if at is None:
        # After the last item of the list.
        items = [i for i, l in enumerate(kept) if l.startswith("- ")]
        at = items[-1] + 1 if items else len(kept)
    new = [f"- {h}\n" for h in lines]
    return "".join(rows[:head + 1] + kept[:at] + new + kept[at:] + rows[end:])

"""Markdown report (bench/out/results-*.md and docs/BENCHMARKS.md) from the results JSON."""

from __future__ import annotations

import json
import os

from . import capping, maintenance, restore_targets, s3
from .restore_targets import dead_reason, left_out_text
from .scenarios import REFERENCES, RESTORES, SCENARIOS

# Where docs/bench/ lives (the capping experiment's results).
DOCS_BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "bench")

MiB = 1024 * 1024


def fmt_s(x) -> str:
    if x is None:
        return "–"
    return f"{x:.2f} s" if x < 10 else f"{x:.1f} s"


def fmt_mib(b) -> str:
    if b is None:
        return "–"
    v = b / MiB
    return f"{v:.1f} MiB" if v < 100 else f"{v:.0f} MiB"


def fmt_ratio(best_peer, arca) -> str:
    if not best_peer or not arca:
        return "–"
    r = best_peer / arca
    return f"**{r:.1f}× faster**" if r >= 1.05 else (f"{1 / r:.1f}× slower" if r <= 0.95 else "≈ same")


def tool_order(results) -> list:
    return [t["name"] for t in results["tools"]]


def tool_label(results, name) -> str:
    for t in results["tools"]:
        if t["name"] == name:
            return t["label"]
    return name


def _is_peer(results, name) -> bool:
    return any(t["name"] == name and t["peer"] for t in results["tools"])


def best_peer(results, cells: dict, key: str = "wall_s") -> tuple:
    """(name, value) of the peer with the lowest median `key` among the peers that succeeded in
    this scenario, or (None, None)."""
    vals = {t: _cell_value(c, key) for t, c in cells.items() if _is_peer(results, t) and c["ok"]}
    vals = {t: v for t, v in vals.items() if v is not None}
    if not vals:
        return None, None
    t = min(vals, key=vals.get)
    return t, vals[t]


def warm_cache(results) -> bool:
    """True when some measured command ran without its page-cache drop (--allow-warm-cache)."""
    return results["meta"].get("caches_dropped") is False


WARM = " *(warm page cache)*"


class Notes:
    """Numbered footnotes for failures."""

    def __init__(self):
        self.items = []

    def ref(self, text: str) -> str:
        if text not in self.items:
            self.items.append(text)
        return f"[^{self.items.index(text) + 1}]"


def _cell_value(cell, key):
    if cell is None:
        return None
    return (cell.get("median") or {}).get(key)


def _fail_text(cell, notes: Notes, where: str) -> str:
    msg = (cell["failure"] or "failed")[:300]
    if cell.get("expected_failure"):
        msg += f" — known limitation: {cell['expected_failure']}"
    return "✗ failed" + notes.ref(f"{where}: {msg}")


def _table(results, ds, key, fmt, notes, *, scenarios=None, ratio=False, per_mb=False) -> list:
    tools = [t for t in tool_order(results) if any(t in c for c in ds["scenarios"].values())]
    header = ["scenario"] + [tool_label(results, t) for t in tools]
    peers_in = [t for t in tools if _is_peer(results, t)]
    arca_in = "arca" in tools and bool(peers_in)
    if ratio and arca_in:
        header.append("arca vs best peer")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for sc in scenarios or SCENARIOS:
        cells = ds["scenarios"].get(sc)
        if not cells:
            continue
        row = [SCENARIOS[sc]]
        for t in tools:
            cell = cells.get(t)
            dead = dead_reason(ds, t) if cell is None else None
            if dead:
                row.append("✗ not run" + notes.ref(
                    f"{ds['name']} / {tool_label(results, t)}: not run after its {dead}"))
            elif cell is None:
                row.append("")
            elif not cell["ok"]:
                row.append(_fail_text(cell, notes, f"{ds['name']} / {SCENARIOS[sc]} / {tool_label(results, t)}"))
            else:
                v = _cell_value(cell, key)
                if per_mb and v is not None:
                    restored = _cell_value(cell, "restored_bytes")
                    v = v / (restored / 1e6) if restored else None
                row.append(fmt(v))
        if ratio and arca_in:
            arca = cells.get("arca")
            best_t, best = best_peer(results, cells, key)
            cell = fmt_ratio(best, _cell_value(arca, key)) if arca and arca["ok"] else "–"
            if cell != "–" and len(peers_in) > 1:
                cell += f" ({tool_label(results, best_t)})"
            row.append(cell)
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _dataset_section(results, ds, plots_rel, notes) -> list:
    man = ds["manifest"]
    spec = ds["spec"]
    out = [f"### {ds['name']}", ""]
    out.append(f"{spec.get('description') or ''}. Generated: {man['files']:,} files, "
               f"{man['dirs']:,} directories, {man['symlinks']} symlinks, "
               f"{man['bytes'] / MiB:,.1f} MiB; {man['text_share'] * 100:.0f}% of the bytes "
               f"compressible text, {man['duplicated_share'] * 100:.0f}% duplicated "
               f"(seed {results['meta']['seed']}, key `{man['key']}`). "
               f"Median of {ds['runs']} run(s); this dataset took {ds.get('seconds', 0):.0f} s.")
    out.append("")
    for n in ds.get("notes") or []:
        out += [f"*Note: {n}.*", ""]
    if plots_rel and ds.get("plots"):
        for p in ds["plots"]:
            out.append(f"![{ds['name']}]({plots_rel}/{os.path.basename(p)})")
        out.append("")
    w = WARM if warm_cache(results) else ""
    if w:
        out += ["*Warm page cache: the page cache could not be dropped before (some of) the "
                "commands of this run (`--allow-warm-cache`); every figure below may include "
                "warm-cache effects.*", ""]
    order = (ds.get("order") or {}).get("restores")
    if order:
        out += ["Tool order of the restores, per run (rotated each run): " + "; ".join(
            f"run {i}: " + ", ".join(tool_label(results, t) for t in o)
            for i, o in enumerate(order, 1)) + ".", ""]
    runs_txt = "one run, not a median" if ds.get("runs") == 1 else "median"
    out += [f"**Wall time**{w} ({runs_txt}; arca vs best peer = best peer's time / arca's "
            "time; a peer that failed or did not run is left out of best peer)", ""]
    out += _table(results, ds, "wall_s", fmt_s, notes, ratio=True)
    out += ["", f"**CPU time**{w} (user + sys)", ""]
    out += _table(results, ds, "cpu_s", fmt_s, notes, ratio=True)
    out += ["", f"**Peak RSS**{w}", ""]
    out += _table(results, ds, "maxrss_kib", lambda v: "–" if v is None else f"{v / 1024:.0f} MiB", notes)
    restores = [s for s in SCENARIOS if s in RESTORES]
    if _has_key(ds, "process_read_bytes"):
        out += ["", f"**Bytes read by the process (repository, caches and target files)**{w} "
                "(restores; every tool measured the same way: rchar minus its startup's; per MB "
                "restored in the next table)", ""]
        out += _table(results, ds, "process_read_bytes", fmt_mib, notes, scenarios=restores)
        out += ["", f"**Bytes read by the process per MB restored**{w}", ""]
        out += _table(results, ds, "process_read_bytes",
                      lambda v: "–" if v is None else f"{v / 1e6:.2f} MB", notes,
                      scenarios=restores, per_mb=True)
    else:  # results from before the harness measured every tool the same way
        out += ["", f"**Bytes read** (restores; NOT comparable across tools: arca's column "
                "is the repository bytes it fetched (`backend.bytes_read`), without its reads of "
                "files already in the target; the peers' are everything the process read "
                "(rchar minus startup): repository, local cache and the target files they "
                "re-read in partial, no-op and metadata-only restores)", ""]
        out += _table(results, ds, "repo_read_bytes", fmt_mib, notes, scenarios=restores)
        out += ["", "**Bytes read per MB restored** (as above: not comparable across tools)", ""]
        out += _table(results, ds, "repo_read_bytes",
                      lambda v: "–" if v is None else f"{v / 1e6:.2f} MB", notes,
                      scenarios=restores, per_mb=True)
    req_tools = [t for t in tool_order(results)
                 if any((c.get(t) or {}).get("median", {}).get("requests") is not None
                        for c in ds["scenarios"].values())]
    if req_tools:
        out += ["", "**Backend requests** (arca's JSON summary; per MB restored for restores)", "",
                "| scenario | " + " | ".join(tool_label(results, t) for t in req_tools) + " |",
                "|" + "---|" * (len(req_tools) + 1)]
        for sc in SCENARIOS:
            cells = ds["scenarios"].get(sc) or {}
            row = []
            for t in req_tools:
                c = cells.get(t)
                med = (c or {}).get("median") or {}
                req = med.get("requests")
                if req is None:
                    row.append("–")
                    continue
                mb = (med.get("restored_bytes") or 0) / 1e6
                row.append(f"{req:,.0f}" + (f" ({req / mb:.1f}/MB)" if sc in RESTORES and mb else ""))
            if any(x != "–" for x in row):
                out.append(f"| {SCENARIOS[sc]} | " + " | ".join(row) + " |")
    if ds["repo"]:
        out += ["", "**Repository size** (apparent bytes; local cache kept by the tool in its own "
                "dir, not counted)", "", "| tool | after first backup | at the end | local cache |",
                "|---|---|---|---|"]
        for t in tool_order(results):
            r = ds["repo"].get(t)
            if r:
                out.append(f"| {tool_label(results, t)} | {fmt_mib(r.get('after_first_backup'))} | "
                           f"{fmt_mib(r.get('final'))} | {fmt_mib(r.get('cache_bytes'))} |")
    if ds["references"]:
        out += ["", "**Reference limits on the same tree** (page cache dropped; what a tool "
                "cannot beat)", "", "| reference | wall | CPU | bounds | note |", "|---|---|---|---|---|"]
        for k, cell in ds["references"].items():
            desc, bounds = REFERENCES[k]
            note = next((r.get("note") for r in cell["runs"] if r.get("note")), "")
            wall = fmt_s(cell["median"]["wall_s"]) if cell["ok"] else f"✗ {cell['failure']}"
            out.append(f"| {desc} | {wall} | {fmt_s(cell['median']['cpu_s'])} | {bounds} | {note} |")
    if ds.get("series"):
        out += ["", "**Backups per generation** (wall seconds)", ""]
        tools = [t for t in tool_order(results) if t in ds["series"]]
        out.append("| generation | " + " | ".join(tool_label(results, t) for t in tools) + " |")
        out.append("|" + "---|" * (len(tools) + 1))
        gens = max(len(ds["series"][t]) for t in tools)
        for i in range(gens):
            row = [str(i + 1)]
            for t in tools:
                s = ds["series"][t]
                row.append(("✗" if s[i]["failed"] else fmt_s(s[i]["wall_s"])) if i < len(s) else "")
            out.append("| " + " | ".join(row) + " |")
    remote = [t for t in tool_order(results) if t.startswith("arca-remote")]
    for t in remote:
        rows = []
        for sc, cells in ds["scenarios"].items():
            cell = cells.get(t)
            if not cell or not cell["ok"]:
                continue
            med = cell["median"]
            mb = (med.get("restored_bytes") or 0) / 1e6 if sc in RESTORES else None
            req = med.get("requests")
            rb = med.get("backend_read_bytes")
            if rb is None and not _has_key(ds, "process_read_bytes"):
                rb = med.get("repo_read_bytes")  # older results: arca's backend.bytes_read
            per = (lambda v: f"{v / mb:.2f}" if (v is not None and mb) else "–")
            local = (ds["scenarios"][sc].get("arca") or {})
            rows.append(f"| {SCENARIOS[sc]} | {fmt_s(med['wall_s'])} | "
                        f"{fmt_s(_cell_value(local, 'wall_s')) if local.get('ok') else '–'} | "
                        f"{req if req is not None else '–'} | {fmt_mib(rb)} | {per(req)} | "
                        f"{per(rb / 1e6 if rb is not None else None)} |")
        if rows:
            out += ["", f"**{tool_label(results, t)}**: arca's backend wrapped in the throttle", "",
                    "| scenario | wall (throttled; restores: its first backup's snapshot, the data before the mutations, on the standard datasets) | wall (local arca; restores: its latest snapshot) | requests | repository bytes read (arca's count) | "
                    "requests per MB restored | MB read per MB restored |", "|---|---|---|---|---|---|---|"]
            out += rows
    out += _arca_backup_profile(results, ds)
    out += _arca_profile(results, ds)
    out.append("")
    return out


def _has_key(ds, key) -> bool:
    return any((c.get("median") or {}).get(key) is not None
               for cells in ds["scenarios"].values() for c in cells.values())


def _arca_backup_profile(results, ds) -> list:
    """arca's own profile (its `--json` summary) of its first backup in this dataset, the run
    with the median wall time: per stage of the pipeline, the time its threads were busy,
    waited for input and waited to hand on, and the backup's phases."""
    cell = ds["scenarios"].get("backup_first", {}).get("arca")
    if not cell or not cell.get("ok"):
        return []
    runs = [r for r in cell.get("runs") or []
            if ((r.get("summary") or {}).get("profile") or None) is not None]
    if not runs:
        return []
    runs.sort(key=lambda r: r["wall_s"])
    r = runs[(len(runs) - 1) // 2]
    sm = r["summary"]
    out = ["", f"**Profile of arca's first backup here** (its median run, {r['wall_s']:.2f} s wall; "
           f"arca's `--profile`, from its JSON summary; a stage's times are summed over its "
           f"threads)", "",
           "| stage | threads | busy | waiting for input | waiting to hand on |", "|---|---|---|---|---|"]
    for st in sm["profile"]:
        out.append(f"| {st['name']} | {st['threads']} | {st['busy_seconds']:.2f} s | "
                   f"{st['wait_input_seconds']:.2f} s | {st['wait_output_seconds']:.2f} s |")
    phases = ", ".join(f"{p['name']} {p['seconds']:.2f} s" for p in sm.get("phases") or [])
    if phases:
        out += ["", f"Phases: {phases}."]
    return out


def _arca_profile(results, ds) -> list:
    """arca's own profile (its `--json` summary) of its slowest restore in this dataset: where
    the time went, per stage and phase, and the run's fetch figures."""
    worst = None
    for sc, cells in ds["scenarios"].items():
        if sc not in RESTORES:
            continue
        for t in ("arca", "arca-remote"):
            cell = cells.get(t)
            if not cell or not cell.get("ok"):
                continue
            for r in cell["runs"]:
                prof = ((r.get("summary") or {}).get("profile") or {})
                if prof.get("stages") is not None and (worst is None or r["wall_s"] > worst[2]["wall_s"]):
                    worst = (sc, t, r)
    if not worst:
        return []
    sc, t, r = worst
    sm = r["summary"]
    prof = sm["profile"]
    out = ["", f"**Profile of arca's slowest restore here**: {SCENARIOS[sc]}, {tool_label(results, t)}, "
           f"{r['wall_s']:.2f} s wall (arca's `--profile`, from its JSON summary)", "",
           "| stage | threads | busy | waiting for input | waiting to hand on |", "|---|---|---|---|---|"]
    for st in prof.get("stages") or []:
        out.append(f"| {st['name']} | {st['threads']} | {st['busy_seconds']:.2f} s | "
                   f"{st['wait_input_seconds']:.2f} s | {st['wait_output_seconds']:.2f} s |")
    phases = ", ".join(f"{p['name']} {p['seconds']:.2f} s" for p in prof.get("phases") or [])
    mb = max((sm.get("bytes_restored") or 0) / 1e6, 1e-9)
    out += ["", f"Phases: {phases}. Fetched {fmt_mib(sm.get('fetched_bytes'))} for "
            f"{fmt_mib(sm.get('bytes_restored'))} restored in {sm.get('requests', 0):,} reads "
            f"({sm.get('requests', 0) / mb:.2f} per MB) from {sm.get('packs_read', 0):,} packs "
            f"({sm.get('packs_read', 0) / mb:.3f} per MB); {sm.get('blocks_copied', 0):,} blocks "
            f"copied locally, {sm.get('cache_hits', 0):,} cache hits, {sm.get('evictions', 0):,} "
            f"evictions, {sm.get('rereads', 0):,} re-reads; {sm.get('files_hashed', 0):,} files "
            f"hashed; peak block memory {fmt_mib(sm.get('peak_memory'))}."]
    tun = prof.get("tuning") or {}
    if tun:
        out.append(f"Knobs: fetchers {tun.get('fetchers')}, workers {tun.get('workers')}, "
                   f"memory {fmt_mib(tun.get('memory'))}, read gap {fmt_mib(tun.get('read_gap'))}, "
                   f"largest read {fmt_mib(tun.get('max_read'))}.")
    return out


def render(results: dict, plots_rel: str | None = None) -> str:
    meta = results["meta"]
    notes = Notes()
    out = ["# arca benchmarks", ""]
    out.append(f"Generated by `bench/run{(' ' + meta['argv']) if meta['argv'] else ''}` on "
               f"{meta['finished']} (mode: {meta['mode']}, total {meta['seconds']:.0f} s). "
               "Every number below comes from one run of the harness in `bench/`, all tools on "
               "the same data on the same machine; methodology in `bench/README.md` and at the end "
               "of this page.")
    out += ["", "## Machine", "", "| | |", "|---|---|"]
    for k, v in meta["machine"].items():
        out.append(f"| {k} | {v} |")
    drops = meta.get("cache_drops") or {}
    failed = f" ({drops.get('failed')} of {drops.get('ok', 0) + drops.get('failed', 0)} drops failed)" \
        if drops.get("failed") else ""
    out.append(f"| page cache dropped before each measured command | "
               f"{'yes' if meta['caches_dropped'] else 'NO' + failed + ' (not permitted; run with --allow-warm-cache: every figure includes warm-cache effects)'} |")
    out += ["", "## Versions", "", "| tool | version | settings |", "|---|---|---|"]
    for t in results["tools"]:
        state = t["version"] if t["available"] else f"**skipped**: {t['note']}"
        settings = t["settings"] + (f"; restores {t['verify_note']}" if t.get("verify_note") else "")
        out.append(f"| {t['label']} | {state} | {settings} |")
    if results["headline"]:
        out += ["", "## Headline" + (WARM if warm_cache(results) else ""), ""]
        out += [f"- {h}" for h in results["headline"]]
    out += restore_targets.render(results)
    if results["failures"] or results["contract"] or results["expected_failures"]:
        out += ["", "## Failures", "", "A failed cell shows ✗ instead of a time. Unexpected "
                "failures make `bench/run` exit non-zero; known peer limitations do not.", "",
                "| where | runs failed | what | known limitation |", "|---|---|---|---|"]
        for f in results["failures"] + results["expected_failures"]:
            what = f["failure"].replace("|", "\\|")
            what = what if len(what) <= 200 else what[:200] + "…"
            out.append(f"| {f['where']} | {f['runs_failed']} | {what} | {f['known'] or '**no**'} |")
        out += [f"| arca CLI contract | | {c} | **no** |" for c in results["contract"]]
    if results["datasets"]:
        out += ["", "## Results", ""]
    for ds in results["datasets"]:
        out += _dataset_section(results, ds, plots_rel, notes)
    # S3: this run's, else the last recorded one (docs/bench/s3.json, from `bench/run --s3`).
    out += (s3.render(results["s3"]) if (results.get("s3") or {}).get("datasets")
            else s3.render_file(os.path.join(DOCS_BENCH, "s3.json")))
    # Maintenance: this run's, else the last recorded one (docs/bench/maintenance.json); a run
    # with only one of its parts shows the other from that file.
    mres = results.get("maintenance")
    if maintenance.has_results(mres):
        try:
            with open(os.path.join(DOCS_BENCH, "maintenance.json")) as f:
                mres = maintenance.merge_previous(mres, json.load(f))
        except (OSError, ValueError):
            pass
        out += maintenance.render(mres)
    else:
        out += maintenance.render_file(os.path.join(DOCS_BENCH, "maintenance.json"))
    out += capping.render(os.path.join(DOCS_BENCH, "capping.json"))
    out += ["## How each figure is obtained", ""]
    out += METHOD
    if notes.items:
        out.append("")
        for i, n in enumerate(notes.items, 1):
            out.append(f"[^{i}]: {n}")
    return "\n".join(out) + "\n"


METHOD = [
    "- **Wall**: `time.monotonic()` around the tool's process, from spawn to exit (a tool that "
    "leaves dirty pages behind is not charged for the writeback; no tool syncs restored files). "
    "The `sync` run right after each restore is timed too (`sync_s` in the JSON); the "
    "restore targets' rows \"until on disk\" add it.",
    "- **CPU**: user + system time from `os.wait4()`'s rusage of the child (includes its "
    "reaped children). **Peak RSS**: the tool's own `ru_maxrss`, reported by GNU `time -f %M` "
    "wrapped around it (a child forked straight from the Python harness would inherit the "
    "harness's high-water mark).",
    "- **Median of N runs**; min/max and every run are in the JSON. Where a dataset or variant "
    "has one run (`many` by default, the throttled arca variant), its figures are that one run, "
    "not a median, and the headline says \"(1 run)\". The generations dataset's incremental "
    "backups are one sequence: its figure is the median over the generations.",
    "- **Order of the tools**: interleaved run by run, backups and restores alike, and rotated: "
    "run i (generation i for the incremental backups) starts at tool (i - 1 + d) mod n, d being "
    "the dataset's position in the bench run, so no tool is always the first (for instance the "
    "first to restore onto the fresh file system). Within a run each tool does its restores in "
    "sequence (full, partial, no-op, metadata-only; or newest, oldest), then its target is "
    "removed. Each dataset section lists the restore order of every run; every phase's order is "
    "in the JSON (`order`).",
    "- **Page cache**: `sync; echo 3 > /proc/sys/vm/drop_caches` before every measured command "
    "(so every phase starts cold, source data and repository alike); the result of every drop is "
    "counted. A run where the drop is not permitted stops before measuring unless "
    "`--allow-warm-cache` is given; then the Machine table, the headline and every table are "
    "marked warm-cache.",
    "- **Password key derivation**: every command opens the encrypted repository, so its wall "
    "time, CPU and peak RSS include deriving the key from the password with the tool's own "
    "default cost: arca Argon2id with 48 MiB, 4 passes, 4 lanes (about 0.07 s on two cores by "
    "its parameters' documentation; not measured separately here); restic and rustic scrypt "
    "with the parameters stored at `init` (restic calibrates them there); kopia and borg their "
    "own defaults. It is a fixed cost per command, so it dominates the sub-second figures "
    "(no-op restore, no-change backup) and weighs little in the long ones.",
    "- **Restore targets** (and the tar/cp references) are on a journaled ext4 made with "
    "`mkfs.ext4` defaults for the run, on a loop device over a sparse file (`--target-fs ext4`; "
    "the Machine table says where they were). The reason: ext4 *without* a journal, as this "
    "VM's root filesystem is, refuses to reuse inodes deleted in the last 60-360 s and scans "
    "every cached inode-table block for them, so a restore that starts right after the previous "
    "tool's tree was removed paid 2-3x its system time on the 100,000-file set (any parallel "
    "restorer; tar, creating files one at a time, barely). Users restore onto journaled "
    "filesystems, where that scan does not exist.",
    "- **Bytes read by the process (repository, caches and target files)**: the same measure "
    "for every tool, arca included: `rchar` from `/proc/<pid>/io` read after exit (bytes "
    "returned by read-type syscalls; files read with read/pread, not mmap) minus the `rchar` "
    "of the tool's version command (`arca --version`, `restic version`, `rustic --version`, "
    "`kopia --version`, `borg --version`: interpreter and module reads, ~6 MB for borg, ~0 for "
    "the others). So it is not only the repository: it includes the tool's local cache and "
    "config, and the files already in the restore target that the tool reads back (to hash or "
    "compare them) in partial, no-op and metadata-only restores, which is why a restore can "
    "read more than the repository holds. arca's own count of repository bytes "
    "(`backend.bytes_read` of its `--json` summary) is in the JSON as `backend_read_bytes` and "
    "in the throttled variant's table. `rchar` and `read_bytes` (block device reads) of every "
    "run are in the JSON.",
    "- **Repository size**: sum of the apparent file sizes under the repository directory, "
    "after the first backup and at the end.",
    "- **Verification**: after every restore, the restored tree is compared with the source: "
    "same entries (nothing missing or extra), types, permission bits, uid/gid, mtimes to the "
    "nanosecond (files, directories, symlinks), symlink targets, and every byte of every file "
    "(read back and compared, not hashed). Any difference, non-zero exit or (arca) non-zero "
    "`errors` makes the cell a failure instead of a time. Where a tool cannot restore a "
    "metadata item by design, the Versions table says what its verification relaxes (kopia: "
    "symlink mtimes to ±1 µs, no subdirectory mtimes).",
    "- **Partial restore**: before each run, in the correct target, 25% of the files are deleted "
    "and 25% get their first byte inverted (their mtime becomes now); 50% are untouched "
    "(Duplicati's benchmark). **No-op**: target already correct. **Metadata-only**: every mtime "
    "in the target set to now. Each tool does what its default restore into an existing "
    "directory does (no overwrite flags).",
    "- **Throttled backend** (arca only): `--backend-latency`/`--backend-bandwidth` wrap arca's "
    "repository backend; requests and bytes come from the JSON summary. The peers have no "
    "equivalent latency injection, so they have no remote column. On the standard datasets it "
    "backs up the data once and restores that first snapshot (before the mutations), while "
    "local arca's full restore is of its latest snapshot, after the mutations (2% of the files "
    "changed and 0.5% added per mutation): the headline says so next to both times.",
    "- **Best peer** is the fastest peer whose cell succeeded. A peer that failed (a known "
    "limitation or not), did not run after its first backup failed (its cells show ✗ not run), "
    "or was skipped is left out, and the headline and the targets name it with the reason.",
    "- **arca's version**: `arca --version`, the SHA-256 (first 12 hex digits) and path of the "
    "binary measured, and the checkout's git HEAD; with `--no-build` or `$ARCA_BIN` the harness "
    "did not build the binary, and the version says that the git HEAD is only the checkout's.",
    "- **S3 on loopback** (`bench/run --s3`): one S3 server (versitygw, Versity's S3 gateway, "
    "by default; `--s3-server s3s-fs` for the test suite's server) on 127.0.0.1, its folder on the "
    "same disk as the local repositories; arca (`-r s3:http://...`), restic (`-r s3:http://...`) "
    "and rustic (`opendal:s3` profile) with the AWS credentials in their environment and their "
    "local caches; \"behind 20ms\" goes through `bench/arcabench/delayproxy.py`, a TCP proxy that "
    "delays each direction by half the round trip (and the first bytes of a connection by one "
    "more round trip, the handshake) and passes 100 MB/s per direction (one link shared by all "
    "connections); it counts the bytes and HTTP responses that cross it. Server and proxy CPU "
    "come from their /proc/<pid>/stat, the server's reads from its /proc/<pid>/io.",
    "- **Maintenance** (`bench/run --maintenance-only`, and at the end of the generations "
    "dataset): per tool, page cache dropped before each command, `forget --keep-last 5`, "
    "`prune --dry-run`, `prune` (rustic with `--instant-delete`, so that it deletes now as "
    "restic and arca do), a verified restore of the newest snapshot and the tool's `check`; "
    "space freed = repository bytes after forget minus after prune; with several runs every "
    "figure (times, bytes read and written, repository sizes, bytes freed) is the median of "
    "the runs. The index at scale comes "
    "from `crates/arca-maintenance/examples/index_scale.rs` (a fresh process with the "
    "allocator set up as `arca` sets it, `arca_repo::alloc`; RSS from "
    "`/proc/self/status`).",
    "- **References**: `tar -xpf` of a POSIX (pax, ns mtimes) uncompressed tar made beforehand, "
    "`cp -a`, `find -printf` (stats every entry) and `find -exec cat` (reads every byte), on "
    "the same tree with the page cache dropped.",
]


def headline(results: dict) -> list:
    """Short lines: arca's speed-up over the best peer (wall time) for the key scenarios, and the
    throttled-backend figures. Each line names the peers left out of "best peer" (failed, not
    run, skipped) and why, says "(1 run)" where a figure is one run rather than a median, and
    is marked when the page cache could not be dropped."""
    lines = []
    keys = ("backup_first", "backup_nochange", "backup_mutation", "backup_generation",
            "restore_full", "restore_partial", "restore_noop", "restore_metadata",
            "restore_newest", "restore_oldest")

    def runs_text(n):
        return f" ({n} run)" if n == 1 else ""

    for ds in results["datasets"]:
        parts = []
        for sc in keys:
            cells = ds["scenarios"].get(sc) or {}
            arca = cells.get("arca")
            if not arca:
                continue
            out_text = left_out_text(results, ds, cells)
            peers = {t: c for t, c in cells.items() if _is_peer(results, t) and c["ok"]}
            if not peers:
                if out_text:
                    parts.append(f"{SCENARIOS[sc]}: no peer succeeded{out_text}")
                continue
            if not arca["ok"]:
                parts.append(f"{SCENARIOS[sc]}: arca FAILED")
                continue
            best_t, best = best_peer(results, cells)
            r = best / arca["median"]["wall_s"]
            parts.append(f"{SCENARIOS[sc]} {r:.2f}× ({tool_label(results, best_t)}{out_text})")
        if parts:
            lines.append(f"**{ds['name']}**{runs_text(ds.get('runs'))} — arca's speed-up over "
                         "the best peer (wall): " + "; ".join(parts))
        standard = not ds.get("series") and not (ds.get("spec") or {}).get("generations")
        for t in [t["name"] for t in results["tools"] if t["name"].startswith("arca-remote")]:
            bits, n = [], []
            for sc in ("backup_first", "restore_full", "restore_newest"):
                c = (ds["scenarios"].get(sc) or {}).get(t)
                local = (ds["scenarios"].get(sc) or {}).get("arca")
                if not c or not c["ok"]:
                    continue
                n.append(c.get("n") or len(c.get("runs") or []))
                med = c["median"]
                if sc == "restore_full" and standard:
                    muts = ds.get("mutations_before_restores") or ds.get("runs")
                    b = (f"{SCENARIOS[sc]} of its first backup's snapshot {med['wall_s']:.1f} s")
                    if local and local["ok"]:
                        b += (f" (local arca, restoring its latest snapshot, after {muts} "
                              f"mutation(s) of the data: {local['median']['wall_s']:.1f} s)")
                else:
                    b = f"{SCENARIOS[sc]} {med['wall_s']:.1f} s"
                    if local and local["ok"]:
                        b += f" (local {local['median']['wall_s']:.1f} s)"
                mb = (med.get("restored_bytes") or 0) / 1e6
                if sc.startswith("restore") and mb and med.get("requests") is not None:
                    b += f", {med['requests'] / mb:.2f} requests/MB"
                bits.append(b)
            if bits:
                lines.append(f"**{ds['name']}**{runs_text(max(n) if n else None)} — "
                             f"{tool_label(results, t)}: " + "; ".join(bits))
    s3res = results.get("s3") or {}
    for row in s3.target_rows(s3res) if s3res.get("datasets") else []:
        if row["ratio"] is not None:
            sc = s3.SCENARIOS[row["scenario"]].format(lat=s3res["meta"]["latency"])
            lines.append(f"**S3 (loopback)**{runs_text((s3res.get('meta') or {}).get('runs'))} — "
                         f"{row['dataset']}, {sc}: arca {row['arca']:.2f} s, "
                         f"{row['ratio']:.2f}× its baseline (target ≤ {row['limit']}×: "
                         f"{'met' if row['met'] else 'NOT met'})")
    lines += maintenance.headline(results.get("maintenance"))
    if warm_cache(results):
        lines = ["[warm page cache] " + line for line in lines]
    return lines

"""bench/run entry point: parse options, set up tools and datasets, run, report."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import shutil
import subprocess
import sys
import time

from . import datasets as dsm
from . import maintenance, plots, report, s3, targetfs
from .measure import drop_caches, ensure_gnu_time
from . import scenarios as scen
from .scenarios import Bench
from .tools import (KOPIA_VERSION, RESTIC_LATEST_VERSION, RUSTIC_VERSION, S3_CAPABLE, Arca,
                    ArcaRemote, Borg, Kopia, Restic, ResticLatest, Rustic)

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)

DEFAULT_RUNS = {"small": 3, "medium": 3, "many": 1, "generations": 3}
SETTINGS = {
    "arca": "defaults (zstd level 3; a blob whose sample is not 1/64 smaller at level 3 than at level 1 "
            "is compressed at level 1), encrypted, local repository",
    "arca-remote": "as arca, backend throttled: {lat} per request, {bw}/s",
    "restic": "Debian's package; repository v2, --compression auto (zstd default level), "
              "encrypted, local cache",
    "restic-latest": "built from source (Go); repository v2, --compression auto (zstd default "
                     "level, as level 3), encrypted, local cache",
    "rustic": "built from source (cargo install rustic-rs); init --set-compression 3 (zstd level "
              "3, also its default), encrypted, local cache",
    "kopia": "built from source (Go); filesystem repository, global policy --compression=zstd "
             "(klauspost zstd default level, as level 3; kopia's default is none), default "
             "AES256-GCM encryption and DYNAMIC-4M-BUZHASH splitter, local cache; retention "
             "--keep-latest 1000000 (kopia expires snapshots after each backup; keep them all, "
             "as the others do)",
    "borg": "Debian's package; repokey-blake2, --compression zstd,3, default chunker, local cache",
}

# --tools: names and aliases. The default is the quick set (Debian packages, nothing to build);
# the strong peers are built from pinned sources on first use and cached under bench/out/peers/.
DEFAULT_TOOLS = "arca,restic,borg"
TOOL_ALIASES = {
    "strong": ["arca", "rustic", "restic-latest", "kopia", "borg"],
    "all": ["arca", "rustic", "restic-latest", "restic", "kopia", "borg"],
}
PEERS = {"rustic": Rustic, "restic-latest": ResticLatest, "restic": Restic, "kopia": Kopia,
         "borg": Borg}
TOOL_ORDER = ["arca", *PEERS, "arca-remote"]  # columns of the report, in this order


def expand_tools(text: str) -> list:
    """`--tools` value -> tool names, aliases expanded, duplicates dropped, in TOOL_ORDER."""
    names = []
    for t in (x.strip() for x in text.split(",")):
        if not t:
            continue
        for n in TOOL_ALIASES.get(t, [t]):
            if n not in TOOL_ORDER:
                raise ValueError(f"unknown tool {n!r}; choose from {', '.join(TOOL_ORDER)} "
                                 f"or {', '.join(TOOL_ALIASES)}")
            if n not in names:
                names.append(n)
    return sorted(names, key=TOOL_ORDER.index)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/run", description=__doc__)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--smoke", action="store_true",
                      help="tiny datasets, 1 run, every scenario; outputs under bench/out only")
    mode.add_argument("--full", action="store_true", help="also the 10 GiB 'medium' dataset")
    p.add_argument("--tools", default=DEFAULT_TOOLS,
                   help="comma list of arca, restic (Debian's 0.14), borg (Debian's 1.2), "
                   f"rustic ({RUSTIC_VERSION}), restic-latest ({RESTIC_LATEST_VERSION}), kopia "
                   f"({KOPIA_VERSION}), or the aliases strong (= "
                   f"{','.join(TOOL_ALIASES['strong'])}) and all (= strong + restic); arca "
                   "implies the throttled arca-remote. rustic, restic-latest and kopia are built "
                   "from source on first use (cargo/go; rustic alone takes 10-15 min or more on 2 "
                   "cores) and cached "
                   f"under bench/out/peers/. Default: {DEFAULT_TOOLS} (nothing to build)")
    p.add_argument("--datasets", help="comma list of small, medium, many, generations")
    p.add_argument("--runs", type=int, help="runs per scenario (median reported); default 1 with "
                   "--smoke, else " + ", ".join(f"{k} {v}" for k, v in DEFAULT_RUNS.items()))
    p.add_argument("--seed", type=int, default=1, help="dataset seed (default 1)")
    p.add_argument("--no-build", action="store_true", help="do not run cargo build for arca; use "
                   "the existing target/release/arca (or $ARCA_BIN). Peers built from source are "
                   "still built when requested and missing")
    p.add_argument("--no-remote", action="store_true", help="skip the throttled arca variant")
    p.add_argument("--remote-latency", default="20ms")
    p.add_argument("--remote-bandwidth", default="100MB")
    p.add_argument("--remote-runs", type=int, default=1,
                   help="runs of the throttled arca variant (default 1)")
    p.add_argument("--remote-datasets", default="small,generations",
                   help="datasets the throttled arca variant runs on (default small,generations; "
                   "add many to see its per-file overhead behind latency)")
    p.add_argument("--s3", action="store_true",
                   help="also run the S3 part: arca, restic and rustic (those among --tools) "
                   "against an S3 server on loopback (--s3-server), plain and behind --s3-latency, "
                   "next to arca on a local folder; on small and many (see bench/README.md)")
    p.add_argument("--s3-only", action="store_true",
                   help="only the S3 part (implies --s3; datasets default to small,many); with "
                   "docs, only the S3 section of docs/BENCHMARKS.md is replaced")
    p.add_argument("--s3-server", choices=s3.SERVERS, default="versitygw",
                   help="the S3 server: versitygw (default; Versity's S3 gateway, built with go "
                   "on first use) or s3s-fs (the test suite's server; CPU-hungry on reads)")
    p.add_argument("--s3-latency", default="20ms",
                   help="round trip per request behind the delaying proxy (default 20ms)")
    p.add_argument("--s3-bandwidth", default="100MB",
                   help="link bandwidth per direction behind the proxy, bytes/s (default 100MB)")
    p.add_argument("--s3-runs", type=int,
                   help="runs per S3 scenario (median); default 1 with --smoke, else 3")
    p.add_argument("--maintenance-only", action="store_true",
                   help="only the maintenance part: the generations dataset's backups, then "
                   f"forget --keep-last {maintenance.KEEP_LAST} + prune with arca, restic and "
                   "rustic (those among --tools), and the index at scale (unless --no-scale); "
                   "with docs, only the Maintenance section of docs/BENCHMARKS.md is replaced")
    p.add_argument("--maintenance-runs", type=int,
                   help="runs of forget + prune, each on a fresh copy of every repository "
                   "(median); default 1 with --smoke, else 3")
    p.add_argument("--no-maintenance", action="store_true",
                   help="skip forget + prune after the generations dataset")
    p.add_argument("--scale", action="store_true",
                   help="also run the index at scale (crates/arca-maintenance/examples/"
                   "index_scale.rs; implied by --maintenance-only)")
    p.add_argument("--scale-only", action="store_true",
                   help="only the index at scale (no backups); with docs, only the Maintenance "
                   "section of docs/BENCHMARKS.md is replaced (its forget + prune figures kept)")
    p.add_argument("--no-scale", action="store_true",
                   help="with --maintenance-only: skip the index at scale")
    p.add_argument("--scale-blobs", type=int, default=maintenance.SCALE_BLOBS,
                   help=f"blobs of the synthetic index (default {maintenance.SCALE_BLOBS:,})")
    p.add_argument("--target-fs", choices=["ext4", "native"], default="ext4",
                   help="where restores land: ext4 = a fresh journaled ext4 on a loop device, made "
                   "for this run (default; needs root, falls back to native with a note); native = "
                   "bench/out's own filesystem")
    p.add_argument("--no-refs", action="store_true", help="skip the tar/cp/find reference limits")
    p.add_argument("--no-docs", action="store_true",
                   help="do not rewrite docs/BENCHMARKS.md and docs/bench/ (non-smoke runs)")
    p.add_argument("--keep", action="store_true", help="keep repositories and work dirs")
    p.add_argument("--allow-warm-cache", action="store_true",
                   help="run even when the page cache cannot be dropped (not root, or a "
                   "container): every figure and headline is then marked warm-cache. Without "
                   "it such a run stops before measuring (--smoke implies it: its figures are "
                   "never published)")
    p.add_argument("--no-space-check", action="store_true",
                   help="start even when bench/out seems to have too little free space")
    p.add_argument("--timeout", type=float, help="per-command timeout in seconds")
    p.add_argument("--out", default=os.path.join(BENCH, "out"))
    p.add_argument("--render", metavar="RESULTS_JSON",
                   help="only re-render docs/BENCHMARKS.md and docs/bench/*.png (or, with --no-docs, "
                   "the .md beside the JSON) from an earlier run's results JSON")
    p.add_argument("--no-selftest", action="store_true",
                   help="with --smoke: skip the harness's own unit tests (bench/tests)")
    return p.parse_args(argv)


def machine_info(out_dir) -> dict:
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    except OSError:
        model = platform.processor()
    info["CPU"] = f"{model}, {os.cpu_count()} logical cores"
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(l for l in f if l.startswith("MemTotal")).split()[1])
        info["RAM"] = f"{kb / 2**20:.1f} GiB"
    except (OSError, StopIteration):
        pass
    try:
        with open("/etc/os-release") as f:
            info["OS"] = next(l.split("=", 1)[1].strip().strip('"') for l in f if l.startswith("PRETTY_NAME"))
    except (OSError, StopIteration):
        pass
    info["kernel"] = platform.release()
    try:
        df = subprocess.run(["df", "-T", "-h", out_dir], capture_output=True, text=True).stdout.splitlines()[-1].split()
        info["filesystem (bench/out)"] = f"{df[1]} on {df[0]} ({df[2]} total, {df[4]} free)"
    except (OSError, IndexError):
        pass
    virt = subprocess.run(["systemd-detect-virt"], capture_output=True, text=True).stdout.strip() \
        if shutil.which("systemd-detect-virt") else ""
    if virt and virt != "none":
        info["virtualisation"] = virt
    info["Python"] = platform.python_version()
    return info


def space_needed(dataset_bytes: int, tools: int) -> int:
    """Free bytes a run needs in bench/out while its largest dataset runs (datasets run one at
    a time and are cleaned up after): the source copy, the tar reference, a repository of
    about the data's size per tool plus caches (kopia keeps a copy), and up to two restored
    trees on the target filesystem, plus 2 GiB of slack."""
    return int(dataset_bytes * (1 + 1 + 1.3 * tools + 2)) + 2 * 2**30


def check_space(out: str, need: int) -> str | None:
    """None when `out` has `need` bytes free, else the failure in one line."""
    free = shutil.disk_usage(out).free
    if free >= need:
        return None
    return (f"{out} has {free / 2**30:.1f} GiB free; this run needs about "
            f"{need / 2**30:.1f} GiB (a full disk fails the run midway). Free space, choose "
            f"fewer --datasets or --tools, or pass --no-space-check")


def write_partial(path: str, meta: dict, results_ds: list, bench=None) -> None:
    """The datasets finished so far (and the failures and contract findings so far), so that
    a run that dies later keeps them."""
    out = {"meta": dict(meta, partial=True), "datasets": results_ds}
    if bench is not None:
        out.update(failures=bench.failures, expected_failures=bench.expected_failures,
                   contract=bench.contract)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1, default=str)
    os.replace(tmp, path)


def _run_datasets(args, bench, names, specs, data, active, log, maint=None, checkpoint=None):
    """Every dataset's scenarios; returns the results per dataset. `checkpoint(results)` is
    called after each dataset."""
    remote_sets = set(args.remote_datasets.split(",")) if args.remote_datasets else set()
    results_ds = []
    for n in names:
        spec = specs[n]
        runs = args.runs or (1 if args.smoke else DEFAULT_RUNS[n])
        data_dir, manifest = data[n]
        tools_here = [t for t in active if t.scenarios is None or n in remote_sets]
        if not tools_here:
            break
        if spec.generations:
            res = bench.run_generations(spec, data_dir, manifest, runs, tools_here,
                                        with_refs=not args.no_refs, maintenance=maint)
        else:
            res = bench.run_standard(spec, data_dir, manifest, runs, tools_here,
                                     with_refs=not args.no_refs)
        skipped = [t.label for t in active if t not in tools_here]
        if skipped:
            res["notes"].append(f"not run on this dataset: {', '.join(skipped)} "
                                f"(see --remote-datasets)")
        results_ds.append(res)
        log(f"[{n}] done in {res['seconds']:.0f} s")
        if checkpoint:
            checkpoint(results_ds)
    return results_ds


def selftest(log) -> bool:
    """The harness's unit tests (dataset determinism, verification catches differences)."""
    import io
    import unittest

    stream = io.StringIO()
    suite = unittest.defaultTestLoader.discover(os.path.join(BENCH, "tests"))
    result = unittest.TextTestRunner(stream=stream, verbosity=0).run(suite)
    log(f"harness self-test: {result.testsRun} tests, {len(result.failures)} failures, "
        f"{len(result.errors)} errors")
    if not result.wasSuccessful():
        print(stream.getvalue())
    return result.wasSuccessful()


def write_outputs(results: dict, base: str, plot_dir: str, write_docs: bool, log) -> None:
    """results JSON + markdown under bench/out; with write_docs also docs/BENCHMARKS.md + PNGs
    (and docs/bench/s3.json when the run has S3 results). A run with S3 results only (--s3-only)
    replaces just the S3 section of docs/BENCHMARKS.md, keeping the other figures."""
    out = os.path.dirname(base)
    docs_dir = os.path.join(ROOT, "docs")
    docs_plots = os.path.join(docs_dir, "bench")
    has_s3 = bool((results.get("s3") or {}).get("datasets"))
    has_maint = maintenance.has_results(results.get("maintenance"))
    partial = not results["datasets"] and (has_s3 or has_maint)
    made = []
    if not partial:
        try:
            made = plots.make_all(results, docs_plots if write_docs else plot_dir)
        except Exception as e:  # noqa: BLE001 - plots must never lose the numbers
            log(f"WARNING: plotting failed: {e!r}")
        if not plots.available():
            log("matplotlib not available: no plots")
    with open(base + ".json", "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(base + ".md", "w") as f:
        f.write(report.render(results, plots_rel=os.path.relpath(
            docs_plots if write_docs else plot_dir, out)))
    if write_docs and (results.get("s3") or {}).get("datasets"):
        os.makedirs(docs_plots, exist_ok=True)
        with open(os.path.join(docs_plots, "s3.json"), "w") as f:
            json.dump(results["s3"], f, indent=1, default=str)
        log("wrote docs/bench/s3.json")
    maint_json = os.path.join(docs_plots, "maintenance.json")
    if write_docs and has_maint:
        os.makedirs(docs_plots, exist_ok=True)
        try:
            with open(maint_json) as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = None
        merged = maintenance.merge_previous(results["maintenance"], old)
        with open(maint_json, "w") as f:
            json.dump(merged, f, indent=1, default=str)
        log("wrote docs/bench/maintenance.json")
    if write_docs and partial:
        path = os.path.join(docs_dir, "BENCHMARKS.md")
        try:
            with open(path) as f:
                doc = f.read()
        except OSError:
            doc = "# arca benchmarks\n"
        if has_s3:
            doc = s3.splice_section(doc, "\n".join(s3.render(results["s3"])) + "\n")
            log("replaced the S3 section of docs/BENCHMARKS.md (the rest is unchanged)")
        if has_maint:
            doc = s3.splice_section(doc, "\n".join(maintenance.render_file(maint_json)) + "\n",
                                    heading=maintenance.HEADING)
            doc = maintenance.splice_headline(doc, maintenance.headline(merged))
            log("replaced the Maintenance section of docs/BENCHMARKS.md and its lines of the "
                "headline (the rest is unchanged)")
        with open(path, "w") as f:
            f.write(doc)
    elif write_docs:
        with open(os.path.join(docs_dir, "BENCHMARKS.md"), "w") as f:
            f.write(report.render(results, plots_rel="bench"))
        log(f"wrote docs/BENCHMARKS.md and {len(made)} plots under docs/bench/")
    log(f"wrote {base}.json and {base}.md")


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.render:
        with open(args.render) as f:
            results = json.load(f)
        results["headline"] = report.headline(results)
        base = args.render[:-len(".json")] if args.render.endswith(".json") else args.render
        run_id = results["meta"].get("run_id", "render")
        write_outputs(results, base, os.path.join(os.path.dirname(base), f"plots-{run_id}"),
                      results["meta"]["mode"] != "smoke" and not args.no_docs, print)
        return 0
    t_start = time.monotonic()
    mode = "smoke" if args.smoke else ("full" if args.full else "default")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    lock = open(os.path.join(out, ".lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("another bench/run is using", out, file=sys.stderr)
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_id = f"{'smoke-' if args.smoke else ''}{stamp}"
    logs = os.path.join(out, "logs", run_id)
    os.makedirs(logs, exist_ok=True)
    harness_log = open(os.path.join(logs, "harness.log"), "w")

    def log(msg):
        line = f"[{time.monotonic() - t_start:7.1f}s] {msg}"
        print(line, flush=True)
        harness_log.write(line + "\n")
        harness_log.flush()

    specs = dsm.SMOKE_SPECS if args.smoke else dsm.FULL_SPECS
    if args.scale_only:
        args.maintenance_only, args.scale, args.no_scale = True, True, False
    if args.s3_only and args.maintenance_only:
        print("--s3-only and --maintenance-only exclude each other", file=sys.stderr)
        return 2
    if args.s3_only:
        args.s3 = True
    if args.maintenance_only:
        args.no_maintenance = False
        args.scale = args.scale or not args.no_scale
        if args.datasets and args.datasets != "generations":
            print("--maintenance-only runs on the generations dataset only", file=sys.stderr)
            return 2
    names = (args.datasets.split(",") if args.datasets else
             (["generations"] if args.maintenance_only else
              ["small", "many"] if args.s3_only else
              ["small", "medium", "many", "generations"] if args.full else ["small", "many", "generations"]))
    for n in names:
        if n not in specs:
            print(f"unknown dataset {n!r}; choose from {', '.join(specs)}", file=sys.stderr)
            return 2
    try:
        wanted = expand_tools(args.tools)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if args.s3_only:
        # Only the tools with an S3 variant; no throttled arca (the S3 part has its own latency).
        wanted = [w for w in wanted if w in S3_CAPABLE]
        args.no_remote = True
        if not wanted or not any(n in s3.PLAN for n in names):
            print(f"--s3-only needs one of the tools {', '.join(S3_CAPABLE)} and one of the "
                  f"datasets {', '.join(s3.PLAN)}", file=sys.stderr)
            return 2
    if args.maintenance_only:
        wanted = [] if args.scale_only else [w for w in wanted if w in maintenance.SUPPORTED]
        args.no_remote = True
        if not wanted and not args.scale:
            print(f"--maintenance-only needs one of the tools {', '.join(maintenance.SUPPORTED)} "
                  "(or the index at scale)", file=sys.stderr)
            return 2
    timeout = args.timeout or (600 if args.smoke else 4 * 3600)

    work = os.path.join(out, "work")
    restore_root = os.path.join(work, "restore")
    targetfs.release_stale(restore_root)
    shutil.rmtree(work, ignore_errors=True)
    home_root = os.path.join(work, "home")

    log(f"mode {mode}; tools {','.join(wanted)}; datasets {','.join(names)}")
    if args.smoke and not args.no_selftest:
        if not selftest(log):
            log("FAILURE: the harness's own unit tests failed (bench/tests)")
            return 1

    # ---- tools
    t_setup = time.monotonic()
    tools = []
    arca_build_s = 0.0
    if "arca" in wanted or "arca-remote" in wanted:
        arca = Arca(home_root)
        t_build = time.monotonic()
        ok = arca.ensure(log, build=not args.no_build, build_log=os.path.join(logs, "cargo-build.log"))
        arca_build_s = time.monotonic() - t_build
        if ok:
            log(f"arca: {arca.version} ({arca.binary}; build step {arca_build_s:.0f} s)")
        else:
            log(f"SKIPPING arca: {arca.note}")
        if "arca" in wanted:
            tools.append(arca)
        if ("arca-remote" in wanted or ("arca" in wanted and not args.no_remote)):
            remote = ArcaRemote(home_root, arca.binary, args.remote_latency, args.remote_bandwidth)
            if ok:
                remote.ensure(log)
                remote.built_by_harness = arca.built_by_harness
                remote.version = arca.version  # the same binary, described the same way
            else:
                remote.note = arca.note
            tools.append(remote)
    peer_setup_s = {}
    for name, cls in PEERS.items():
        if name in wanted:
            t = cls(home_root)
            t_peer = time.monotonic()
            try:
                ok = t.ensure(log)
            except Exception as e:  # noqa: BLE001 - a peer's setup never stops the run
                ok, t.available = False, False
                t.note = t.note or f"{t.name} setup failed: {e!r}"[:300]
            peer_setup_s[name] = round(time.monotonic() - t_peer, 1)
            if ok:
                log(f"{t.name}: {t.version}")
            else:
                log(f"SKIPPING {t.name}: {t.note}")
            tools.append(t)
    tools.sort(key=lambda t: TOOL_ORDER.index(t.name))
    active = [t for t in tools if t.available]
    if not ensure_gnu_time(log):
        log("WARNING: GNU time (/usr/bin/time) unavailable: peak RSS will not be reported")
    setup_s = time.monotonic() - t_setup

    dropped = drop_caches()
    allow_warm = args.allow_warm_cache or args.smoke
    if not dropped and not allow_warm:
        log("ERROR: the page cache cannot be dropped here (writing /proc/sys/vm/drop_caches is "
            "not permitted: run as root outside a container). Every figure would be warm-cache; "
            "pass --allow-warm-cache to run anyway with every figure and headline marked "
            "warm-cache")
        return 2
    log("page cache: " + ("dropped before each measured command" if dropped else
                          "CANNOT be dropped here (not permitted); every figure is marked "
                          "warm-cache (--allow-warm-cache" + (" implied by --smoke)" if
                                                             args.smoke and not
                                                             args.allow_warm_cache else ")")))

    # ---- datasets
    t_data = time.monotonic()
    cache_root = os.path.join(out, "datasets")
    data = {}
    for n in names:
        data[n] = dsm.ensure_dataset(specs[n], args.seed, cache_root, log=log)
    data_s = time.monotonic() - t_data
    log(f"datasets ready in {data_s:.1f} s")
    if not args.no_space_check:
        largest = max((data[n][1].get("bytes", 0) for n in names), default=0)
        why = check_space(out, space_needed(largest, len(active)))
        if why:
            log("ERROR: " + why)
            return 2

    # ---- restore targets
    target_fs = None
    target_desc = "bench/out's filesystem (--target-fs native)"
    if args.target_fs == "ext4":
        size = (40 if "medium" in names else 16) * 2**30
        target_fs, why = targetfs.make_ext4(restore_root, os.path.join(out, "restore-fs.img"), size)
        if target_fs:
            target_desc = target_fs.description
            scen.TRIMMED.append((os.path.abspath(target_fs.mountpoint), target_fs.trim))
        else:
            target_desc = f"bench/out's filesystem (no fresh ext4: {why})"
    log(f"restore targets: {target_desc}")

    # ---- run
    bench = Bench(work=work, logs=logs, timeout=timeout, seed=args.seed, log=log,
                  remote_runs=args.remote_runs, keep=args.keep)
    results_ds, s3res, maint = [], None, None
    run_meta = {"mode": mode, "argv": " ".join(sys.argv[1:] if argv is None else argv),
                "machine": machine_info(out), "restore_targets": target_desc}
    if ("generations" in names and not args.no_maintenance and not args.s3_only
            and not args.scale_only):
        # Smoke: a tiny arca-only check of the wiring (the peers' figures need the full set).
        maint = maintenance.Maintenance(bench, specs["generations"], data["generations"][1], log,
                                        run_meta, only={"arca"} if args.smoke else None,
                                        runs=args.maintenance_runs or (1 if args.smoke else 3))
    try:
        if args.maintenance_only:
            tools_here = [t for t in active if t.scenarios is None]
            if tools_here:
                res = bench.run_generations(specs["generations"], *data["generations"], 1,
                                            tools_here, with_refs=False, restores=False,
                                            maintenance=maint)
                log(f"[generations] backups and maintenance done in {res['seconds']:.0f} s")
        elif not args.s3_only:
            partial_path = os.path.join(out, f"results-{run_id}.partial.json")
            results_ds = _run_datasets(
                args, bench, names, specs, data, active, log, maint,
                checkpoint=lambda r: write_partial(partial_path, run_meta, r, bench))
        if args.s3:
            s3res = s3.run(bench=bench, tools=active, specs=specs, data=data, names=names,
                           runs=args.s3_runs or (1 if args.smoke else 3),
                           latency=args.s3_latency, bandwidth=args.s3_bandwidth, log=log,
                           meta=run_meta, server_kind=args.s3_server)
    finally:
        if target_fs:
            scen.TRIMMED.clear()
            target_fs.close()
    scale = None
    if args.scale:
        scale = maintenance.run_scale(blobs=args.scale_blobs, work=work,
                                      logs=os.path.join(logs, "maintenance"), log=log,
                                      timeout=timeout, build=not args.no_build, meta=run_meta)
        if (scale.get("note") or "").startswith("index_scale failed"):
            bench.failures.append({"where": "maintenance/index scale", "failure": scale["note"],
                                   "known": None, "runs_failed": 1})
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)

    total_s = time.monotonic() - t_start
    bench_s = total_s - setup_s
    machine = machine_info(out)
    machine["filesystem (restore targets)"] = target_desc
    results = {
        "meta": {
            "mode": mode, "argv": " ".join(sys.argv[1:] if argv is None else argv),
            "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - total_s)),
            "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "seconds": total_s,
            "setup_seconds": setup_s, "arca_build_seconds": arca_build_s,
            "peer_setup_seconds": peer_setup_s,
            "dataset_seconds": data_s, "seed": args.seed, "machine": machine,
            "caches_dropped": dropped if bench.caches_dropped is None else bench.caches_dropped,
            "cache_drops": dict(bench.drops),
            "run_id": run_id, "logs": logs,
        },
        "tools": [{"name": t.name, "label": t.label, "peer": t.peer, "available": t.available,
                   "version": t.version, "note": t.note,
                   "settings": SETTINGS[t.name].format(lat=args.remote_latency, bw=args.remote_bandwidth),
                   "verify_note": t.verify_note}
                  for t in tools],
        "datasets": results_ds,
        "failures": bench.failures, "expected_failures": bench.expected_failures,
        "contract": bench.contract,
    }
    if s3res is not None:
        results["s3"] = s3res
    mres = {"generations": maint.result() if maint else None, "scale": scale}
    if maintenance.has_results(mres):
        results["maintenance"] = mres
    results["headline"] = report.headline(results)

    # ---- outputs
    write_outputs(results, os.path.join(out, f"results-{run_id}"),
                  os.path.join(out, f"plots-{run_id}"), not args.smoke and not args.no_docs, log)

    partial_path = os.path.join(out, f"results-{run_id}.partial.json")
    if os.path.exists(partial_path):
        os.unlink(partial_path)  # the whole run's results are written now
    for h in results["headline"]:
        log("headline: " + h)
    for t in tools:
        if not t.available:
            log(f"NOTE: {t.label} skipped: {t.note}")
    for f in bench.expected_failures:
        log(f"known limitation: {f['where']} ({f['runs_failed']} run(s)): {f['failure'][:160]}")
    for c in bench.contract:
        log(f"ARCA CONTRACT VIOLATION: {c}")
    for f in bench.failures:
        log(f"FAILURE: {f['where']} ({f['runs_failed']} run(s)): {f['failure']}")
    log(f"{mode} run finished in {total_s:.0f} s (tool setup incl. builds {setup_s:.0f} s, "
        f"datasets {data_s:.0f} s, benchmark without setup {bench_s:.0f} s)")
    if args.smoke and bench_s > 180 and wanted == expand_tools(DEFAULT_TOOLS):
        log(f"WARNING: smoke took {bench_s:.0f} s without the build, over the 180 s budget")
    return 1 if (bench.failures or bench.contract) else 0


if __name__ == "__main__":
    sys.exit(main())

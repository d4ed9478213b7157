"""Unit tests of the maintenance part: the targets (prune time vs the fastest peer, space freed
vs that peer and vs the peer that freed most, a broken repository never counts), the
index-scale figures,
merging docs/bench/maintenance.json, the docs section, the tools' command lines, and one
forget + prune sequence over a fake tool (shell commands on a folder). No tool is built."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from arcabench import maintenance as mt  # noqa: E402
from arcabench import s3  # noqa: E402
from arcabench.scenarios import Bench, arca_contract_problems, contract_kind  # noqa: E402


def _cell(wall, ok=True, **med):
    return {"ok": ok, "failure": None if ok else "exit 1: broken", "expected_failure": None,
            "runs": [{"wall_s": wall, "rchar": 10, "wchar": 5}], "n": 1,
            "median": dict({"wall_s": wall, "cpu_s": wall, "maxrss_kib": 2048}, **med)}


def part(prune=None, freed=None, broken=()):
    """A generations part: prune walls and bytes freed per tool; `broken` tools fail their
    check after prune."""
    prune = prune or {"arca": 2.0, "restic-latest": 5.0, "rustic": 4.0}
    freed = freed or {"arca": 300, "restic-latest": 250, "rustic": 200}
    scen = {sc: {} for sc in mt.SCENARIOS}
    repo = {}
    for t, w in prune.items():
        for sc in mt.SCENARIOS:
            scen[sc][t] = _cell(w if sc == "prune" else 1.0,
                                ok=not (sc == "check" and t in broken))
        repo[t] = {"bytes_before": 1000, "snapshots_before": 21, "snapshots_after": 5,
                   "bytes_after_forget": 990, "bytes_after_prune": 990 - freed[t]}
    labels = {"arca": "arca", "restic-latest": "restic 0.19", "rustic": "rustic 0.11"}
    return {"meta": {"argv": "--maintenance-only", "date": "today", "git": "abc",
                     "generations": 20, "keep_last": 5, "machine": {"CPU": "cpu"},
                     "loadavg_start": 1.0, "loadavg_end": 2.0, "cores": 2},
            "tools": [{"name": t, "label": labels[t], "peer": t != "arca", "version": "v",
                       "prune_note": "note"} for t in prune],
            "dataset": {"name": "maintenance", "dataset": "generations", "seconds": 10,
                        "scenarios": scen, "repo": repo},
            "notes": []}


SCALE_RAW = {"blobs": 1000, "blobs_per_pack": 100, "data_packs": 10, "index_files": 3,
             "index_bytes": 50_000, "snapshot_used_blobs": 500, "files": 5, "dirs": 1,
             "tree_blobs": 3, "tree_bytes": 20_000, "tree_packs": 1, "generate_s": 0.1,
             "caches_dropped": True, "load_s": 0.5, "rss_before": 1_000_000,
             "hwm_before": 1_000_000, "rss_after_load": 1_030_000, "hwm_after_load": 1_080_000,
             "index_len": 1000, "index_memory_bytes": 32_800, "plan_s": 0.2,
             "rss_after_plan": 1_040_000, "hwm_after_plan": 1_090_000, "plan_trees": 3,
             "plan_used_blobs": 503, "packs_keep": 1, "packs_repack": 8, "packs_delete": 1,
             "lookups": 500, "lookup_s": 0.01}


class TargetTests(unittest.TestCase):
    def test_met(self):
        time_row, fast_row, most_row = mt.target_rows(part())
        self.assertEqual(time_row["best"], "rustic")
        self.assertAlmostEqual(time_row["ratio"], 0.5)
        self.assertTrue(time_row["met"])
        self.assertEqual(fast_row["best"], "rustic")  # the peer of the time row
        self.assertEqual(fast_row["best_label"], "rustic 0.11")
        self.assertEqual(fast_row["best_value"], 200)
        self.assertAlmostEqual(fast_row["ratio"], 300 / 200)
        self.assertEqual(fast_row["limit"], "≥ 1× (the fastest peer)")
        self.assertTrue(fast_row["met"])
        self.assertEqual(most_row["best"], "restic-latest")  # the peer that freed most
        self.assertAlmostEqual(most_row["ratio"], 300 / 250)
        self.assertEqual(most_row["limit"], "≥ 1× (most freed)")
        self.assertTrue(most_row["met"])
        self.assertEqual(set(fast_row), set(time_row))
        self.assertEqual(set(most_row), set(time_row))

    def test_not_met(self):
        rows = mt.target_rows(part(prune={"arca": 2.1, "restic-latest": 5.0, "rustic": 4.0},
                                   freed={"arca": 9, "restic-latest": 250, "rustic": 10}))
        self.assertEqual([r["met"] for r in rows], [False, False, False])

    def test_freed_more_than_the_fastest_peer_only(self):
        # arca frees more than rustic (the fastest peer), less than restic (the most freed).
        time_row, fast_row, most_row = mt.target_rows(
            part(freed={"arca": 240, "restic-latest": 250, "rustic": 200}))
        self.assertEqual(fast_row["best"], "rustic")
        self.assertAlmostEqual(fast_row["ratio"], 240 / 200)
        self.assertTrue(fast_row["met"])
        self.assertEqual(most_row["best"], "restic-latest")
        self.assertAlmostEqual(most_row["ratio"], 240 / 250)
        self.assertFalse(most_row["met"])

    def test_broken_repository_never_counts(self):
        # arca's check after prune failed: all three targets missed, whatever the figures.
        rows = mt.target_rows(part(broken=("arca",)))
        self.assertEqual([r["met"] for r in rows], [False, False, False])
        self.assertIsNone(rows[0]["arca"])
        self.assertIsNone(rows[1]["arca"])
        # A peer that broke its repository is not the yardstick: the fastest peer that
        # succeeded is, for time and for space freed alike.
        time_row, fast_row, most_row = mt.target_rows(
            part(freed={"arca": 240, "restic-latest": 230, "rustic": 260}, broken=("rustic",)))
        self.assertEqual(time_row["best"], "restic-latest")
        self.assertEqual(fast_row["best"], "restic-latest")
        self.assertAlmostEqual(fast_row["ratio"], 240 / 230)
        self.assertTrue(fast_row["met"])
        self.assertNotIn("rustic", fast_row["peers"])
        self.assertEqual(most_row["best"], "restic-latest")
        self.assertNotIn("rustic", most_row["peers"])

    def test_no_arca_or_no_peers(self):
        p = part()
        self.assertEqual(mt.target_rows(dict(p, tools=[t for t in p["tools"]
                                                       if t["name"] != "arca"])), [])
        only = part(prune={"arca": 1.0}, freed={"arca": 5})
        rows = mt.target_rows(only)
        self.assertEqual([r["met"] for r in rows], [None, None, None])
        self.assertEqual([r["best"] for r in rows], [None, None, None])

    def test_freed(self):
        self.assertEqual(mt.freed(part()["dataset"], "arca"), 300)
        self.assertIsNone(mt.freed(part()["dataset"], "kopia"))


class ScaleTests(unittest.TestCase):
    def test_figures(self):
        f = mt.scale_figures(SCALE_RAW)
        self.assertAlmostEqual(f["rss_per_blob"], 30.0)
        self.assertAlmostEqual(f["peak_per_blob"], 80.0)
        self.assertAlmostEqual(f["structure_per_blob"], 32.8)
        self.assertEqual(f["met"], {"load_s": True, "rss_per_blob": True, "plan_s": True})
        f = mt.scale_figures(dict(SCALE_RAW, load_s=5.0, rss_after_load=1_033_000, plan_s=31))
        self.assertEqual(f["met"], {"load_s": False, "rss_per_blob": False, "plan_s": False})
        self.assertEqual(mt.scale_figures({})["met"],
                         {"load_s": None, "rss_per_blob": None, "plan_s": None})

    def test_last_json_line(self):
        self.assertEqual(mt.last_json_line('progress\n{"a": 1}\n'), {"a": 1})
        self.assertIsNone(mt.last_json_line("{broken\n"))


class DocsTests(unittest.TestCase):
    def test_merge_previous(self):
        old = {"generations": {"dataset": "old"}, "scale": {"figures": "old"}}
        self.assertEqual(mt.merge_previous({"generations": {"dataset": "new"}, "scale": None},
                                           old),
                         {"generations": {"dataset": "new"}, "scale": {"figures": "old"}})
        self.assertEqual(mt.merge_previous({"generations": None, "scale": {"n": 3}}, None),
                         {"generations": None, "scale": {"n": 3}})
        self.assertFalse(mt.has_results({"generations": None, "scale": None}))
        # A scale part that could not run (a note only) does not replace measured figures.
        old = {"generations": {"dataset": {"x": 1}}, "scale": {"figures": {"load_s": 1}}}
        new = {"generations": {"dataset": {"y": 2}}, "scale": {"note": "not built"}}
        self.assertEqual(mt.merge_previous(new, old),
                         {"generations": {"dataset": {"y": 2}}, "scale": {"figures": {"load_s": 1}}})
        self.assertEqual(mt.merge_previous(new, None)["scale"], {"note": "not built"})

    def test_render(self):
        m = {"generations": part(), "scale": {"meta": {"date": "d", "git": "g"},
                                              "figures": mt.scale_figures(SCALE_RAW)}}
        text = "\n".join(mt.render(m))
        self.assertTrue(text.startswith(mt.HEADING))
        self.assertIn("| prune wall time | 2.00 s | rustic 0.11: 4.00 s | 0.50× | ≤ 0.5× | yes |",
                      text)
        self.assertIn("| space freed vs the fastest peer | 0 kB | rustic 0.11: 0 kB | 1.50× | "
                      "≥ 1× (the fastest peer) | yes |", text)
        self.assertIn("| space freed vs the peer that freed most | 0 kB | restic 0.19: 0 kB | "
                      "1.20× | ≥ 1× (most freed) | yes |", text)
        self.assertNotIn("Like for like", text)
        self.assertIn("| check after prune | passed | passed | passed |", text)
        self.assertIn("30.0 B | ≤ 32 B | yes |", text)
        self.assertEqual(mt.render(None), [])
        broken = "\n".join(mt.render({"generations": part(broken=("arca",)), "scale": None}))
        self.assertIn("✗ failed", broken)
        self.assertIn("**no**", broken)
        note = "\n".join(mt.render({"generations": None, "scale": {"note": "not built"}}))
        self.assertIn("not measured (not built)", note)
        lines = mt.headline(m)
        self.assertEqual(len(lines), 4)  # three targets, the index at scale
        self.assertIn("prune wall time: arca vs rustic 0.11 0.50×", lines[0])
        self.assertIn("space freed vs the fastest peer: arca vs rustic 0.11 1.50× "
                      "(target ≥ 1× (the fastest peer): met)", lines[1])
        self.assertIn("space freed vs the peer that freed most: arca vs restic 0.19 1.20×",
                      lines[2])

    def test_splice_keeps_other_sections(self):
        doc = ("# arca benchmarks\n\n## Results\n\nr\n\n## S3 on loopback\n\ns\n\n"
               "## Capping (FAST'13)\n\nc\n")
        sec = mt.HEADING + "\n\nfirst\n\n"
        once = s3.splice_section(doc, sec, heading=mt.HEADING)
        self.assertIn("## S3 on loopback\n\ns\n\n" + sec + "## Capping", once)
        again = s3.splice_section(once, mt.HEADING + "\n\nsecond\n\n", heading=mt.HEADING)
        self.assertNotIn("first", again)
        self.assertIn("second", again)
        self.assertIn("## S3 on loopback\n\ns\n", again)
        self.assertIn("## Capping (FAST'13)\n\nc\n", again)


    def test_splice_headline_replaces_only_the_maintenance_lines(self):
        doc = ("# arca benchmarks\n\n## Headline\n\n- **small** — fast\n"
               "- **Maintenance** — prune wall time: old\n- **Maintenance** — freed: old\n"
               "- **Index at scale** — old\n\n## Results\n\n- **Maintenance** — not here\n")
        new = mt.splice_headline(doc, ["**Maintenance** — prune wall time: new",
                                       "**Index at scale** — new"])
        self.assertEqual(new, "# arca benchmarks\n\n## Headline\n\n- **small** — fast\n"
                         "- **Maintenance** — prune wall time: new\n- **Index at scale** — new\n"
                         "\n## Results\n\n- **Maintenance** — not here\n")
        # No maintenance lines yet: after the last item; no headline: unchanged.
        bare = "## Headline\n\n- **small** — fast\n\n## Results\n"
        self.assertEqual(mt.splice_headline(bare, ["**Maintenance** — m"]),
                         "## Headline\n\n- **small** — fast\n- **Maintenance** — m\n\n"
                         "## Results\n")
        self.assertEqual(mt.splice_headline("## Results\n", ["x"]), "## Results\n")


class CommandTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="arcabench-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_command_lines(self):
        from arcabench import tools

        home = os.path.join(self.tmp, "home")
        arca = tools.Arca(home, binary="/bin/arca")
        self.assertEqual(arca.forget_argv("R", 5)[0],
                         ["/bin/arca", "-r", "R", "forget", "--keep-last", "5"])
        self.assertEqual(arca.prune_argv("R")[0], ["/bin/arca", "-r", "R", "prune", "--json"])
        self.assertIn("--dry-run", arca.prune_argv("R", dry_run=True)[0])
        rl = tools.ResticLatest(home, peers_dir=self.tmp)
        self.assertEqual(rl.forget_argv("R", 5)[0][1:], ["-r", "R", "forget", "--keep-last", "5"])
        self.assertEqual(rl.prune_argv("R")[0][1:], ["-r", "R", "prune"])
        self.assertEqual(rl.check_argv("R")[0][1:], ["-r", "R", "check"])
        ru = tools.Rustic(home, peers_dir=self.tmp)
        argv, cwd = ru.prune_argv("R")
        self.assertEqual(argv[1:], ["-r", "R", "prune", "--instant-delete"])
        self.assertEqual(cwd, ru.home)  # no rustic.toml of the working directory is read
        self.assertEqual(ru.prune_argv("R", dry_run=True)[0][1:],
                         ["-r", "R", "--dry-run", "prune", "--instant-delete"])
        for cls in (tools.Kopia, tools.Borg):
            t = cls(home) if cls is tools.Borg else cls(home, peers_dir=self.tmp)
            self.assertIsNone(t.forget_argv("R", 5))
            self.assertIsNone(t.prune_argv("R"))
        self.assertTrue(all(t.prune_note for t in (arca, rl, ru)))

    def test_prune_contract(self):
        self.assertEqual(contract_kind("prune"), "prune")
        self.assertEqual(contract_kind("prune_dry_run"), "prune")
        self.assertEqual(contract_kind("restore_after_prune"), "restore")
        self.assertIsNone(contract_kind("forget"))
        self.assertIsNone(contract_kind("check"))
        ok = {"message_type": "summary", "snapshots": 5, "used_blobs": 1, "unused_blobs": 0,
              "packs_delete": 0, "packs_repack": 0, "freed_bytes": 0,
              "backend": {"requests": 1, "bytes_read": 1, "bytes_written": 0}}
        self.assertEqual(arca_contract_problems(ok, kind="prune"), [])
        bad = dict(ok)
        del bad["freed_bytes"]
        self.assertEqual(arca_contract_problems(bad, kind="prune"),
                         ["freed_bytes missing or not a number"])

    def test_cli_options(self):
        from arcabench import cli

        a = cli.parse_args(["--maintenance-only", "--tools", "arca,restic-latest,rustic"])
        self.assertTrue(a.maintenance_only)
        self.assertTrue(cli.parse_args(["--scale-only"]).scale_only)
        self.assertEqual(a.scale_blobs, 10_000_000)
        import contextlib
        import io

        out = os.path.join(self.tmp, "out")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(cli.main(["--maintenance-only", "--s3-only", "--out", out]), 2)
            self.assertEqual(cli.main(["--maintenance-only", "--datasets", "small", "--out",
                                       out]), 2)
            self.assertEqual(cli.main(["--maintenance-only", "--no-scale", "--tools", "borg",
                                       "--out", out]), 2)
        self.assertIn("exclude each other", err.getvalue())


class FakeTool:
    """A backup tool made of shell commands over a folder: snapshots are files under
    REPO/snapshots, data is REPO/data/<n>; `forget` deletes all but the newest snapshots,
    `prune` deletes data/old*, restore copies REPO/tree into the target."""

    name = "restic"  # a supported name that has no JSON contract to answer to
    label = "restic"
    peer = True
    scenarios = None
    version = "fake"
    prune_note = "fake"
    mtime_tolerance_ns = 0
    verify_dir_mtimes = True
    verify_root_mtime = True

    def __init__(self, home, keep_wrong=False, break_restore=False, arca=False):
        self.home = home
        self.keep_wrong = keep_wrong
        self.break_restore = break_restore
        if arca:  # arca's name: its prune and restore must print arca's JSON summaries
            self.name, self.label, self.peer = "arca", "arca", False
        self.arca = arca
        self.calls = os.path.join(os.path.dirname(home), "calls")  # outside the home, which
        # each run restores from its copy
        os.makedirs(home, exist_ok=True)

    BACKEND = {"requests": 1, "bytes_read": 1, "bytes_written": 0}

    def _json(self, kind):
        if not self.arca:
            return ""
        if kind == "prune":
            obj = {"message_type": "summary", "snapshots": 5, "used_blobs": 3, "unused_blobs": 2,
                   "used_bytes": 950, "packs_delete": 1, "packs_repack": 0, "freed_bytes": 1,
                   "backend": self.BACKEND}
        else:
            obj = {"message_type": "summary", "files_restored": 1, "bytes_written": 7,
                   "duration_seconds": 0.1, "errors": 0, "backend": self.BACKEND}
        return f" && echo '{json.dumps(obj)}'"

    def env(self):
        return dict(os.environ)

    def snapshots(self, repo):
        return sorted(os.listdir(os.path.join(repo, "snapshots")))

    def latest(self, repo):
        return self.snapshots(repo)[-1]

    def forget_argv(self, repo, keep_last):
        keep = keep_last + (1 if self.keep_wrong else 0)
        return (["sh", "-c", f'cd "$1/snapshots" && ls | sort | head -n -{keep} | xargs -r rm',
                 "sh", repo], None)

    def prune_argv(self, repo, dry_run=False):
        log = f' && echo "$@" >> {self.calls}'
        if dry_run:
            return ["sh", "-c", "true" + log + self._json("prune"), "sh", repo], None
        return ["sh", "-c", 'rm -f "$1"/data/old*' + log + self._json("prune"), "sh", repo], None

    def restore_argv(self, repo, snapshot, target):
        src = os.path.join(self.src_parent, "src")
        dest = target + src
        script = 'mkdir -p "$(dirname "$2")" && cp -a "$1/tree" "$2"'
        if self.break_restore:
            script += ' && rm -f "$2"/a'
        script += self._json("restore")
        return ["sh", "-c", script, "sh", repo, dest], None

    def check_argv(self, repo):
        return ["true"], None

    def repo_bytes_read(self, m):
        return None, "n/a"

    def backend_requests(self, m):
        return None

    def known_failure(self, scenario, m):
        return None


class NoDropBench(Bench):
    """Bench without dropping the machine's page cache before each command."""

    def _measure(self, ds, tool, scenario, run_no, argv, cwd=None, env=None):
        from arcabench.measure import run

        return run(argv, env=env, cwd=cwd, drop=False, timeout=self.timeout,
                   log_path=os.path.join(self.logs, ds, tool, f"{scenario}-{run_no}.log"))


class FlowTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="arcabench-test-")
        self.src = os.path.join(self.tmp, "src")
        os.makedirs(self.src)
        with open(os.path.join(self.src, "a"), "w") as f:
            f.write("content")
        self.repo = os.path.join(self.tmp, "repo")
        os.makedirs(os.path.join(self.repo, "snapshots"))
        os.makedirs(os.path.join(self.repo, "data"))
        for i in range(8):
            open(os.path.join(self.repo, "snapshots", f"s{i:02}"), "w").close()
        for n, size in (("old1", 1000), ("old2", 500), ("live", 300)):
            with open(os.path.join(self.repo, "data", n), "wb") as f:
                f.write(b"x" * size)
        import subprocess

        subprocess.run(["cp", "-a", self.src, os.path.join(self.repo, "tree")], check=True)
        self.lines = []
        self.bench = NoDropBench(work=os.path.join(self.tmp, "work"), logs=os.path.join(self.tmp, "logs"),
                           timeout=30, seed=1, log=self.lines.append)
        spec = types.SimpleNamespace(name="generations", generations=7)
        self.m = mt.Maintenance(self.bench, spec, {"files": 1}, self.lines.append,
                                {"argv": "", "machine": {}})

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def tool(self, **kw):
        t = FakeTool(os.path.join(self.tmp, "home"), **kw)
        t.src_parent = self.tmp
        return t

    def test_sequence(self):
        self.m.run_tool(self.tool(), self.repo, self.src)
        self.m.run_all()
        p = self.m.result()
        ds = p["dataset"]
        self.assertEqual(self.bench.failures, [])
        self.assertEqual(ds["repo"]["restic"]["snapshots_before"], 8)
        self.assertEqual(ds["repo"]["restic"]["snapshots_after"], 5)
        self.assertEqual(mt.freed(ds, "restic"), 1500)
        self.assertTrue(mt.tool_ok(ds, "restic"))
        self.assertEqual(ds["scenarios"]["restore_after_prune"]["restic"]["runs"][0]["verify"]
                         ["files"], 1)
        json.dumps(p)  # serialisable as maintenance.json

    def test_forget_keeping_the_wrong_count_fails(self):
        self.m.run_tool(self.tool(keep_wrong=True), self.repo, self.src)
        self.m.run_all()
        self.assertIn("forget left 6 snapshots", self.bench.failures[0]["failure"])
        self.assertNotIn("prune", self.m.res["scenarios"])

    def test_broken_restore_fails(self):
        self.m.run_tool(self.tool(break_restore=True), self.repo, self.src)
        self.m.run_all()
        where = [f["where"] for f in self.bench.failures]
        self.assertEqual(where, ["maintenance/restore_after_prune/restic"])
        self.assertFalse(mt.tool_ok(self.m.result()["dataset"], "restic"))

    def test_arca_runs_on_fresh_copies(self):
        t = self.tool(arca=True)
        self.m.runs = 2
        self.m.run_tool(t, self.repo, self.src)
        self.assertFalse(os.path.exists(self.repo))  # taken over
        self.m.run_all()
        self.assertEqual(self.bench.failures, [])
        self.assertEqual(self.bench.contract, [])
        ds = self.m.result()["dataset"]
        self.assertEqual([x["name"] for x in self.m.tools], ["arca"])  # no twin
        self.assertTrue(mt.tool_ok(ds, "arca"))
        self.assertEqual(ds["repo"]["arca"]["snapshots_before"], 8)
        with open(t.calls) as f:
            calls = f.read().split()
        self.assertEqual(calls.count("--max-unused"), 0)  # arca's own default
        # Two runs each, on fresh copies: the same bytes freed both times.
        self.assertEqual(len(ds["scenarios"]["prune"]["arca"]["runs"]), 2)
        self.assertEqual(ds["repo"]["arca"]["freed_runs"], [1500, 1500])
        self.assertEqual(os.listdir(self.m.work), [])  # the copies are gone

    def test_unsupported_tool_is_noted(self):
        t = self.tool()
        t.name, t.label = "borg", "borg 1.2"
        self.m.run_tool(t, self.repo, self.src)
        self.m.run_all()
        self.assertIsNone(self.m.result())
        self.assertIn("borg 1.2: not in the maintenance part", self.m.notes[0])


if __name__ == "__main__":
    unittest.main()


class MedianTests(unittest.TestCase):
    """Every figure of the maintenance table from the same statistic (review 26)."""

    def test_repository_sizes_and_prune_io_are_medians(self):
        p = part()
        ds = p["dataset"]
        ds["repo"]["arca"]["bytes_after_prune_runs"] = [700, 900, 800]
        ds["repo"]["arca"]["bytes_after_prune"] = 900  # the last run's
        self.assertEqual(mt.repo_figure(ds, "arca", "bytes_after_prune"), 800)
        self.assertEqual(mt.repo_figure(ds, "rustic", "bytes_after_prune"), 790)  # older results
        c = ds["scenarios"]["prune"]["arca"]
        c["runs"] = [{"rchar": 1, "wchar": 2}, {"rchar": 5, "wchar": 6}, {"rchar": 3, "wchar": 4}]
        c["median"].update(rchar=3, wchar=4)
        self.assertEqual(mt.prune_io(ds, "arca"), (3, 4, "median"))
        self.assertEqual(mt.prune_io(ds, "rustic"), (10, 5, "first run"))
        p["meta"]["runs"] = 3
        text = "\n".join(mt.render_generations(p))
        self.assertIn("prune bytes read / written (rchar / wchar; first run)", text)
        self.assertIn("the repository sizes: the last run's", text)
        for t in ("restic-latest", "rustic"):
            ds["repo"][t]["bytes_after_prune_runs"] = [ds["repo"][t]["bytes_after_prune"]]
            ds["scenarios"]["prune"][t]["median"].update(rchar=10, wchar=5)
        text = "\n".join(mt.render_generations(p))
        self.assertIn("prune bytes read / written (rchar / wchar; median)", text)
        self.assertIn("every figure the median of the runs", text)

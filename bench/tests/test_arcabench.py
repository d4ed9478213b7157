"""Unit tests of the harness itself: determinism of the datasets, that verification catches
every kind of difference, the tools' command lines and the --tools aliases (no network, no
builds). Run: python3 -m unittest discover -s bench/tests (bench/run --smoke runs them first)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from arcabench import datasets as d  # noqa: E402
from arcabench.measure import last_json_object, run  # noqa: E402
from arcabench.tools import parse_size  # noqa: E402
from arcabench.verify import verify_tree  # noqa: E402

TINY = d.DatasetSpec("tiny", 40, 12 * d.MiB, 3 * d.MiB, 0.25, change_frac=0.1, add_frac=0.05)


def tree_digest(root: str) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for n in sorted(filenames + [x for x in dirnames if os.path.islink(os.path.join(dirpath, x))]):
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, root)} {st.st_mode} {st.st_mtime_ns} {st.st_size}".encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            else:
                with open(p, "rb") as f:
                    h.update(f.read())
        st = os.lstat(dirpath)
        h.update(f"{os.path.relpath(dirpath, root)} {st.st_mode} {st.st_mtime_ns}".encode())
    return h.hexdigest()


class DatasetTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="arcabench-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_deterministic_and_parallel_equals_serial(self):
        a, b = os.path.join(self.tmp, "a"), os.path.join(self.tmp, "b")
        d.materialize(d.plan_dataset(TINY, 7), a, workers=2)
        d.materialize(d.plan_dataset(TINY, 7), b, workers=1)
        self.assertEqual(tree_digest(a), tree_digest(b))
        c = os.path.join(self.tmp, "c")
        d.materialize(d.plan_dataset(TINY, 8), c)
        self.assertNotEqual(tree_digest(a), tree_digest(c))

    def test_plan_shape(self):
        plan = d.plan_dataset(d.FULL_SPECS["small"], 1)
        s = d.plan_summary(d.FULL_SPECS["small"], plan)
        self.assertEqual(s["files"], 1000)
        self.assertLessEqual(s["largest_file"], 10 * d.MiB)
        self.assertAlmostEqual(s["duplicated_share"], 0.2, delta=0.03)
        self.assertTrue(0.25 < s["text_share"] < 0.6)
        self.assertTrue(0.9 * d.GiB < s["bytes"] <= 1.05 * d.GiB)

    def test_duplicates_are_unaligned_copies(self):
        plan = d.plan_dataset(d.FULL_SPECS["small"], 1)
        copies = [seg for f in plan.files for seg in f.segments if seg[0] == "c"]
        self.assertTrue(copies)
        self.assertTrue(any(seg[4] % 4096 for seg in copies))
        seg = copies[0]
        src = d.fresh_bytes(seg[1], seg[2], seg[3])
        self.assertEqual(d.segment_bytes(seg), src[seg[4]:seg[4] + seg[5]])

    def test_text_compresses_random_does_not(self):
        import zlib

        t = d.fresh_bytes(1, "t", 1 << 20)
        b = d.fresh_bytes(1, "b", 1 << 20)
        self.assertLess(len(zlib.compress(t, 6)), 0.7 * len(t))
        self.assertGreater(len(zlib.compress(b, 6)), 0.99 * len(b))

    def test_mutate_deterministic(self):
        a, b = os.path.join(self.tmp, "a"), os.path.join(self.tmp, "b")
        plan = d.plan_dataset(TINY, 3)
        d.materialize(plan, a)
        subprocess.run(["cp", "-a", a, b], check=True)
        ca = d.mutate(a, TINY, 3, "gen", 1)
        cb = d.mutate(b, TINY, 3, "gen", 1)
        self.assertEqual(ca, cb)
        self.assertGreaterEqual(ca["changed_files"], 1)
        # only the mtimes of the directories that got new files (set to 'now') may differ
        v = verify_tree(a, b)
        self.assertTrue(all(e.split(":")[0].endswith("/") and "mtime" in e for e in v.examples),
                        v.examples)

    def test_damage_and_touch(self):
        a = os.path.join(self.tmp, "a")
        d.materialize(d.plan_dataset(TINY, 3), a)
        ref = os.path.join(self.tmp, "ref")
        subprocess.run(["cp", "-a", a, ref], check=True)
        info = d.damage(a, 1)
        self.assertEqual(info["deleted"] + info["modified"] + info["untouched"], 40)
        self.assertGreaterEqual(info["deleted"], 10)
        self.assertFalse(verify_tree(ref, a).ok)
        shutil.rmtree(a)
        subprocess.run(["cp", "-a", ref, a], check=True)
        d.touch_all(a)
        v = verify_tree(ref, a)
        self.assertFalse(v.ok)
        self.assertTrue(all("mtime" in e for e in v.examples))


class VerifyTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="arcabench-test-")
        self.a = os.path.join(self.tmp, "a")
        self.b = os.path.join(self.tmp, "b")
        d.materialize(d.plan_dataset(TINY, 5), self.a)
        subprocess.run(["cp", "-a", self.a, self.b], check=True)
        self.files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(self.b) for f in fs
                            if os.path.isfile(os.path.join(dp, f)) and not os.path.islink(os.path.join(dp, f))
                            and os.path.getsize(os.path.join(dp, f)) > 100)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assertCaught(self, needle):
        v = verify_tree(self.a, self.b)
        self.assertFalse(v.ok)
        self.assertTrue(any(needle in e for e in v.examples), v.examples)

    def test_identical_copy_is_ok(self):
        v = verify_tree(self.a, self.b)
        self.assertTrue(v.ok, v.examples)
        self.assertEqual(v.files, 40)

    def test_content_change_keeping_size_and_mtime(self):
        p = self.files[0]
        st = os.stat(p)
        with open(p, "r+b") as f:
            f.seek(st.st_size // 2)
            x = f.read(1)
            f.seek(st.st_size // 2)
            f.write(bytes([x[0] ^ 1]))
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.assertCaught("content differs")

    def test_verifying_moves_no_atime_of_the_restored_tree(self):
        paths = [os.path.join(d, n) for d, _, names in os.walk(self.b) for n in names + ["."]]
        paths = [p for p in paths if not os.path.islink(p)]
        # Atimes older than the mtimes: any read would move them (relatime).
        for p in paths:
            st = os.stat(p)
            os.utime(p, ns=(st.st_mtime_ns - 10**12, st.st_mtime_ns))
        before = {p: os.stat(p).st_atime_ns for p in paths}
        self.assertTrue(verify_tree(self.a, self.b).ok)
        self.assertEqual(before, {p: os.stat(p).st_atime_ns for p in paths})

    def test_mtime_ns(self):
        p = self.files[1]
        st = os.stat(p)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
        self.assertCaught("mtime")

    def test_mode(self):
        os.chmod(self.files[2], 0o666)
        self.assertCaught("mode")

    def test_missing_and_extra(self):
        os.unlink(self.files[3])
        self.assertCaught("missing")
        with open(os.path.join(self.b, "extra"), "w"):
            pass
        self.assertCaught("unexpected extra")

    def test_symlink_target(self):
        links = [os.path.join(dp, f) for dp, ds_, fs in os.walk(self.b) for f in fs + ds_
                 if os.path.islink(os.path.join(dp, f))]
        self.assertTrue(links)
        mt = os.lstat(links[0]).st_mtime_ns
        os.unlink(links[0])
        os.symlink("elsewhere", links[0])
        os.utime(links[0], ns=(mt, mt), follow_symlinks=False)
        self.assertCaught("symlink")

    def test_dir_mtime(self):
        sub = next(os.path.join(self.b, n) for n in os.listdir(self.b)
                   if os.path.isdir(os.path.join(self.b, n)) and not os.path.islink(os.path.join(self.b, n)))
        os.utime(sub, ns=(0, 0))
        self.assertCaught("mtime")


class MeasureTests(unittest.TestCase):
    def test_run_measures_child(self):
        with tempfile.TemporaryDirectory() as tmp:
            m = run(["sh", "-c", "head -c 3000000 /dev/zero | cat > /dev/null; echo '{\"a\": 1}'"],
                    log_path=os.path.join(tmp, "x.log"))
            self.assertEqual(m.exit_code, 0)
            self.assertEqual(m.summary, {"a": 1})
            self.assertGreaterEqual(m.rchar, 3_000_000)
            self.assertGreater(m.maxrss_kib, 0)
            m = run(["sh", "-c", "exit 3"], log_path=os.path.join(tmp, "y.log"))
            self.assertEqual(m.exit_code, 3)
            m = run(["sleep", "5"], log_path=os.path.join(tmp, "z.log"), timeout=0.5)
            self.assertTrue(m.timed_out)
            self.assertLess(m.wall_s, 4)

    def test_arca_contract(self):
        from arcabench.scenarios import arca_contract_problems

        backend = {"requests": 3, "bytes_read": 10, "bytes_written": 0}
        ok = {"message_type": "summary", "files_restored": 1, "bytes_written": 2,
              "duration_seconds": 0.5, "errors": 0, "backend": backend}
        self.assertEqual(arca_contract_problems(ok, True), [])
        self.assertTrue(arca_contract_problems(None, True))
        self.assertTrue(arca_contract_problems(dict(ok, backend={"requests": 1}), True))
        backup = {"message_type": "summary", "snapshot_id": "a" * 64, "files_new": 1,
                  "files_changed": 0, "files_unmodified": 0, "data_added": 5,
                  "data_added_packed": 4, "total_bytes_processed": 5, "duration_seconds": 0.1,
                  "backend": backend}
        self.assertEqual(arca_contract_problems(backup, False), [])
        self.assertTrue(arca_contract_problems(dict(backup, snapshot_id="abc"), False))

    def test_helpers(self):
        self.assertEqual(last_json_object('x\n{"b": 2}\nnot json\n'), {"b": 2})
        self.assertIsNone(last_json_object("nothing"))
        self.assertEqual(parse_size("100MB"), 100_000_000)
        self.assertEqual(parse_size("1MiB"), 1 << 20)


class ToolTests(unittest.TestCase):
    """Command lines and settings of the peers; nothing is run or built."""

    def setUp(self):
        from arcabench import tools

        self.t = tools
        self.tmp = tempfile.mkdtemp(prefix="arcabench-test-")
        self.home = os.path.join(self.tmp, "home")
        self.peers = os.path.join(self.tmp, "peers")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_tools_aliases(self):
        from arcabench.cli import DEFAULT_TOOLS, SETTINGS, TOOL_ORDER, expand_tools, parse_args

        self.assertEqual(parse_args([]).tools, DEFAULT_TOOLS)
        self.assertEqual(expand_tools(DEFAULT_TOOLS), ["arca", "restic", "borg"])
        self.assertEqual(expand_tools("strong"),
                         ["arca", "rustic", "restic-latest", "kopia", "borg"])
        self.assertEqual(expand_tools("all"),
                         ["arca", "rustic", "restic-latest", "restic", "kopia", "borg"])
        self.assertEqual(expand_tools("strong,restic"), expand_tools("all"))
        self.assertEqual(expand_tools(" kopia, rustic ,kopia,"), ["rustic", "kopia"])
        self.assertEqual(expand_tools("arca-remote,arca"), ["arca", "arca-remote"])
        with self.assertRaises(ValueError):
            expand_tools("arca,bup")
        self.assertEqual(set(SETTINGS), set(TOOL_ORDER))

    def test_pinned_versions(self):
        for v in (self.t.RUSTIC_VERSION, self.t.RESTIC_LATEST_VERSION, self.t.KOPIA_VERSION):
            self.assertRegex(v, r"^\d+\.\d+\.\d+$")
        self.assertEqual(self.t.ResticLatest.label, "restic " + ".".join(
            self.t.RESTIC_LATEST_VERSION.split(".")[:2]))

    def test_restic_latest(self):
        r = self.t.ResticLatest(self.home, self.peers)
        self.assertEqual(r.binary, os.path.join(self.peers, "bin", "restic"))
        argv, cwd = r.backup_argv("/r", "/s")
        self.assertEqual(argv, [r.binary, "-r", "/r", "--compression", "auto", "backup", "--json", "/s"])
        self.assertEqual(r.restore_argv("/r", "latest", "/t")[0],
                         [r.binary, "-r", "/r", "restore", "latest", "--target", "/t"])
        env = r.env()
        self.assertTrue(env["RESTIC_CACHE_DIR"].startswith(r.home + os.sep))
        self.assertEqual(env["HOME"], r.home)
        self.assertEqual(env["RESTIC_PASSWORD"], self.t.PASSWORD)
        self.assertEqual(self.t.Restic(self.home).binary, "restic")  # Debian's, from PATH

    def test_rustic(self):
        r = self.t.Rustic(self.home, self.peers)
        self.assertEqual(r.binary, os.path.join(self.peers, "cargo", "bin", "rustic"))
        argv, cwd = r.backup_argv("/r", "/s")
        self.assertEqual(argv, [r.binary, "-r", "/r", "backup", "--json", "/s"])
        self.assertEqual(cwd, r.home)  # no rustic.toml from the harness's working directory
        argv, cwd = r.restore_argv("/r", "latest", "/t")
        self.assertEqual(argv, [r.binary, "-r", "/r", "restore", "latest", "/t"])
        os.environ["RUSTIC_REPOSITORY"] = "/elsewhere"
        try:
            env = r.env()
        finally:
            del os.environ["RUSTIC_REPOSITORY"]
        self.assertNotIn("RUSTIC_REPOSITORY", env)
        self.assertEqual(env["RUSTIC_PASSWORD"], self.t.PASSWORD)
        self.assertTrue(env["RUSTIC_CACHE_DIR"].startswith(r.home + os.sep))
        self.assertTrue(env["XDG_CONFIG_HOME"].startswith(r.home + os.sep))
        self.assertFalse(r.verify_root_mtime)
        self.assertTrue(r.verify_dir_mtimes)

    def test_kopia(self):
        k = self.t.Kopia(self.home, self.peers)
        self.assertEqual(k.binary, os.path.join(self.peers, "bin", "kopia"))
        cfg = ["--config-file", os.path.join(k.home, "repository.config")]
        argv, cwd = k.backup_argv("/r", "/s")
        self.assertEqual(argv, [k.binary, "snapshot", "create", "/s", "--json", *cfg])
        k._source_paths["abc"] = "/data/src"
        argv, cwd = k.restore_argv("/r", "abc", "/t")
        # the snapshot root's contents go to TARGET + absolute source path
        self.assertEqual(argv, [k.binary, "snapshot", "restore", "abc", "/t/data/src", *cfg])
        env = k.env()
        self.assertEqual(env["KOPIA_PASSWORD"], self.t.PASSWORD)
        self.assertEqual(env["KOPIA_CHECK_FOR_UPDATES"], "false")
        self.assertFalse(k.verify_dir_mtimes)
        self.assertEqual(k.mtime_tolerance_ns, 1000)
        self.assertTrue(k.verify_note)

    def test_time_key(self):
        stamps = ["2026-11-21T17:07:36.5945Z", "2026-11-21T17:07:36.59Z", "2026-11-21T17:07:36Z",
                  "2026-11-21T18:07:36.1+01:00", "2026-11-21T17:07:35.999999999+00:00"]
        self.assertEqual(sorted(stamps, key=self.t._time_key),
                         [stamps[4], stamps[2], stamps[3], stamps[1], stamps[0]])

    def test_source_built_uses_cache_and_reports_failed_build(self):
        t = self.t

        class Fake(t.SourceBuilt, t.Tool):
            name = "fake"
            pinned = "1.2.3"
            version_args = ("--version",)
            builds = 0

            def _build(self, log):
                self.builds += 1
                return "no toolchain here"

        f = Fake(self.home)
        f.binary = os.path.join(self.tmp, "fake")
        self.assertFalse(f.ensure_built(lambda m: None))  # missing: build attempted, failed
        self.assertEqual(f.builds, 1)
        self.assertIn("not built: no toolchain here", f.note)
        with open(f.binary, "w") as fh:
            fh.write("#!/bin/sh\necho 'fake v1.2.3'\n")
        os.chmod(f.binary, 0o755)
        self.assertTrue(f.ensure_built(lambda m: None))  # cached binary of the pinned version
        self.assertEqual(f.builds, 1)
        f.pinned = "1.2.4"
        self.assertFalse(f.ensure_built(lambda m: None))  # other version: rebuild attempted
        self.assertEqual(f.builds, 2)

    def test_verify_without_dir_mtimes(self):
        a, b = os.path.join(self.tmp, "a"), os.path.join(self.tmp, "b")
        for root in (a, b):
            os.makedirs(os.path.join(root, "sub"))
            with open(os.path.join(root, "sub", "f"), "w") as fh:
                fh.write("x")
            os.utime(os.path.join(root, "sub", "f"), ns=(10**18, 10**18))
            os.utime(root, ns=(10**18, 10**18))
        os.utime(os.path.join(a, "sub"), ns=(5 * 10**17, 5 * 10**17))
        os.utime(os.path.join(b, "sub"), ns=(10**18, 10**18))
        self.assertFalse(verify_tree(a, b).ok)
        self.assertTrue(verify_tree(a, b, dir_mtimes=False).ok)
        os.utime(b, ns=(0, 0))  # the root's mtime is still checked
        self.assertFalse(verify_tree(a, b, dir_mtimes=False).ok)
        self.assertTrue(verify_tree(a, b, dir_mtimes=False, root_mtime=False).ok)
        self.assertFalse(verify_tree(a, b, root_mtime=False).ok)  # sub's mtime still checked


class ReportTests(unittest.TestCase):
    """Best peer over every peer present, with 5-7 tools."""

    @staticmethod
    def results():
        names = ["arca", "rustic", "restic-latest", "restic", "kopia", "borg", "arca-remote"]
        walls = {"arca": 1.0, "rustic": 3.0, "restic-latest": 2.0, "restic": 5.0, "kopia": 2.5,
                 "borg": 4.0, "arca-remote": 9.0}

        def cell(w, ok=True):
            return {"ok": ok, "failure": None if ok else "exit 1: x", "expected_failure": None,
                    "runs": [], "n": 1, "median": {"wall_s": w, "cpu_s": w, "maxrss_kib": 1024,
                                                   "repo_read_bytes": None, "restored_bytes": None,
                                                   "requests": None}}

        scen = {"backup_first": {t: cell(w) for t, w in walls.items()},
                "restore_full": {t: cell(w) for t, w in walls.items()}}
        scen["restore_full"]["restic-latest"] = cell(0.1, ok=False)  # failed: not the best
        return {
            "meta": {"argv": "", "finished": "now", "mode": "smoke", "seconds": 1, "seed": 1,
                     "machine": {}, "caches_dropped": True},
            "tools": [{"name": t, "label": t.upper(), "peer": not t.startswith("arca"),
                       "available": True, "version": "v", "note": "", "settings": "s"} for t in names],
            "datasets": [{"name": "small", "spec": {"description": "d"}, "runs": 1,
                          "manifest": {"files": 1, "dirs": 1, "symlinks": 0, "bytes": 1,
                                       "text_share": 0, "duplicated_share": 0, "key": "k"},
                          "scenarios": scen, "references": {}, "repo": {}, "series": {},
                          "notes": []}],
            "failures": [], "expected_failures": [], "contract": [],
        }

    def test_best_peer_and_tables(self):
        from arcabench import report

        res = self.results()
        cells = res["datasets"][0]["scenarios"]
        self.assertEqual(report.best_peer(res, cells["backup_first"]), ("restic-latest", 2.0))
        self.assertEqual(report.best_peer(res, cells["restore_full"]), ("kopia", 2.5))
        res["headline"] = report.headline(res)
        self.assertIn("first backup 2.00× (RESTIC-LATEST)", res["headline"][0])
        self.assertIn("full restore (empty target) 2.50× (KOPIA; left out: RESTIC-LATEST "
                      "failed)", res["headline"][0])
        self.assertTrue(res["headline"][0].startswith("**small** (1 run) — "))
        md = report.render(res)
        self.assertIn("| scenario | ARCA | RUSTIC | RESTIC-LATEST | RESTIC | KOPIA | BORG | "
                      "ARCA-REMOTE | arca vs best peer |", md)
        self.assertIn("| **2.0× faster** (RESTIC-LATEST) |", md)

    def test_backup_profile_of_the_median_run(self):
        from arcabench import report

        res = self.results()
        cell = res["datasets"][0]["scenarios"]["backup_first"]["arca"]

        def run(wall, busy):
            return {"wall_s": wall, "summary": {
                "profile": [{"name": "read", "threads": 12, "busy_seconds": busy,
                             "wait_input_seconds": 0.5, "wait_output_seconds": 0.25}],
                "phases": [{"name": "pipeline", "seconds": wall - 0.1}]}}

        cell["runs"] = [run(3.0, 3.5), run(1.0, 1.5), run(2.0, 2.5)]
        res["headline"] = report.headline(res)
        md = report.render(res)
        self.assertIn("**Profile of arca's first backup here** (its median run, 2.00 s wall", md)
        self.assertIn("| read | 12 | 2.50 s | 0.50 s | 0.25 s |", md)
        self.assertIn("Phases: pipeline 1.90 s.", md)
        cell["runs"] = []  # no summary: no section
        self.assertNotIn("Profile of arca's first backup", report.render(res))

    def test_plots_with_seven_tools(self):
        from arcabench import plots

        if not plots.available():
            self.skipTest("matplotlib not installed")
        res = self.results()
        res["datasets"][0]["series"] = {
            t: [{"generation": g, "wall_s": 1.0, "cpu_s": 1.0, "repo_bytes": 2**20 * g,
                 "failed": False} for g in (1, 2)] for t in ("arca", "rustic", "kopia")}
        with tempfile.TemporaryDirectory() as tmp:
            made = plots.make_all(res, tmp)
            self.assertEqual(len(made), 2)
            self.assertTrue(all(os.path.getsize(p) > 1000 for p in made))
        self.assertEqual(len({plots.color(t["name"]) for t in res["tools"]}), 7)


if __name__ == "__main__":
    unittest.main()


class RunGuardTests(unittest.TestCase):
    """The checks that keep a long run from dying late and losing what it measured."""

    def test_space_check_refuses_when_the_estimate_exceeds_free_space(self):
        from arcabench.cli import check_space, space_needed
        with tempfile.TemporaryDirectory() as t:
            free = shutil.disk_usage(t).free
            self.assertIsNone(check_space(t, 1))
            why = check_space(t, free + 2**40)
            self.assertIsNotNone(why)
            self.assertIn(t, why)
            self.assertIn("--no-space-check", why)
        # More tools and more data need more room; an empty run still wants the slack.
        self.assertGreater(space_needed(2**30, 6), space_needed(2**30, 2))
        self.assertGreater(space_needed(2**31, 2), space_needed(2**30, 2))
        self.assertGreaterEqual(space_needed(0, 0), 2**30)

    def test_partial_results_hold_every_finished_dataset(self):
        import json
        from arcabench.cli import write_partial
        with tempfile.TemporaryDirectory() as t:
            p = os.path.join(t, "results-x.partial.json")
            write_partial(p, {"mode": "full"}, [{"name": "small"}])
            write_partial(p, {"mode": "full"}, [{"name": "small"}, {"name": "many"}])
            with open(p) as f:
                got = json.load(f)
            self.assertEqual([d["name"] for d in got["datasets"]], ["small", "many"])
            self.assertTrue(got["meta"]["partial"])
            self.assertEqual(os.listdir(t), ["results-x.partial.json"])

    def test_removing_under_a_trimmed_mount_trims_it_and_nothing_else(self):
        from arcabench import scenarios
        with tempfile.TemporaryDirectory() as t:
            mount = os.path.join(t, "restore")
            os.makedirs(os.path.join(mount, "arca", "d"))
            os.makedirs(os.path.join(t, "repos", "arca"))
            calls = []
            scenarios.TRIMMED.append((mount, lambda: calls.append(1)))
            try:
                scenarios._rm(os.path.join(t, "repos", "arca"))
                self.assertEqual(calls, [])
                scenarios._rm(os.path.join(mount, "arca"))
                self.assertEqual(calls, [1])
                self.assertFalse(os.path.exists(os.path.join(mount, "arca")))
            finally:
                scenarios.TRIMMED.clear()


class HonestFiguresTests(unittest.TestCase):
    """Review 26: comparable bytes read, peers left out of best peer named, dead peers marked,
    arca's binary identified, warm cache marked, order rotated, single runs said."""

    def test_rotation(self):
        from arcabench.scenarios import rotated
        self.assertEqual(rotated([1, 2, 3], 0), [1, 2, 3])
        self.assertEqual(rotated([1, 2, 3], 1), [2, 3, 1])
        self.assertEqual(rotated([1, 2, 3], 5), [3, 1, 2])
        self.assertEqual(rotated([], 4), [])
        # over n runs, every tool starts once
        self.assertEqual({rotated(list("abcd"), i)[0] for i in range(4)}, set("abcd"))

    def test_left_out_peers_are_named(self):
        from arcabench import report
        res = ReportTests.results()
        cell = res["datasets"][0]["scenarios"]["restore_full"]["restic-latest"]
        cell["expected_failure"] = "symlinks exist"
        res["headline"] = report.headline(res)
        self.assertIn("left out: RESTIC-LATEST failed (known limitation: symlinks exist)",
                      res["headline"][0])
        # first backup: every peer ran; nothing left out there
        self.assertIn("first backup 2.00× (RESTIC-LATEST);", res["headline"][0])

    def test_dead_peer_cells_marked_and_named(self):
        from arcabench import report, restore_targets
        res = ReportTests.results()
        ds = res["datasets"][0]
        ds["scenarios"]["backup_first"]["borg"]["ok"] = False
        ds["scenarios"]["backup_first"]["borg"]["failure"] = "exit 2: nope"
        del ds["scenarios"]["restore_full"]["borg"]
        ds["dead"] = {"borg": "first backup failed: exit 2: nope"}
        lo = restore_targets.left_out(res, ds, ds["scenarios"]["restore_full"])
        self.assertIn("not run", lo["borg"])
        md = report.render(dict(res, headline=report.headline(res)))
        self.assertIn("✗ not run", md)
        self.assertIn("BORG not run (first backup failed", report.headline(res)[0])

    def test_warm_cache_marks_everything(self):
        from arcabench import report
        res = ReportTests.results()
        res["meta"]["caches_dropped"] = False
        res["meta"]["cache_drops"] = {"ok": 3, "failed": 2}
        res["headline"] = report.headline(res)
        self.assertTrue(all(h.startswith("[warm page cache] ") for h in res["headline"]))
        md = report.render(res)
        self.assertIn("## Headline *(warm page cache)*", md)
        self.assertIn("**Wall time** *(warm page cache)*", md)
        self.assertIn("NO (2 of 5 drops failed)", md)

    def test_bytes_read_column_is_one_measure(self):
        from arcabench import report
        res = ReportTests.results()
        for cells in res["datasets"][0]["scenarios"].values():
            for c in cells.values():
                c["median"]["process_read_bytes"] = 1 << 20
        md = report.render(dict(res, headline=[]))
        self.assertIn("**Bytes read by the process (repository, caches and target files)**", md)
        self.assertNotIn("NOT comparable", md)
        # older results: the mixed column is labelled as such
        md = report.render(dict(ReportTests.results(), headline=[]))
        self.assertIn("NOT comparable across tools", md)

    def test_remote_headline_says_snapshot_and_run_count(self):
        from arcabench import report
        res = ReportTests.results()
        res["datasets"][0]["mutations_before_restores"] = 3
        res["headline"] = report.headline(res)
        remote = [h for h in res["headline"] if "ARCA-REMOTE" in h][0]
        self.assertTrue(remote.startswith("**small** (1 run) — "))
        self.assertIn("of its first backup's snapshot 9.0 s", remote)
        self.assertIn("after 3 mutation(s)", remote)

    def test_arca_version_names_the_binary(self):
        from arcabench.tools import describe_arca_version
        with tempfile.TemporaryDirectory() as t:
            b = os.path.join(t, "arca")
            with open(b, "wb") as f:
                f.write(b"binary")
            digest = hashlib.sha256(b"binary").hexdigest()[:12]
            v = describe_arca_version("arca 0.1.0", b, "abc1234", False, built=False)
            self.assertIn(f"sha256 {digest}", v)
            self.assertIn(b, v)
            self.assertIn("git abc1234 is the git HEAD of the checkout, binary not built by the "
                          "harness", v)
            v = describe_arca_version("arca 0.1.0", b, "abc1234", True, built=True)
            self.assertIn("git abc1234+dirty, built by the harness", v)

    def test_every_drop_is_tracked(self):
        from arcabench.scenarios import Bench
        b = Bench(work="/tmp", logs="/tmp", timeout=1, seed=1, log=print)
        b.note_drop(True)
        self.assertTrue(b.caches_dropped)
        b.note_drop(False)
        b.note_drop(True)
        self.assertFalse(b.caches_dropped)
        self.assertEqual(b.drops, {"ok": 2, "failed": 1})

    def test_refuses_warm_cache_without_the_flag(self):
        from arcabench import cli
        self.assertTrue(cli.parse_args(["--allow-warm-cache"]).allow_warm_cache)
        self.assertFalse(cli.parse_args([]).allow_warm_cache)

    def test_capping_render_says_cache_and_verification(self):
        import json
        from arcabench import capping
        row = {"cap": 0, "repo_bytes": 1e6, "capped_bytes": 0, "packs_read": 1,
               "packs_per_mb": 0.1, "restore_median_s": 1.0}
        with tempfile.TemporaryDirectory() as t:
            p = os.path.join(t, "c.json")
            for extra, want in (({}, "whether the drop succeeded was not recorded"),
                                ({"cold_cache": True, "verified": True}, "from a cold page cache"),
                                ({"cold_cache": False, "verified": True}, "WARM page cache")):
                with open(p, "w") as f:
                    json.dump(dict({"date": "d", "git": "g", "readers": 1, "runs": 3,
                                    "rows": [row]}, **extra), f)
                text = "\n".join(capping.render(p))
                self.assertIn(want, text)
                self.assertEqual("every restore verified" in text, bool(extra))

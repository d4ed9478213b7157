"""Unit tests of the harness itself: determinism of the datasets, and that verification catches
every kind of difference. Run: python3 -m unittest discover -s bench/tests (bench/run --smoke runs them first)."""

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


if __name__ == "__main__":
    unittest.main()

"""Unit tests of the S3 part: the link model and the delaying proxy (bytes intact and in order,
delay and rate as configured), the targets table, splicing the docs section, the S3 variants'
repository arguments. No S3 server needed."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from arcabench import s3  # noqa: E402
from arcabench.delayproxy import LinkModel, parse_duration, parse_rate  # noqa: E402
from arcabench.tools import Arca, ResticLatest, Rustic, S3Location, s3_variant  # noqa: E402

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LinkTests(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(parse_duration("10ms"), 0.01)
        self.assertEqual(parse_duration("0"), 0.0)
        self.assertAlmostEqual(parse_duration("250us"), 0.00025)
        self.assertEqual(parse_rate("100MB"), 100e6)
        self.assertEqual(parse_rate("800mbit"), 100e6)
        self.assertEqual(parse_rate("1GiB"), 2**30)
        self.assertEqual(parse_rate("0"), 0)
        with self.assertRaises(ValueError):
            parse_rate("fast")

    def test_link_serialises_and_delays(self):
        link = LinkModel(0.01, 100e6)
        # 1 MB at 100 MB/s: leaves in 10 ms, arrives 10 ms later.
        self.assertAlmostEqual(link.arrival(0.0, 1_000_000), 0.02)
        # Handed over at the same time: queues behind the first.
        self.assertAlmostEqual(link.arrival(0.0, 1_000_000), 0.03)
        # After the link went idle: only its own time.
        self.assertAlmostEqual(link.arrival(1.0, 500_000), 1.015)
        # No rate limit: delay only.
        self.assertAlmostEqual(LinkModel(0.01, 0).arrival(5.0, 10**9), 5.01)


class _Echo(threading.Thread):
    """A TCP echo server on a free port."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _serve(c):
        with c:
            while True:
                data = c.recv(1 << 16)
                if not data:
                    return
                c.sendall(data)


class ProxyTests(unittest.TestCase):
    def _proxy(self, upstream, delay, rate):
        p = subprocess.Popen([sys.executable, "-m", "arcabench.delayproxy", "--upstream",
                              f"127.0.0.1:{upstream}", "--delay", delay, "--rate", rate],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=BENCH))
        self.addCleanup(lambda: (p.stdin.close(), p.wait(5)))
        return p, json.loads(p.stdout.readline())["port"]

    def _roundtrip(self, port, payload: bytes) -> tuple:
        with socket.create_connection(("127.0.0.1", port)) as c:
            t0 = time.monotonic()
            got = bytearray()

            def send():
                c.sendall(payload)

            th = threading.Thread(target=send)
            th.start()
            while len(got) < len(payload):
                chunk = c.recv(1 << 20)
                if not chunk:
                    break
                got += chunk
            th.join()
            return bytes(got), time.monotonic() - t0

    def test_bytes_intact_delay_and_rate(self):
        echo = _Echo()
        echo.start()
        self.addCleanup(echo.sock.close)
        proxy, port = self._proxy(echo.port, "10ms", "50MB")
        # Small message: handshake round trip + there and back = 3 x 2 x 10 ms... at least 40 ms.
        got, secs = self._roundtrip(port, b"ping")
        self.assertEqual(got, b"ping")
        self.assertGreaterEqual(secs, 0.039)
        self.assertLess(secs, 0.5)
        # 10 MB there and back, in order: each direction at 50 MB/s takes >= 0.2 s (pipelined).
        payload = os.urandom(10_000_000)
        got, secs = self._roundtrip(port, payload)
        self.assertEqual(got, payload)
        self.assertGreaterEqual(secs, 0.2)
        self.assertLess(secs, 3.0)
        proxy.stdin.write("stats\n")
        proxy.stdin.flush()
        stats = json.loads(proxy.stdout.readline())
        self.assertEqual(stats["connections"], 2)
        self.assertEqual(stats["up_bytes"], 4 + 10_000_000)
        self.assertEqual(stats["down_bytes"], 4 + 10_000_000)


def _cell(wall, ok=True, **med):
    return {"ok": ok, "failure": None if ok else "boom", "runs": [{"wall_s": wall}],
            "median": dict(wall_s=wall, **med)}


class TargetTests(unittest.TestCase):
    def results(self):
        small = {"name": "small", "scenarios": {
            "backup_first": {"arca": _cell(4.0), "arca-s3": _cell(5.0), "rustic-s3": _cell(12.0)},
            "restore_full": {"arca": _cell(2.0), "arca-s3": _cell(4.0),
                             "rustic-s3": _cell(9.0, ok=False)},
            "restore_full_lat": {"arca-s3": _cell(9.0, proxy_down_bytes=800e6),
                                 "rustic-s3": _cell(30.0, proxy_down_bytes=1000e6)}}}
        many = {"name": "many", "scenarios": {
            "backup_nochange": {"arca": _cell(3.0)},
            "backup_nochange_lat": {"arca-s3": _cell(3.3), "rustic-s3": _cell(10.0)}}}
        return {"meta": {"bandwidth": 100e6, "bandwidth_text": "100MB", "latency": "20ms",
                         "runs": 1, "date": "d", "argv": "--s3-only"},
                "tools": [{"name": "arca", "label": "arca", "version": "v"},
                          {"name": "arca-s3", "label": "arca S3", "version": "v"},
                          {"name": "rustic-s3", "label": "rustic S3", "version": "r"}],
                "datasets": [small, many], "notes": []}

    def test_rows(self):
        rows = {r["scenario"]: r for r in s3.target_rows(self.results())}
        self.assertAlmostEqual(rows["backup_first"]["ratio"], 1.25)
        self.assertTrue(rows["backup_first"]["met"])
        self.assertAlmostEqual(rows["restore_full"]["ratio"], 2.0)
        self.assertFalse(rows["restore_full"]["met"])
        self.assertTrue(rows["restore_full"]["tools"]["rustic-s3"]["failed"])
        lat = rows["restore_full_lat"]
        self.assertAlmostEqual(lat["baseline"], 8.0)  # 800 MB at 100 MB/s
        self.assertAlmostEqual(lat["ratio"], 9.0 / 8.0)
        self.assertTrue(lat["met"])
        self.assertAlmostEqual(lat["tools"]["rustic-s3"]["ratio"], 3.0)  # its own bytes
        self.assertAlmostEqual(rows["backup_nochange_lat"]["ratio"], 1.1)
        self.assertTrue(rows["backup_nochange_lat"]["met"])
        text = "\n".join(s3.render(self.results()))
        self.assertIn(s3.HEADING, text)
        self.assertIn("| small: full restore (plain S3) | arca local 2.00 s | 4.00 s | 2.00× "
                      "| ≤ 1.5× | **no** | ✗ failed |", text)

    def test_busy_share(self):
        self.assertAlmostEqual(s3.busy_share({"wall_s": 2.0, "cpu_s": 1.0, "server_cpu_s": 1.5,
                                              "proxy_cpu_s": 0.5, "other_cpu_s": 1.0}, 2), 1.0)
        self.assertAlmostEqual(s3.busy_share({"wall_s": 4.0, "cpu_s": 1.0, "other_cpu_s": 0.0},
                                             2), 0.125)
        self.assertIsNone(s3.busy_share({"wall_s": 4.0, "cpu_s": 1.0}, 2))

    def test_missing_dataset_and_arca(self):
        r = self.results()
        r["datasets"] = r["datasets"][:1]
        del r["datasets"][0]["scenarios"]["backup_first"]["arca-s3"]
        rows = s3.target_rows(r)
        self.assertEqual([x["scenario"] for x in rows],
                         ["backup_first", "restore_full", "restore_full_lat"])
        self.assertIsNone(rows[0]["ratio"])
        self.assertIsNone(rows[0]["met"])
        self.assertEqual(rows[0]["baseline"], 4.0)
        self.assertEqual(s3.render({"datasets": []}), [])

    def test_splice(self):
        doc = "# t\n\n## Results\n\nx\n\n## Capping (FAST'13)\n\nc\n\n## How each figure\n\nm\n"
        sec = "## S3 on loopback\n\nnew\n"
        once = s3.splice_section(doc, sec)
        self.assertEqual(once, "# t\n\n## Results\n\nx\n\n## S3 on loopback\n\nnew\n"
                               "## Capping (FAST'13)\n\nc\n\n## How each figure\n\nm\n")
        again = s3.splice_section(once, "## S3 on loopback\n\nnewer\n\n")
        self.assertIn("newer", again)
        self.assertNotIn("\nnew\n", again)
        self.assertEqual(again.count("## S3 on loopback"), 1)
        self.assertTrue(again.endswith("## How each figure\n\nm\n"))
        self.assertEqual(s3.splice_section("# t\n", sec), "# t\n\n" + sec)


class VariantTests(unittest.TestCase):
    def test_repo_arguments(self):
        tmp = tempfile.mkdtemp(prefix="arcabench-s3-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        loc = S3Location("http://127.0.0.1:9000/", "rustic", "small")
        arca = s3_variant(Arca(tmp, binary="/bin/arca"), os.path.join(tmp, "s3"))
        self.assertEqual(arca.name, "arca-s3")
        self.assertEqual(arca.base, "arca")
        self.assertEqual(arca.s3_repo(loc), "s3:http://127.0.0.1:9000/rustic/small")
        env = arca.env()
        self.assertEqual(env["AWS_DEFAULT_REGION"], "us-east-1")
        self.assertEqual(env["HOME"], os.path.join(tmp, "s3", "arca-s3"))
        restic = s3_variant(ResticLatest(tmp, peers_dir=tmp), os.path.join(tmp, "s3"))
        argv, _ = restic.backup_argv(restic.s3_repo(loc), "/src")
        self.assertEqual(argv[1:3], ["-r", "s3:http://127.0.0.1:9000/rustic/small"])
        rustic = s3_variant(Rustic(tmp, peers_dir=tmp), os.path.join(tmp, "s3"))
        repo = rustic.s3_repo(loc)
        argv, _ = rustic.restore_argv(repo, "latest", "/t")
        self.assertEqual(argv[1], "-P")
        with open(argv[2]) as f:
            prof = f.read()
        self.assertIn('repository = "opendal:s3"', prof)
        self.assertIn('endpoint = "http://127.0.0.1:9000"', prof)
        self.assertIn('root = "/small"', prof)
        self.assertNotIn("OPENDAL_ROOT", rustic.env())


if __name__ == "__main__":
    unittest.main()

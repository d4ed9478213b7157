"""The restore issue's targets table: ratios against the best peer, `tar x`, arca's own full
restore (wall time, and until on disk), the throttled link, and restic's peak RSS.
Run: python3 -m unittest discover -s bench/tests."""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from arcabench import restore_targets as rt  # noqa: E402


def cell(wall, rss=100 * 1024, synced=None, read=None):
    med = {"wall_s": wall, "maxrss_kib": rss}
    if synced is not None:
        med["synced_wall_s"] = synced
    if read is not None:
        med["repo_read_bytes"] = read
    return {"ok": True, "median": med}


RESULTS = {
    "tools": [
        {"name": "arca", "label": "arca", "peer": False},
        {"name": "rustic", "label": "rustic 0.11", "peer": True},
        {"name": "restic-latest", "label": "restic 0.19", "peer": True},
        {"name": "arca-remote", "label": "arca remote", "peer": False,
         "settings": "as arca, backend throttled: 20ms per request, 100MB/s"},
    ],
    "datasets": [{
        "name": "small",
        "references": {"tar_extract": cell(1.2)},
        "scenarios": {
            "restore_full": {"arca": cell(0.6, synced=2.0), "rustic": cell(1.6),
                             "restic-latest": cell(2.2, rss=150 * 1024),
                             "arca-remote": cell(8.0, read=780_000_000)},
            "restore_partial": {"arca": cell(0.5, synced=0.9),
                                "restic-latest": cell(2.6, rss=80 * 1024)},
            "restore_noop": {"arca": cell(0.1, synced=0.1)},
            "restore_metadata": {"arca": cell(0.6, synced=0.6)},
        },
    }],
}


class RestoreTargets(unittest.TestCase):
    def test_rows(self):
        rows = {r["what"]: r for r in rt.rows(RESULTS)}
        best = rows["full restore vs the best peer"]
        self.assertAlmostEqual(best["ratio"], 0.6 / 1.6)
        self.assertTrue(best["met"])
        self.assertIn("rustic 0.11", best["measured"])
        self.assertTrue(rows["full restore vs `tar x`"]["met"])
        partial = rows["partial restore vs arca's own full restore"]
        self.assertAlmostEqual(partial["ratio"], 0.5 / 0.6)
        self.assertFalse(partial["met"])
        synced = rows["partial restore vs arca's own full restore, both until on disk"]
        self.assertAlmostEqual(synced["ratio"], 0.9 / 2.0)
        self.assertTrue(synced["met"])
        self.assertTrue(rows["no-op restore vs arca's own full restore, both until on disk"]["met"])
        remote = rows["arca remote: full restore vs its bytes at the link's rate"]
        self.assertAlmostEqual(remote["ratio"], 8.0 / 7.8)
        self.assertTrue(remote["met"])
        # The closest restore to restic's RSS: the partial one (100 of 80 MiB): not met.
        rss = rows["peak RSS vs restic 0.19 (the closest restore)"]
        self.assertIn("partial", rss["measured"])
        self.assertFalse(rss["met"])
        text = "\n".join(rt.render(RESULTS))
        self.assertIn("| small | full restore vs the best peer |", text)


if __name__ == "__main__":
    unittest.main()

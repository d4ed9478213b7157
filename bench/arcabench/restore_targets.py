"""The restore engine issue's targets, checked against one run's results: each row names the
figure, the ratio measured, the target and whether it is met (rendered after the headline)."""

from __future__ import annotations

import re

# (scenario, limit): ratios of arca's wall time to its own full restore on the same dataset.
OWN_FULL = (("restore_partial", "partial restore", 0.5),
            ("restore_noop", "no-op restore", 0.2),
            ("restore_metadata", "metadata-only restore", 0.6))


def _ok(cell) -> bool:
    return bool(cell) and cell.get("ok") and (cell.get("median") or {}).get("wall_s") is not None


def _wall(cell):
    return cell["median"]["wall_s"] if _ok(cell) else None


def _synced(cell):
    """Median wall time plus the sync after it (runs made before the harness timed the sync
    have none)."""
    return (cell.get("median") or {}).get("synced_wall_s") if _ok(cell) else None


def _peers(results) -> set:
    return {t["name"] for t in results["tools"] if t["peer"]}


def _label(results, name) -> str:
    return next((t["label"] for t in results["tools"] if t["name"] == name), name)


def dead_reason(ds, tool) -> str | None:
    """Why a tool ran nothing more on this dataset (its init or first backup failed), or None."""
    why = (ds.get("dead") or {}).get(tool)
    if why:
        return why
    cell = (ds["scenarios"].get("backup_first") or {}).get(tool)
    if cell is not None and not cell.get("ok") and not any(
            tool in cells for sc, cells in ds["scenarios"].items() if sc != "backup_first"):
        return f"first backup failed: {(cell.get('failure') or '')[:200]}"
    return None


def left_out(results, ds, cells) -> dict:
    """The peers left out of "best peer" in one scenario, each with why: its cell failed
    (a known limitation or not), it did not run on the dataset after its first backup failed,
    or it was skipped (not available)."""
    out = {}
    for t in results["tools"]:
        if not t["peer"]:
            continue
        name = t["name"]
        cell = cells.get(name)
        if not t.get("available", True):
            out[name] = "skipped (not available)"
        elif cell is not None and not cell.get("ok"):
            known = cell.get("expected_failure")
            out[name] = "failed" + (f" (known limitation: {known[:80]})" if known else "")
        elif cell is None and ds is not None:
            dead = dead_reason(ds, name)
            if dead:
                out[name] = f"not run ({dead[:80]})"
    return out


def left_out_text(results, ds, cells) -> str:
    """"; left out: kopia 0.23 failed (...)" or ""."""
    lo = left_out(results, ds, cells)
    if not lo:
        return ""
    return "; left out: " + ", ".join(f"{_label(results, t)} {why}" for t, why in lo.items())


def _best_peer(results, cells) -> tuple:
    vals = {t: _wall(c) for t, c in cells.items() if t in _peers(results) and _ok(c)}
    if not vals:
        return None, None
    t = min(vals, key=vals.get)
    return t, vals[t]


def _bandwidth(results, tool) -> float | None:
    """Bytes per second of the throttled arca's link, from its settings ("..., 100MB/s")."""
    for t in results["tools"]:
        if t["name"] == tool:
            m = re.search(r"([\d.]+)\s*(k|M|G)B/s", t.get("settings", ""))
            if m:
                return float(m.group(1)) * {"k": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]
    return None


def rows(results: dict) -> list:
    """One dict per target: dataset, what, measured text, ratio, limit, met."""
    out = []

    def add(ds, what, measured, ratio, limit, cmp="≤"):
        met = None if ratio is None else (ratio <= limit if cmp == "≤" else ratio < limit)
        out.append({"dataset": ds, "what": what, "measured": measured, "ratio": ratio,
                    "limit": limit, "cmp": cmp, "met": met})

    restic = next((n for n in ("restic-latest", "restic") if n in _peers(results)), None)
    for ds in results["datasets"]:
        sc = ds["scenarios"]
        name = ds["name"]
        full = sc.get("restore_full") or {}
        arca_full = _wall(full.get("arca"))
        if arca_full:
            bt, best = _best_peer(results, full)
            if best:
                add(name, "full restore vs the best peer",
                    f"{arca_full:.2f} s vs {_label(results, bt)} {best:.2f} s"
                    + left_out_text(results, ds, full),
                    arca_full / best, 0.5)
            tar = _wall((ds.get("references") or {}).get("tar_extract"))
            if tar:
                add(name, "full restore vs `tar x`", f"{arca_full:.2f} s vs {tar:.2f} s",
                    arca_full / tar, 1.0)
            full_synced = _synced(full.get("arca"))
            for key, what, limit in OWN_FULL:
                cell = (sc.get(key) or {}).get("arca")
                w = _wall(cell)
                if w:
                    add(name, f"{what} vs arca's own full restore",
                        f"{w:.2f} s vs {arca_full:.2f} s", w / arca_full, limit)
                # The same, each timed until its writes are on disk (its wall time plus the
                # sync after it): a full restore's writeback is not in its wall time.
                ws = _synced(cell)
                if ws and full_synced:
                    add(name, f"{what} vs arca's own full restore, both until on disk",
                        f"{ws:.2f} s vs {full_synced:.2f} s (wall + sync)", ws / full_synced,
                        limit)
        for t in [t["name"] for t in results["tools"] if t["name"].startswith("arca-remote")]:
            cell = full.get(t)
            bw = _bandwidth(results, t)
            # The bytes that crossed the throttled link: arca's own count of repository reads
            # (older results kept it as repo_read_bytes).
            link_bytes = (cell or {}).get("median", {}).get("backend_read_bytes") \
                if _ok(cell) else None
            if link_bytes is None and _ok(cell) and "process_read_bytes" not in cell["median"]:
                link_bytes = cell["median"].get("repo_read_bytes")
            if _ok(cell) and bw and link_bytes:
                link = link_bytes / bw
                add(name, f"{_label(results, t)}: full restore vs its bytes at the link's rate",
                    f"{_wall(cell):.2f} s vs {link:.2f} s "
                    f"({link_bytes / 1e6:.0f} MB)",
                    _wall(cell) / link, 1.3)
        newest = sc.get("restore_newest") or {}
        w = _wall(newest.get("arca"))
        bt, best = _best_peer(results, newest)
        if w and best:
            add(name, "restore newest generation vs the best peer",
                f"{w:.2f} s vs {_label(results, bt)} {best:.2f} s"
                + left_out_text(results, ds, newest), w / best, 0.5)
        if restic:
            worst = None
            for key, cells in sc.items():
                if not key.startswith("restore"):
                    continue
                a, r = (cells.get("arca") or {}), (cells.get(restic) or {})
                if not (_ok(a) and _ok(r)):
                    continue
                ratio = a["median"]["maxrss_kib"] / r["median"]["maxrss_kib"]
                if worst is None or ratio > worst[0]:
                    worst = (ratio, key, a["median"]["maxrss_kib"], r["median"]["maxrss_kib"])
            if worst:
                add(name, f"peak RSS vs {_label(results, restic)} (the closest restore)",
                    f"{worst[1].removeprefix('restore_')}: {worst[2] / 1024:.0f} MiB vs "
                    f"{worst[3] / 1024:.0f} MiB", worst[0], 1.0, "<")
    return out


def render(results: dict) -> list:
    rs = rows(results)
    if not rs:
        return []
    out = ["", "## Restore engine targets", "",
           "The restore issue's figures in this run (arca's wall time over the named baseline; "
           "peak RSS over restic's, in the restore scenario where arca comes closest to it). "
           "No tool syncs what it restores, so a wall time leaves the writeback out; the rows "
           "\"until on disk\" add the time of the `sync` run right after each restore.", "",
           "| dataset | figure | measured | ratio | target | met? |", "|---|---|---|---|---|---|"]
    for r in rs:
        ratio = "–" if r["ratio"] is None else f"{r['ratio']:.2f}×"
        met = "–" if r["met"] is None else ("yes" if r["met"] else "**no**")
        out.append(f"| {r['dataset']} | {r['what']} | {r['measured']} | {ratio} | "
                   f"{r['cmp']} {r['limit']}× | {met} |")
    return out

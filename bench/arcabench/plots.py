"""PNG plots (matplotlib, Agg backend). Optional: without matplotlib the report has no figures."""

from __future__ import annotations

import os

from .scenarios import REFERENCES, SCENARIOS

COLORS = {"arca": "#d62728", "arca-remote": "#ff9896", "restic": "#1f77b4",
          "restic-latest": "#17becf", "rustic": "#ff7f0e", "kopia": "#9467bd", "borg": "#2ca02c"}
OTHER_COLORS = ["#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


def color(name: str) -> str:
    """A fixed colour per tool; tools not listed get distinct spares, stable per name."""
    if name in COLORS:
        return COLORS[name]
    return OTHER_COLORS[sum(name.encode()) % len(OTHER_COLORS)]


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(results, name):
    return next((t["label"] for t in results["tools"] if t["name"] == name), name)


def wall_chart(results, ds, path) -> str:
    """Horizontal grouped bars: wall time per scenario and tool, reference limits in grey."""
    plt = _plt()
    tools = [t["name"] for t in results["tools"] if any(t["name"] in c for c in ds["scenarios"].values())]
    scen = [s for s in SCENARIOS if s in ds["scenarios"]]
    refs = list(ds["references"])
    rows = len(scen) + len(refs)
    fig, ax = plt.subplots(figsize=(9, 0.55 * rows * max(1, len(tools)) ** 0.5 + 1.6))
    h = 0.8 / max(1, len(tools))
    yticks, ylabels = [], []
    for i, sc in enumerate(scen):
        y = rows - 1 - i
        yticks.append(y)
        ylabels.append(SCENARIOS[sc])
        for j, t in enumerate(tools):
            cell = ds["scenarios"][sc].get(t)
            if not cell:
                continue
            yy = y + 0.4 - h * (j + 0.5)
            if cell["ok"]:
                v = cell["median"]["wall_s"]
                ax.barh(yy, v, h, color=color(t), label=_label(results, t))
                ax.text(v, yy, f" {v:.2f}", va="center", fontsize=7)
            else:
                ax.text(0, yy, " failed", va="center", fontsize=7, color=color(t))
    for k, key in enumerate(refs):
        y = rows - 1 - len(scen) - k
        yticks.append(y)
        ylabels.append("limit: " + REFERENCES[key][0].split(" (")[0])
        cell = ds["references"][key]
        v = cell["median"]["wall_s"] or 0
        ax.barh(y, v, 0.5, color="#aaaaaa")
        ax.text(v, y, f" {v:.2f}", va="center", fontsize=7)
    ax.set_yticks(yticks)
    ax.set_yticklabels(ylabels, fontsize=8)
    ax.set_xlabel("wall seconds (median, page cache dropped)")
    ax.set_title(f"{ds['name']}: {ds['manifest']['files']:,} files, "
                 f"{ds['manifest']['bytes'] / 2**20:,.0f} MiB")
    # One legend entry per tool, in column order, also for a tool whose every cell failed.
    from matplotlib.patches import Patch

    ax.legend([Patch(color=color(t)) for t in tools], [_label(results, t) for t in tools],
              fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def generations_chart(results, ds, path) -> str:
    """Per-generation backup time and repository growth; restore newest vs oldest."""
    plt = _plt()
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(13, 3.8))
    for t, series in ds["series"].items():
        xs = [p["generation"] for p in series]
        a1.plot(xs, [p["wall_s"] for p in series], marker=".", color=color(t), label=_label(results, t))
        a2.plot(xs, [p["repo_bytes"] / 2**20 for p in series], marker=".", color=color(t),
                label=_label(results, t))
    a1.set_title("incremental backup per generation")
    a1.set_xlabel("generation")
    a1.set_ylabel("wall seconds")
    a2.set_title("repository size")
    a2.set_xlabel("generation")
    a2.set_ylabel("MiB")
    tools = [t["name"] for t in results["tools"]
             if any(t["name"] in ds["scenarios"].get(s, {}) for s in ("restore_newest", "restore_oldest"))]
    w = 0.38
    for j, sc in enumerate(("restore_oldest", "restore_newest")):
        vals = []
        for t in tools:
            cell = ds["scenarios"].get(sc, {}).get(t)
            vals.append(cell["median"]["wall_s"] if cell and cell["ok"] else 0)
        a3.bar([i + (j - 0.5) * w for i in range(len(tools))], vals, w,
               label=SCENARIOS[sc].replace("restore ", ""), color=["#bbbbbb", "#555555"][j])
    a3.set_xticks(range(len(tools)))
    a3.set_xticklabels([_label(results, t) for t in tools], fontsize=7,
                       rotation=15 if len(tools) <= 4 else 35, ha="right" if len(tools) > 4 else "center")
    a3.set_title("restore: oldest vs newest generation")
    a3.set_ylabel("wall seconds")
    for a in (a1, a2, a3):
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def make_all(results, out_dir) -> list:
    if not available():
        return []
    os.makedirs(out_dir, exist_ok=True)
    made = []
    for ds in results["datasets"]:
        ds["plots"] = [wall_chart(results, ds, os.path.join(out_dir, f"{ds['name']}-wall.png"))]
        if ds.get("series"):
            ds["plots"].append(generations_chart(results, ds, os.path.join(out_dir, f"{ds['name']}-history.png")))
        made += ds["plots"]
    return made

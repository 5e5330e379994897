"""Charts of a run, drawn with matplotlib in the bench venv:

    .bench-venv/bin/python -m bench.charts bench/results/<timestamp>.json

Writes <timestamp>-drain1.png, -drain2.png, -burst.png (completions per second over time,
first run of each system) and -ontime.png (the distribution of start minus due) next to the
JSON, and prints their paths.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

TITLES = {
    "drain1": "Drain, 1 worker process: completions per second",
    "drain2": "Drain, 2 worker processes: completions per second",
    "burst": "Burst: completions per second after T",
}


def _first_runs(doc: dict[str, Any], workload: str) -> list[dict[str, Any]]:
    """The first successful run of each system for a workload."""
    seen: dict[str, dict[str, Any]] = {}
    for r in doc["results"]:
        if r["workload"] == workload and not r["note"] and r["system"] not in seen:
            seen[r["system"]] = r
    return list(seen.values())


def throughput(doc: dict[str, Any], workload: str, path: Path) -> bool:
    runs = [r for r in _first_runs(doc, workload) if r["series"].get("throughput")]
    if not runs:
        return False
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for r in runs:
        xs = [p[0] for p in r["series"]["throughput"]]
        ys = [p[1] for p in r["series"]["throughput"]]
        ax.step(xs, ys, where="post", label=r["system"], marker="." if len(xs) < 20 else None)
    origin = "T" if workload == "burst" else "first job start"
    ax.set_xlabel(f"seconds since {origin}")
    ax.set_ylabel("jobs done per second (0.5 s bins)")
    ax.set_title(TITLES[workload])
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def ontime(doc: dict[str, Any], path: Path) -> bool:
    runs = [r for r in _first_runs(doc, "ontime") if r["samples"].get("lag_ms")]
    if not runs:
        return False
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for r in runs:
        lags = sorted(r["samples"]["lag_ms"])
        n = len(lags)
        ax.step(lags, [(i + 1) / n for i in range(n)], where="post", label=r["system"])
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlabel("start minus due (ms, symmetric log scale)")
    ax.set_ylabel("fraction of jobs started")
    ax.set_title("Start on time: distribution of start lag")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str]) -> int:
    json_path = Path(argv[0])
    doc = json.loads(json_path.read_text())
    stem = json_path.with_suffix("")
    written: list[Path] = []
    for workload in ("drain1", "drain2", "burst"):
        path = Path(f"{stem}-{workload}.png")
        if throughput(doc, workload, path):
            written.append(path)
    path = Path(f"{stem}-ontime.png")
    if ontime(doc, path):
        written.append(path)
    sys.stdout.write("".join(f"{p}\n" for p in written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

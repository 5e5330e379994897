"""Charts of a run, drawn with matplotlib in the bench venv:

    .bench-venv/bin/python -m bench.charts bench/results/<timestamp>.json

Writes next to the JSON, and prints their paths: <timestamp>-drain-p1.png, -drain-p2.png
(the drain comparison: completions per second over time of each system's first run at its
best configuration with that many worker processes), -drain-sweep.png (jobs/s against C, one
line per system and number of processes), -drain1.png, -drain2.png (when those workloads were
named), -burst.png (completions per second over time, first run of each system) and
-ontime.png (the distribution of start minus due), and -pressure.png, -pressure-pgqueuer.png
(the pressure workload's first run of duetime and of pgqueuer: throughput, claim latency,
queue depth, dead tuples and table and index sizes over time, the phases shaded).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench import pressure_plan

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


def drain_best(doc: dict[str, Any], scope: str, path: Path) -> bool:
    """Completions over time of each system's first run at its best configuration of `scope`
    (p1, p2: that many worker processes)."""
    best = doc.get("drain_comparison", {}).get("best", {})
    runs = []
    for system, scopes in best.items():
        key = scopes.get(scope, {}).get("setting")
        for r in doc["results"]:
            if (
                r["system"] == system
                and r["workload"] == f"drain:{key}"
                and not r["note"]
                and r["series"].get("throughput")
            ):
                runs.append((f"{system} ({key})", r))
                break
    if not runs:
        return False
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for label, r in runs:
        xs = [p[0] for p in r["series"]["throughput"]]
        ys = [p[1] for p in r["series"]["throughput"]]
        ax.step(xs, ys, where="post", label=label, marker="." if len(xs) < 20 else None)
    ax.set_xlabel("seconds since first job start")
    ax.set_ylabel("jobs done per second (0.5 s bins)")
    n = scope[1:]
    ax.set_title(f"Drain, {n} worker process(es), each system at its best configuration")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def drain_sweep(doc: dict[str, Any], path: Path) -> bool:
    """jobs/s (median) against C, one line per system and number of worker processes."""
    per = doc.get("drain_comparison", {}).get("per_setting", {})
    lines: dict[str, list[tuple[int, float]]] = {}
    for key, systems in per.items():
        head, _, procs = key.rpartition("-p")
        if not (head.startswith("c") and head[1:].isdigit()):
            continue
        for system, data in systems.items():
            label = f"{system}, {procs} proc"
            lines.setdefault(label, []).append((int(head[1:]), data["jobs_s"]))
    if not lines:
        return False
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for label, points in sorted(lines.items()):
        points.sort()
        style = "--" if label.endswith(", 2 proc") else "-"
        ax.plot([p[0] for p in points], [p[1] for p in points], style, marker="o", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("C: jobs at once per worker process (and batch per fetch where there is one)")
    ax.set_ylabel("drain, jobs/s (median of the runs)")
    ax.set_title("Drain comparison: throughput against concurrency")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
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


SHADES = {"warmup": ("0.85", 0.5), "pressure": ("tab:red", 0.15), "recovery": ("tab:green", 0.1)}


def pressure(doc: dict[str, Any], system: str, path: Path) -> bool:
    """The pressure workload's first run of `system`: five panels over time, the phases
    shaded."""
    runs = [
        r
        for r in _first_runs(doc, "pressure")
        if r["info"].get("pressure") and r["system"] == system
    ]
    if not runs:
        return False
    run = runs[0]["info"]["pressure"]
    # a sample's short table names -> the system's tables (bench/pressure.py, Tables.sampled)
    # (runs recorded before pgqueuer was measured kept no tables: duetime's)
    tables = run.get("tables") or pressure_plan.DUETIME_TABLES
    names = {short: table for table, short in tables.items()}
    samples = run["samples"]
    if not samples:
        return False
    t = [s["t"] for s in samples]

    def col(key: str, scale: float = 1.0) -> list[float]:
        return [float("nan") if s.get(key) is None else s[key] / scale for s in samples]

    fig, axes = plt.subplots(5, 1, figsize=(10, 13), sharex=True)
    tp, lat, queue, dead, size = axes
    tp.plot(t, col("offered_per_s"), "--", color="0.4", label="offered")
    tp.plot(t, col("enqueued_per_s"), ":", color="tab:gray", label="enqueued (jobs due)")
    tp.plot(t, col("finished_per_s"), label="finished")
    tp.set_ylabel("jobs/s")
    lat.plot(t, col("p50_ms"), label="p50")
    lat.plot(t, col("p99_ms"), label="p99")
    lat.set_yscale("log")
    lat.set_ylabel("claim latency, ms\n(claimed - due)")
    queue.plot(t, col("queued"), label="due, not claimed")
    queue.set_ylabel("queued jobs")
    shorts = [short for short in pressure_plan.SHORTS if short in names]
    for short in shorts:
        dead.plot(t, col(f"dead_{short}"), label=names[short])
    dead.set_ylabel("n_dead_tup")
    for short in shorts:
        size.plot(t, col(f"table_{short}", 1e6), label=f"{names[short]}: table + TOAST")
        size.plot(t, col(f"indexes_{short}", 1e6), "--", label=f"{names[short]}: indexes")
    size.plot(t, col("bytes_total", 1e6), color="k", label="total")
    size.set_ylabel("MB")
    size.set_xlabel("seconds since the origin (the enqueuer's first tick)")
    for ax in axes:
        for ph in run["phases"]:
            shade = SHADES.get(ph["kind"])
            if shade:
                ax.axvspan(ph["start"], ph["end"], color=shade[0], alpha=shade[1], lw=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="upper left")
    for ph in run["phases"]:
        tp.annotate(
            ph["name"],
            ((ph["start"] + ph["end"]) / 2, 1.0),
            xycoords=("data", "axes fraction"),
            ha="center",
            va="bottom",
            fontsize="small",
        )
    verdict = "meets" if run["verdict"]["pass"] else "misses"
    fig.suptitle(
        f"Under pressure: {system}, {run['rate']:,.0f} jobs/s offered, "
        f"phases at {run['scale']:.3g} of full length ({verdict} the target)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: list[str]) -> int:
    json_path = Path(argv[0])
    doc = json.loads(json_path.read_text())
    stem = json_path.with_suffix("")
    written: list[Path] = []
    for scope in ("p1", "p2"):
        path = Path(f"{stem}-drain-{scope}.png")
        if drain_best(doc, scope, path):
            written.append(path)
    path = Path(f"{stem}-drain-sweep.png")
    if drain_sweep(doc, path):
        written.append(path)
    for workload in ("drain1", "drain2", "burst"):
        path = Path(f"{stem}-{workload}.png")
        if throughput(doc, workload, path):
            written.append(path)
    path = Path(f"{stem}-ontime.png")
    if ontime(doc, path):
        written.append(path)
    for system, suffix in (("duetime-postgres", ""), ("pgqueuer", "-pgqueuer")):
        path = Path(f"{stem}-pressure{suffix}.png")
        if pressure(doc, system, path):
            written.append(path)
    sys.stdout.write("".join(f"{p}\n" for p in written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""`make bench`: duetime against its peers, on this machine, in one run.

What it does
    Measures the workloads below for every duetime store (PostgreSQL, SQLite, MariaDB/MySQL)
    and, in the same run, for pgqueuer and procrastinate on PostgreSQL. Each (workload,
    system, run) gets a fresh database with a unique name, created and dropped here. Runs
    alternate systems (duetime-postgres, pgqueuer, procrastinate, duetime-sqlite,
    duetime-mysql), and each workload is repeated R times; the table shows medians.

Workloads (handlers are no-ops that note their start)
    bulk    N jobs through each system's batch enqueue API, `--batch` jobs a call: jobs/s
    single  N/10 jobs, one enqueue call each, from one client: jobs/s
    drain   the drain comparison: N jobs enqueued, then the workers: jobs/s from the first
            job start to the last job done, peak RSS, and completions per 0.5 s over time,
            for every system in each configuration: its own defaults, and concurrency C
            (--concurrency; with a batch of C per fetch where the system has a batch
            setting), each with 1 and 2 worker processes (--procs); --throttled adds
            pgqueuer's configuration of the previous tables. Each system's best, and the
            ratios at equal configuration (docs/performance.md)
    drain1, drain2, drain4, drain8  N jobs, then 1, 2, 4 or 8 worker processes at 10 jobs
            at once each (pgqueuer at its defaults); run only when named in --workloads,
            never by "all"
    ontime  jobs due at random instants over a window (2,000 over 10 s at full size), 2
            workers running (10 jobs at once each; pgqueuer at its defaults): start minus
            due p50/p99/max, and starts before due (must be 0)
    burst   M = 5N jobs all due at one instant T, 2 workers running: first start - T and
            all done - T
    backlog duetime on PostgreSQL at full size (N >= 20,000): drain N and time claim(10),
            on an empty database and with 1M future + 1M finished jobs
    outbox  duetime on PostgreSQL and SQLite with its queue in outbox mode (RabbitMQ at
            DUETIME_BENCH_AMQP_URL, default 127.0.0.1:5672): drain N through one relay and
            one broker-fed worker (jobs/s, beside drain1), and the ontime jobs with the
            relay and two workers (start lag, beside ontime); docs/outbox.md
    bytes   duetime only: N jobs with a 256-byte JSON payload drained by 2 workers, then
            (PostgreSQL) a plain VACUUM: bytes per finished job of the jobs and attempts
            tables, their TOAST and indexes, per relation (bench/sizes.py); on PostgreSQL
            also the share of the drain's updates that were HOT
    fanout  duetime only: min(N, 10,000) children and one callback depending on all of them
            (App.group, one transaction), 2 workers: the time from the last child's end to
            the callback's start (attempts' finished_at and started_at), the enqueue's
            seconds and the children's jobs/s (docs/workflows.md, "Chains and groups")
    ceiling duetime on PostgreSQL only, only when named: the raw ceiling, N jobs claimed and
            finished 400 at a time through duetime's store layer (no worker, no handler) by
            1, 2 and 4 client processes: jobs/s (bench/ceiling.py); with drain1 and drain2
            in the same run, the drains as a share of it; with drain, each system's best
            against the highest ceiling
    pressure duetime on PostgreSQL and pgqueuer, run only when named: a steady offered rate
            (1,000 jobs/s, --pressure-rate) of 1 ms jobs to 2 workers of 16, through a transaction
            held open, 1.5x the load and four REPEATABLE READ counting connections, each for
            4 minutes and 2 minutes of recovery after a clean 2 minutes (20 minutes;
            --pressure-scale shortens every phase): throughput, claim p50/p99, queue depth,
            dead tuples and table sizes every 5 s, judged against issue 22's target, with a
            probe of what the machine gives any process in each phase (a sleep's overshoot,
            a SELECT 1 round trip) (bench/pressure.py, bench/pressure_plan.py)
    flow    duetime only: drain N with 2 workers with flow control off, with a queue and tenant
            cap of 1000 (never reached), with a tenant weight of 2, with jobs carrying a limit
            key that never binds, and with all of these: jobs/s and each over off
            (docs/flow-control.md)
    Machine references are measured first: pgbench -N TPS with 2 and 8 clients, and the
    disk's fdatasync rate.

How
    The orchestrator (this module) runs in duetime's venv (.venv). Every system step runs as
    a subprocess with the system's interpreter: duetime's in .venv, the peers' in
    .bench-venv. Workers are the systems' own CLIs (`duetime worker`, `pgq run`,
    `procrastinate worker`). "Done" is read from each system's tables every 0.1 s.

Usage
    make bench BENCH_SIZE=tiny                      # a few hundred jobs, 1 run: CI
    make bench                                      # full: 20,000 jobs, 3 runs, C = 10,50,100
    make bench BENCH_SIZE=20000 BENCH_RUNS=3 BENCH_STORES=postgres,sqlite,mysql \
        BENCH_PEERS=pgqueuer,procrastinate BENCH_WORKLOADS=all
    .venv/bin/python -m bench.run --help

Output
    The markdown report on stdout and in bench/results/<timestamp>.md;
    bench/results/<timestamp>.json (every raw figure, the medians, the drain comparison with
    each configuration's parameters) and bench/results/<timestamp>-*.png charts (drawn by
    bench/charts.py in .bench-venv). See docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from bench import dbs, machine, report
from bench.load import CpuWatch
from bench.pressure_plan import PRESSURES
from bench.procs import ROOT
from bench.systems import duetime_sys, pgqueuer_sys, procrastinate_sys
from bench.systems.base import Setting, System
from bench.workloads import (
    DRAIN,
    ONLY_WHEN_NAMED,
    WORKLOADS,
    Ctx,
    Result,
    Size,
    applies,
    drain_unit,
    run_one,
)

log = logging.getLogger("bench")

STORES = ("postgres", "sqlite", "mysql")
PEERS = ("pgqueuer", "procrastinate")
SWEEP_FULL = "10,50,100"  # --concurrency auto: the drain comparison's C values
SWEEP_TINY = "10,100"  # ... at BENCH_SIZE=tiny (CI), to stay short


def _ints(text: str, what: str) -> list[int]:
    if text.strip() == "none":
        return []
    try:
        values = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{what} takes whole numbers separated by commas, e.g. 10,50,100; got {text!r}"
        ) from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{what} values must be at least 1; got {text!r}")
    return values


def drain_settings(
    concurrency: list[int], procs: list[int], defaults: bool, throttled: bool
) -> list[Setting]:
    """The drain comparison's configurations, in the order they run (and are shown)."""
    settings: list[Setting] = []
    for n in procs:
        if defaults:
            settings.append(Setting("defaults", n))
        settings += [Setting("sweep", n, c) for c in concurrency]
        if throttled:
            settings.append(Setting("throttled", n))
    return settings


def same_as(system: System, setting: Setting, settings: list[Setting]) -> Setting | None:
    """An earlier setting in `settings` whose configuration of `system` is the same as this
    one's (the same parameters and the same number of processes), if any: run once only."""
    if system.tune is None:
        return None
    mine = system.tune(setting)
    if mine is None:
        return None
    for other in settings:
        if other == setting or other.procs != setting.procs:
            continue
        theirs = system.tune(other)
        if theirs is not None and theirs.params == mine.params:
            return other
    return None


def _list(text: str, allowed: tuple[str, ...], unless_named: tuple[str, ...] = ()) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if items == ["all"]:
        return [x for x in allowed if x not in unless_named]
    if items == ["none"]:
        return []
    unknown = [x for x in items if x not in allowed]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {', '.join(allowed)}")
    return [x for x in allowed if x in items]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    p.add_argument("--size", default="tiny", help="'tiny' or N, the drain size (full: 20000)")
    p.add_argument("--runs", type=int, default=3, help="repetitions per workload (median)")
    p.add_argument("--stores", default="postgres,sqlite,mysql", help="duetime stores, or none")
    p.add_argument("--peers", default="pgqueuer,procrastinate", help="peers, or none")
    p.add_argument("--workloads", default="all", help=f"all or some of {','.join(WORKLOADS)}")
    p.add_argument("--batch", type=int, default=1000, help="jobs per batch-enqueue call")
    p.add_argument(
        "--concurrency",
        default="auto",
        help=f"drain comparison: the C values (auto: {SWEEP_FULL}, {SWEEP_TINY} at tiny; none)",
    )
    p.add_argument(
        "--procs", default="1,2", help="drain comparison: worker processes of each configuration"
    )
    p.add_argument(
        "--no-defaults",
        action="store_true",
        help="drain comparison: leave out each system's defaults configuration",
    )
    p.add_argument(
        "--throttled",
        action="store_true",
        help="drain comparison: add pgqueuer's previous configuration (batch 5, at most 10)",
    )
    p.add_argument(
        "--pressure-rate", type=float, default=1000.0, help="pressure: offered jobs/s (R)"
    )
    p.add_argument(
        "--pressure-scale",
        default="auto",
        help="pressure: every phase's duration times this (auto: 1, i.e. 20 minutes; "
        "1/24 at tiny); e.g. 0.25 for 30 s clean, 60 s pressures, 30 s recoveries",
    )
    p.add_argument(
        "--pressure-step",
        default="auto",
        help="pressure: seconds between samples (auto: 5; 1 at tiny)",
    )
    p.add_argument(
        "--pressures",
        default="hold,load,counts",
        help="pressure: which pressures run, in this order (default: hold,load,counts; e.g. "
        "hold alone, about 8 minutes at full size)",
    )
    p.add_argument(
        "--pressure-server",
        choices=("private", "shared"),
        default="private",
        help="pressure: a PostgreSQL cluster of its own started for the run (initdb, the "
        "server's defaults: autovacuum on; fsync on), or the shared server at --pg-url as it is",
    )
    p.add_argument("--pg-url", default=dbs.DEFAULT_PG_URL, help="PostgreSQL admin URL")
    p.add_argument("--mysql-url", default=dbs.DEFAULT_MYSQL_URL, help="MariaDB admin URL")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="results folder")
    p.add_argument("--no-machine", action="store_true", help="skip pgbench and fdatasync")
    p.add_argument("--no-charts", action="store_true", help="do not draw PNG charts")
    args = p.parse_args(argv)
    args.stores = _list(args.stores, STORES)
    args.peers = _list(args.peers, PEERS)
    args.workloads = _list(args.workloads, tuple(WORKLOADS), ONLY_WHEN_NAMED)
    args.size = Size.parse(args.size)
    if args.size.label == "tiny":
        args.runs = 1
    if args.concurrency == "auto":
        args.concurrency = SWEEP_TINY if args.size.label == "tiny" else SWEEP_FULL
    try:
        args.concurrency = _ints(args.concurrency, "--concurrency")
        args.procs = _ints(args.procs, "--procs")
    except argparse.ArgumentTypeError as exc:
        p.error(str(exc))
    tiny = args.size.label == "tiny"
    try:
        args.pressure_scale = (
            (1 / 24 if tiny else 1.0)
            if args.pressure_scale == "auto"
            else float(Fraction(args.pressure_scale))
        )
        args.pressure_step = (
            (1.0 if tiny else 5.0) if args.pressure_step == "auto" else float(args.pressure_step)
        )
    except (ValueError, ZeroDivisionError):
        p.error("--pressure-scale and --pressure-step take numbers, e.g. 0.25 or 1/4, and 5")
    if args.pressure_scale <= 0 or args.pressure_step <= 0 or args.pressure_rate <= 0:
        p.error("--pressure-scale, --pressure-step and --pressure-rate must be above 0")
    given = args.pressures
    args.pressures = tuple(x.strip() for x in given.split(",") if x.strip())
    if (
        not set(args.pressures) <= set(PRESSURES)
        or len(set(args.pressures)) < len(args.pressures)
        or not args.pressures
    ):
        p.error(f"--pressures takes some of {','.join(PRESSURES)}, each once; got {given!r}")
    args.settings = drain_settings(
        args.concurrency, args.procs, not args.no_defaults, args.throttled
    )
    if DRAIN in args.workloads and not args.settings:
        p.error("the drain workload needs a configuration: give --concurrency or --procs values")
    return args


def units(workloads: list[str], settings: list[Setting]) -> list[str]:
    """The workloads as run: `drain` becomes one drain:<setting> unit per configuration."""
    out: list[str] = []
    for w in workloads:
        out += [drain_unit(s) for s in settings] if w == DRAIN else [w]
    return out


def make_systems(stores: list[str], peers: list[str]) -> list[System]:
    """In the order runs alternate: duetime-postgres, the peers, then the other stores."""
    systems: list[System] = []
    if "postgres" in stores:
        systems.append(duetime_sys.make_system("postgres", ROOT))
    if "pgqueuer" in peers:
        systems.append(pgqueuer_sys.make_system(ROOT))
    if "procrastinate" in peers:
        systems.append(procrastinate_sys.make_system(ROOT))
    systems += [duetime_sys.make_system(s, ROOT) for s in stores if s != "postgres"]
    return systems


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    code = "import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"  # noqa: E501
    for venv, names in ((".venv", ["duetime"]), (".bench-venv", ["pgqueuer", "procrastinate"])):
        try:
            proc = subprocess.run(
                [str(ROOT / venv / "bin" / "python"), "-c", code, *names],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            )
            out.update(json.loads(proc.stdout))
        except (subprocess.SubprocessError, OSError, ValueError):
            out.update({n: "not installed" for n in names})
    return out


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # stop workers and drop databases on the way out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr
    )
    started = datetime.now(UTC)
    run_id = started.strftime("%Y%m%d%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"{run_id}.json"
    systems = make_systems(args.stores, args.peers)
    if not systems:
        log.error("nothing to measure: no store and no peer chosen")
        return 2
    work_dir = Path(tempfile.mkdtemp(prefix=f"bench-{run_id}-"))
    servers = dbs.Servers(args.pg_url, args.mysql_url, work_dir / "sqlite")
    servers.sqlite_dir.mkdir(parents=True)
    down = dbs.check(servers, {s.store for s in systems})
    skipped: dict[tuple[str, str], str] = {}
    run_units = units(args.workloads, args.settings)
    for w in run_units:
        for s in systems:
            reason = applies(w, s, args.size)
            if s.store in down:
                reason = f"{s.store} unreachable: {down[s.store]}"
            if reason is not None:
                skipped[(w, s.name)] = reason
    for setting in args.settings:
        for s in systems:
            twin = same_as(s, setting, args.settings[: args.settings.index(setting)])
            if twin is not None and (drain_unit(setting), s.name) not in skipped:
                skipped[(drain_unit(setting), s.name)] = f"{report.SAME_AS}{drain_unit(twin)}"

    doc: dict[str, Any] = {
        "started": started.isoformat(),
        "command": " ".join(sys.argv),
        "config": {
            "size": vars(args.size),
            "runs": args.runs,
            "batch": args.batch,
            "systems": [s.name for s in systems],
            "workloads": args.workloads,
            "concurrency_per_worker": 10,
            "pressure": {
                "rate": args.pressure_rate,
                "scale": args.pressure_scale,
                "step": args.pressure_step,
                "pressures": list(args.pressures),
                "server": args.pressure_server,
            },
            "drain_settings": [s.key for s in args.settings],
        },
        "drain_configs": {
            s.name: {
                st.key: tuned.params
                for st in args.settings
                if s.tune is not None and (tuned := s.tune(st)) is not None
            }
            for s in systems
        },
        "versions": versions(),
        "machine": {},
        "results": [],
    }

    def save() -> None:
        json_path.write_text(json.dumps(doc, indent=1))

    t_start = time.monotonic()
    quiet = CpuWatch(f"bench_{run_id}")
    time.sleep(2)
    doc["other_load_before"] = quiet.cores()
    log.info(
        "other work on the machine before the run: %.2f cores", doc["other_load_before"]["other"]
    )
    if not args.no_machine and "postgres" not in down:
        log.info("machine references (pgbench, fdatasync)")
        doc["machine"] = machine.measure(servers, run_id, quick=args.size.label == "tiny")
    save()

    results: list[Result] = []
    bulk_rates: dict[str, float] = {}
    single_rates: dict[str, float] = {}
    try:
        for workload in run_units:
            for rep in range(args.runs):
                for system in systems:
                    if (workload, system.name) in skipped:
                        continue
                    ctx = Ctx(
                        args.size,
                        args.batch,
                        servers,
                        run_id,
                        work_dir,
                        rep,
                        bulk_rates,
                        single_rates,
                        args.pressure_rate,
                        args.pressure_scale,
                        args.pressure_step,
                        args.pressure_server,
                        args.pressures,
                    )
                    log.info("%s run %d/%d: %s ...", workload, rep + 1, args.runs, system.name)
                    result = run_one(ctx, workload, system)
                    shown = ", ".join(f"{k}={v:,.1f}" for k, v in result.figures.items())
                    log.info(
                        "  %s %s (%.0f s)",
                        shown or "",
                        result.note or result.warning or "",
                        result.seconds,
                    )
                    results.append(result)
                    if "bulk_jobs_s" in result.figures:
                        bulk_rates.setdefault(system.name, result.figures["bulk_jobs_s"])
                    if "single_jobs_s" in result.figures:
                        single_rates.setdefault(system.name, result.figures["single_jobs_s"])
                    doc["results"].append(result.to_json())
                    save()
    finally:
        servers.drop_all()

    doc["medians"] = report.medians(results)
    doc["elapsed_s"] = round(time.monotonic() - t_start, 1)
    names = [s.name for s in systems]
    text = report.table(results, names, args.workloads, args.runs, skipped)
    if "bytes" in args.workloads:
        text += "\n" + report.bytes_table(results, names)
    comparison = None
    if DRAIN in args.workloads:
        comparison = report.drain_comparison(
            results, names, args.settings, args.runs, skipped, doc["drain_configs"]
        )
        doc["drain_comparison"] = comparison.data
    if "ceiling" in args.workloads:
        text += "\n" + report.ceiling_lines(results, comparison.data if comparison else None)
    if "pressure" in args.workloads:
        text += "\n" + report.pressure_tables(results)
    if comparison is not None:
        text = comparison.text + "\n" + text
    text += "\n" + report.machine_lines(doc["machine"]) if doc["machine"] else "\n"
    text += (
        f"- other work on the machine (not this benchmark's) just before the run: "
        f"{doc['other_load_before']['other']:.2f} of {doc['other_load_before']['cpus']:.0f} "
        "cores\n"
    )
    doc["table"] = text
    save()

    charts: list[str] = []
    if not args.no_charts:
        bench_python = ROOT / ".bench-venv" / "bin" / "python"
        proc = subprocess.run(
            [str(bench_python), "-m", "bench.charts", str(json_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            log.error("charts failed: %s", proc.stderr.strip()[-2000:])
        charts = proc.stdout.split()

    # a peer's failure is a finding (a note in the table); the harness's or duetime's is not
    failed = any(
        r.note and (r.note.startswith("harness error") or r.system.startswith("duetime"))
        for r in results
    )
    if any(r.note for r in results):
        log.info("records and worker logs kept in %s", work_dir)
    else:
        shutil.rmtree(work_dir, ignore_errors=True)
    heading = (
        f"## duetime benchmark, {started:%Y-%m-%d %H:%M} UTC, size {args.size.label}, "
        f"{args.runs} run(s)\n\n"
    )
    md_path = json_path.with_suffix(".md")
    md_path.write_text(heading + text + f"\nraw figures: {json_path.name}\n")
    sys.stdout.write("\n" + heading + text + f"\nraw figures: {json_path}\nreport: {md_path}\n")
    for chart in charts:
        sys.stdout.write(f"chart: {chart}\n")
    sys.stdout.write(f"elapsed: {doc['elapsed_s']:.0f} s\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

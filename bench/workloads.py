"""The workloads: each runs once for one system on a fresh database and returns a Result.

Every workload creates its own database (unique name), sets the system's schema up, and
drops the database at the end, whatever happened. A system that cannot do a workload raises
procs.Failed (or any exception): the Result then carries a note and no figures.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import random
import shutil
import socket
import statistics
import subprocess
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.common import read_records
from bench.dbs import Database, Servers
from bench.load import CpuWatch
from bench.procs import ROOT, Failed, Workers, _env, run_step, wait_done
from bench.sizes import TABLES
from bench.systems.base import Setting, System

log = logging.getLogger("bench")

SERIES_STEP = 0.5  # seconds per bin of the throughput-over-time series
MIN_RATE = 100.0  # jobs/s: a drain or burst slower than this on average times out
STEP_TIMEOUT = 1800.0


@dataclass(frozen=True)
class Size:
    label: str
    n: int  # bulk enqueue and drain jobs
    single: int  # one-at-a-time enqueue jobs
    delayed: int  # start-on-time jobs
    window: float  # seconds the start-on-time due instants are spread over
    burst: int  # jobs of the burst (M)
    backlog: int  # future and finished jobs of the backlog workload (0: skipped)
    claims: int  # claim calls timed in the backlog workload
    warmup: float = 3.0  # seconds between starting workers and enqueueing due-later jobs
    lead: float = 3.0  # least seconds between that enqueue's start and the first due instant

    @staticmethod
    def parse(text: str) -> Size:
        if text == "tiny":
            return Size("tiny", 400, 40, 200, 2.0, 800, 0, 50, warmup=1.5, lead=2.0)
        n = int(text)
        if n < 10:
            raise ValueError("size must be 'tiny' or at least 10 jobs")
        full = n >= 20_000
        return Size(
            label=str(n),
            n=n,
            single=n // 10,
            delayed=2000 if full else max(100, n // 10),
            window=10.0,
            burst=5 * n,
            backlog=1_000_000 if full else 0,
            claims=200,
        )


@dataclass
class Ctx:
    size: Size
    batch: int  # jobs per batch-enqueue call, the same for every system
    servers: Servers
    run_id: str
    work_dir: Path  # records and worker logs (kept when a run fails)
    rep: int = 0
    # enqueue rates measured earlier in this run (system -> jobs/s), to enqueue delayed jobs
    # early enough: the bulk rate for the burst, the one-at-a-time rate for start-on-time
    bulk_rates: dict[str, float] = field(default_factory=dict)
    single_rates: dict[str, float] = field(default_factory=dict)
    # the pressure workload (bench/pressure.py): offered jobs/s, the phases' durations over
    # the issue's, seconds between samples
    pressure_rate: float = 1000.0
    pressure_scale: float = 1.0
    pressure_step: float = 5.0
    pressure_server: str = "private"  # a PostgreSQL cluster of its own, or "shared" (--pg-url)
    pressures: tuple[str, ...] = ("hold", "load", "counts")  # which run, in this order


@dataclass
class Result:
    workload: str
    system: str
    rep: int
    figures: dict[str, float] = field(default_factory=dict)
    note: str | None = None  # why there are no figures
    warning: str | None = None  # figures kept, but read them with this in mind
    series: dict[str, list[list[float]]] = field(default_factory=dict)
    samples: dict[str, list[float]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "system": self.system,
            "rep": self.rep,
            "figures": self.figures,
            "note": self.note,
            "warning": self.warning,
            "series": self.series,
            "samples": self.samples,
            "info": self.info,
            "seconds": round(self.seconds, 2),
        }


# -- helpers ----------------------------------------------------------------------------------


def _db_name(ctx: Ctx, workload: str, system: System, tag: str = "") -> str:
    return f"bench_{ctx.run_id}_{workload}{tag}_{system.name.replace('-', '_')}_{ctx.rep}"


def _drain_timeout(jobs: int) -> float:
    return 120.0 + jobs / MIN_RATE


def _interpolate(samples: list[tuple[float, int]], t: float) -> float:
    if t <= samples[0][0]:
        return float(samples[0][1])
    for (t0, d0), (t1, d1) in itertools.pairwise(samples):
        if t0 <= t <= t1:
            return d0 + (d1 - d0) * (t - t0) / (t1 - t0) if t1 > t0 else float(d1)
    return float(samples[-1][1])


def throughput_series(samples: list[tuple[float, int]], origin: float) -> list[list[float]]:
    """Completions per second in SERIES_STEP bins from `origin`, from the probe's samples."""
    series: list[list[float]] = []
    end = samples[-1][0]
    t = origin
    while t < end:
        a, b = _interpolate(samples, t), _interpolate(samples, t + SERIES_STEP)
        series.append([round(t - origin, 3), round((b - a) / SERIES_STEP, 1)])
        t += SERIES_STEP
    return series


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted values."""
    rank = max(1, min(len(sorted_values), round(q / 100 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


def _fresh(ctx: Ctx, system: System, workload: str, tag: str = "") -> Database:
    db = ctx.servers.create(system.store, _db_name(ctx, workload, system, tag))
    run_step(system, "setup", {"url": db.url}, STEP_TIMEOUT)
    return db


def _done(ctx: Ctx, db: Database) -> None:
    db.drop()
    ctx.servers.forget(db)


def _dirs(ctx: Ctx, name: str) -> tuple[Path, Path]:
    base = ctx.work_dir / name
    if base.exists():
        shutil.rmtree(base)
    return base / "records", base / "logs"


# -- drains ---------------------------------------------------------------------------------------


@dataclass
class Drain:
    jobs_per_s: float
    rss_mib: list[float]
    series: list[list[float]]
    first_start: float
    last_done: float


def drain(
    ctx: Ctx,
    system: System,
    db: Database,
    jobs: int,
    workers: int,
    name: str,
    task: str | None = None,
    payload_bytes: int = 0,
) -> Drain:
    """Enqueue `jobs` with the batch API, then start `workers` processes and time the drain
    from the first job start (handlers' records) to the probe seeing the last one done.
    `task`: a task of the system's bench app other than its default one (duetime only);
    `payload_bytes`: each job's arguments padded to that many bytes of JSON (duetime only)."""
    params: dict[str, Any] = {"url": db.url, "n": jobs, "batch": ctx.batch}
    if task is not None:
        params["task"] = task
    if payload_bytes:
        params["payload_bytes"] = payload_bytes
    run_step(system, "enqueue_bulk", params, STEP_TIMEOUT)
    baseline = system.done(db.count(system.done_query), jobs)
    record_dir, log_dir = _dirs(ctx, name)
    with Workers(system, db, workers, record_dir, log_dir) as w:
        samples = wait_done(system, db, jobs, baseline + jobs, w, _drain_timeout(jobs))
        rss = w.peak_rss_mib()
    records = read_records(record_dir)
    if not records:
        raise Failed("no handler ran")
    first_start = min(start for start, _ in records)
    last_done = samples[-1][0]
    samples = [(t, d - baseline) for t, d in samples]
    return Drain(
        jobs_per_s=jobs / (last_done - first_start),
        rss_mib=rss,
        series=throughput_series(samples, first_start),
        first_start=first_start,
        last_done=last_done,
    )


def w_bulk(ctx: Ctx, system: System, result: Result) -> None:
    db = _fresh(ctx, system, "bulk")
    try:
        r = run_step(
            system, "enqueue_bulk", {"url": db.url, "n": ctx.size.n, "batch": ctx.batch}, 3600
        )
        result.figures["bulk_jobs_s"] = r["jobs"] / r["seconds"]
    finally:
        _done(ctx, db)


def w_single(ctx: Ctx, system: System, result: Result) -> None:
    db = _fresh(ctx, system, "single")
    try:
        r = run_step(system, "enqueue_single", {"url": db.url, "n": ctx.size.single}, 3600)
        result.figures["single_jobs_s"] = r["jobs"] / r["seconds"]
    finally:
        _done(ctx, db)


def _w_drain(workers: int) -> Callable[[Ctx, System, Result], None]:
    def run(ctx: Ctx, system: System, result: Result) -> None:
        key = f"drain{workers}"
        db = _fresh(ctx, system, key)
        try:
            d = drain(ctx, system, db, ctx.size.n, workers, f"{key}-{system.name}-{ctx.rep}")
        finally:
            _done(ctx, db)
        result.figures[f"{key}_jobs_s"] = d.jobs_per_s
        if d.rss_mib:
            result.figures[f"{key}_rss_mib"] = max(d.rss_mib)
        result.info["rss_mib_per_worker"] = d.rss_mib
        result.info["drain_seconds"] = d.last_done - d.first_start
        result.series["throughput"] = d.series

    return run


DRAIN = "drain"  # the drain comparison: one unit of work per Setting, named drain:<key>


def drain_unit(setting: Setting) -> str:
    return f"{DRAIN}:{setting.key}"


def unit_setting(workload: str) -> Setting | None:
    """The Setting of a drain-comparison unit (None for any other workload)."""
    if not workload.startswith(DRAIN + ":"):
        return None
    return Setting.parse(workload[len(DRAIN) + 1 :])


def w_drain_setting(ctx: Ctx, system: System, result: Result, setting: Setting) -> None:
    """The drain of the comparison: N jobs, then `setting.procs` workers configured as the
    Setting says for this system (docs/performance.md, "The drain comparison")."""
    tuned = system.tune(setting) if system.tune is not None else None
    if tuned is None:
        raise Failed(f"{system.name} has no {setting.label} configuration")
    tuned_system = replace(system, worker_argv=tuned.argv)
    result.info["setting"] = setting.key
    result.info["params"] = tuned.params
    result.info["argv"] = tuned.argv("<url>")
    db = _fresh(ctx, system, "drain", "_" + setting.key.replace("-", "_"))
    try:
        name = f"drain-{setting.key}-{system.name}-{ctx.rep}"
        d = drain(ctx, tuned_system, db, ctx.size.n, setting.procs, name)
    finally:
        _done(ctx, db)
    result.figures["drain_jobs_s"] = d.jobs_per_s
    if d.rss_mib:
        result.figures["drain_rss_mib"] = max(d.rss_mib)
    result.info["rss_mib_per_worker"] = d.rss_mib
    result.info["drain_seconds"] = d.last_done - d.first_start
    result.series["throughput"] = d.series


def w_ontime(ctx: Ctx, system: System, result: Result) -> None:
    """Jobs due at random instants over a window, enqueued before they are due, two workers
    already running: how late does each start, measured against the due instant the system
    itself hands the handler."""
    count, window = ctx.size.delayed, ctx.size.window
    rng = random.Random(1000 + ctx.rep)  # the same instants for every system in a run
    offsets = sorted(rng.uniform(0, window) for _ in range(count))
    # one call per job, in due order: start the window late enough that the enqueue keeps
    # ahead of the due instants (pgqueuer enqueues them in one call)
    rate = ctx.single_rates.get(system.name, 200.0)
    lead = ctx.size.lead + max(0.0, 1.3 * count / rate - window)
    db = _fresh(ctx, system, "ontime")
    record_dir, log_dir = _dirs(ctx, f"ontime-{system.name}-{ctx.rep}")
    try:
        with Workers(system, db, 2, record_dir, log_dir) as w:
            time.sleep(ctx.size.warmup)
            w.check_alive()
            start = time.time() + lead
            dues = [start + o for o in offsets]
            r = run_step(system, "enqueue_delayed", {"url": db.url, "dues": dues}, 600)
            wait_done(system, db, count, count, w, lead + window + 120)
    finally:
        _done(ctx, db)
    records = read_records(record_dir)
    lags = sorted((s - d) * 1000 for s, d in records)
    if not lags:
        raise Failed("no handler ran")
    result.figures.update(
        {
            "ontime_p50_ms": _percentile(lags, 50),
            "ontime_p99_ms": _percentile(lags, 99),
            "ontime_max_ms": lags[-1],
            "ontime_early": float(sum(1 for lag in lags if lag < 0)),
        }
    )
    result.samples["lag_ms"] = [round(x, 2) for x in lags]
    warnings = []
    if r["late"]:
        warnings.append(f"{r['late']} of {count} jobs were enqueued after their due instant")
    if len(lags) != count:
        warnings.append(f"{len(lags)} handler starts for {count} jobs")
    result.warning = "; ".join(warnings) or None


def w_burst(ctx: Ctx, system: System, result: Result) -> None:
    """M jobs all due at one instant T, enqueued before T, two workers already running."""
    m = ctx.size.burst
    lead = ctx.size.lead + 1.5 * m / ctx.bulk_rates.get(system.name, 2000.0)
    db = _fresh(ctx, system, "burst")
    record_dir, log_dir = _dirs(ctx, f"burst-{system.name}-{ctx.rep}")
    try:
        with Workers(system, db, 2, record_dir, log_dir) as w:
            time.sleep(ctx.size.warmup)
            w.check_alive()
            at = time.time() + lead
            r = run_step(
                system, "enqueue_burst", {"url": db.url, "m": m, "at": at, "batch": ctx.batch}, 3600
            )
            samples = wait_done(system, db, m, m, w, lead + _drain_timeout(m))
            rss = w.peak_rss_mib()
    finally:
        _done(ctx, db)
    records = read_records(record_dir)
    if not records:
        raise Failed("no handler ran")
    first = min(s for s, _ in records)
    result.figures["burst_first_ms"] = (first - at) * 1000
    result.figures["burst_done_s"] = samples[-1][0] - at
    if rss:
        result.figures["burst_rss_mib"] = max(rss)
    result.series["throughput"] = throughput_series(samples, at)
    result.info["enqueue_finished_before_T_s"] = at - r["finished_at"]
    if r["finished_at"] > at:
        result.warning = f"the enqueue ended {r['finished_at'] - at:.1f} s after T"


def w_backlog(ctx: Ctx, system: System, result: Result) -> None:
    """duetime on PostgreSQL: drain N and time claims on an empty database, then again with
    `backlog` jobs due far in the future and `backlog` finished jobs kept."""
    n, big = ctx.size.n, ctx.size.backlog
    for variant in ("empty", "full"):
        db = _fresh(ctx, system, "backlog", variant[0])
        try:
            if variant == "full":
                r = run_step(
                    system, "fill_backlog", {"url": db.url, "future": big, "finished": big}, 7200
                )
                result.info["fill"] = r
            # the probe counts the drained jobs only (ids past the fill's), through the listing
            # index: counting every succeeded job took 50 ms and more with the backlog, so the
            # probe (PROBE_SHARE) looked only every second or two and the drain's end was late
            top = db.count(
                "SELECT GREATEST((SELECT COALESCE(MAX(id), 0) FROM duetime_jobs), "
                "(SELECT COALESCE(MAX(id), 0) FROM duetime_jobs_done))"
            )
            # both tables: a job that ended moves to the history table (docs/history-plan.md)
            past = f"tenant = 'default' AND status = 'succeeded' AND id > {int(top)}"
            done = f"SELECT (SELECT count(*) FROM duetime_jobs WHERE {past}) + "  # noqa: S608
            done += f"(SELECT count(*) FROM duetime_jobs_done WHERE {past})"  # noqa: S608
            probe = replace(system, done_query=done)
            name = f"backlog-{variant}-{system.name}-{ctx.rep}"
            d = drain(ctx, probe, db, n, 2, name)
            c = run_step(system, "claim_latency", {"url": db.url, "calls": ctx.size.claims}, 1800)
        finally:
            _done(ctx, db)
        result.figures[f"backlog_{variant}_drain_jobs_s"] = d.jobs_per_s
        result.figures[f"backlog_{variant}_claim_ms"] = c["median_ms"]
        result.info[f"claim_{variant}"] = c
        result.series[f"throughput_{variant}"] = d.series


BYTES_PAYLOAD = 256  # bytes of JSON arguments per job in the bytes workload
BYTES_WORKERS = 2


def w_bytes(ctx: Ctx, system: System, result: Result) -> None:
    """duetime's bytes on disk per finished job: N jobs with a 256-byte JSON payload drained
    by 2 workers (defaults otherwise), then (PostgreSQL) a plain VACUUM of the jobs and
    attempts tables; the bytes of those tables, their TOAST and each index, over N
    (bench/sizes.py says how each dialect is measured). PostgreSQL also reports its update
    counters of the drain: updates, and how many were HOT."""
    from bench.bench_app import PAYLOAD_TASK

    n = ctx.size.n
    db = _fresh(ctx, system, "bytes")
    try:
        name = f"bytes-{system.name}-{ctx.rep}"
        d = drain(ctx, system, db, n, BYTES_WORKERS, name, PAYLOAD_TASK, BYTES_PAYLOAD)
        if system.store == "postgres":
            time.sleep(1.0)  # the workers' last statistics reach pg_stat_user_tables
            result.info["updates"] = db.updates()
        sizes = db.sizes()
    finally:
        _done(ctx, db)
    result.info["sizes"] = sizes
    result.info["jobs"] = n
    result.figures["bytes_per_job"] = sum(sizes.values()) / n
    for table in TABLES:
        mine = {k: v for k, v in sizes.items() if k == table or k.startswith(table + ".")}
        result.figures[f"bytes_{table[len('duetime_') :]}_per_job"] = sum(mine.values()) / n
    result.figures["bytes_drain_jobs_s"] = d.jobs_per_s
    updates = result.info.get("updates", {})
    for table in TABLES:
        if updates.get(f"{table}.upd"):
            short = table[len("duetime_") :]
            result.figures[f"bytes_{short}_hot_share"] = (
                updates[f"{table}.hot_upd"] / updates[f"{table}.upd"]
            )


FLOW_SETUPS = ("off", "cap", "weight", "limit", "all")


def w_flow(ctx: Ctx, system: System, result: Result) -> None:
    """duetime with flow control off and on (docs/flow-control.md): drain N with 2 workers
    on a fresh database each time: no controls (off); a concurrency cap of 1000 on the queue
    and on the tenant, far above the 20 worker slots (cap); a tenant weight of 2 (weight);
    jobs carrying a limit key whose limit never binds (limit); all of these (all). jobs/s of
    each, and each over off from the same run."""
    from bench.bench_app import LIMITED_TASK

    for setup in FLOW_SETUPS:
        db = _fresh(ctx, system, "flow", setup[0])
        try:
            if setup != "off":
                result.info[f"controls_{setup}"] = run_step(
                    system, "flow_setup", {"url": db.url, "setup": setup}, STEP_TIMEOUT
                )
            name = f"flow-{setup}-{system.name}-{ctx.rep}"
            task = LIMITED_TASK if setup in ("limit", "all") else None
            d = drain(ctx, system, db, ctx.size.n, 2, name, task)
        finally:
            _done(ctx, db)
        result.figures[f"flow_{setup}_jobs_s"] = d.jobs_per_s
        result.series[f"throughput_{setup}"] = d.series
    off = result.figures["flow_off_jobs_s"]
    for setup in FLOW_SETUPS[1:]:
        result.figures[f"flow_{setup}_ratio"] = result.figures[f"flow_{setup}_jobs_s"] / off


def broker_url() -> str:
    return os.environ.get(
        "DUETIME_BENCH_AMQP_URL",
        os.environ.get("DUETIME_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672/"),
    )


def broker_answers(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5672), 1.0):
            return True
    except OSError:
        return False


def w_outbox(ctx: Ctx, system: System, result: Result) -> None:
    """duetime with its queue in outbox mode (docs/outbox.md): one `duetime relay` and
    broker-fed workers on RabbitMQ. drain1: N jobs enqueued, then the relay and one worker:
    jobs/s from the first start to the last done (compare drain1). ontime: jobs due at random
    instants, the relay and two workers running: start minus due (compare ontime)."""
    from bench.systems.duetime_sys import outbox_argvs

    url = broker_url()
    worker_argv, relay_argv = outbox_argvs(ROOT, url)
    fed = replace(system, worker_argv=worker_argv)
    relay = replace(system, worker_argv=relay_argv)

    # throughput: drain N with one broker-fed worker
    db = _fresh(ctx, system, "outbox", "d")
    try:
        run_step(system, "outbox_setup", {"url": db.url, "broker_url": url}, STEP_TIMEOUT)
        jobs = ctx.size.n
        run_step(system, "enqueue_bulk", {"url": db.url, "n": jobs, "batch": ctx.batch}, 3600)
        record_dir, log_dir = _dirs(ctx, f"outbox-drain-{system.name}-{ctx.rep}")
        with (
            Workers(relay, db, 1, record_dir, log_dir / "relay"),
            Workers(fed, db, 1, record_dir, log_dir) as w,
        ):
            samples = wait_done(system, db, jobs, jobs, w, _drain_timeout(jobs))
        records = read_records(record_dir)
        if not records:
            raise Failed("no handler ran")
        first = min(start for start, _ in records)
        result.figures["outbox_drain1_jobs_s"] = jobs / (samples[-1][0] - first)
        result.series["throughput"] = throughput_series(samples, first)
    finally:
        _done(ctx, db)

    # start lag: jobs due at random instants, the relay and two broker-fed workers running
    count, window = ctx.size.delayed, ctx.size.window
    rng = random.Random(1000 + ctx.rep)  # the instants of the ontime workload
    offsets = sorted(rng.uniform(0, window) for _ in range(count))
    rate = ctx.single_rates.get(system.name, 200.0)
    lead = ctx.size.lead + max(0.0, 1.3 * count / rate - window)
    db = _fresh(ctx, system, "outbox", "o")
    record_dir, log_dir = _dirs(ctx, f"outbox-ontime-{system.name}-{ctx.rep}")
    try:
        run_step(system, "outbox_setup", {"url": db.url, "broker_url": url}, STEP_TIMEOUT)
        with (
            Workers(relay, db, 1, record_dir, log_dir / "relay"),
            Workers(fed, db, 2, record_dir, log_dir) as w,
        ):
            time.sleep(ctx.size.warmup)
            w.check_alive()
            start = time.time() + lead
            dues = [start + o for o in offsets]
            run_step(system, "enqueue_delayed", {"url": db.url, "dues": dues}, 600)
            wait_done(system, db, count, count, w, lead + window + 120)
    finally:
        _done(ctx, db)
    lags = sorted((s - d) * 1000 for s, d in read_records(record_dir))
    if not lags:
        raise Failed("no handler ran")
    result.figures.update(
        {
            "outbox_ontime_p50_ms": _percentile(lags, 50),
            "outbox_ontime_p99_ms": _percentile(lags, 99),
            "outbox_ontime_early": float(sum(1 for lag in lags if lag < 0)),
        }
    )
    result.samples["lag_ms"] = [round(x, 2) for x in lags]


# client processes of the ceiling workload: with 4, the 2 cores are busy (the statements'
# ceiling on this machine), with 1 and 2 the drains' counterparts
CEILING_PROCS = (1, 2, 4)


def w_ceiling(ctx: Ctx, system: System, result: Result) -> None:
    """The raw ceiling (bench/ceiling.py): N jobs enqueued (batch API), then 1, 2 and 4 client
    processes claim and finish them BATCH at a time through duetime's store layer, each on a
    fresh database: jobs/s from the clients' common start to the last one's end. The
    load average is recorded before each (other sessions' work shares the machine)."""
    from bench.ceiling import BATCH

    n = ctx.size.n
    for procs in CEILING_PROCS:
        db = _fresh(ctx, system, "ceiling", str(procs))
        try:
            run_step(system, "enqueue_bulk", {"url": db.url, "n": n, "batch": ctx.batch}, 3600)
            load = os.getloadavg()[0]
            start_at = time.time() + 3.0  # time for every client to import and connect
            clients = []
            for i in range(procs):
                params = {"url": db.url, "worker": f"ceiling-{i}", "start_at": start_at}
                argv = [str(system.python), "-m", "bench.ceiling", "client", json.dumps(params)]
                clients.append(
                    subprocess.Popen(
                        argv,
                        cwd=ROOT,
                        env=_env(db.url, None),
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                )
            outs = []
            for proc in clients:
                out, err = proc.communicate(timeout=_drain_timeout(n))
                if proc.returncode != 0:
                    lines = err.strip().splitlines()
                    raise Failed(
                        f"ceiling client failed: {lines[-1] if lines else proc.returncode}"
                    )
                outs.append(json.loads(out.strip().splitlines()[-1]))
            done = system.done(db.count(system.done_query), n)
        finally:
            _done(ctx, db)
        finished = sum(o["finished"] for o in outs)
        if finished != n or done != n:
            raise Failed(f"ceiling: {finished} finished by the clients, {done} done of {n}")
        seconds = max(o["ended"] for o in outs) - min(o["started"] for o in outs)
        result.figures[f"ceiling{procs}_jobs_s"] = n / seconds
        result.figures[f"ceiling{procs}_load1"] = load
        result.info[f"ceiling{procs}"] = {"clients": outs, "batch": BATCH, "seconds": seconds}


def w_pressure(ctx: Ctx, system: System, result: Result) -> None:
    """duetime on PostgreSQL (or pgqueuer) at a steady offered rate through a held
    transaction, 1.5x the load and REPEATABLE READ counts (bench/pressure.py; issue 22, "Flat
    under pressure")."""
    from bench import pressure

    base = ctx.work_dir / f"pressure-{system.name}-{ctx.rep}"
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    with contextlib.ExitStack() as stack:
        servers = ctx.servers
        if ctx.pressure_server == "private":
            url = stack.enter_context(pressure.private_server())
            servers = Servers(url, ctx.servers.mysql_url, ctx.servers.sqlite_dir)
        db = servers.create(system.store, _db_name(ctx, "pressure", system))
        try:
            run_step(system, "setup", {"url": db.url}, STEP_TIMEOUT)
            settings = pressure.server_settings(db.url)
            doc, verdict = pressure.run(
                system,
                db,
                base,
                ctx.pressure_rate,
                ctx.pressure_scale,
                ctx.pressure_step,
                ctx.pressures,
            )
        finally:
            db.drop()
            servers.forget(db)
    doc["server"] = {"kind": ctx.pressure_server, "settings": settings}
    result.info["pressure"] = doc
    result.figures.update(pressure.figures_of(verdict))
    if doc.get("repeats"):
        result.warning = (
            f"{doc['repeats']} jobs were queued or picked more than once (a retry, a stale "
            "heartbeat): the claim latency pairs each of their rows (bench/pressure.py, Tables)"
        )
    late = doc["enqueuer"].get("late_1s_ticks", 0)
    if late > 0.01 * doc["enqueuer"].get("ticks", 1):
        result.warning = (
            f"the enqueuer reached {late} of its {doc['enqueuer']['ticks']} ticks more than 1 s "
            f"late (at worst {doc['enqueuer']['worst_late_s']:.1f} s): the offered rate fell "
            "short while it was behind (the enqueued column shows by how much)"
        )


FANOUT_MAX = 10_000  # children of the fanout workload at most (a job's parents at most)
FANOUT_WORKERS = 2


def w_fanout(ctx: Ctx, system: System, result: Result) -> None:
    """duetime only: a group of min(N, 10,000) children and one callback depending on all of
    them (App.group, one transaction), then 2 worker processes: the time from the last
    child's end (its attempt's finished_at) to the callback's start (its attempt's
    started_at), both as the database recorded them; also the enqueue's seconds and the
    children's drain rate. The callback reads every child's result (parent_results)."""
    n = min(ctx.size.n, FANOUT_MAX)
    db = _fresh(ctx, system, "fanout")
    try:
        made = run_step(system, "enqueue_fanout", {"url": db.url, "n": n}, STEP_TIMEOUT)
        record_dir, log_dir = _dirs(ctx, f"fanout-{system.name}-{ctx.rep}")
        with Workers(system, db, FANOUT_WORKERS, record_dir, log_dir) as w:
            wait_done(system, db, n + 1, n + 1, w, _drain_timeout(n))
        times = run_step(
            system, "fanout_times", {"url": db.url, "callback": made["callback"]}, STEP_TIMEOUT
        )
    finally:
        _done(ctx, db)
    if times["callback_status"] != "succeeded" or times["callback_result"] != n * (n - 1) // 2:
        raise Failed(f"the callback ended {times['callback_status']}: {times['callback_result']}")
    gap = times["callback_start"] - times["last_child_end"]
    result.figures["fanout_callback_ms"] = gap * 1000
    result.figures["fanout_enqueue_s"] = made["seconds"]
    drained = times["last_child_end"] - times["first_child_start"]
    result.figures["fanout_children_jobs_s"] = n / drained if drained > 0 else 0.0
    result.info["fanout"] = {**times, "enqueue_seconds": made["seconds"], "workers": FANOUT_WORKERS}
    if gap < 0:
        result.warning = "the callback started before the last child ended: a bug"


WORKLOADS: dict[str, Callable[[Ctx, System, Result], None]] = {
    "bulk": w_bulk,
    "single": w_single,
    "drain": lambda ctx, system, result: None,  # expanded into drain:<setting> units (run.py)
    "drain1": _w_drain(1),
    "drain2": _w_drain(2),
    "drain4": _w_drain(4),  # capacity: only when named (not in "all")
    "drain8": _w_drain(8),
    "ontime": w_ontime,
    "burst": w_burst,
    "backlog": w_backlog,
    "outbox": w_outbox,
    "flow": w_flow,
    "bytes": w_bytes,
    "ceiling": w_ceiling,
    "pressure": w_pressure,
    "fanout": w_fanout,
}
# left out of BENCH_WORKLOADS=all: the drain comparison covers 1 and 2 workers; drainN runs
# every system at 10 jobs at once per worker (pgqueuer at its defaults) with N workers; the
# raw ceiling is a reference for the drains, measured beside drain1 and drain2; pressure
# takes 20 minutes at full scale
ONLY_WHEN_NAMED = ("drain1", "drain2", "drain4", "drain8", "ceiling", "pressure")


def applies(workload: str, system: System, size: Size) -> str | None:
    """Why a workload is not run for a system (None: it is)."""
    setting = unit_setting(workload)
    if setting is not None:
        if system.tune is None or system.tune(setting) is None:
            return f"n/a: {system.name} has no such configuration"
        return None
    if workload == "outbox":
        if system.kind != "duetime" or system.store == "mysql":
            return "n/a: duetime on PostgreSQL and SQLite only"
        if not broker_answers(broker_url()):
            return f"skipped: no RabbitMQ answers at {broker_url()} (DUETIME_BENCH_AMQP_URL)"
    if workload == "ceiling" and system.name != "duetime-postgres":
        return "n/a: duetime on PostgreSQL only"
    if workload == "bytes" and system.kind != "duetime":
        return "n/a: duetime only (its tables)"
    if workload == "flow" and system.kind != "duetime":
        return "n/a: duetime only (its flow controls)"
    if workload == "fanout" and system.kind != "duetime":
        return "n/a: duetime only (its groups with a callback)"
    if workload == "pressure" and system.name not in ("duetime-postgres", "pgqueuer"):
        return "n/a: PostgreSQL systems only (the pressures are PostgreSQL transactions)"
    if workload == "backlog":
        if system.name != "duetime-postgres":
            return "n/a: duetime on PostgreSQL only"
        if not size.backlog:
            return "skipped below full size (BENCH_SIZE >= 20000)"
    return None


OTHER_LOAD_LIMIT = 0.25  # cores used by other work during a run before its figures are flagged


def run_one(ctx: Ctx, workload: str, system: System) -> Result:
    result = Result(workload, system.name, ctx.rep)
    t0 = time.monotonic()
    watch = CpuWatch(f"bench_{ctx.run_id}")
    try:
        setting = unit_setting(workload)
        if setting is not None:
            w_drain_setting(ctx, system, result, setting)
        else:
            WORKLOADS[workload](ctx, system, result)
    except Failed as exc:
        result.note = str(exc)
    except Exception as exc:
        log.error("%s %s crashed:\n%s", workload, system.name, traceback.format_exc())
        result.note = f"harness error: {type(exc).__name__}: {exc}"
    if result.note:
        result.figures = {}
    result.seconds = time.monotonic() - t0
    cpu = watch.cores()
    result.info["cpu_cores"] = cpu
    if cpu["other"] > OTHER_LOAD_LIMIT and result.figures:
        busy = (
            f"other work on the machine used up to {cpu['other']:.1f} "
            f"of its {cpu['cpus']:.0f} cores"
        )
        result.warning = f"{result.warning}; {busy}" if result.warning else busy
    return result


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None

"""The `pressure` workload (issue 22, "Flat under pressure"): duetime on PostgreSQL, and
pgqueuer beside it, at a steady offered rate, through a held transaction, 1.5x the load and
REPEATABLE READ counts.

- Workers: PROCS worker processes at CONCURRENCY jobs at once each (32 in all), running a
  job that takes 1 ms (an `asyncio.sleep(0.001)`): `duetime worker` running `bench.sleep1ms`,
  defaults otherwise (finished jobs are kept: the default retention is 7 days, so the tables
  grow as a user's would); pgqueuer's runner (bench/pgqueuer_app.py) with `batch_size`
  CONCURRENCY and no cap, its entrypoint `bench_sleep1ms` (its queue table keeps a job until
  it ends, its log table a row per status change).
- Offered load: one enqueuer process (the system's `pressure_enqueue` step,
  bench/pressure_offer.py) sends, every TICK seconds on a fixed schedule from the origin, the
  jobs the schedule has offered by then and it has not sent (R jobs/s times the phase's
  factor; due now) in one call (duetime's `App.enqueue_many`, pgqueuer's `Queries.enqueue`
  of lists). It never waits for the workers; a tick it reaches late is counted.
- Phases (bench/pressure_plan.py): warmup, clean, then for each pressure its window and a
  recovery window. The orchestrator opens the pressure connections itself: `hold` one
  connection in a transaction (`SELECT txid_current()`, then idle) for the window, `counts`
  four threads each running `REPEATABLE READ` transactions of one `SELECT count(*)` of the
  system's jobs table (`duetime_jobs`, `pgqueuer`) back to back for the window.
- Samples every `step` seconds from a connection of their own: queued jobs (due, not claimed),
  jobs enqueued so far, n_live_tup and n_dead_tup of the tables (pg_stat_user_tables: the
  server's statistics, which lag by up to a second or more), their sizes (heap, TOAST,
  indexes), the oldest transaction's xmin age in the database, running vacuums, the CPU of
  the workers, the enqueuer and PostgreSQL (its processes except other databases' backends,
  bench/load.py), the machine's busy cores and load average.
- A probe process (bench/pressure_probe.py) measures, every PROBE_EVERY seconds, how late a
  sleeping process wakes and one `SELECT 1` round trip: what the machine gives any process in
  each phase, reported beside the claims' latency.
- Afterwards, from the claims the run kept (Tables.views): finished per step and per phase,
  claim latency (the claim's instant minus the due instant) p50/p99 per step (by the claim)
  and per phase (of the jobs due in it), jobs offered per phase. These join the samples; the
  verdict is bench/pressure_plan.judge. Beside it, not judged: the enqueuer's calls' duration
  per phase, and each claim's latency counted from the end of its job's call.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench import pressure_plan as plan
from bench.dbs import Database
from bench.load import HZ, _busy_seconds, _db_seconds
from bench.procs import ROOT, Failed, Workers, _env
from bench.systems.base import Setting, System

log = logging.getLogger("bench")

PROCS = 2
CONCURRENCY = 16
TICK = 0.02  # seconds between the enqueuer's batches
TASK = "bench.sleep1ms"  # bench/bench_app.py
DRAIN_GRACE = 60.0  # seconds after the schedule for the queue to empty before workers stop
PROBE_EVERY = 0.02  # seconds between the probe's measurements (bench/pressure_probe.py)
WAITS_EVERY = 0.1  # seconds between the probe's samples of the backends' waits


@dataclass(frozen=True)
class Tables:
    """Where a system keeps the pressure workload's jobs, for the counts, the samples and the
    figures afterwards."""

    counted: str  # the jobs table the counting connections read (the "jobs table")
    sampled: dict[str, str]  # table -> its short name in the samples ("jobs", "attempts", ...)
    queued: str  # a scalar query: jobs due and not claimed
    enqueued: str  # a scalar query: jobs enqueued so far
    # temporary views the figures read: pressure_attempts(due_at, started_at, finished_at),
    # one row per claim; pressure_jobs(due_at, unclaimed), one row per job
    views: tuple[str, ...]
    # a scalar query: how many jobs the views cannot pair up (0 where they always can)
    repeats: str = "SELECT 0"


DUETIME = Tables(
    counted="duetime_jobs",
    sampled=plan.DUETIME_TABLES,
    queued="SELECT count(*) FROM duetime_jobs WHERE status = 'scheduled' AND due_at <= now()",
    enqueued="""SELECT GREATEST((SELECT COALESCE(max(id), 0) FROM duetime_jobs),
                     (SELECT COALESCE(max(id), 0) FROM duetime_jobs_done))""",
    views=(
        """CREATE TEMP VIEW pressure_attempts AS
        SELECT due_at, started_at, finished_at FROM duetime_all_attempts""",
        """CREATE TEMP VIEW pressure_jobs AS
        SELECT due_at, status = 'scheduled' AS unclaimed FROM duetime_jobs
        UNION ALL SELECT due_at, status = 'scheduled' FROM duetime_jobs_done""",
    ),
)

# pgqueuer 1.6.0: a job's row in `pgqueuer` from its enqueue to its end (deleted by the
# statement that logs its outcome); `pgqueuer_log` keeps a row per status change ('queued'
# at the enqueue, 'picked' at the claim, 'successful' at the end), each stamped with its
# transaction's now(). A job due now has execute_after = the enqueue's now(), which is its
# 'queued' row's instant, so its claim latency is 'picked' minus 'queued'.
PGQUEUER = Tables(
    counted="pgqueuer",
    sampled={"pgqueuer": "jobs", "pgqueuer_log": "attempts"},
    queued="SELECT count(*) FROM pgqueuer WHERE status = 'queued' AND execute_after <= now()",
    enqueued="SELECT COALESCE(max(job_id), 0) FROM pgqueuer_log WHERE status = 'queued'",
    views=(
        """CREATE TEMP VIEW pressure_attempts AS
        SELECT q.created AS due_at, p.created AS started_at, f.created AS finished_at
        FROM pgqueuer_log p
        JOIN pgqueuer_log q ON q.job_id = p.job_id AND q.status = 'queued'
        LEFT JOIN pgqueuer_log f ON f.job_id = p.job_id
            AND f.status IN ('successful', 'exception', 'canceled', 'failed')
        WHERE p.status = 'picked'""",
        """CREATE TEMP VIEW pressure_jobs AS
        SELECT q.created AS due_at, NOT EXISTS (
            SELECT 1 FROM pgqueuer_log p WHERE p.job_id = q.job_id AND p.status = 'picked'
        ) AS unclaimed
        FROM pgqueuer_log q WHERE q.status = 'queued'""",
    ),
    # the views pair a job's rows by its id: a job queued or picked twice (a retry, a pick
    # after its heartbeat went stale) would be paired with each of its rows; a 1 ms job that
    # never fails has one of each (the run warns otherwise)
    repeats="""SELECT count(*) FROM (
        SELECT job_id FROM pgqueuer_log WHERE status IN ('queued', 'picked')
        GROUP BY job_id, status HAVING count(*) > 1) AS twice""",
)

SYSTEMS = {"duetime": DUETIME, "pgqueuer": PGQUEUER}  # System.kind -> its tables


# -- the server ----------------------------------------------------------------------------------

SETTINGS = (
    "server_version",
    "autovacuum",
    "autovacuum_naptime",
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_insert_scale_factor",
    "autovacuum_vacuum_cost_limit",
    "autovacuum_vacuum_cost_delay",
    "autovacuum_max_workers",
    "fsync",
    "synchronous_commit",
    "shared_buffers",
)


def server_settings(url: str) -> dict[str, str]:
    """The settings of the server that decide how its tables are vacuumed and written."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, setting || COALESCE(unit, '') FROM pg_settings WHERE name = ANY (%s)",
            (list(SETTINGS),),
        ).fetchall()
    return {name: value for name, value in rows}


@contextmanager
def private_server() -> Iterator[str]:
    """A PostgreSQL cluster of its own: initdb in a temporary folder with the installed
    server's binaries (duetime.chaos.pgcluster, as the tests' private clusters), started
    with the server's defaults (autovacuum on, fsync on; unlike the tests' clusters, which
    turn fsync off); its admin URL. Stopped and deleted on the way out."""
    from duetime.chaos.pgcluster import Cluster, free_port

    root = Path(tempfile.mkdtemp(prefix="bench-pressure-pg-"))
    cluster = Cluster(root)
    try:
        done = cluster._run(
            str(cluster.bin / "initdb"),
            *("-D", str(cluster.data), "-A", "trust", "-U", "postgres", "-E", "UTF8"),
            *("--locale=C", "--no-sync"),
        )
        if done.returncode != 0:
            raise Failed(f"initdb failed: {(done.stdout or '').strip()[-500:]}")
        for _ in range(5):  # the free port may be taken before the server binds it
            cluster.port = free_port()
            cluster.options = (
                f"-p {cluster.port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=200"
            )
            done = cluster._pg_ctl(
                "-l", str(cluster.log), "-o", cluster.options, "-w", "-t", "60", "start"
            )
            if done.returncode == 0:
                break
            cluster._pg_ctl("-m", "immediate", "-w", "stop")
        else:
            raise Failed(f"could not start a private PostgreSQL: {cluster.tail()[-500:]}")
        yield cluster.url
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


# -- CPU -----------------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = stat[stat.rindex(")") + 2 :].split()
    return (int(rest[11]) + int(rest[12])) / HZ


class CpuMeter:
    """Cores used between two reads by the workers, the enqueuer, PostgreSQL (bench/load.py's
    accounting: its processes, except backends of other databases), this process (the
    orchestrator: the counting connections' client side, the hold, the samples) and the whole
    machine."""

    def __init__(self, workers: list[int], enqueuer: int, database: str) -> None:
        self.groups = {"workers": workers, "enqueuer": [enqueuer], "orchestrator": [os.getpid()]}
        self.database = database
        self.last = self._read()

    def _read(self) -> dict[str, Any]:
        per: dict[str, dict[int, float]] = {}
        for name, pids in self.groups.items():
            per[name] = {p: s for p in pids if (s := _cpu_seconds(p)) is not None}
        per["postgres"] = _db_seconds(self.database)
        return {"t": time.monotonic(), "busy": _busy_seconds(), "per": per}

    def cores(self) -> dict[str, float]:
        now = self._read()
        wall = max(1e-6, now["t"] - self.last["t"])
        out = {"cpu_machine": round((now["busy"] - self.last["busy"]) / wall, 2)}
        for name, pids in now["per"].items():
            before = self.last["per"].get(name, {})
            used = sum(s - before.get(pid, 0.0) for pid, s in pids.items())
            out[f"cpu_{name}"] = round(max(0.0, used) / wall, 2)
        self.last = now
        return out


def load_average() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return math.nan


# -- the pressures ---------------------------------------------------------------------------


class Hold:
    """One connection holding a transaction open (it has an xid: txid_current())."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: psycopg.Connection[Any] | None = None
        self.info: dict[str, Any] = {}

    def start(self) -> None:
        self.conn = psycopg.connect(self.url)
        row = self.conn.execute("SELECT txid_current()").fetchone()
        self.info["xid"] = int(row[0]) if row else None
        self.info["started"] = time.time()

    def stop(self) -> None:
        if self.conn is not None:
            self.conn.rollback()
            self.conn.close()
            self.conn = None
            self.info["stopped"] = time.time()


class Counts:
    """`n` connections, each running REPEATABLE READ transactions of one count of the jobs
    table (`table`), back to back, until stopped."""

    def __init__(self, url: str, table: str, n: int = plan.COUNT_CONNECTIONS) -> None:
        self.url = url
        self.table = table
        self.n = n
        self.halt = threading.Event()
        self.threads: list[threading.Thread] = []
        self.seconds: list[float] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.info: dict[str, Any] = {}

    def _loop(self) -> None:
        try:
            count = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(self.table))
            with psycopg.connect(self.url) as conn:
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                while not self.halt.is_set():
                    t0 = time.perf_counter()
                    conn.execute(count).fetchone()
                    conn.commit()
                    with self.lock:
                        self.seconds.append(time.perf_counter() - t0)
        except Exception as exc:  # a count that failed ends its thread: reported
            with self.lock:
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def start(self) -> None:
        self.info["started"] = time.time()
        for i in range(self.n):
            t = threading.Thread(target=self._loop, name=f"rr-count-{i}", daemon=True)
            t.start()
            self.threads.append(t)
            time.sleep(0.05)  # staggered: their snapshots do not start together

    def done(self) -> int:
        """How many count transactions have ended so far."""
        with self.lock:
            return len(self.seconds)

    def stop_if_started(self) -> None:
        if self.threads and "stopped" not in self.info:
            self.stop()

    def stop(self) -> None:
        self.halt.set()
        for t in self.threads:
            t.join(timeout=120)
        self.info["stopped"] = time.time()
        done = sorted(self.seconds)
        self.info["transactions"] = len(done)
        if done:
            self.info["count_seconds_median"] = round(done[len(done) // 2], 3)
            self.info["count_seconds_max"] = round(done[-1], 3)
        self.info["errors"] = self.errors[:5]


# -- samples -----------------------------------------------------------------------------------


SAMPLE_SQL = r"""
SELECT
    ({queued}),
    ({enqueued}),
    (SELECT COALESCE(max(age(backend_xmin)), 0) FROM pg_stat_activity
        WHERE datname = current_database() AND backend_type = 'client backend'),
    (SELECT COALESCE(max(extract(epoch FROM now() - query_start)), 0) FROM pg_stat_activity
        WHERE datname = current_database() AND backend_type = 'client backend'
        AND state = 'active' AND pid <> pg_backend_pid()),
    (SELECT count(*) FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'),
    (SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 100) FROM pg_stat_activity
        WHERE datname = current_database() AND backend_type = 'client backend'
        AND state = 'active' AND pid <> pg_backend_pid() ORDER BY query_start LIMIT 1),
    (SELECT COALESCE(string_agg(c.relname, ','), '') FROM pg_stat_progress_vacuum v
        JOIN pg_class c ON c.oid = v.relid WHERE v.datname = current_database())
"""
STATS_SQL = """
SELECT relname, n_live_tup, n_dead_tup, autovacuum_count, n_tup_upd, n_tup_hot_upd
FROM pg_stat_user_tables WHERE relname = ANY (%s)
"""
WAL_SQL = "SELECT to_jsonb(w) FROM pg_stat_wal w"
SIZES_SQL = """
SELECT c.relname, pg_relation_size(c.oid), pg_table_size(c.oid), pg_indexes_size(c.oid),
       COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0)
FROM pg_class c WHERE c.relname = ANY (%s) AND c.relkind = 'r'
"""


def db_sample(conn: psycopg.Connection[Any], tables: Tables) -> dict[str, Any]:
    """The database's side of one sample (autocommit: each statement its own snapshot)."""
    out: dict[str, Any] = {}
    query = SAMPLE_SQL.format(queued=tables.queued, enqueued=tables.enqueued)
    row = conn.execute(query).fetchone()
    assert row is not None
    out["queued"], out["jobs"], out["xmin_age"] = int(row[0]), int(row[1]), int(row[2])
    out["longest_active_s"] = round(float(row[3]), 2)
    out["lock_waits"] = int(row[4])
    out["longest_active"] = row[5] or ""
    out["vacuuming"] = row[6]
    names = list(tables.sampled)
    for name, live, dead, autovacuums, upd, hot in conn.execute(STATS_SQL, (names,)):
        short = tables.sampled[name]
        out[f"live_{short}"] = int(live)
        out[f"dead_{short}"] = int(dead)
        out[f"autovacuums_{short}"] = int(autovacuums)
        out[f"upd_{short}"] = int(upd)
        out[f"hot_upd_{short}"] = int(hot)
    total = 0
    for name, heap, table, indexes, toast in conn.execute(SIZES_SQL, (names,)):
        short = tables.sampled[name]
        out[f"heap_{short}"] = int(heap)  # the main fork
        out[f"table_{short}"] = int(table)  # main, free space and visibility maps, TOAST
        out[f"toast_{short}"] = int(toast)
        out[f"indexes_{short}"] = int(indexes)
        total += int(table) + int(indexes)
    out["bytes_total"] = total
    out["count_plan"] = count_plan(conn, tables.counted)
    # the server's WAL so far (its one database is the run's): records, full-page images,
    # bytes, syncs (cumulative; the report takes each phase's difference). pg_stat_wal is in
    # PostgreSQL 14 and later, its wal_sync until 17: what the server has of them
    try:
        wal = conn.execute(WAL_SQL).fetchone()
    except psycopg.errors.UndefinedTable:
        wal = None
    for key in ("wal_records", "wal_fpi", "wal_bytes", "wal_sync"):
        if wal is not None and wal[0].get(key) is not None:
            out[key] = int(wal[0][key])
    for short in plan.SHORTS:
        for key in ("live", "dead", "autovacuums", "upd", "hot_upd", "heap", "table", "toast"):
            out.setdefault(f"{key}_{short}", 0)
        out.setdefault(f"indexes_{short}", 0)
    return out


def count_plan(conn: psycopg.Connection[Any], table: str) -> str:
    """The plan a planning of the counting connections' statement chooses now (planned, not
    run): its nodes from the top, each with its index where it reads one ("Aggregate > Index
    Only Scan duetime_jobs_pkey"). The counting connections run the count prepared (psycopg
    prepares a statement run five times), and their plan is made again when the table's
    statistics change (a vacuum, an analyze), so between those it may differ from this one;
    the count transactions a second say which the loops ran. The counts' cost, and so the
    cores they take, follows it."""
    count = sql.SQL("EXPLAIN (FORMAT JSON) SELECT count(*) FROM {}").format(sql.Identifier(table))
    row = conn.execute(count).fetchone()
    node = row[0][0]["Plan"] if row else None
    steps: list[str] = []
    while node is not None:
        steps.append(" ".join(filter(None, (node["Node Type"], node.get("Index Name")))))
        children = node.get("Plans") or [None]
        node = children[0]
    return " > ".join(steps)


# -- afterwards: the claims the run kept (Tables.views) ---------------------------------------

SERIES_FINISHED_SQL = """
SELECT floor((extract(epoch FROM finished_at) - %(origin)s) / %(step)s)::int AS b, count(*)
FROM pressure_attempts WHERE finished_at IS NOT NULL GROUP BY b
"""
SERIES_ENQUEUED_SQL = """
SELECT floor((extract(epoch FROM due_at) - %(origin)s) / %(step)s)::int AS b, count(*)
FROM pressure_jobs GROUP BY b
"""
SERIES_STARTED_SQL = """
SELECT floor((extract(epoch FROM started_at) - %(origin)s) / %(step)s)::int AS b, count(*),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - due_at)),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - due_at))
FROM pressure_attempts GROUP BY b
"""
PHASE_FINISHED_SQL = """
SELECT width_bucket(extract(epoch FROM finished_at) - %(origin)s, %(bounds)s) AS b, count(*)
FROM pressure_attempts WHERE finished_at IS NOT NULL GROUP BY b
"""
PHASE_STARTED_SQL = """
SELECT width_bucket(extract(epoch FROM due_at) - %(origin)s, %(bounds)s) AS b, count(*),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - due_at)),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - due_at))
FROM pressure_attempts GROUP BY b
"""
CLAIMS_SQL = """
SELECT extract(epoch FROM due_at), extract(epoch FROM started_at) FROM pressure_attempts
"""
PHASE_OFFERED_SQL = """
SELECT width_bucket(extract(epoch FROM due_at) - %(origin)s, %(bounds)s) AS b, count(*),
       count(*) FILTER (WHERE unclaimed)
FROM pressure_jobs GROUP BY b
"""


def series(
    conn: psycopg.Connection[Any], origin: float, step: float
) -> dict[int, dict[str, float]]:
    """Step k (the interval ((k-1) step, k step] after the origin) -> finished/s, enqueued/s
    (jobs due in it), claimed/s, claim latency p50/p99 (ms) of the attempts claimed in it."""
    params = {"origin": origin, "step": step}
    out: dict[int, dict[str, float]] = {}
    for b, n in conn.execute(SERIES_FINISHED_SQL, params):
        out.setdefault(int(b) + 1, {})["finished_per_s"] = round(int(n) / step, 1)
    for b, n in conn.execute(SERIES_ENQUEUED_SQL, params):
        out.setdefault(int(b) + 1, {})["enqueued_per_s"] = round(int(n) / step, 1)
    for b, n, p50, p99 in conn.execute(SERIES_STARTED_SQL, params):
        entry = out.setdefault(int(b) + 1, {})
        entry["claimed_per_s"] = round(int(n) / step, 1)
        entry["p50_ms"] = round(float(p50) * 1000, 2)
        entry["p99_ms"] = round(float(p99) * 1000, 2)
    return out


def phase_figures(
    conn: psycopg.Connection[Any], origin: float, phases: list[plan.Phase]
) -> dict[str, plan.PhaseFigures]:
    bounds = [p.start for p in phases] + [phases[-1].end]
    params = {"origin": origin, "bounds": bounds}
    finished = {int(b): int(n) for b, n in conn.execute(PHASE_FINISHED_SQL, params)}
    started = {
        int(b): (int(n), float(p50) * 1000, float(p99) * 1000)
        for b, n, p50, p99 in conn.execute(PHASE_STARTED_SQL, params)
    }
    offered = {int(b): (int(n), int(m)) for b, n, m in conn.execute(PHASE_OFFERED_SQL, params)}
    out: dict[str, plan.PhaseFigures] = {}
    for i, p in enumerate(phases, start=1):
        n, p50, p99 = started.get(i, (0, None, None))
        out[p.name] = plan.PhaseFigures(
            enqueued=offered.get(i, (0, 0))[0],
            finished=finished.get(i, 0),
            started=n,
            missing=offered.get(i, (0, 0))[1],
            p50_ms=p50,
            p99_ms=p99,
        )
    return out


# -- the workload ----------------------------------------------------------------------------


def _finite(value: Any) -> Any:
    """JSON has no infinity: an unbounded figure is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def run(
    system: System,
    db: Database,
    work_dir: Path,
    rate: float,
    scale: float,
    step: float,
    pressures: Sequence[str] = tuple(plan.PRESSURES),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One pressure run on a fresh database (set up by the caller): (the record for the JSON:
    samples, the phases' figures, the verdict; the verdict as judged, with infinities).
    `pressures`: which pressures run, in this order (each with its recovery)."""
    phases = plan.schedule(scale, step, pressures)
    end = plan.total_seconds(phases)
    log.info(
        "pressure schedule (R = %s jobs/s):\n%s", f"{rate:,.0f}", plan.schedule_text(phases, rate)
    )
    tuned = system.tune(Setting("sweep", PROCS, CONCURRENCY)) if system.tune else None
    tables = SYSTEMS.get(system.kind)
    if tuned is None or tables is None:
        raise Failed(f"{system.name} has no configuration for the pressure workload")
    workers_system = replace(system, worker_argv=tuned.argv)
    record_dir, log_dir = work_dir / "records", work_dir / "logs"
    samples: list[dict[str, Any]] = []
    hold = Hold(db.url)
    counts = Counts(db.url, tables.counted)
    opened: dict[str, Hold | Counts] = {"hold": hold, "counts": counts}
    enqueuer_out = work_dir / "enqueuer.out"
    enqueuer_err = work_dir / "enqueuer.err"
    probe_out, probe_err = work_dir / "probe.txt", work_dir / "probe.err"
    waits_out = work_dir / "waits.jsonl"
    with Workers(workers_system, db, PROCS, record_dir, log_dir) as workers:
        time.sleep(2.0)
        workers.check_alive()
        origin = time.time() + 1.0
        params = {
            "url": db.url,
            "origin": origin,
            "rate": rate,
            "tick": TICK,
            "phases": plan.phases_json(phases),
            "task": TASK,
        }
        argv = [str(system.python), "-m", system.module, "pressure_enqueue", json.dumps(params)]
        lasts = str(end + 2.0 + DRAIN_GRACE)
        probe_argv = [
            *("-m", "bench.pressure_probe", db.url, str(probe_out), lasts, str(PROBE_EVERY)),
            *(str(waits_out), str(WAITS_EVERY)),
        ]
        # undone in reverse on the way out, each whatever the one before raised: the pressure
        # connections, then the enqueuer, then the probe
        with ExitStack() as undo:
            with probe_err.open("wb") as err:
                probe = subprocess.Popen([sys.executable, *probe_argv], cwd=ROOT, stderr=err)
            undo.callback(_stopped, probe)
            with enqueuer_out.open("wb") as out, enqueuer_err.open("wb") as err:
                enqueuer = subprocess.Popen(
                    argv, cwd=ROOT, env=_env(db.url, None), stdout=out, stderr=err
                )
            undo.callback(_stopped, enqueuer)
            undo.callback(counts.stop_if_started)
            undo.callback(hold.stop)
            cpu = CpuMeter([p.pid for p in workers.procs], enqueuer.pid, db.name)
            events = plan.events(phases)
            with psycopg.connect(db.url, autocommit=True) as conn:
                k = 1
                # the counting connections' transactions at the last sample, and when (none
                # before the origin)
                counted, counted_at = 0, 0.0
                drained_at: float | None = None
                while True:
                    rel = time.time() - origin
                    _fire(events, rel, opened, stops_only=True)
                    if k * step <= rel:
                        t0 = time.perf_counter()
                        # t: the step's nominal instant (phases are judged by it); at: when
                        s: dict[str, Any] = {"k": k, "t": k * step, "at": round(rel, 2)}
                        phase = plan.phase_at(phases, k * step - step / 2)
                        s["phase"] = phase.name if phase else "drain"
                        s.update(db_sample(conn, tables))
                        s.update(cpu.cores())
                        s["load1"] = load_average()
                        # the counting connections' transactions ended in the step (0 outside
                        # the counts phase): how often each loop went round
                        done = counts.done()
                        s["counts_per_s"] = round((done - counted) / max(1e-6, rel - counted_at), 1)
                        counted, counted_at = done, rel
                        s["sample_ms"] = round((time.perf_counter() - t0) * 1000, 1)
                        samples.append(s)
                        log.info(
                            "  %4.0f s %-8s jobs %8d queued %6d dead %8d+%-8d MB %6.0f "
                            "xmin age %6d longest %5.1f s lock waits %2d vacuum %s "
                            "cpu w %.2f pg %.2f orchestrator %.2f machine %.2f load %.1f "
                            "counts/s %.0f plan %s",
                            rel,
                            s["phase"],
                            s["jobs"],
                            s["queued"],
                            s["dead_jobs"],
                            s["dead_attempts"],
                            s["bytes_total"] / 1e6,
                            s["xmin_age"],
                            s["longest_active_s"],
                            s["lock_waits"],
                            s["vacuuming"] or "-",
                            s["cpu_workers"],
                            s["cpu_postgres"],
                            s["cpu_orchestrator"],
                            s["cpu_machine"],
                            s["load1"],
                            s["counts_per_s"],
                            s["count_plan"],
                        )
                        k += 1
                        if rel >= end and drained_at is None and s["queued"] == 0:
                            drained_at = rel
                    # a pressure that begins at a step's end begins after that step's sample,
                    # and one that ends there ends before it (above): the count transactions
                    # of each step are its phase's. The last sample of a pressure phase
                    # therefore reads the instant's figures (xmin age, the longest statement)
                    # with the pressure just ended
                    _fire(events, rel, opened)
                    workers.check_alive()
                    if enqueuer.poll() not in (None, 0):
                        tail = enqueuer_err.read_text(errors="replace").strip()[-300:]
                        raise Failed(f"the enqueuer exited with {enqueuer.returncode}: {tail}")
                    if rel >= end and (drained_at is not None or rel >= end + DRAIN_GRACE):
                        break
                    upcoming = [k * step] + ([events[0][0]] if events else [])
                    time.sleep(max(0.0, min(upcoming) - (time.time() - origin)))
            # its schedule is over: let it write what it sent (stopping it lost that, and a
            # pgqueuer enqueuer still closing its connection was stopped)
            try:
                if enqueuer.wait(timeout=30) != 0:
                    tail = enqueuer_err.read_text(errors="replace").strip()[-300:]
                    raise Failed(f"the enqueuer exited with {enqueuer.returncode}: {tail}")
            except subprocess.TimeoutExpired:
                log.warning("the enqueuer had not exited 30 s after its schedule ended")
    if probe.returncode != 0:
        log.warning(
            "the probe exited with %s: %s",
            probe.returncode,
            probe_err.read_text(errors="replace").strip()[-300:],
        )
    enqueued = _last_json(enqueuer_out)
    timed_calls = enqueued.pop("timed_calls", [])
    with psycopg.connect(db.url, autocommit=True) as conn:
        for view in tables.views:
            conn.execute(view)
        row = conn.execute(tables.repeats).fetchone()
        repeats = int(row[0]) if row else 0
        per_step = series(conn, origin, step)
        figures = phase_figures(conn, origin, phases)
        claims = [
            (float(due) - origin, float(claimed) - origin)
            for due, claimed in conn.execute(CLAIMS_SQL)
        ]
    for s in samples:
        s.update({"finished_per_s": 0.0, "claimed_per_s": 0.0, "enqueued_per_s": 0.0})
        s.update(per_step.get(s["k"], {}))
        s["offered_per_s"] = round(
            (
                plan.offered_jobs(phases, rate, s["k"] * step)
                - plan.offered_jobs(phases, rate, (s["k"] - 1) * step)
            )
            / step,
            1,
        )
    verdict = plan.judge(phases, figures, samples)
    doc = {
        "rate": rate,
        "scale": scale,
        "step": step,
        "procs": PROCS,
        "concurrency": CONCURRENCY,
        "tick": TICK,
        "origin": origin,
        "phases": plan.phases_json(phases),
        "figures": {name: vars(f) for name, f in figures.items()},
        "verdict": _finite(verdict),
        "samples": _finite(samples),
        "enqueuer": enqueued,
        "hold": hold.info,
        "counts": counts.info,
        "probe": plan.probe_figures(probe_rows(probe_out, origin), phases),
        "waits": plan.wait_figures(wait_rows(waits_out, origin), phases),
        "enqueue_calls": plan.call_figures(timed_calls, phases),
        "claims_after_calls": plan.after_calls(claims, timed_calls, phases),
        "tables": tables.sampled,
        # the workers' configuration as the system takes it (duetime's concurrency;
        # pgqueuer's batch_size and max_concurrent_tasks, None: no cap)
        "workers": tuned.params,
        "repeats": repeats,
        "drained_s": (drained_at - end) if drained_at is not None else None,
        "load1_mean": round(sum(s["load1"] for s in samples) / len(samples), 2)
        if samples
        else None,
    }
    return doc, verdict


def _fire(
    events: list[tuple[float, str, str]],
    rel: float,
    opened: dict[str, Hold | Counts],
    *,
    stops_only: bool = False,
) -> None:
    """Starts and stops the pressures whose instant (plan.events) has come by `rel`, in order;
    `stops_only`: only the stops at the head of the list."""
    while events and events[0][0] <= rel and (not stops_only or events[0][1] == "stop"):
        _, what, name = events.pop(0)
        log.info("  %.0f s: %s %s", rel, what, name)
        getattr(opened[name], what)()


def _probe_lines(path: Path) -> list[str]:
    """The lines a probe's file holds (none if it was never written)."""
    try:
        return path.read_text().splitlines()
    except OSError:
        return []


def wait_rows(path: Path, origin: float) -> list[tuple[float, list[list[str]]]]:
    """The probe's samples of the backends (bench/pressure_probe.py, WAITS_OUT), their instants
    as seconds since the origin; a line cut short by the probe's stop is left out."""
    rows: list[tuple[float, list[list[str]]]] = []
    for line in _probe_lines(path):
        try:
            at, backends = json.loads(line)
        except ValueError:
            continue
        rows.append((float(at) - origin, backends))
    return rows


def probe_rows(path: Path, origin: float) -> list[tuple[float, float, float]]:
    """bench/pressure_probe.py's lines as (seconds since the origin, a sleep's overshoot in
    ms, a SELECT 1 round trip in ms); a line it could not finish is left out."""
    rows: list[tuple[float, float, float]] = []
    for line in _probe_lines(path):
        try:
            at, wake, trip = (float(x) for x in line.split())
        except ValueError:
            continue
        rows.append((at - origin, wake, trip))
    return rows


def _stopped(proc: subprocess.Popen[bytes]) -> None:
    """A child process ended: terminated if it still runs, killed if that takes 30 s."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _last_json(path: Path) -> dict[str, Any]:
    lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    if not lines:
        return {}
    try:
        out: dict[str, Any] = json.loads(lines[-1])
    except ValueError:
        return {"output": lines[-1][-300:]}
    return out


def figures_of(v: dict[str, Any]) -> dict[str, float]:
    """A verdict's headline figures for the bench table (finite ones only)."""
    out = {
        "pressure_clean_jobs_s": v["clean"]["finished_per_s"],
        "pressure_clean_p99_ms": v["clean"]["p99_ms"],
    }
    for name, ph in v["phases"].items():
        out[f"pressure_{name}_jobs_s"] = ph["finished_per_s"]
        out[f"pressure_{name}_tp_ratio"] = ph["throughput_ratio"]
        out[f"pressure_{name}_p99_ms"] = ph["p99_ms"]
        out[f"pressure_{name}_p99_ratio"] = ph["p99_ratio"]
        if ph["dead_peak"] is not None:
            out[f"pressure_{name}_dead_peak"] = ph["dead_peak"]
        if ph["dead_after"] is not None:
            out[f"pressure_{name}_dead_after"] = ph["dead_after"]
        if ph["bytes_per_job_after"] is not None:
            out[f"pressure_{name}_bpj_after"] = ph["bytes_per_job_after"]
    out["pressure_pass"] = 1.0 if v["pass"] else 0.0
    return {k: float(x) for k, x in out.items() if x is not None and math.isfinite(float(x))}

"""The pressure workload's probe of the machine (bench/pressure.py): how long a process
waits for a core, and for one round trip to the database, in each phase, whatever the
system under test does.

    python -m bench.pressure_probe URL OUT SECONDS EVERY [WAITS_OUT WAITS_EVERY]

Every EVERY seconds (bench/pressure.py passes 0.02) until SECONDS have passed or it is sent
SIGTERM: the overshoot of a sleep of EVERY (the time from the sleep's end to the process
running again), then one `SELECT 1` on its own autocommit connection to the run's database.
One line per measurement to OUT, written as it is made: Unix seconds, the overshoot in ms,
the round trip in ms. It runs in duetime's venv, a process of its own (the orchestrator's
threads share one interpreter lock with the counting connections).

With WAITS_OUT, every WAITS_EVERY seconds it also samples, on the same connection, what the
database's other backends are doing (pg_stat_activity, the idle ones left out): for each, its
state, its wait (type and event; none: on a core or waiting for one), the first characters of
its statement and its backend type. One JSON line per sample to WAITS_OUT: Unix seconds and
the list of backends; bench/pressure_plan.wait_figures sums them up per phase (the average
number of backends in each statement and wait).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from types import FrameType

import psycopg


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)  # the with blocks close the file and the connection


WAITS_SQL = r"""
SELECT COALESCE(state, ''), COALESCE(wait_event_type, ''), COALESCE(wait_event, ''),
    COALESCE(left(regexp_replace(query, '\s+', ' ', 'g'), 60), ''), COALESCE(backend_type, '')
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
    AND state IS DISTINCT FROM 'idle'
"""


def main(
    url: str,
    out_path: str,
    seconds: float,
    every: float,
    waits_path: str | None = None,
    waits_every: float = 0.0,
) -> None:
    signal.signal(signal.SIGTERM, _stop)
    end = time.time() + seconds
    next_wait = time.time()
    with (
        psycopg.connect(url, autocommit=True) as conn,
        open(out_path, "w", buffering=1) as out,  # a line at a time: none lost at the end
        open(waits_path or os.devnull, "w", buffering=1) as waits,
    ):
        while time.time() < end:
            if waits_path and time.time() >= next_wait:
                # after a stall, the next sample a whole interval on: no burst to catch up
                next_wait = max(next_wait + waits_every, time.time())
                rows = conn.execute(WAITS_SQL).fetchall()
                waits.write(json.dumps([round(time.time(), 3), [list(r) for r in rows]]) + "\n")
            t0 = time.perf_counter()
            time.sleep(every)
            wake = time.perf_counter() - t0 - every
            t1 = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            trip = time.perf_counter() - t1
            out.write(f"{time.time():.3f} {wake * 1000:.3f} {trip * 1000:.3f}\n")


if __name__ == "__main__":
    if len(sys.argv) not in (5, 7):
        sys.exit(
            "usage: python -m bench.pressure_probe URL OUT SECONDS EVERY [WAITS_OUT WAITS_EVERY]"
        )
    waits_args = (sys.argv[5], float(sys.argv[6])) if len(sys.argv) == 7 else ()
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), *waits_args)

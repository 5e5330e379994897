"""The pressure workload's probe of the machine (bench/pressure.py): how long a process
waits for a core, and for one round trip to the database, in each phase, whatever the
system under test does.

    python -m bench.pressure_probe URL OUT SECONDS EVERY

Every EVERY seconds (bench/pressure.py passes 0.02) until SECONDS have passed or it is sent
SIGTERM: the overshoot of a sleep of EVERY (the time from the sleep's end to the process
running again), then one `SELECT 1` on its own autocommit connection to the run's database.
One line per measurement to OUT, written as it is made: Unix seconds, the overshoot in ms,
the round trip in ms. It runs in duetime's venv, a process of its own (the orchestrator's
threads share one interpreter lock with the counting connections).
"""

from __future__ import annotations

import signal
import sys
import time
from types import FrameType

import psycopg


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)  # the with blocks close the file and the connection


def main(url: str, out_path: str, seconds: float, every: float) -> None:
    signal.signal(signal.SIGTERM, _stop)
    end = time.time() + seconds
    with (
        psycopg.connect(url, autocommit=True) as conn,
        open(out_path, "w", buffering=1) as out,  # a line at a time: none lost at the end
    ):
        while time.time() < end:
            t0 = time.perf_counter()
            time.sleep(every)
            wake = time.perf_counter() - t0 - every
            t1 = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            trip = time.perf_counter() - t1
            out.write(f"{time.time():.3f} {wake * 1000:.3f} {trip * 1000:.3f}\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))

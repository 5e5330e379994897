"""The pressure workload's enqueuer loop (bench/pressure.py), shared by each system's
`pressure_enqueue` step: stdlib only, so it runs in duetime's venv and in the bench venv.

Every `tick` seconds from `origin` (Unix seconds) it sends the jobs that the schedule
(`phases`, at `rate` jobs/s times each phase's factor) has offered by then and were not sent
yet, through the system's own `send(offset, size)` (calls of at most 1,000 jobs), until the
schedule ends. It never waits for the workers. A tick reached late sends everything offered
up to the moment it runs and the ticks it overtook are skipped, so the enqueuer is behind
only while its own calls are slow; ticks reached more than one tick and more than a second
late are counted. Each call is timed (`timed_calls`: when it began, how long it took): a job's
claim latency begins before its call, so the call's own time is part of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench.common import chunks
from bench.pressure_plan import offered_jobs, phases_from_json, tick_jobs, total_seconds


def offer(p: dict[str, Any], send: Callable[[int, int], None]) -> dict[str, Any]:
    """Run the schedule of the step's parameters `p` (phases, rate, tick, origin); what it
    sent and how late it was, for the JSON."""
    phases = phases_from_json(p["phases"])
    rate, tick, origin = float(p["rate"]), float(p["tick"]), float(p["origin"])
    end = total_seconds(phases)
    ticks = round(end / tick)
    sent = calls = late = late_1s = skipped = 0
    worst = 0.0
    timed: list[tuple[float, float]] = []  # each call: (its start since the origin, its ms)
    k = 0
    while True:
        k += 1
        behind = time.time() - (origin + k * tick)
        if behind < 0:
            time.sleep(-behind)
        else:
            worst = max(worst, behind)
            if behind > tick:
                late += 1
            if behind > 1.0:
                late_1s += 1
        t = min(time.time() - origin, end)
        n = tick_jobs(phases, rate, t, sent)
        for offset, size in chunks(n, 1000):
            began = time.time()
            send(sent + offset, size)
            timed.append((round(began - origin, 4), round((time.time() - began) * 1000, 3)))
            calls += 1
        sent += n
        if t >= end:
            break
        overtaken = int((time.time() - origin) / tick)
        if overtaken > k:
            skipped += overtaken - k
            k = overtaken
    return {
        "jobs": sent,
        "offered": round(offered_jobs(phases, rate, end)),
        "calls": calls,
        "ticks": ticks,
        "ticks_run": k,
        "ticks_skipped": skipped,
        "late_ticks": late,
        "late_1s_ticks": late_1s,
        "worst_late_s": worst,
        "timed_calls": timed,
    }

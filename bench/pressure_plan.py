"""The pressure workload's schedule and verdict (issue 22, "Flat under pressure"): pure, no I/O.

bench/pressure.py runs the workload; this module says when each phase runs, how many jobs the
enqueuer has offered by any instant, and how the measured figures are judged against the
target. Stdlib only: the enqueuer step (duetime's venv) and the unit tests import it too.

The schedule at full size (scale 1), seconds from the run's origin:

    warmup      0 -   20   offered rate R, not judged (workers and autovacuum settle)
    clean      20 -  140   R
    hold      140 -  380   R; one connection holds a transaction open (txid_current())
    hold+     380 -  500   R; recovery
    load      500 -  740   1.5 R
    load+     740 -  860   R; recovery
    counts    860 - 1100   R; four connections run REPEATABLE READ counts of the jobs table
    counts+  1100 - 1220   R; recovery

Every duration is multiplied by the scale and rounded to a whole number of sampling steps
(at least one step).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

FULL_WARMUP = 20.0
FULL_CLEAN = 120.0
FULL_PRESSURE = 240.0
FULL_RECOVERY = 120.0
LOAD_FACTOR = 1.5  # (b): the offered rate during the load phase, times R
COUNT_CONNECTIONS = 4  # (c): connections running REPEATABLE READ counts

# the short names of a system's tables in the samples (dead_jobs, table_attempts, ...): every
# sample has each (0 where the system has no such table)
SHORTS = ("jobs", "jobs_done", "attempts")
# duetime's tables (docs/history-plan.md): the jobs, the finished jobs, the attempts that
# ended in a retry or a failure (a success is kept on its job's row: migrations 22, 24)
DUETIME_TABLES = {
    "duetime_jobs": "jobs",
    "duetime_jobs_done": "jobs_done",
    "duetime_attempts": "attempts",
}

# the pressures in the order they run, and what each one does
PRESSURES: dict[str, str] = {
    "hold": "one connection holds a transaction open (BEGIN; SELECT txid_current(); idle)",
    "load": f"{LOAD_FACTOR:g}x the offered rate",
    "counts": (
        f"{COUNT_CONNECTIONS} connections run REPEATABLE READ transactions of one count of "
        "the jobs table each, in a loop"
    ),
}

# the target (issue 22)
THROUGHPUT_FLOOR = 0.8  # a pressure phase's throughput share at least 80% of the clean one's
P99_CEILING = 2.0  # its claim p99 at most 2x the clean phase's
SIZE_SLACK = 1.10  # bytes per job back within 10% of the clean phase's
TAIL_SHARE = 0.25  # "back to the level": the samples of the recovery window's last quarter
MISSING_SHARE = 0.01  # more jobs than this never claimed: p99 is unbounded


@dataclass(frozen=True)
class Phase:
    name: str  # warmup, clean, hold, hold+, load, load+, counts, counts+
    kind: str  # warmup, clean, pressure or recovery
    pressure: str | None  # hold, load or counts for a pressure phase and its recovery
    start: float  # seconds from the origin
    end: float
    factor: float = 1.0  # the offered rate, times R

    @property
    def seconds(self) -> float:
        return self.end - self.start


def _steps(full: float, scale: float, step: float) -> float:
    return max(1, round(full * scale / step)) * step


def schedule(
    scale: float = 1.0, step: float = 5.0, pressures: Sequence[str] = tuple(PRESSURES)
) -> list[Phase]:
    """The phases, in order, back to back from 0."""
    if scale <= 0 or step <= 0:
        raise ValueError(f"scale and step must be above 0; got {scale} and {step}")
    unknown = [p for p in pressures if p not in PRESSURES]
    if unknown:
        raise ValueError(f"unknown pressure {unknown}; choose from {', '.join(PRESSURES)}")
    phases: list[Phase] = []
    t = 0.0

    def add(name: str, kind: str, pressure: str | None, full: float, factor: float) -> None:
        nonlocal t
        length = _steps(full, scale, step)
        phases.append(Phase(name, kind, pressure, t, t + length, factor))
        t += length

    add("warmup", "warmup", None, FULL_WARMUP, 1.0)
    add("clean", "clean", None, FULL_CLEAN, 1.0)
    for p in pressures:
        add(p, "pressure", p, FULL_PRESSURE, LOAD_FACTOR if p == "load" else 1.0)
        add(f"{p}+", "recovery", p, FULL_RECOVERY, 1.0)
    return phases


def total_seconds(phases: Sequence[Phase]) -> float:
    return phases[-1].end if phases else 0.0


def phase_at(phases: Sequence[Phase], t: float) -> Phase | None:
    """The phase running at `t` seconds from the origin (a boundary belongs to the later)."""
    for p in phases:
        if p.start <= t < p.end:
            return p
    return None


def offered_jobs(phases: Sequence[Phase], rate: float, t: float) -> float:
    """Jobs offered from the origin to `t` seconds after it, at `rate` jobs/s times each
    phase's factor (the integral of the offered rate; constant after the last phase)."""
    total = 0.0
    for p in phases:
        if t <= p.start:
            break
        total += (min(t, p.end) - p.start) * rate * p.factor
    return total


def tick_jobs(phases: Sequence[Phase], rate: float, t: float, sent: int) -> int:
    """How many jobs the enqueuer sends at a tick at `t`, having sent `sent` so far: what
    the schedule has offered by then and it has not sent yet."""
    return max(0, math.floor(offered_jobs(phases, rate, t) + 1e-9) - sent)


def events(phases: Sequence[Phase]) -> list[tuple[float, str, str]]:
    """(seconds, "start" or "stop", pressure) of the pressures that need connections: hold
    and counts (load is the enqueuer's own schedule), in time order; at one instant the
    stops first (bench/pressure.py ends them before that step's sample, and starts the others
    after it)."""
    out: list[tuple[float, str, str]] = []
    for p in phases:
        if p.kind == "pressure" and p.pressure in ("hold", "counts"):
            out += [(p.start, "start", p.pressure), (p.end, "stop", p.pressure)]
    return sorted(out, key=lambda e: (e[0], e[1] != "stop", e[2]))


def probe_figures(
    rows: Sequence[tuple[float, float, float]], phases: Sequence[Phase]
) -> dict[str, dict[str, float]]:
    """The probe's measurements (bench/pressure_probe.py) per phase: `rows` are (seconds since
    the origin, a sleep's overshoot in ms, a SELECT 1 round trip in ms); for each phase with
    at least two of them, how many, and the p50 and p99 of each (what the machine gave any
    process then, beside the claims' latency; not judged)."""
    out: dict[str, dict[str, float]] = {}
    for p in phases:
        mine = [r for r in rows if p.start < r[0] <= p.end]
        if len(mine) < 2:
            continue
        entry: dict[str, float] = {"n": len(mine)}
        for i, name in ((1, "wake"), (2, "trip")):
            figures = _p50_p99([r[i] for r in mine])
            entry[f"{name}_p50_ms"] = figures["p50_ms"]
            entry[f"{name}_p99_ms"] = figures["p99_ms"]
        out[p.name] = entry
    return out


WAITS_TOP = 12  # the statement-and-wait pairs kept per phase


def wait_figures(
    samples: Sequence[tuple[float, Sequence[Sequence[str]]]], phases: Sequence[Phase]
) -> dict[str, dict[str, Any]]:
    """The probe's samples of the database's backends (bench/pressure_probe.py, WAITS_OUT):
    `samples` are (seconds since the origin, the backends not idle, each [state, wait type,
    wait event, the statement's first characters, backend type]). For each phase with any:
    how many samples, the average number of backends not idle, and the pairs of what a
    backend ran (its statement's start; the backend type where it runs none) and what it
    waited for ("cpu": no wait, on a core or waiting for one; else type:event; the state where
    it is not active) with the average number of backends in each, the largest first (at most
    WAITS_TOP; not judged)."""
    out: dict[str, dict[str, Any]] = {}
    for p in phases:
        mine = [backends for at, backends in samples if p.start < at <= p.end]
        if not mine:
            continue
        tally: Counter[tuple[str, str]] = Counter()
        for backends in mine:
            for state, wait_type, wait_event, query, backend_type in backends:
                what = query if backend_type == "client backend" else backend_type
                if state != "active":
                    wait = state
                elif wait_type:
                    wait = f"{wait_type}:{wait_event}"
                else:
                    wait = "cpu"
                tally[(what, wait)] += 1
        n = len(mine)
        top = sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))[:WAITS_TOP]
        out[p.name] = {
            "samples": n,
            "backends_mean": round(sum(len(b) for b in mine) / n, 2),
            "top": [[what, wait, round(count / n, 3)] for (what, wait), count in top],
        }
    return out


def _p50_p99(values: Sequence[float]) -> dict[str, float]:
    """How many values, and their p50 and p99 (inclusive quantiles), rounded."""
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"n": len(values), "p50_ms": round(cuts[49], 2), "p99_ms": round(cuts[98], 2)}


def call_figures(
    calls: Sequence[Sequence[float]], phases: Sequence[Phase]
) -> dict[str, dict[str, float]]:
    """The enqueuer's calls (bench/pressure_offer.py `timed_calls`: seconds since the origin
    when each began, how long it took in ms) per phase: for each phase with at least two,
    how many, and the p50 and p99 of their durations (the part of a job's claim latency spent
    before its enqueue returned; not judged)."""
    out: dict[str, dict[str, float]] = {}
    for p in phases:
        mine = [float(ms) for at, ms in calls if p.start < at <= p.end]
        if len(mine) >= 2:
            out[p.name] = _p50_p99(mine)
    return out


CALL_SLACK = 0.005  # seconds: see after_calls


def after_calls(
    claims: Sequence[tuple[float, float]],
    calls: Sequence[Sequence[float]],
    phases: Sequence[Phase],
) -> dict[str, dict[str, float]]:
    """Each claim's latency counted from the end of the enqueuer's call that sent its job,
    not from its due instant (taken as the call ran): the claim's part after the job's
    commit had returned to the client. `claims` are (due, claimed) in seconds since the
    origin. A job's call is the last one that began at or before its due instant; but when
    that call had ended before it and the next began at most CALL_SLACK after it, the next
    (duetime reads the due instant on its clock corrected to the database's, which may stand
    a little before the enqueuer's own; calls are a tick apart, 20 ms, unless the enqueuer
    fell behind). Per phase of the due instant, with at least two claims: how many, and the
    p50 and p99 in ms (not judged; the claim p99 of the target counts from the due instant).
    A claim made before its call returned counts below 0."""
    starts = [float(at) for at, _ in calls]
    ends = [float(at) + float(ms) / 1000 for at, ms in calls]
    out: dict[str, dict[str, float]] = {}
    for p in phases:
        mine = []
        for due, claimed in claims:
            if not p.start < due <= p.end:
                continue
            i = bisect.bisect_right(starts, due) - 1
            after_it = i < 0 or due > ends[i]
            if after_it and i + 1 < len(starts) and starts[i + 1] <= due + CALL_SLACK:
                i += 1
            if i >= 0:
                mine.append((claimed - ends[i]) * 1000)
        if len(mine) >= 2:
            out[p.name] = _p50_p99(mine)
    return out


# -- the verdict -------------------------------------------------------------------------------


def p99_or_unbounded(p99_ms: float | None, started: int, missing: int) -> float:
    """The phase's claim p99 over every job due in it: unbounded (inf) when more than 1% of
    them were never claimed, or none was."""
    total = started + missing
    if p99_ms is None or total == 0 or missing > MISSING_SHARE * total:
        return math.inf
    return p99_ms


def tail(samples: Sequence[Mapping[str, Any]], phase: Phase) -> list[Mapping[str, Any]]:
    """The samples taken in the last quarter of a phase (at least the last one in it)."""
    mine = [s for s in samples if phase.start < s["t"] <= phase.end]
    if not mine:
        return []
    since = phase.end - TAIL_SHARE * phase.seconds
    last = [s for s in mine if s["t"] >= since]
    return last or mine[-1:]


def _median(samples: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [float(s[key]) for s in samples if s.get(key) is not None]
    return statistics.median(values) if values else None


def dead_tuples(sample: Mapping[str, Any]) -> float:
    return float(sample["dead_jobs"] + sample["dead_attempts"])


def bytes_per_job(sample: Mapping[str, Any]) -> float | None:
    """Bytes on disk (both tables, TOAST, indexes) per job enqueued so far."""
    jobs = sample.get("jobs") or 0
    return float(sample["bytes_total"]) / jobs if jobs else None


@dataclass
class PhaseFigures:
    """What one phase measured (bench/pressure.py reads them from the database afterwards)."""

    enqueued: int  # jobs due in the phase (what the enqueuer sent: short of the schedule if late)
    finished: int  # attempts finished in the phase
    started: int  # jobs due in the phase that were claimed (by the end of the run)
    missing: int  # jobs due in the phase never claimed
    p50_ms: float | None  # claim latency (started_at - due_at) of the jobs due in the phase
    p99_ms: float | None


def judge(
    phases: Sequence[Phase],
    figures: Mapping[str, PhaseFigures],
    samples: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Each pressure phase against the clean phase (the issue's target):

    - throughput: finished/s over the phase's offered rate (R times its factor, as
      scheduled: an enqueuer that falls behind does not lower the bar) at least 0.8 x the
      same of the clean window (for hold and counts, finished/s at least 0.8 x clean's; for
      load, at least 0.8 x 1.5 x clean's);
    - claim p99 of the jobs due in the pressure window at most 2 x the clean window's
      (unbounded if more than 1% of them were never claimed);
    - dead tuples (n_dead_tup of jobs + attempts): the median of the samples in the last
      quarter of the recovery window at most the clean phase's highest sample;
    - size: bytes on disk (both tables, TOAST, indexes) per job enqueued so far, the median
      over the same samples at most 1.1 x the median of the clean phase's last quarter.
    """
    by_name = {p.name: p for p in phases}
    clean = by_name["clean"]
    cf = figures["clean"]
    clean_share = cf.finished / (clean.factor * clean.seconds)
    clean_p99 = p99_or_unbounded(cf.p99_ms, cf.started, cf.missing)
    clean_samples = [s for s in samples if clean.start < s["t"] <= clean.end]
    dead_level = max((dead_tuples(s) for s in clean_samples), default=None)
    clean_bpj = [b for s in tail(samples, clean) if (b := bytes_per_job(s)) is not None]
    size_level = statistics.median(clean_bpj) if clean_bpj else None
    out: dict[str, Any] = {
        "clean": {
            "finished_per_s": cf.finished / clean.seconds,
            "enqueued_per_s": cf.enqueued / clean.seconds,
            "share": clean_share,
            "p99_ms": clean_p99,
            "dead_level": dead_level,
            "bytes_per_job_level": size_level,
        },
        "phases": {},
    }
    all_pass = True
    for p in phases:
        if p.kind != "pressure":
            continue
        f = figures[p.name]
        after = by_name[f"{p.name}+"]
        share = f.finished / (p.factor * p.seconds)
        tp_ratio = share / clean_share if clean_share else 0.0
        p99 = p99_or_unbounded(f.p99_ms, f.started, f.missing)
        p99_ratio = p99 / clean_p99 if clean_p99 and math.isfinite(clean_p99) else math.inf
        end = tail(samples, after)
        dead_end = statistics.median([dead_tuples(s) for s in end]) if end else None
        bpj = [b for s in end if (b := bytes_per_job(s)) is not None]
        size_end = statistics.median(bpj) if bpj else None
        checks = {
            "throughput": tp_ratio >= THROUGHPUT_FLOOR,
            "p99": p99_ratio <= P99_CEILING,
            "dead_tuples": dead_end is not None
            and dead_level is not None
            and dead_end <= dead_level,
            "size": size_end is not None
            and size_level is not None
            and size_end <= SIZE_SLACK * size_level,
        }
        all_pass = all_pass and all(checks.values())
        out["phases"][p.name] = {
            "finished_per_s": f.finished / p.seconds,
            "enqueued_per_s": f.enqueued / p.seconds,
            "throughput_ratio": tp_ratio,
            "p50_ms": f.p50_ms,
            "p99_ms": p99,
            "p99_ratio": p99_ratio,
            "missing": f.missing,
            "dead_after": dead_end,
            "dead_peak": max(
                (dead_tuples(s) for s in samples if p.start < s["t"] <= after.end),
                default=None,
            ),
            "bytes_per_job_after": size_end,
            "checks": checks,
            "pass": all(checks.values()),
        }
    out["pass"] = all_pass
    return out


def phases_json(phases: Sequence[Phase]) -> list[dict[str, Any]]:
    return [asdict(p) for p in phases]


def left_out(figure: str, schedules: Sequence[Sequence[Mapping[str, Any]] | None]) -> bool:
    """Whether `figure` (a bench table's key, pressure_<phase>_...) is of a pressure that
    none of the runs' `schedules` (their phases_json, None where a run recorded none) had:
    one left out by bench/run.py --pressures, not one that failed."""
    parts = figure.split("_")
    if len(parts) < 3 or parts[0] != "pressure" or parts[1] not in PRESSURES:
        return False
    return bool(schedules) and all(
        s is not None and parts[1] not in {phase["name"] for phase in s} for s in schedules
    )


def phases_from_json(rows: Sequence[Mapping[str, Any]]) -> list[Phase]:
    return [Phase(**dict(r)) for r in rows]


def schedule_text(phases: Sequence[Phase], rate: float) -> str:
    """One line per phase: name, seconds from the origin, offered rate, what happens."""
    lines = []
    for p in phases:
        what = {
            "warmup": "not judged",
            "clean": "the reference",
            "pressure": PRESSURES.get(p.pressure or "", ""),
            "recovery": f"recovery after {p.pressure}",
        }[p.kind]
        lines.append(
            f"{p.name:<8} {p.start:6.0f} - {p.end:6.0f} s  {rate * p.factor:,.0f} jobs/s  {what}"
        )
    return "\n".join(lines)

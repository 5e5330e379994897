"""The pressure workload's schedule and verdict (bench/pressure_plan.py; issue 22, "Flat under
pressure"): phases and their lengths at every scale, the offered jobs the enqueuer sends, and
each check of the target against made-up figures. No database: `make bench
BENCH_WORKLOADS=pressure` runs the workload itself."""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from pathlib import Path
from typing import Any

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "pressure_plan.py"
_spec = importlib.util.spec_from_file_location("bench_pressure_plan", _PATH)
assert _spec is not None and _spec.loader is not None
plan: Any = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = plan  # dataclasses look their module up
_spec.loader.exec_module(plan)


def spans(phases: list[Any]) -> list[tuple[str, float, float, float]]:
    return [(p.name, p.start, p.end, p.factor) for p in phases]


def test_the_full_schedule_is_the_issues() -> None:
    assert spans(plan.schedule()) == [
        ("warmup", 0, 20, 1.0),
        ("clean", 20, 140, 1.0),
        ("hold", 140, 380, 1.0),
        ("hold+", 380, 500, 1.0),
        ("load", 500, 740, 1.5),
        ("load+", 740, 860, 1.0),
        ("counts", 860, 1100, 1.0),
        ("counts+", 1100, 1220, 1.0),
    ]
    kinds = [(p.kind, p.pressure) for p in plan.schedule()]
    assert kinds[:3] == [("warmup", None), ("clean", None), ("pressure", "hold")]
    assert kinds[3] == ("recovery", "hold")


def test_a_scale_shortens_every_phase_to_whole_steps() -> None:
    quarter = plan.schedule(0.25, 5.0)
    assert [p.seconds for p in quarter] == [5, 30, 60, 30, 60, 30, 60, 30]
    assert plan.total_seconds(quarter) == 305
    # 1/24 with one-second steps (BENCH_SIZE=tiny): 0.83 s of warmup rounds up to one step
    tiny = plan.schedule(1 / 24, 1.0)
    assert [p.seconds for p in tiny] == [1, 5, 10, 5, 10, 5, 10, 5]
    for a, b in itertools.pairwise(tiny):
        assert a.end == b.start


def test_some_pressures_only_and_wrong_arguments() -> None:
    names = [p.name for p in plan.schedule(pressures=["counts"])]
    assert names == ["warmup", "clean", "counts", "counts+"]
    with pytest.raises(ValueError, match="unknown pressure"):
        plan.schedule(pressures=["vacuum"])
    with pytest.raises(ValueError, match="above 0"):
        plan.schedule(0)


def test_phase_at_gives_a_boundary_to_the_later_phase() -> None:
    phases = plan.schedule()
    assert plan.phase_at(phases, 0).name == "warmup"
    assert plan.phase_at(phases, 139.9).name == "clean"
    assert plan.phase_at(phases, 140).name == "hold"
    assert plan.phase_at(phases, 1219.9).name == "counts+"
    assert plan.phase_at(phases, 1220) is None


def test_offered_jobs_follow_the_rate_and_the_load_phase() -> None:
    phases = plan.schedule()
    assert plan.offered_jobs(phases, 1000, 0) == 0
    assert plan.offered_jobs(phases, 1000, 10) == 10_000
    assert plan.offered_jobs(phases, 1000, 500) == 500_000
    assert plan.offered_jobs(phases, 1000, 600) == 500_000 + 100 * 1500
    assert plan.offered_jobs(phases, 1000, 740) == 500_000 + 240 * 1500
    total = 1220 * 1000 + 240 * 500
    assert plan.offered_jobs(phases, 1000, 1220) == total
    assert plan.offered_jobs(phases, 1000, 5000) == total  # nothing after the schedule


def test_the_enqueuers_ticks_send_every_offered_job_once() -> None:
    phases = plan.schedule(1 / 24, 1.0)
    tick = 0.02
    sent = 0
    per_tick = []
    for k in range(1, round(plan.total_seconds(phases) / tick) + 1):
        n = plan.tick_jobs(phases, 1000, k * tick, sent)
        per_tick.append(n)
        sent += n
    assert sent == round(plan.offered_jobs(phases, 1000, plan.total_seconds(phases)))
    assert min(per_tick) >= 19  # 20 a tick at R, 30 in the load phase
    assert max(per_tick) <= 31
    # a late tick catches up with the schedule, it does not lose the jobs it missed
    assert plan.tick_jobs(phases, 1000, 2.0, 1000) == 1000


def test_events_open_and_close_the_pressure_connections() -> None:
    assert plan.events(plan.schedule()) == [
        (140, "start", "hold"),
        (380, "stop", "hold"),
        (860, "start", "counts"),
        (1100, "stop", "counts"),
    ]


def test_at_one_instant_a_pressure_stops_before_another_starts() -> None:
    # no schedule of today's has this (each recovery lasts a step at least): a made-up one
    phases = [
        plan.Phase("counts", "pressure", "counts", 10.0, 20.0),
        plan.Phase("hold", "pressure", "hold", 20.0, 30.0),
    ]
    assert plan.events(phases) == [
        (10.0, "start", "counts"),
        (20.0, "stop", "counts"),
        (20.0, "start", "hold"),
        (30.0, "stop", "hold"),
    ]


def test_p99_is_unbounded_when_more_than_one_percent_never_started() -> None:
    assert plan.p99_or_unbounded(12.0, 1000, 10) == 12.0
    assert plan.p99_or_unbounded(12.0, 1000, 11) == math.inf
    assert plan.p99_or_unbounded(None, 0, 0) == math.inf


# -- the verdict -------------------------------------------------------------------------------

PHASES = plan.schedule(0.25, 5.0)  # clean 5-35, hold 35-95, hold+ 95-125, load 125-185, ...
RATE = 1000


def sample(t: float, dead: int = 20_000, bpj: float = 2000.0, jobs: int | None = None) -> Any:
    jobs = jobs if jobs is not None else max(1, round(plan.offered_jobs(PHASES, RATE, t)))
    return {
        "t": t,
        "dead_jobs": dead // 2,
        "dead_attempts": dead - dead // 2,
        "jobs": jobs,
        "bytes_total": bpj * jobs,
    }


def steady_samples(**changes: dict[float, dict[str, Any]]) -> list[Any]:
    """A sample every 5 s; `at` maps a time to what that sample has instead."""
    at = changes.get("at", {})
    return [sample(t, **at.get(t, {})) for t in range(5, 306, 5)]


def figures(**changes: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for p in PHASES:
        offered = round(RATE * p.factor * p.seconds)
        base = {
            "enqueued": offered,
            "finished": offered,
            "started": offered,
            "missing": 0,
            "p50_ms": 3.0,
            "p99_ms": 10.0,
        }
        base.update(changes.get(p.name.replace("+", "_after"), {}))
        out[p.name] = plan.PhaseFigures(**base)
    return out


def test_a_flat_run_meets_the_target() -> None:
    v = plan.judge(PHASES, figures(), steady_samples())
    assert v["pass"]
    assert set(v["phases"]) == {"hold", "load", "counts"}
    assert v["clean"]["finished_per_s"] == 1000
    assert v["phases"]["load"]["finished_per_s"] == 1500  # kept up with 1.5x: a ratio of 1
    assert v["phases"]["load"]["throughput_ratio"] == 1.0
    assert v["phases"]["hold"]["p99_ratio"] == 1.0


def test_throughput_below_80_percent_of_clean_fails_only_that_check() -> None:
    v = plan.judge(PHASES, figures(counts={"finished": 47_000}), steady_samples())
    assert not v["pass"]
    counts = v["phases"]["counts"]
    assert counts["throughput_ratio"] == pytest.approx(47_000 / 60_000)
    assert counts["checks"] == {"throughput": False, "p99": True, "dead_tuples": True, "size": True}
    assert v["phases"]["hold"]["pass"]
    # 80% exactly is still within the target; a load phase at clean's 1,000/s is not
    assert plan.judge(PHASES, figures(counts={"finished": 48_000}), steady_samples())["pass"]
    v = plan.judge(PHASES, figures(load={"finished": 60_000}), steady_samples())
    assert not v["phases"]["load"]["checks"]["throughput"]
    # an enqueuer that fell behind does not lower the bar: the schedule's rate is the offer
    late = {"enqueued": 40_000, "finished": 40_000, "started": 40_000}
    v = plan.judge(PHASES, figures(counts=late), steady_samples())
    assert v["phases"]["counts"]["throughput_ratio"] == pytest.approx(40_000 / 60_000)
    assert not v["phases"]["counts"]["checks"]["throughput"]


def test_claim_p99_over_twice_clean_fails() -> None:
    v = plan.judge(PHASES, figures(hold={"p99_ms": 20.0}), steady_samples())
    assert v["phases"]["hold"]["checks"]["p99"]
    v = plan.judge(PHASES, figures(hold={"p99_ms": 20.1}), steady_samples())
    assert not v["phases"]["hold"]["checks"]["p99"]
    v = plan.judge(PHASES, figures(hold={"missing": 700}), steady_samples())
    assert v["phases"]["hold"]["p99_ms"] == math.inf
    assert not v["pass"]


def test_dead_tuples_must_be_back_to_the_clean_peak_by_the_recovery_end() -> None:
    # hold+ runs 95-125: its last quarter (117.5-125) holds the sample at 120 and 125
    high = {t: {"dead": 900_000} for t in (100, 105, 110, 115)}
    v = plan.judge(PHASES, figures(), steady_samples(at=high))
    hold = v["phases"]["hold"]
    assert hold["checks"]["dead_tuples"]  # high during the recovery, back at its end
    assert hold["dead_peak"] == 900_000
    late = {120: {"dead": 900_000}, 125: {"dead": 900_000}}
    v = plan.judge(PHASES, figures(), steady_samples(at=late))
    assert not v["phases"]["hold"]["checks"]["dead_tuples"]
    assert v["phases"]["hold"]["dead_after"] == 900_000
    # the clean phase's own peak is the level
    peak = {30: {"dead": 50_000}, 120: {"dead": 50_000}, 125: {"dead": 50_000}}
    v = plan.judge(PHASES, figures(), steady_samples(at=peak))
    assert v["clean"]["dead_level"] == 50_000
    assert v["phases"]["hold"]["checks"]["dead_tuples"]


def test_size_is_judged_per_job_within_ten_percent_of_clean() -> None:
    ok = {t: {"bpj": 2199.0} for t in (120, 125)}
    assert plan.judge(PHASES, figures(), steady_samples(at=ok))["phases"]["hold"]["checks"]["size"]
    bloated = {t: {"bpj": 2300.0} for t in (120, 125)}
    v = plan.judge(PHASES, figures(), steady_samples(at=bloated))
    assert not v["phases"]["hold"]["checks"]["size"]
    assert v["phases"]["hold"]["bytes_per_job_after"] == 2300.0
    assert v["clean"]["bytes_per_job_level"] == 2000.0


def test_schedule_text_names_every_phase_and_its_rate() -> None:
    text = plan.schedule_text(plan.schedule(), 1000)
    assert "load        500 -    740 s  1,500 jobs/s" in text
    assert "REPEATABLE READ" in text
    assert len(text.splitlines()) == 8


def test_a_pressure_left_out_is_told_from_one_that_failed() -> None:
    """bench/run.py --pressures hold runs no load and no counts: the report says their rows
    were not run (plan.left_out), where a figure missing from a pressure that ran failed."""
    hold_only = plan.phases_json(plan.schedule(pressures=["hold"]))
    every = plan.phases_json(plan.schedule())
    assert plan.left_out("pressure_load_tp_ratio", [hold_only])
    assert plan.left_out("pressure_counts_p99_ratio", [hold_only, hold_only])
    assert not plan.left_out("pressure_hold_p99_ratio", [hold_only])
    assert not plan.left_out("pressure_load_tp_ratio", [hold_only, every])
    assert not plan.left_out("pressure_load_tp_ratio", [hold_only, None])  # unknown: failed
    assert not plan.left_out("pressure_load_tp_ratio", [])
    assert not plan.left_out("pressure_clean_p99_ms", [hold_only])
    assert not plan.left_out("pressure_pass", [hold_only])


def test_the_probe_is_summed_up_per_phase_by_the_instant_of_each_measurement() -> None:
    phases = plan.schedule(1 / 24, 1.0)  # warmup 0-1, clean 1-6, hold 6-16, ...
    clean, hold = phases[1], phases[2]
    rows = [(clean.start + 0.01 * k, 0.1 * k, 1.0) for k in range(1, 101)]  # 100 in clean
    rows += [(hold.start + 0.5, 50.0, 7.0), (hold.end, 60.0, 9.0)]  # two in hold, its end in
    rows += [(-0.5, 999.0, 999.0)]  # before the origin: in no phase
    figures = plan.probe_figures(rows, phases)
    assert set(figures) == {"clean", "hold"}  # a phase with fewer than two is left out
    assert figures["clean"]["n"] == 100
    assert figures["clean"]["wake_p50_ms"] == pytest.approx(5.05)
    assert figures["clean"]["wake_p99_ms"] == pytest.approx(9.9, abs=0.01)
    assert figures["clean"]["trip_p99_ms"] == 1.0
    assert figures["hold"] == {
        "n": 2,
        "wake_p50_ms": 55.0,
        "wake_p99_ms": pytest.approx(59.9),
        "trip_p50_ms": 8.0,
        "trip_p99_ms": pytest.approx(8.98),
    }


def test_the_enqueuers_calls_are_summed_up_per_phase_by_when_each_began() -> None:
    phases = plan.schedule(1 / 24, 1.0)  # warmup 0-1, clean 1-6, hold 6-16, ...
    clean, hold = phases[1], phases[2]
    calls = [[clean.start + 0.01 * k, 0.1 * k] for k in range(1, 101)]  # 100 in clean
    calls += [[hold.start + 0.5, 50.0], [hold.end, 60.0], [hold.end + 0.1, 999.0]]
    figures = plan.call_figures(calls, phases)
    assert set(figures) == {"clean", "hold"}  # the last call is the next phase's only one
    assert figures["clean"] == {"n": 100, "p50_ms": 5.05, "p99_ms": 9.9}
    assert figures["hold"] == {"n": 2, "p50_ms": 55.0, "p99_ms": pytest.approx(59.9)}


def test_a_claim_after_its_call_counts_from_the_end_of_the_call_that_sent_its_job() -> None:
    phases = plan.schedule(1 / 24, 1.0)  # warmup 0-1, clean 1-6, hold 6-16, ...
    clean, hold = phases[1], phases[2]
    at = clean.start + 1.0
    calls = [[at, 4.0], [at + 0.02, 30.0], [hold.start + 1.0, 2.0]]  # began (s), took (ms)
    claims = [
        (at + 0.001, at + 0.010),  # the first call's: 6 ms after it returned at +4 ms
        (at + 0.0015, at + 0.005),  # 1 ms after
        (at + 0.021, at + 0.060),  # the second call's: it returned at +50 ms, 10 ms after
        (at + 0.025, at + 0.052),  # 2 ms after
        (hold.start + 1.001, hold.start + 1.005),  # hold's: 3 ms after its call
        (at - 0.5, at),  # due before any call began: no call to count from
        (at + 0.0198, at + 0.0520),  # due on a clock 0.2 ms behind: the second call's, 2 ms
    ]
    # calls bunched after a late tick: a job due within the first call is the first call's
    # even when the next began less than CALL_SLACK later
    late = hold.start + 3.0
    calls += [[late, 2.0], [late + 0.003, 1.0]]
    claims += [(late + 0.001, late + 0.007), (late + 0.0035, late + 0.0045)]  # 5 and 0.5 ms
    figures = plan.after_calls(claims, calls, phases)
    assert set(figures) == {"clean", "hold"}
    assert figures["clean"]["n"] == 5
    assert figures["clean"]["p50_ms"] == pytest.approx(2.0, abs=0.01)
    assert figures["clean"]["p99_ms"] == pytest.approx(9.84, abs=0.01)
    assert figures["hold"]["n"] == 3  # 3 ms, 5 ms and 0.5 ms after their calls
    assert figures["hold"]["p50_ms"] == pytest.approx(3.0, abs=0.01)
    assert figures["hold"]["p99_ms"] == pytest.approx(4.96, abs=0.01)  # the 5 ms one's


def test_the_backends_waits_are_averaged_per_phase_by_statement_and_wait() -> None:
    phases = plan.schedule(1 / 24, 1.0)  # warmup 0-1, clean 1-6, hold 6-16, ...
    clean, hold = phases[1], phases[2]
    claim = "WITH picked AS (SELECT id FROM duetime_jobs"
    count = "SELECT count(*) FROM duetime_jobs"
    on_cpu = ["active", "", "", claim, "client backend"]
    on_lock = ["active", "Lock", "transactionid", claim, "client backend"]
    counting = ["active", "", "", count, "client backend"]
    held = [
        "idle in transaction",
        "Client",
        "ClientRead",
        "SELECT txid_current()",
        "client backend",
    ]
    vacuum = ["active", "IO", "DataFileRead", "", "autovacuum worker"]
    samples = [(clean.start + 0.5, [on_cpu]), (clean.start + 1.5, [on_cpu, on_lock])]
    samples += [(clean.start + 2.5, [])]  # nothing but idle backends: a sample all the same
    samples += [(hold.start + 1.0, [held, counting, counting, vacuum])]
    samples += [(-0.5, [on_cpu])]  # before the origin: in no phase
    figures = plan.wait_figures(samples, phases)
    assert set(figures) == {"clean", "hold"}
    assert figures["clean"] == {
        "samples": 3,
        "backends_mean": 1.0,
        "top": [[claim, "cpu", round(2 / 3, 3)], [claim, "Lock:transactionid", round(1 / 3, 3)]],
    }
    assert figures["hold"]["top"] == [
        [count, "cpu", 2.0],
        ["SELECT txid_current()", "idle in transaction", 1.0],
        ["autovacuum worker", "IO:DataFileRead", 1.0],
    ]

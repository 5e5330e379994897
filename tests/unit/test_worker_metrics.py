"""WorkerMetrics records what the worker tells it, in a registry of its own (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.core.models import Attempt, Claim, Job
from duetime.core.states import AttemptStatus, JobStatus
from duetime.runtime.attempt import RECORDED
from duetime.runtime.metrics import FOLD_EVERY, STALE, WorkerMetrics, observe_all

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def claim(
    queue: str = "q", task: str = "t", lag: float = 0.5, *, due_on_attempt: bool = True
) -> Claim:
    due = T0
    started = T0 + timedelta(seconds=lag)
    job = Job(
        id=1,
        tenant="default",
        queue=queue,
        task=task,
        args={},
        priority=0,
        due_at=due,
        deadline_at=None,
        status=JobStatus.RUNNING,
        version=2,
        attempts=1,
        max_attempts=3,
        generation=1,
        retry_base=1.0,
        retry_cap=10.0,
        lease_seconds=30.0,
        timeout_seconds=None,
        idempotency_key=None,
        business_key=f"default/{task}:1",
        created_at=due,
        updated_at=started,
    )
    attempt = Attempt(
        id=1,
        job_id=1,
        generation=1,
        worker_id="w",
        status=AttemptStatus.RUNNING,
        lease_expires_at=started + timedelta(seconds=30),
        started_at=started,
        due_at=due if due_on_attempt else None,
    )
    return Claim(job, attempt)


@pytest.fixture
def metrics() -> WorkerMetrics:
    return WorkerMetrics(process=False)


def test_claims_observe_the_lag_per_queue(metrics: WorkerMetrics) -> None:
    metrics.claimed([claim("q1", lag=0.002)])
    metrics.claimed([claim("q1", lag=42.0)])
    metrics.claimed([claim("q2", lag=-1.0)])  # a clock a little behind: clamped to 0
    metrics.claimed([claim("q2", lag=3.0, due_on_attempt=False)])  # falls back to the job's due

    assert metrics.value("duetime_jobs_claimed_total", queue="q1") == 2
    assert metrics.value("duetime_scheduling_lag_seconds_count", queue="q1") == 2
    assert metrics.value("duetime_scheduling_lag_seconds_sum", queue="q1") == pytest.approx(42.002)
    assert metrics.value("duetime_scheduling_lag_seconds_bucket", queue="q1", le="0.0025") == 1
    assert metrics.value("duetime_scheduling_lag_seconds_bucket", queue="q1", le="60.0") == 2
    assert metrics.value("duetime_scheduling_lag_seconds_sum", queue="q2") == pytest.approx(3.0)
    assert metrics.value("duetime_scheduling_lag_seconds_bucket", queue="q2", le="0.001") == 1


def test_outcomes_durations_and_losses(metrics: WorkerMetrics) -> None:
    metrics.finished("send", "succeeded", 0.2)
    metrics.finished("send", "succeeded", 0.3)
    metrics.finished("send", "retried", 1.5)
    metrics.finished("bill", "dead", 0.01)
    metrics.stale_rejected("send", 2.0)
    metrics.lease_lost()
    metrics.leases_reaped(2)
    metrics.leases_reaped(0)

    def attempts(task: str, outcome: str) -> float:
        return metrics.value("duetime_attempts_total", task=task, outcome=outcome)

    assert attempts("send", "succeeded") == 2
    assert attempts("send", "retried") == 1
    assert attempts("bill", "dead") == 1
    assert attempts("send", STALE) == 1
    assert attempts("bill", "succeeded") == 0
    assert metrics.value("duetime_attempt_duration_seconds_count", task="send") == 4
    assert metrics.value("duetime_attempt_duration_seconds_sum", task="send") == pytest.approx(4.0)
    assert metrics.value("duetime_attempt_duration_seconds_bucket", task="bill", le="0.01") == 1
    assert metrics.value("duetime_stale_completions_rejected_total") == 1
    assert metrics.value("duetime_lease_expiries_total") == 3


def test_busy_is_read_when_scraped(metrics: WorkerMetrics) -> None:
    running: dict[int, object] = {}
    metrics.watch_busy(lambda: len(running))
    assert metrics.value("duetime_worker_busy") == 0
    running.update({1: object(), 2: object()})
    assert metrics.value("duetime_worker_busy") == 2


def test_one_claim_of_many_jobs_counts_each_by_its_queue(metrics: WorkerMetrics) -> None:
    metrics.claimed([claim("q1", lag=0.5), claim("q2", lag=1.0), claim("q1", lag=2.0)])

    assert metrics.value("duetime_jobs_claimed_total", queue="q1") == 2
    assert metrics.value("duetime_jobs_claimed_total", queue="q2") == 1
    assert metrics.value("duetime_scheduling_lag_seconds_count", queue="q1") == 2
    assert metrics.value("duetime_scheduling_lag_seconds_sum", queue="q1") == pytest.approx(2.5)
    assert metrics.value("duetime_scheduling_lag_seconds_sum", queue="q2") == pytest.approx(1.0)


def test_the_rendered_registry_names_every_metric(metrics: WorkerMetrics) -> None:
    metrics.claimed([claim()])
    metrics.finished("t", "succeeded", 0.1)
    text = metrics.render().decode()
    for name in [
        "duetime_scheduling_lag_seconds_bucket",
        "duetime_jobs_claimed_total",
        "duetime_attempts_total",
        "duetime_attempt_duration_seconds_bucket",
        "duetime_lease_expiries_total",
        "duetime_stale_completions_rejected_total",
        "duetime_worker_busy",
    ]:
        assert f"\n{name}" in text, name
    assert "# TYPE duetime_scheduling_lag_seconds histogram" in text
    assert "process_cpu_seconds_total" not in text  # process=False


def test_registries_are_private_and_may_carry_process_figures() -> None:
    one, two = WorkerMetrics(), WorkerMetrics()  # no clash: neither uses the global registry
    one.finished("t", "succeeded", 0.1)
    assert two.value("duetime_attempts_total", task="t", outcome="succeeded") == 0
    assert "python_info" in one.render().decode()


def test_every_recorded_outcome_has_a_distinct_label() -> None:
    labels = [label for _, _, label in RECORDED.values()]
    assert len(set(labels)) == len(labels)
    assert STALE not in labels
    assert {"succeeded", "retried", "dead", "cancelled", "parked"} <= set(labels)


def test_many_values_at_once_count_as_one_at_a_time() -> None:
    """observe_all (a claim's lags, a batch's durations) leaves every bucket, the sum and the
    count as observing each value does, bounds and the +Inf bucket included."""
    values = [0.0, 0.001, 0.0011, 0.005, 0.7, 600.0, 600.5, 1e9, 0.001]
    one, many = WorkerMetrics(process=False), WorkerMetrics(process=False)
    for value in values:
        one.lag.labels("q").observe(value)
    observe_all(many.lag.labels("q"), values)

    def samples(metrics: WorkerMetrics) -> list[str]:  # but when each metric was created
        return [line for line in metrics.render().decode().splitlines() if "_created" not in line]

    assert samples(many) == samples(one)


def test_ends_are_counted_before_any_read_and_in_batches(metrics: WorkerMetrics) -> None:
    """An end noted is in the next read, a scrape's (registry.collect) as well as value()'s,
    and the notes do not pile up between reads (counted every FOLD_EVERY)."""
    metrics.finished("t", "succeeded", 0.1)
    scraped = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for m in metrics.registry.collect()
        for s in m.samples
    }
    key = ("duetime_attempts_total", (("outcome", "succeeded"), ("task", "t")))
    assert scraped[key] == 1
    for _ in range(FOLD_EVERY * 2 + 1):
        metrics.finished("t", "succeeded", 0.1)
    assert len(metrics._ended) <= FOLD_EVERY
    assert (
        metrics.value("duetime_attempts_total", task="t", outcome="succeeded") == 2 * FOLD_EVERY + 2
    )
    assert metrics.value("duetime_attempt_duration_seconds_count", task="t") == 2 * FOLD_EVERY + 2

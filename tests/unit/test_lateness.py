"""A task's max_lateness: the deadline it derives (on_late="expire"), what it refuses, and
how late an attempt is as its handler sees it (on_late="run"), with a manual clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

import duetime
from duetime.core.errors import InvalidRequest
from duetime.core.requests import (
    TaskDefaults,
    build_new_job,
    build_new_jobs,
    check_lateness,
    late_deadline,
)
from duetime.runtime.context import AttemptContext
from jobhelpers import running_claim

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
FIVE_MIN = TaskDefaults(max_lateness_seconds=300)


def test_expire_derives_the_deadline_from_the_due_time() -> None:
    job = build_new_job("t", {}, now=NOW, tenant="a", defaults=FIVE_MIN, delay="1h")
    assert job.due_at == NOW + timedelta(hours=1)
    assert job.deadline_at == NOW + timedelta(hours=1, minutes=5)


def test_a_deadline_given_at_enqueue_wins_when_it_is_earlier() -> None:
    early = NOW + timedelta(minutes=2)
    job = build_new_job("t", {}, now=NOW, tenant="a", defaults=FIVE_MIN, deadline=early)
    assert job.deadline_at == early
    late = NOW + timedelta(hours=2)
    job = build_new_job("t", {}, now=NOW, tenant="a", defaults=FIVE_MIN, deadline=late)
    assert job.deadline_at == NOW + timedelta(minutes=5)


def test_run_and_no_bound_leave_the_deadline_alone() -> None:
    run = TaskDefaults(max_lateness_seconds=300, on_late="run")
    assert build_new_job("t", {}, now=NOW, tenant="a", defaults=run).deadline_at is None
    assert build_new_job("t", {}, now=NOW, tenant="a", defaults=TaskDefaults()).deadline_at is None
    assert late_deadline(NOW, None, run) is None


def test_the_idempotency_fingerprint_ignores_the_derived_deadline() -> None:
    first = build_new_job("t", {}, now=NOW, tenant="a", defaults=FIVE_MIN, key="k", delay=60)
    later = NOW + timedelta(seconds=30)
    again = build_new_job("t", {}, now=later, tenant="a", defaults=FIVE_MIN, key="k", delay=60)
    assert first.deadline_at != again.deadline_at
    assert first.request_hash == again.request_hash  # the same request: the same job


def test_a_batch_with_at_each_gets_a_deadline_per_job() -> None:
    template = build_new_job("t", {}, now=NOW, tenant="a", defaults=FIVE_MIN)
    template = replace(template, deadline_at=None)
    dues = [NOW + timedelta(hours=h) for h in (1, 2)]
    jobs = build_new_jobs(template, [{}, {}], at_each=dues, defaults=FIVE_MIN)
    assert [j.deadline_at for j in jobs] == [d + timedelta(minutes=5) for d in dues]


@pytest.mark.parametrize(
    ("max_lateness", "on_late", "message"),
    [
        (0, "expire", "more than 0 seconds"),
        ("soon", "expire", "not a duration"),
        (-1, "expire", "must not be negative"),
        ("5m", "drop", "on_late must be 'expire' or 'run'"),
    ],
)
def test_bad_options_are_refused(max_lateness: object, on_late: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        check_lateness(max_lateness, on_late, "task 't'")  # type: ignore[arg-type]


def test_the_task_decorator_takes_and_checks_the_options() -> None:
    app = duetime.App("sqlite:///:memory:")

    @app.task(name="remind", max_lateness="5m")
    def remind() -> None: ...

    @app.task(name="report", max_lateness=timedelta(hours=1), on_late="run")
    def report() -> None: ...

    assert remind.defaults.max_lateness_seconds == 300 and remind.defaults.on_late == "expire"
    assert report.defaults.max_lateness_seconds == 3600 and report.defaults.on_late == "run"
    with pytest.raises(InvalidRequest, match="task 'bad': on_late"):

        @app.task(name="bad", max_lateness=10, on_late="skip")
        def bad() -> None: ...


def test_the_handler_sees_how_late_its_attempt_started() -> None:
    bound = timedelta(minutes=5)
    on_time = AttemptContext(running_claim(NOW, NOW + timedelta(minutes=4)), max_lateness=bound)
    assert on_time.lateness == timedelta(minutes=4) and not on_time.late
    late = AttemptContext(running_claim(NOW, NOW + timedelta(minutes=6)), max_lateness=bound)
    assert late.lateness == timedelta(minutes=6) and late.late
    unbounded = AttemptContext(running_claim(NOW, NOW + timedelta(hours=6)))
    assert unbounded.lateness == timedelta(hours=6) and not unbounded.late
    early = AttemptContext(running_claim(NOW, NOW - timedelta(seconds=1)), max_lateness=bound)
    assert early.lateness == timedelta(0)  # clocks apart: never negative

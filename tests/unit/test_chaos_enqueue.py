"""The chaos run's enqueuer: a deadline job retried through an outage stays valid (seen in CI:
a deadline fixed at the first try passed while the primary was down, and every retry was then
refused as invalid until the run gave up)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.chaos import run


def test_a_deadline_job_takes_its_deadline_from_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(1)
    task, args, options = run._job_for("deadline", 7, rng)
    assert "deadline" not in options and 0.5 <= options["deadline_in"] <= 20
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(run.chaos_app, "enqueue", lambda t, a, **o: calls.append(o))
    before = datetime.now(UTC)
    run._enqueue(task, args, options)
    after = datetime.now(UTC)
    span = timedelta(seconds=options["deadline_in"])
    assert before + span <= calls[0]["deadline"] <= after + span
    assert calls[0]["key"] == "chaos-7" and "deadline_in" not in calls[0]
    assert "deadline_in" in options  # the caller's options stay as they were, for a retry

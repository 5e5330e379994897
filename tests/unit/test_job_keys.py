"""What puts a job in a sequence or makes it unique (core/requests.py: job_keys, JobKeys,
render_sequence, check_sequence_template): templates name arguments only, values render
stably, keys and windows are bounded, a digest does not depend on the args' key order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.core.errors import InvalidRequest
from duetime.core.models import NewJob
from duetime.core.requests import (
    TaskDefaults,
    build_new_job,
    check_sequence_template,
    check_unique_for,
    render_sequence,
)

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def job(args: dict[str, object], **kw: Any) -> NewJob:
    defaults: TaskDefaults = kw.pop("defaults", TaskDefaults())
    return build_new_job("t", args, now=NOW, tenant="default", defaults=defaults, **kw)


@pytest.mark.parametrize("template", ["{a.b}", "{a[0]}", "{a!r}", "{a:>5}", "{0}", "{}", "{a"])
def test_a_template_names_arguments_only(template: str) -> None:
    with pytest.raises(InvalidRequest):
        check_sequence_template(template, "release", "task 't'")


def test_templates_render_values_stably() -> None:
    assert render_sequence("acct-{id}", {"id": "x"}, "t") == "acct-x"
    assert render_sequence("{a}/{b}", {"a": 1, "b": True}, "t") == "1/true"
    assert render_sequence("{a}", {"a": {"y": 1, "x": [1]}}, "t") == '{"x":[1],"y":1}'
    assert render_sequence("{{literal}}-{a}", {"a": 2}, "t") == "{literal}-2"
    with pytest.raises(InvalidRequest, match="255"):
        render_sequence("{a}", {"a": "x" * 256}, "t")
    with pytest.raises(InvalidRequest, match="sequence_on_dead"):
        check_sequence_template("{a}", "skip", "task 't'")


def test_unique_digests_and_windows() -> None:
    first = job({"a": 1, "b": 2}, unique_for="10m")
    same = job({"b": 2, "a": 1}, unique_for=600)
    other = job({"a": 1, "b": 3}, unique_for="10m")
    keyed = job({"a": 9}, unique_for="10m", unique_key="k")
    assert first.unique_key == same.unique_key != other.unique_key
    assert keyed.unique_key == job({"z": 0}, unique_for="1h", unique_key="k").unique_key
    assert first.unique_until == NOW + timedelta(minutes=10)
    assert check_unique_for("1s") == 1 and check_unique_for("366d") == 366 * 86400
    for bad in ("0.5s", "367d", "soon", -1, float("nan")):
        with pytest.raises(InvalidRequest):
            check_unique_for(bad)


def test_a_task_default_window_and_sequence() -> None:
    defaults = TaskDefaults(sequence="{a}", unique_for_seconds=30, sequence_on_dead="hold")
    made = job({"a": "x"}, defaults=defaults)
    assert (made.sequence_key, made.sequence_hold) == ("x", True)
    assert made.unique_until == NOW + timedelta(seconds=30)
    own = job({"a": "x"}, defaults=defaults, sequence="mine")
    assert own.sequence_key == "mine"
    plain = job({"a": "x"})
    assert (plain.sequence_key, plain.unique_key) == (None, None)

"""Every bad enqueue input is refused with a clear message before any I/O."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from duetime.core.durations import parse_duration
from duetime.core.errors import InvalidRequest
from duetime.core.requests import TaskDefaults, build_new_job, parse_instant

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def build(**kw: Any) -> Any:
    task = kw.pop("task", "t")
    args = kw.pop("args", {})
    return build_new_job(task, args, now=NOW, tenant="default", defaults=TaskDefaults(), **kw)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("1h30m", 5400),
        ("2d", 172800),
        ("1.5", 1.5),
        (" 90 ", 90),
        ("250ms", 0.25),
        ("1w", 604800),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["soon", "5 minutes", "-5s", "5x", "", "1h-3m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_duration(text)


def test_instants_need_an_offset_and_come_back_in_utc() -> None:
    parsed = parse_instant("2026-03-01T10:00:00+01:00", "due time")
    assert parsed == NOW and parsed.tzinfo is UTC
    assert parse_instant("2026-03-01T09:00:00Z", "due time") == NOW
    with pytest.raises(InvalidRequest, match="no UTC offset"):
        parse_instant("2026-03-01T09:00:00", "due time")
    with pytest.raises(InvalidRequest, match="no UTC offset"):
        parse_instant(datetime(2026, 3, 1, 9), "due time")
    with pytest.raises(InvalidRequest, match="not an ISO 8601 time"):
        parse_instant("tomorrow", "due time")


def test_due_time_from_at_delay_or_now() -> None:
    assert build().due_at == NOW
    assert build(delay="90s").due_at == NOW + timedelta(seconds=90)
    assert build(delay=timedelta(minutes=1)).due_at == NOW + timedelta(minutes=1)
    tz = timezone(timedelta(hours=5, minutes=30))
    assert build(at=datetime(2026, 3, 1, 14, 30, tzinfo=tz)).due_at == NOW
    with pytest.raises(InvalidRequest, match="not both"):
        build(at=NOW, delay=5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"args": [1, 2]}, "JSON object"),
        ({"args": "x"}, "JSON object"),
        ({"args": {1: "a"}}, "string"),
        ({"args": {"a": object()}}, "plain JSON"),
        ({"args": {"a": float("nan")}}, "plain JSON"),
        ({"args": {"blob": "x" * (1024 * 1024)}}, "limit is 1048576 bytes"),
        ({"deadline": NOW}, "not after the due time"),
        ({"at": NOW + timedelta(hours=1), "deadline": NOW}, "not after the due time"),
        ({"task": ""}, "task name"),
        ({"task": "x" * 201}, "limit is 200"),
        ({"queue": ""}, "queue"),
        ({"priority": 1.5}, "whole number"),
        ({"priority": True}, "whole number"),
        ({"priority": 5000}, "between"),
        ({"max_attempts": 0}, "between 1"),
        ({"key": ""}, "idempotency key"),
        ({"delay": -3}, "negative"),
    ],
)
def test_bad_requests_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        build(**kwargs)


def test_fingerprint_matches_for_the_same_request_only() -> None:
    a = build(args={"x": 1, "y": 2}, key="k")
    b = build(args={"y": 2, "x": 1}, key="k")
    c = build(args={"x": 1, "y": 3}, key="k")
    assert a.request_hash == b.request_hash != c.request_hash
    assert a.business_key == "default/t:k"


def test_business_key_without_an_idempotency_key_is_unique() -> None:
    assert build().business_key != build().business_key
    assert build(business_key="order-7").business_key == "order-7"


def test_text_databases_cannot_store_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="NUL"):
        build(args={"a": "x\x00y"})
    with pytest.raises(InvalidRequest, match="surrogate"):
        build(args={"a": "\ud800"})


@pytest.mark.parametrize("value", [1e14 * 86400, float("inf"), float("nan"), "1e400"])
def test_absurd_durations_are_refused(value: object) -> None:
    with pytest.raises(InvalidRequest):
        parse_duration(value)  # type: ignore[arg-type]


def test_names_with_nul_are_refused() -> None:
    with pytest.raises(InvalidRequest, match="NUL"):
        build(task="a\x00b")


def test_flat_args_are_copied_as_parsing_their_json_would_give_them() -> None:
    from duetime.core.requests import dump_args

    given = {"s": "é\u2603", "i": 10**20, "f": -0.0, "b": True, "n": None}
    args, text = dump_args(given, 1024)
    assert args == json.loads(text) == given and args is not given
    # values JSON does not give back as they are go through the text
    nested, _ = dump_args({"t": (1, 2), "d": {"x": [3]}}, 1024)
    assert nested == {"t": [1, 2], "d": {"x": [3]}}

    class Text(str):
        pass

    odd, _ = dump_args({"v": Text("x")}, 1024)
    assert type(odd["v"]) is str
    with pytest.raises(InvalidRequest, match="every key must be a string"):
        dump_args({1: "x"}, 1024)


def test_args_are_encoded_as_the_shared_encoder_would_and_a_circular_value_is_refused() -> None:
    from duetime.core.requests import _ARGS_ENCODER, dump_args

    for given in ({"b": [1, 2.5, -0.0, None, True, "é\u2603\U0001f600"], "a": {"z": [{}]}}, {}):
        assert dump_args(given, 1024)[1] == _ARGS_ENCODER.encode(given)
    loop: dict[str, Any] = {}
    loop["self"] = [loop]
    with pytest.raises(InvalidRequest, match="contain themselves"):
        dump_args({"x": loop}, 1024)
    with pytest.raises(InvalidRequest, match="plain JSON"):
        dump_args({"x": float("inf")}, 1024)


def test_a_batch_is_made_and_checked_in_order_as_it_is_read() -> None:
    from duetime.core.requests import build_new_jobs

    template = build(task="t", delay=5)
    checked: list[int] = []

    def check(job_args: Any, number: int, count: int) -> None:
        checked.append(number)
        if job_args.get("bad"):
            raise InvalidRequest(f"job {number} of {count} is bad")

    args: list[Any] = [{"i": i} for i in range(600)]
    args[450] = {"bad": True}
    jobs = build_new_jobs(template, args, check=check)
    assert len(jobs) == 600 and checked == []  # nothing made yet
    first = jobs[:250]
    assert [j.args["i"] for j in first] == list(range(250)) and checked == list(range(1, 251))
    assert jobs[-600].args == {"i": 0}
    with pytest.raises(InvalidRequest, match="job 451 of 600"):
        jobs[449:460]
    with pytest.raises(IndexError):
        jobs[600]
    assert all(j.due_at == NOW + timedelta(seconds=5) for j in first)
    assert all(j.request_hash == "" and j.idempotency_key is None for j in first)
    assert len({j.business_key for j in first}) == 250
    assert all(j.business_key.startswith("default/t:") for j in first)
    # what a bulk insert reads: each job's parts, the same as its NewJob's fields
    assert [(j.args, j.args_json, j.due_at, j.business_key) for j in first] == jobs.parts(0, 250)
    assert jobs.parts(0, 2)[1] == (
        {"i": 1},
        '{"i":1}',
        NOW + timedelta(seconds=5),
        first[1].business_key,
    )


def test_a_request_without_a_key_has_no_fingerprint() -> None:
    assert build(args={"x": 1}).request_hash == ""
    assert build(args={"x": 1}, key="k").request_hash != ""

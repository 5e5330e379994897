"""Input limits that the API and dashboard rely on (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from duetime.core.errors import InvalidRequest
from duetime.core.requests import dump_args


def test_dump_args_limits_nesting() -> None:
    ok: object = []
    for _ in range(30):
        ok = [ok]
    dump_args({"a": ok}, 10_000)
    deep: object = []
    for _ in range(100):
        deep = {"x": deep}
    with pytest.raises(InvalidRequest, match="nest"):
        dump_args({"a": deep}, 10_000)


def test_dashboard_refuses_out_of_range_times() -> None:
    from duetime.server.dashboard.forms import parse_when

    with pytest.raises(InvalidRequest):
        parse_when("0001-01-01T00:30:00+01:00", "due time")
    with pytest.raises(InvalidRequest):
        parse_when("0001-01-01T00:00", "due time")
    with pytest.raises(InvalidRequest):
        parse_when("9999-12-31T23:59:59-23:59", "due time")
    assert parse_when("2026-03-01T09:00", "due time") == (
        datetime(2026, 3, 1, 9, 0, tzinfo=UTC),
        True,
    )

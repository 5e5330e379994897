"""Input limits that the API and dashboard rely on (no I/O)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from duetime import App
from duetime.admin.tokens import create_token
from duetime.cli import main
from duetime.core.durations import parse_duration
from duetime.core.errors import InvalidRequest
from duetime.core.outbox import check_window
from duetime.core.requests import dump_args, load_args
from duetime.core.schedule_spec import build_spec


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


# -- durations: one bound check, before timedelta() can overflow (issue 20, section 3) -------


@pytest.mark.parametrize("value", [-1e300, "-1e300", -99999999999999, "-99999999999999", -1])
def test_negative_durations_are_refused_not_overflowed(value: object) -> None:
    with pytest.raises(InvalidRequest, match="must not be negative"):
        parse_duration(value, "delay")  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [1e300, "1e300", float("inf"), float("nan"), 10**400])
def test_huge_durations_are_refused(value: object) -> None:
    with pytest.raises(InvalidRequest):
        parse_duration(value, "delay")  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, "0", -1e300, "2d", 86401])
def test_the_outbox_window_is_bounded(value: object) -> None:
    with pytest.raises(InvalidRequest, match="window must be from 1s to 1d"):
        check_window(value)  # type: ignore[arg-type]
    assert check_window("90s") == 90.0


def test_a_token_expiry_beyond_100_years_is_refused(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path / 'a.db'}")
    app.migrate()
    try:
        with pytest.raises(InvalidRequest, match="too long"):
            create_token(app, "acme", "read", expires_in=timedelta.max)
    finally:
        app.close()


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the CLI in-process: its exit status and what it wrote on stderr."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["tokens", "create", "--role", "read", "--expires-in=-1e300"], "must not be negative"),
        (["tokens", "create", "--role", "read", "--expires-in=1e300"], "too long"),
        (["outbox", "status", "--window=-1e300"], "window must be from 1s to 1d"),
        (["outbox", "status", "--window=0"], "window must be from 1s to 1d"),
        (["limits", "set", "k", "--breaker-cooldown=-1e300"], "breaker cool-down"),
        (["limits", "set", "k", "--breaker-cooldown=-99999999999999"], "breaker cool-down"),
    ],
)
def test_cli_refuses_overflowing_durations_in_one_line(
    argv: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert main(["migrate", "--database-url", url]) == 0
    capsys.readouterr()
    code, err = _cli([*argv, "--database-url", url], capsys)
    assert code == 2, err
    assert words in err and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("duetime"), err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["queues", "set", "q", "--concurrency", str(2**63)], "from 0 to 1000000000"),
        (["tenants", "set", "t", "--max-backlog", str(2**63)], "from 0 to 1000000000"),
        (["queues", "set", "q", "--weight", "5e-324"], "weight must be a number from 0.01"),
        (["tenants", "set", "t", "--weight", "1e300"], "weight must be a number from 0.01"),
        (["tenants", "set", "t", "--weight", "nan"], "weight must be a number from 0.01"),
    ],
)
def test_cli_refuses_out_of_range_flow_settings(
    argv: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    code, err = _cli([*argv, "--database-url", url], capsys)
    assert code == 2 and words in err and "Traceback" not in err, err


# -- schedules: the API's bounds in the core; the zone's length and the args' nesting first --


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("every", "367d", "interval must be at most 366d"),
        ("every", -1e300, "interval must not be negative"),
        ("jitter", "2d", "jitter must be at most 1d"),
        ("catchup_window", "400d", "catch-up window must be at most 366d"),
        ("late_after", "400d", "late_after must be at most 366d"),
        ("timezone", "A" * 300, "time zone is 300 characters; the limit is 100"),
        ("timezone", "Europe/" + "x" * 300, "the limit is 100"),
        ("args", {"a": json.loads("[" * 500 + "]" * 500)}, "args nest more than 64"),
    ],
)
def test_schedule_definitions_are_bounded_as_the_api_says(
    option: str, value: object, words: str
) -> None:
    options: dict[str, Any] = {"timezone": "UTC", "every": "1h", option: value}
    with pytest.raises(InvalidRequest, match=re.escape(words)):
        build_spec("s", "t", **options)


@pytest.mark.parametrize("text", ["[" * 1000, '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"])
def test_args_text_nesting_is_checked_before_parsing(text: str) -> None:
    with pytest.raises(InvalidRequest, match="args nest more than 64"):
        load_args(text)
    flat = '{"a": "' + "[" * 1000 + '"}'  # brackets inside a string do not nest
    assert load_args(flat) == {"a": "[" * 1000}


def test_cli_args_nesting_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _cli(["enqueue", "t", "--args", "[" * 1000], capsys)
    assert code == 2 and "args nest more than 64" in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    "argv",
    [
        ["jobs", "show", "99999999999999999999"],
        ["jobs", "cancel", str(2**63)],
        ["jobs", "list", "--cursor", "99999999999999999999"],
        ["jobs", "list", "--limit", "99999999999999999999"],
        ["dlq", "list", "--cursor", str(2**63)],
        ["dlq", "replay", "99999999999999999999"],
        ["tokens", "revoke", "99999999999999999999"],
        ["tokens", "revoke", "0"],
    ],
)
def test_cli_refuses_ids_and_counts_no_column_holds(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same class as the flow settings: 2**63 reached SQLite ("Python int too large to
    convert to SQLite INTEGER", exit 1); now a usage error before anything is opened."""
    code, err = _cli([*argv, "--database-url", f"sqlite:///{tmp_path / 'a.db'}"], capsys)
    assert code == 2 and "from 1 to" in err and "Traceback" not in err, err

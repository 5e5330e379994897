"""Input limits that the API and dashboard rely on (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from duetime import App, operators
from duetime.cli import main
from duetime.core.durations import parse_duration
from duetime.core.errors import InvalidRequest
from duetime.core.outbox import check_window
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
            operators.create_token(app, "acme", "read", expires_in=timedelta.max)
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

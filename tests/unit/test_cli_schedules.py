"""`duetime schedules ...` in-process on a SQLite file: the preview of an unsaved rule lists
fires strictly after --after, like the preview of a saved schedule; --late-after is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duetime.cli import main


def preview(tmp_path: Path, capsys: pytest.CaptureFixture[str], *rule: str) -> list[str]:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    assert main(["schedules", "preview", *rule, "--json", "--database-url", url]) == 0
    fires: list[str] = json.loads(capsys.readouterr().out)
    return fires


def test_a_cron_tick_at_after_itself_is_not_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    got = preview(
        tmp_path, capsys, "--cron", "0 9 * * *", "--tz", "UTC",
        "--after", "2026-03-02T09:00:00Z", "--count", "2",
    )  # fmt: skip
    assert got == ["2026-03-03T09:00:00+00:00", "2026-03-04T09:00:00+00:00"]


def test_an_interval_lists_fires_strictly_after(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anchored = preview(
        tmp_path, capsys, "--every", "15m", "--tz", "UTC", "--start", "2026-03-02T09:00:00Z",
        "--after", "2026-03-02T09:00:00Z", "--count", "2",
    )  # fmt: skip
    assert anchored == ["2026-03-02T09:15:00+00:00", "2026-03-02T09:30:00+00:00"]
    from_after = preview(
        tmp_path, capsys, "--every", "15m", "--tz", "UTC",
        "--after", "2026-03-02T09:00:00Z", "--count", "1",
    )  # fmt: skip
    assert from_after == ["2026-03-02T09:15:00+00:00"]
    before_start = preview(
        tmp_path, capsys, "--every", "15m", "--tz", "UTC", "--start", "2026-03-02T09:00:00Z",
        "--after", "2026-03-02T08:00:00Z", "--count", "1",
    )  # fmt: skip
    assert before_start == ["2026-03-02T09:00:00+00:00"]


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    url = f"sqlite:///{tmp_path / 'duetime.db'}"
    assert main([*argv, "--json", "--database-url", url]) == 0
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


def test_late_after_is_set_shown_and_reset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'duetime.db'}"
    assert main(["migrate", "--database-url", url]) == 0
    capsys.readouterr()
    added = run(
        tmp_path, capsys, "schedules", "add", "pulse", "--task", "t", "--every", "2s",
        "--tz", "UTC", "--late-after", "5m",
    )  # fmt: skip
    assert added["late_after_seconds"] == 300
    assert main(["schedules", "show", "pulse", "--database-url", url]) == 0
    assert "late after  300s" in capsys.readouterr().out
    reset = run(tmp_path, capsys, "schedules", "update", "pulse", "--late-after", "default")
    assert reset["late_after_seconds"] is None
    assert main(["schedules", "show", "pulse", "--database-url", url]) == 0
    assert "late after  the next tick's time (default)" in capsys.readouterr().out

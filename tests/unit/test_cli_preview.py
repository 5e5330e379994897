"""`duetime schedules preview` of an unsaved rule lists fires strictly after --after, like the
preview of a saved schedule (in-process: a rule's preview needs no database)."""

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

"""Typed tasks: mypy checks `task.defer(...)` against the handler's signature (ParamSpec)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

SRC = Path(__file__).resolve().parents[2] / "src"

SNIPPET = """
from datetime import UTC, datetime

import duetime

app = duetime.App()


@app.task(name="greet")
def greet(name: str, times: int = 1) -> None:
    pass


@app.task
async def ping() -> None:
    pass


@app.schedule("nightly", cron="0 3 * * *", timezone="UTC")
@app.task(name="report")
def report(day: str) -> None:
    pass


def good() -> None:
    job: duetime.Job = greet.defer(name="Ada")
    greet.defer("Ada", times=2)
    greet.defer_at(datetime(2030, 1, 1, tzinfo=UTC), name="Ada")
    greet.defer_in("5m", name="Ada")
    greet.options(key="k", queue="mail").defer(name="Ada")
    ping.defer()
    report.defer(day="monday")
    greet("direct", times=3)
    print(job.id)


def bad() -> None:
    greet.defer(nam="Ada")  # BAD: unexpected keyword
    greet.defer()  # BAD: missing name
    greet.defer(name=42)  # BAD: wrong type
    greet.defer_at(datetime(2030, 1, 1, tzinfo=UTC), name="Ada", extra=1)  # BAD
    greet.options(key="k").defer(times="2", name="Ada")  # BAD: wrong type
    report.defer(day=1)  # BAD: a scheduled task keeps its signature
"""


def test_mypy_checks_defer_against_the_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every line marked BAD is an error, and no other line is."""
    source = tmp_path / "typed_app.py"
    source.write_text(textwrap.dedent(SNIPPET))
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n")
    monkeypatch.setenv("MYPYPATH", str(SRC))  # this checkout's duetime
    stdout, stderr, status = mypy_api.run(
        [
            "--config-file",
            str(config),
            "--strict",
            "--no-error-summary",
            "--show-error-codes",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            str(source),
        ]
    )
    assert status in (0, 1), stderr
    lines = source.read_text().splitlines()
    flagged = set()
    for line in stdout.splitlines():
        if ": error:" in line:
            flagged.add(int(line.split(":")[1]))
    expected = {n for n, text in enumerate(lines, start=1) if "# BAD" in text}
    assert flagged == expected, stdout

"""The README's quick start does what its text says and prints what its output blocks show:
its tasks.py, its two enqueue commands, a worker, and `duetime jobs show 2`."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import shlex
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest

from duetime import App, JobStatus
from duetime.runtime.worker import Worker
from integration.procs import DUETIME, base_env
from jobhelpers import run_until

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def block_after(text: str, lang: str) -> str:
    """The first ```lang block after `text` in the README."""
    start = README.index(text)
    match = re.compile(rf"```{lang}\n(.*?)```", re.S).search(README, start)
    assert match is not None, f"no {lang} block after {text!r}"
    return match.group(1)


def shown_lines(block: str) -> list[str]:
    """The lines of an output block that show real output (not elided with ...)."""
    return [
        line.rstrip()
        for line in block.splitlines()
        if line.strip() and "..." not in line and not line.strip().startswith("(")
    ]


@pytest.fixture
def quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    (tmp_path / "tasks.py").write_text(block_after("Write `tasks.py` there", "python"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DUETIME_DATABASE_URL", f"sqlite:///{tmp_path / 'duetime.db'}")
    spec = importlib.util.spec_from_file_location("quickstart_tasks", tmp_path / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    module.app.close()


def cli(tmp_path: Path, command: str) -> str:
    argv = shlex.split(command.split("#")[0])
    assert argv[0] == "duetime"
    env = base_env(DUETIME_DATABASE_URL=f"sqlite:///{tmp_path / 'duetime.db'}")
    result = subprocess.run(
        [str(DUETIME), *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_quick_start_prints_what_the_readme_shows(
    quickstart: ModuleType, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    app: App = quickstart.app
    # the two enqueue commands print the ids their comments say
    enqueues = block_after("Enqueue two jobs", "sh").strip().splitlines()
    for command in enqueues:
        assert cli(tmp_path, command).strip() == command.rsplit("#", 1)[1].strip()

    def first_failed() -> bool:
        job = app.get_job(2)
        return app.get_job(1).terminal and job.attempts >= 1 and job.status is not JobStatus.RUNNING

    asyncio.run(run_until(Worker(app, poll_interval=0.02), first_failed))
    retrying = app.get_job(2)
    first = min(retrying.attempt_history, key=lambda a: a.generation)
    assert first.finished_at is not None and first.error_category is not None
    # "the first retry waits a random delay of up to 10 seconds": due_at is the retry's time
    assert timedelta(0) <= retrying.due_at - first.finished_at <= timedelta(seconds=10)
    if retrying.status is JobStatus.SCHEDULED:  # (a delay near 0 s may have run it already)
        app.reschedule(2, app.clock.now())  # this test does not wait for the backoff
    asyncio.run(run_until(Worker(app, poll_interval=0.02), lambda: app.get_job(2).terminal))
    assert app.get_job(2).status is JobStatus.SUCCEEDED

    # the handlers' own lines (the log goes to stderr); a sync and an async handler print at
    # the same time, so their lines may interleave
    printed = capfd.readouterr().out
    for line in shown_lines(block_after("Run a worker", "text")):
        if "INFO" not in line:
            assert line in printed, line

    shown = cli(tmp_path, "duetime jobs show 2").splitlines()
    for line in shown_lines(block_after("Inspect the job and its attempt history", "text")):
        if not line.startswith(("gen ", "1 ", "2 ")):  # the attempt table is elided in parts
            assert line in [s.rstrip() for s in shown], line

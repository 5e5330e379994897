"""`duetime jobs result ID [--wait SECONDS] [--json]` and its exit statuses: 0 and the result
for a succeeded job, 3 for one that ended dead, cancelled or expired, 4 for one not finished
at the end of the wait, 1 for no such job, 2 for a bad --wait (on an SQLite file)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import duetime
from duetime.cli import main
from duetime.cli.jobs import EXIT_FAILED, EXIT_NOT_FINISHED
from duetime.core.models import Outcome
from duetime.core.retry import ErrorCategory
from duetime.core.states import Event


@pytest.fixture
def app(tmp_path: Path) -> Iterator[duetime.App]:
    application = duetime.App(f"sqlite:///{tmp_path / 'cli.db'}")
    yield application
    application.close()


def finished(app: duetime.App, outcome: Outcome) -> int:
    """A job of `app` whose one attempt ended with `outcome`."""
    job = app.enqueue("t")
    [claim] = app.store.claim(worker_id="w", queues=None, limit=1, now=app.clock.now())
    assert app.store.finish(claim.lease, outcome, app.clock.now())
    return job.id


def run(app: duetime.App, *argv: str) -> int:
    return main(["jobs", "result", *argv, "--database-url", app.database_url])


def test_a_succeeded_job_prints_its_result_and_exits_0(
    app: duetime.App, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = finished(app, Outcome(Event.SUCCEED, result='{"total":3,"name":"é"}'))
    assert run(app, str(job_id)) == 0
    assert json.loads(capsys.readouterr().out) == {"total": 3, "name": "é"}
    assert run(app, str(job_id), "--json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["status"] == "succeeded" and document["result"] == {"total": 3, "name": "é"}
    assert document["error"] is None
    # `jobs show` has the result and the progress
    assert app.store.record_progress([], app.clock.now()) == []
    assert main(["jobs", "show", str(job_id), "--database-url", app.database_url]) == 0
    assert 'result           {"total": 3, "name": "é"}' in capsys.readouterr().out


def test_jobs_show_has_a_running_jobs_progress(
    app: duetime.App, capsys: pytest.CaptureFixture[str]
) -> None:
    job = app.enqueue("t")
    [claim] = app.store.claim(worker_id="w", queues=None, limit=1, now=app.clock.now())
    assert app.store.record_progress([(claim.lease, 0.42, "rows 42/100")], app.clock.now())
    assert main(["jobs", "show", str(job.id), "--database-url", app.database_url]) == 0
    assert "progress         42% rows 42/100 (at " in capsys.readouterr().out


def test_a_job_that_failed_for_good_exits_3(
    app: duetime.App, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = finished(
        app,
        Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT, error_message="boom"),
    )
    assert run(app, str(dead)) == EXIT_FAILED == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"job {dead} ended dead and has no result (last error: boom)" in captured.err
    cancelled = app.enqueue("t").id
    app.cancel(cancelled)
    assert run(app, str(cancelled), "--json") == EXIT_FAILED
    document = json.loads(capsys.readouterr().out)
    assert (document["status"], document["result"]) == ("cancelled", None)
    assert "ended cancelled" in document["error"]


def test_a_job_not_finished_by_the_end_of_the_wait_exits_4(
    app: duetime.App, capsys: pytest.CaptureFixture[str]
) -> None:
    waiting = app.enqueue("t").id
    assert run(app, str(waiting)) == EXIT_NOT_FINISHED == 4
    assert f"job {waiting} is still scheduled after waiting 0s" in capsys.readouterr().err
    assert run(app, str(waiting), "--wait", "0.05", "--json") == EXIT_NOT_FINISHED
    assert json.loads(capsys.readouterr().out)["status"] == "scheduled"


def test_no_such_job_exits_1_and_a_bad_wait_exits_2(
    app: duetime.App, capsys: pytest.CaptureFixture[str]
) -> None:
    app.store.migrate()  # the database exists (the app opens it on first use)
    assert run(app, "999") == 1
    assert "job 999 does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        run(app, "1", "--wait", "soon")
    assert usage.value.code == 2

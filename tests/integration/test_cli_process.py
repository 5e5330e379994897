"""The `duetime` command as a process among others: a reader that stops early (`| head`), a port
another program holds, and a database URL that names no database. SQLite only: none of this
depends on the store."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime import App
from integration.procs import APP_SPEC, DUETIME, base_env, describe, run_cli, scalar

# -- a reader that goes away --------------------------------------------------------------------


@pytest.fixture
def busy_url(tmp_path: Path) -> Iterator[str]:
    """A SQLite database with 300 jobs and a schedule (enough output for a few pipe writes)."""
    url = f"sqlite:///{tmp_path / 'busy.db'}"
    app = App(url)
    app.enqueue_many("report.send", [{"n": n} for n in range(300)], delay="1h")
    app.add_schedule("pulse", task="report.send", every="1m", timezone="UTC")
    app.close()
    yield url


READERS = [
    pytest.param(["jobs", "list", "--limit", "300"], id="jobs-list"),
    pytest.param(["jobs", "list", "--limit", "300", "--json"], id="jobs-list-json"),
    pytest.param(["stats"], id="stats"),
    pytest.param(["schedules", "list"], id="schedules-list"),
]


@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize("command", READERS)
def test_a_closed_stdout_ends_the_command_quietly(
    busy_url: str, command: list[str], unbuffered: bool
) -> None:
    """stdout is a pipe nobody reads any more (as after `| head -1`): no error message, and the
    status a shell reports for a program stopped by SIGPIPE (141), as `seq 100000 | head -1`."""
    env = base_env()
    if not unbuffered:
        env.pop("PYTHONUNBUFFERED")
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to the pipe now fails with EPIPE
    try:
        done = subprocess.run(
            [str(DUETIME), *command, "--database-url", busy_url],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, ""), done.stderr


def test_head_gets_its_line_and_duetime_says_nothing(busy_url: str, tmp_path: Path) -> None:
    script = f"'{DUETIME}' jobs list --limit 300 --database-url '{busy_url}' 2>err | head -1"
    done = subprocess.run(
        ["sh", "-c", script],
        cwd=tmp_path,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.split() == [
        "id",
        "task",
        "status",
        "queue",
        "prio",
        "attempts",
        "due_at",
        "(UTC)",
    ], describe(done)
    assert (tmp_path / "err").read_text() == ""


# -- serve on a port another program holds ------------------------------------------------------


def test_serve_on_a_taken_port_says_so_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = run_cli(["serve", "--port", str(port), "--database-url", url])
    assert done.returncode == 1, describe(done)
    assert done.stderr == (
        f"duetime: error: port {port} on 127.0.0.1 is taken: another program listens there; "
        "stop it or choose another --port\n"
    ), describe(done)
    assert "serving on" not in done.stdout + done.stderr


# -- a URL that names no database ---------------------------------------------------------------

NEEDS_A_DATABASE = [
    ["jobs", "list"],
    ["jobs", "list", "--json"],
    ["jobs", "show", "1"],
    ["jobs", "cancel", "1"],
    ["jobs", "replay", "1"],
    ["jobs", "reschedule", "1", "--in", "5m"],
    ["jobs", "resolve", "1", "--done"],
    ["stats"],
    ["nodes"],
    ["dlq", "list"],
    ["dlq", "replay", "1"],
    ["tokens", "list"],
    ["tokens", "revoke", "1"],
    ["schedules", "list"],
    ["schedules", "show", "s"],
    ["schedules", "history", "s"],
    ["schedules", "preview", "s"],
    ["schedules", "pause", "s"],
    ["schedules", "resume", "s"],
    ["schedules", "update", "s", "--jitter", "1m"],
    ["schedules", "delete", "s"],
    ["schedules", "trigger", "s"],
    [
        "schedules",
        "backfill",
        "s",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-02T00:00:00Z",
    ],
]


@pytest.mark.parametrize("command", NEEDS_A_DATABASE, ids=" ".join)
def test_a_command_that_needs_a_database_does_not_create_one(
    tmp_path: Path, command: list[str]
) -> None:
    done = run_cli([*command, "--database-url", "sqlite:///typo.db"], cwd=tmp_path)
    assert done.returncode == 1, describe(done)
    assert done.stdout == "", describe(done)
    assert done.stderr == (
        f"duetime: error: no duetime database at sqlite:///typo.db (there is no file "
        f"{tmp_path / 'typo.db'}); check the URL (--database-url or DUETIME_DATABASE_URL), or "
        "create the database with `duetime migrate`\n"
    ), describe(done)
    assert list(tmp_path.iterdir()) == [], "nothing may be created"


def test_the_default_database_is_not_created_by_reading(tmp_path: Path) -> None:
    done = run_cli(["jobs", "list"], cwd=tmp_path)
    assert done.returncode == 1 and "no duetime database at sqlite:///duetime.db" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_commands_that_create_still_create_and_then_reading_works(tmp_path: Path) -> None:
    preview = ["schedules", "preview", "--every", "1h", "--tz", "UTC", "--count", "2"]
    done = run_cli([*preview, "--database-url", "sqlite:///typo.db"], cwd=tmp_path)
    assert done.returncode == 0, describe(done)  # an unsaved rule needs no database
    assert list(tmp_path.iterdir()) == []
    done = run_cli(["enqueue", "t", "--database-url", "sqlite:///typo.db"], cwd=tmp_path)
    assert done.returncode == 0, describe(done)
    done = run_cli(["jobs", "list", "--json", "--database-url", "sqlite:///typo.db"], cwd=tmp_path)
    assert done.returncode == 0, describe(done)
    assert scalar(f"sqlite:///{tmp_path / 'typo.db'}", "SELECT count(*) FROM duetime_all_jobs") == 1


# -- a stop request at any moment of a worker's life ----------------------------------------------

# Runs `duetime worker` in-process with one step of its start-up or shutdown replaced by a
# SIGTERM to itself (as a supervisor's stop that lands at that moment), then the step.
STOP_HARNESS = """
import os, signal, sys, time
import duetime.cli.worker as cli_worker
from duetime import App
from duetime.cli import main
from duetime.runtime.worker import Worker

def stop_request():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler runs at the next bytecode: this sleep is cut short, or not

where = sys.argv[2]
if where == "start-up":
    cli_worker.tune_gc = stop_request  # after the store answered, before the worker runs
elif where == "shutdown":
    Worker.serve = lambda self: None  # as if a first stop request had ended the run
    close = App.close
    def closing(self):
        stop_request()
        close(self)
    App.close = closing
sys.exit(main(["worker", "--app", sys.argv[3], "--database-url", sys.argv[1]]))
"""


@pytest.mark.parametrize(("where", "status"), [("start-up", 0), ("shutdown", 1)])
def test_a_stop_request_during_start_up_or_shutdown_ends_the_worker_with_a_status(
    tmp_path: Path, where: str, status: int
) -> None:
    """SIGTERM before the worker's loop runs ends it cleanly (0: nothing was claimed yet); one
    during its shutdown is a repeated request, which exits at once with 1, as while it runs
    (docs/workers.md). Before the fix both died of the signal itself (-15)."""
    url = f"sqlite:///{tmp_path / 'stop.db'}"
    App(url).close()  # the database exists and is migrated
    done = subprocess.run(
        [str(DUETIME.parent / "python"), "-c", STOP_HARNESS, url, where, APP_SPEC],
        capture_output=True,
        env=base_env(),
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == status, describe(done)

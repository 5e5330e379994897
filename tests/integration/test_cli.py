"""The `duetime` command line as a public contract, run as real subprocesses on each store.

Exit status: 0 on success, 2 on usage errors (argparse's, and flag values duetime refuses), 1 on
any other error with exactly one line on stderr starting `duetime: error:` and nothing stored.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from duetime import App, AttemptStatus, ErrorCategory, JobStatus
from duetime.core.models import Node
from duetime.store.driver import load_migrations
from integration.procs import Processes, base_env, describe, run_cli, scalar, wait_until
from kit import DialectKit

# -- helpers ------------------------------------------------------------------------------------


def cli(
    url: str | None, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`duetime ARGS... --database-url URL` (the flag is left out when url is None)."""
    command = [*args, "--database-url", url] if url is not None else list(args)
    return run_cli(command, env=env, cwd=cwd)


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, describe(done)
    assert done.stderr == "", describe(done)
    return done


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    ok(done)
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"stdout is not JSON\n{describe(done)}") from None


def failed(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 1, nothing on stdout, one stderr line `duetime: error: ...` naming `fragments`."""
    assert done.returncode == 1, describe(done)
    assert done.stdout == "", describe(done)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and done.stderr.endswith("\n"), describe(done)
    assert lines[0].startswith("duetime: error: "), describe(done)
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in the message\n{describe(done)}"
    return lines[0]


def usage_error(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 2, describe(done)
    assert done.stdout == "", describe(done)
    assert "usage: duetime" in done.stderr and "error:" in done.stderr, describe(done)


def count_jobs(url: str) -> int:
    return int(scalar(url, "SELECT count(*) FROM duetime_all_jobs"))


def iso(value: str) -> datetime:
    return datetime.fromisoformat(value)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty working directory for the CLI (the SQLite test database is not in it)."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    return folder


def migration_versions(url: str) -> list[int]:
    package = "duetime.store.sqlite" if url.startswith("sqlite") else "duetime.store.postgres"
    return [m.version for m in load_migrations(package)]


# -- migrate ------------------------------------------------------------------------------------


def test_migrate_applies_once_then_reports_up_to_date(
    kit: DialectKit, tmp_path: Path, workdir: Path
) -> None:
    url = kit.fresh_url(tmp_path, drop=True)  # not migrated yet, on either store
    if url.startswith("postgres"):
        # PostgreSQL is never migrated implicitly: every other command says what to do
        failed(cli(url, "jobs", "list", cwd=workdir), "run `duetime migrate`")
    applied = ok(cli(url, "migrate", cwd=workdir)).stdout
    assert applied == f"applied migrations {migration_versions(url)}\n"
    assert ok(cli(url, "migrate", cwd=workdir)).stdout == "schema is up to date\n"
    assert as_json(cli(url, "jobs", "list", "--json")) == {"items": [], "next_cursor": None}
    assert list(workdir.iterdir()) == [], "the default database must not be touched"


# -- enqueue ------------------------------------------------------------------------------------


def test_enqueue_prints_the_job_and_a_key_returns_the_same_job(db_url: str) -> None:
    deadline = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    deadline_text = deadline.astimezone(timezone(timedelta(hours=2))).isoformat()
    options = ["--args", '{"a":1}', "--in", "30s", "--key", "k", "--queue", "q"]
    options += ["--priority", "3", "--max-attempts", "4", "--deadline", deadline_text]

    before = datetime.now(UTC)
    job = as_json(cli(db_url, "enqueue", "report.send", *options, "--json"))
    after = datetime.now(UTC)
    assert {
        k: job[k]
        for k in (
            "task args queue priority max_attempts status attempts generation "
            "idempotency_key business_key attempt_history"
        ).split()
    } == {
        "task": "report.send",
        "args": {"a": 1},
        "queue": "q",
        "priority": 3,
        "max_attempts": 4,
        "status": "scheduled",
        "attempts": 0,
        "generation": 0,
        "idempotency_key": "k",
        "business_key": "default/report.send:k",
        "attempt_history": [],
    }
    assert isinstance(job["id"], int)
    due = iso(job["due_at"])
    assert before + timedelta(seconds=30) <= due <= after + timedelta(seconds=30), job["due_at"]
    assert iso(job["deadline_at"]) == deadline and job["deadline_at"].endswith("+00:00"), job

    # the same request with the same key: the same job, printed as just its id
    again = ok(cli(db_url, "enqueue", "report.send", *options))
    assert again.stdout == f"{job['id']}\n"
    assert count_jobs(db_url) == 1

    # a plain enqueue without --json prints only the new id
    plain = ok(cli(db_url, "enqueue", "report.send"))
    assert plain.stdout.strip().isdigit() and int(plain.stdout) != job["id"], describe(plain)
    assert count_jobs(db_url) == 2


def test_enqueue_same_key_with_different_args_is_refused(db_url: str) -> None:
    first = ok(cli(db_url, "enqueue", "report.send", "--args", '{"a":1}', "--key", "k"))
    done = cli(db_url, "enqueue", "report.send", "--args", '{"a":2}', "--key", "k")
    failed(done, "'k'", f"job {first.stdout.strip()}")
    assert count_jobs(db_url) == 1


def test_enqueue_takes_a_business_key(db_url: str) -> None:
    job = as_json(
        cli(db_url, "enqueue", "pay", "--key", "k", "--business-key", "order-42", "--json")
    )
    assert job["business_key"] == "order-42" and job["idempotency_key"] == "k"
    keyed = as_json(cli(db_url, "enqueue", "pay", "--key", "k2", "--json"))
    assert keyed["business_key"] == "default/pay:k2"


def test_enqueue_from_file_is_all_or_nothing(db_url: str, tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text('{"n": 1}\n\n{"n": 2}\n{"n": 3}\n')
    assert ok(cli(db_url, "enqueue", "t", "--from-file", str(good))).stdout == "enqueued 3 jobs\n"
    ids = as_json(cli(db_url, "enqueue", "t", "--from-file", str(good), "--in", "1h", "--json"))
    assert len(ids) == 3 and all(isinstance(i, int) for i in ids), ids
    assert count_jobs(db_url) == 6

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"n": 4}\n[5]\n')
    failed(cli(db_url, "enqueue", "t", "--from-file", str(bad)), "line 2")
    assert count_jobs(db_url) == 6, "a bad line must leave the whole file unstored"


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["enqueue", "t", "--bogus"], id="unknown-flag"),
        pytest.param(
            ["enqueue", "t", "--at", "2030-01-01T00:00:00+00:00", "--in", "5s"], id="at+in"
        ),
        pytest.param(["enqueue"], id="no-task"),
        pytest.param(["enqueue", "t", "--max-attempts", "0"], id="max-attempts-0"),
        pytest.param(["enqueue", "t", "--priority", "high"], id="priority-not-int"),
        pytest.param(["jobs", "list", "--status", "finished"], id="unknown-status"),
        pytest.param(["jobs", "show", "abc"], id="id-not-int"),
        pytest.param(["jobs", "reschedule", "1"], id="reschedule-without-at"),
        pytest.param(["jobs", "frobnicate", "1"], id="unknown-action"),
        pytest.param(["frobnicate"], id="unknown-command"),
        pytest.param(["worker", "--concurrency", "2"], id="worker-without-app"),
    ],
)
def test_usage_errors_exit_2_and_store_nothing(db_url: str, args: list[str]) -> None:
    ok(cli(db_url, "enqueue", "seed"))
    usage_error(cli(db_url, *args))
    assert count_jobs(db_url) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        pytest.param(["--at", "2026-01-01T09:00:00"], "has no UTC offset", id="naive-at"),
        pytest.param(["--at", "tomorrow"], "is not an ISO 8601 time", id="unparsable-at"),
        pytest.param(["--in", "soon"], "is not a duration", id="unparsable-in"),
        pytest.param(["--in", "5 minutes"], "is not a duration", id="in-with-a-space"),
        pytest.param(["--args", "[1,2]"], "must be a JSON object", id="args-array"),
        pytest.param(["--args", "not json"], "not valid JSON", id="args-not-json"),
        pytest.param(["--args", "{bad"], "not valid JSON", id="args-broken-json"),
        pytest.param(
            ["--at", "2030-01-02T00:00:00+00:00", "--deadline", "2030-01-01T00:00:00+00:00"],
            "is not after the due time",
            id="deadline-before-due",
        ),
        pytest.param(
            ["--deadline", "2030-01-01T00:00:00"], "has no UTC offset", id="naive-deadline"
        ),
        pytest.param(["--priority", "5000"], "priority must be between", id="priority-range"),
        pytest.param(["--max-attempts", "5000"], "max_attempts must be", id="attempts-range"),
    ],
)
def test_bad_enqueue_values_exit_2_and_store_nothing(
    db_url: str, args: list[str], fragment: str
) -> None:
    """A bad flag value is a usage error, whether argparse or duetime finds it (docs/cli.md)."""
    ok(cli(db_url, "enqueue", "seed"))
    for done in (
        cli(db_url, "enqueue", "report.send", *args),
        cli(db_url, "enqueue", "report.send", *args, "--json"),
    ):
        usage_error(done)
        assert fragment in done.stderr.splitlines()[-1], describe(done)
    assert count_jobs(db_url) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        pytest.param(["nosuch", "--args", "{}"], "task 'nosuch' is not registered", id="unknown"),
        pytest.param(
            ["sleep", "--args", '{"second": 1}'],
            "unexpected keyword argument 'second'; missing a required argument: 'seconds'; "
            "its handler takes sleep(seconds",
            id="misspelt",
        ),
        pytest.param(["sleep"], "missing a required argument: 'seconds'", id="no-args"),
        pytest.param(
            ["noop", "--args", '{"x": 1}'], "unexpected keyword argument 'x'", id="extra-arg"
        ),
    ],
)
def test_enqueue_with_app_refuses_what_its_tasks_cannot_run(
    db_url: str, args: list[str], fragment: str
) -> None:
    """With --app the registry is known: exit 2, one line, nothing stored."""
    done = cli(db_url, "enqueue", "--app", "itapp:app", *args)
    assert done.returncode == 2 and done.stdout == "", describe(done)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("duetime: error: "), describe(done)
    assert fragment in lines[0], describe(done)
    assert count_jobs(db_url) == 0
    ok(cli(db_url, "enqueue", "--app", "itapp:app", "sleep", "--args", '{"seconds": 1}'))
    ok(cli(db_url, "enqueue", "nosuch", "--args", '{"x": 1}'))  # no --app: cannot tell
    assert count_jobs(db_url) == 2


def test_enqueue_from_file_with_app_refuses_unknown_tasks(db_url: str, tmp_path: Path) -> None:
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"task": "noop"}\n{"task": "nosuch"}\n{"task": "sleep", "args": {}}\n')
    done = cli(db_url, "enqueue", "--app", "itapp:app", "--from-file", str(lines))
    failed(done, "2 bad lines", "line 2: task 'nosuch'", "line 3: args do not fit")
    assert count_jobs(db_url) == 0


def test_jobs_show_says_when_no_worker_serves_the_task(db_url: str) -> None:
    job_id = ok(cli(db_url, "enqueue", "emails.sned")).stdout.strip()
    shown = ok(cli(db_url, "jobs", "show", job_id)).stdout
    assert "scheduled: no worker serves task 'emails.sned': no live node lists it" in shown
    assert as_json(cli(db_url, "jobs", "show", job_id, "--json"))["unserved"].startswith(
        "no worker serves task 'emails.sned'"
    )
    app = App(db_url)
    now = app.clock.now()
    node = Node("n1", "host", 1, None, 4, ("worker",), "0", now, now, tasks=("emails.sned",))
    app.store.register_node(node, now)
    app.close()
    assert "no worker serves" not in ok(cli(db_url, "jobs", "show", job_id)).stdout
    assert as_json(cli(db_url, "jobs", "show", job_id, "--json"))["unserved"] is None


# -- jobs ---------------------------------------------------------------------------------------


def test_jobs_list_filters_and_pages(db_url: str) -> None:
    app = App(db_url)  # registers no task: enqueues any
    ids = [app.enqueue("a", {"n": n}, queue="q1").id for n in range(3)]
    ids += [app.enqueue("b", {"n": n}, queue="q2").id for n in range(2)]
    app.cancel(ids[1])
    app.close()

    def listed(*args: str) -> list[int]:
        page = as_json(cli(db_url, "jobs", "list", *args, "--json"))
        assert set(page) == {"items", "next_cursor"}, page
        return [item["id"] for item in page["items"]]

    newest_first = sorted(ids, reverse=True)
    assert listed() == newest_first
    assert listed("--task", "a") == sorted(ids[:3], reverse=True)
    assert listed("--queue", "q2") == sorted(ids[3:], reverse=True)
    assert listed("--status", "cancelled") == [ids[1]]
    assert listed("--status", "scheduled", "--task", "a") == [ids[2], ids[0]]
    assert listed("--status", "succeeded") == []

    # pages of 2: next_cursor is the last id of a full page, None after the last page
    pages, cursor = [], None
    while True:
        args = ["--limit", "2"] + (["--cursor", str(cursor)] if cursor is not None else [])
        page = as_json(cli(db_url, "jobs", "list", *args, "--json"))
        pages.append([item["id"] for item in page["items"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert cursor == pages[-1][-1] and len(pages) < 5, page
    assert pages == [newest_first[:2], newest_first[2:4], newest_first[4:]]

    # the table: a header and one row per job
    lines = ok(cli(db_url, "jobs", "list", "--queue", "q1")).stdout.splitlines()
    assert lines[0].split()[:3] == ["id", "task", "status"], lines
    assert [line.split()[:3] for line in lines[1:]] == [
        [str(ids[2]), "a", "scheduled"],
        [str(ids[1]), "a", "cancelled"],
        [str(ids[0]), "a", "scheduled"],
    ]


def test_jobs_cancel_reschedule_and_replay(db_url: str) -> None:
    job_id = int(ok(cli(db_url, "enqueue", "report.send", "--in", "1h")).stdout)

    done = ok(cli(db_url, "jobs", "reschedule", str(job_id), "--at", "2030-01-01T10:00:00+01:00"))
    assert done.stdout == (
        f"job {job_id} is scheduled (due 2030-01-01T09:00:00+00:00, version 2)\n"
    ), describe(done)
    shown = as_json(cli(db_url, "jobs", "show", str(job_id), "--json"))
    assert (shown["status"], shown["due_at"], shown["version"]) == (
        "scheduled",
        "2030-01-01T09:00:00+00:00",
        2,
    )

    usage_error(cli(db_url, "jobs", "reschedule", str(job_id), "--at", "2030-01-01T10:00:00"))
    usage_error(cli(db_url, "jobs", "reschedule", str(job_id), "--at", "tomorrow"))
    # replay applies only to dead, cancelled and expired jobs
    failed(
        cli(db_url, "jobs", "replay", str(job_id)),
        f"cannot replay job {job_id}: it is scheduled",
        "dead",
    )

    cancelled = as_json(cli(db_url, "jobs", "cancel", str(job_id), "--json"))
    assert (cancelled["id"], cancelled["status"], cancelled["version"]) == (job_id, "cancelled", 3)
    failed(cli(db_url, "jobs", "cancel", str(job_id)), f"cannot cancel job {job_id}")
    failed(
        cli(db_url, "jobs", "reschedule", str(job_id), "--at", "2030-01-01T00:00:00+00:00"),
        f"cannot reschedule job {job_id}: it is cancelled",
    )

    replayed = ok(cli(db_url, "jobs", "replay", str(job_id)))
    assert replayed.stdout.startswith(f"job {job_id} is scheduled (due "), describe(replayed)
    shown = as_json(cli(db_url, "jobs", "show", str(job_id), "--json"))
    assert (shown["status"], shown["version"], shown["attempts"]) == ("scheduled", 4, 0)
    assert iso(shown["due_at"]) <= datetime.now(UTC), "a replay is due now"
    assert count_jobs(db_url) == 1


def test_reschedule_past_the_deadline_is_refused(db_url: str) -> None:
    args = ["--at", "2030-03-01T09:00:00+01:00", "--deadline", "2030-03-01T12:00:00+01:00"]
    job_id = int(ok(cli(db_url, "enqueue", "charge", *args)).stdout)
    done = cli(db_url, "jobs", "reschedule", str(job_id), "--at", "2031-01-01T09:00:00Z")
    usage_error(done)  # a value refused: exit 2 (docs/cli.md)
    assert done.stderr.splitlines()[-1] == (
        f"duetime jobs reschedule: error: cannot reschedule job {job_id} to "
        "2031-01-01T09:00:00+00:00: it is not before the job's deadline 2030-03-01T11:00:00+00:00"
    ), describe(done)
    shown = as_json(cli(db_url, "jobs", "show", str(job_id), "--json"))
    assert (shown["due_at"], shown["version"]) == ("2030-03-01T08:00:00+00:00", 1), shown


def test_reschedule_in_a_duration_from_now(db_url: str) -> None:
    job_id = int(ok(cli(db_url, "enqueue", "charge", "--in", "1h")).stdout)
    before = datetime.now(UTC)
    moved = as_json(cli(db_url, "jobs", "reschedule", str(job_id), "--in", "2h30m", "--json"))
    after = datetime.now(UTC)
    span = timedelta(hours=2, minutes=30)
    assert before + span <= iso(moved["due_at"]) <= after + span, moved
    assert moved["version"] == 2


@pytest.mark.parametrize("action", ["show", "cancel", "replay"])
def test_unknown_job_id_exits_1(db_url: str, action: str) -> None:
    ok(cli(db_url, "enqueue", "seed"))
    failed(cli(db_url, "jobs", action, "999999"), "job 999999 does not exist")
    failed(cli(db_url, "jobs", action, "999999", "--json"), "job 999999 does not exist")
    assert count_jobs(db_url) == 1


def test_jobs_show_has_the_attempt_history_and_a_dead_job_replays(
    db_url: str, procs: Processes, app: App
) -> None:
    job_id = int(ok(cli(db_url, "enqueue", "fail.permanent", "--max-attempts", "2")).stdout)
    worker = procs.worker(db_url)
    wait_until(
        lambda: worker.alive() and app.get_job(job_id).status is JobStatus.DEAD,
        30,
        lambda: f"job {job_id} did not go dead\n{worker.tail()}",
        interval=0.2,
    )
    assert worker.terminate_and_wait() == 0

    shown = as_json(cli(db_url, "jobs", "show", str(job_id), "--json"))
    assert (shown["status"], shown["attempts"], shown["generation"]) == ("dead", 1, 1)
    [attempt] = shown["attempt_history"]
    assert (attempt["generation"], attempt["status"], attempt["error_category"]) == (
        1,
        "failed",
        "permanent",
    ), attempt
    assert "PermanentError: this job always fails" in attempt["error_message"], attempt
    assert "Traceback" in attempt["error_traceback"] and attempt["finished_at"], attempt

    text = ok(cli(db_url, "jobs", "show", str(job_id))).stdout
    head, _, history = text.partition("\n\n")
    fields = dict(line.split(None, 1) for line in head.splitlines())
    assert fields["id"] == str(job_id) and fields["status"] == "dead", text
    assert fields["attempts"] == "1/2 (generation 1)", text
    header, row = history.splitlines()
    assert header.split() == [
        "gen",
        "status",
        "worker",
        "started",
        "finished",
        "lease_expires",
        "error",
    ]
    assert row.split()[:2] == ["1", "failed"], text
    assert row.endswith("permanent: PermanentError: this job always fails"), text

    replayed = as_json(cli(db_url, "jobs", "replay", str(job_id), "--json"))
    assert (replayed["status"], replayed["attempts"], replayed["generation"]) == (
        "scheduled",
        0,
        1,
    ), replayed
    assert replayed["business_key"] == shown["business_key"]
    assert len(replayed["attempt_history"]) == 1, "a replay keeps the history"


# -- where the database is ----------------------------------------------------------------------


def test_database_url_from_the_environment_on_every_command(
    db_url: str, procs: Processes, app: App, workdir: Path
) -> None:
    cwd = workdir
    env = procs.env(DUETIME_DATABASE_URL=db_url)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(None, *args, env=env, cwd=cwd)

    ok(run("migrate"))
    job_id = int(ok(run("enqueue", "noop", "--in", "1h")).stdout)
    assert app.get_job(job_id).task == "noop", "enqueue used another database"
    assert [j["id"] for j in as_json(run("jobs", "list", "--json"))["items"]] == [job_id]
    assert as_json(run("jobs", "show", str(job_id), "--json"))["id"] == job_id
    ok(run("jobs", "reschedule", str(job_id), "--at", "2030-01-01T00:00:00+00:00"))
    ok(run("jobs", "cancel", str(job_id)))
    ok(run("jobs", "replay", str(job_id)))  # due now

    worker = procs.worker(None, env=env)
    wait_until(
        lambda: worker.alive() and app.get_job(job_id).status is JobStatus.SUCCEEDED,
        30,
        lambda: f"the worker (URL from the environment) did not run job {job_id}\n{worker.tail()}",
        interval=0.2,
    )
    assert worker.terminate_and_wait() == 0
    assert list(cwd.iterdir()) == [], "nothing may be created in the working directory"


def test_database_url_flag_beats_the_environment(db_url: str, tmp_path: Path) -> None:
    decoy = tmp_path / "decoy.db"
    env = base_env(DUETIME_DATABASE_URL=f"sqlite:///{decoy}")
    job_id = int(ok(cli(db_url, "enqueue", "report.send", env=env, cwd=tmp_path)).stdout)
    assert as_json(cli(db_url, "jobs", "show", str(job_id), "--json", env=env))["id"] == job_id
    assert count_jobs(db_url) == 1
    assert not decoy.exists(), "the flag must win over DUETIME_DATABASE_URL"


@pytest.mark.parametrize(
    "command",
    [["migrate"], ["enqueue", "report.send"], ["jobs", "list", "--json"]],
    ids=["migrate", "enqueue", "jobs-list"],
)
def test_database_url_before_the_command_is_honoured(
    db_url: str, workdir: Path, command: Sequence[str]
) -> None:
    """`duetime --help` offers --database-url before the command; it must not be ignored."""
    done = run_cli(["--database-url", db_url, *command], cwd=workdir)
    assert done.returncode == 0, describe(done)
    assert list(workdir.iterdir()) == [], (
        f"`duetime --database-url URL {' '.join(command)}` ignored URL and used ./duetime.db"
    )
    if command[0] == "enqueue":
        assert count_jobs(db_url) == 1, "the job must be stored in the database the URL names"


# -- graceful shutdown of a worker --------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_lets_the_running_job_finish_and_exits_0(
    db_url: str, procs: Processes, app: App, sig: signal.Signals
) -> None:
    worker = procs.worker(db_url)  # default grace: 30 s
    job = app.enqueue("sleep", {"seconds": 2})
    started = procs.out_dir / f"started-{job.id}-1"
    wait_until(
        lambda: worker.alive() and started.exists(),
        30,
        lambda: f"the job never started\n{worker.tail()}",
    )

    worker.send(sig)
    sent = time.monotonic()
    assert worker.wait_exit(20) == 0, worker.tail()
    took = time.monotonic() - sent

    done = app.get_job(job.id)
    assert done.status is JobStatus.SUCCEEDED, done.to_json()
    [attempt] = done.attempt_history
    assert attempt.status is AttemptStatus.SUCCEEDED, attempt
    assert (procs.out_dir / f"finished-{job.id}-1").exists(), "the handler did not run to its end"
    order = [r["event"] for r in worker.records() if "event" in r]
    assert order.index("worker.draining") < order.index("job.succeeded"), order
    assert order[-1] == "worker.stopped", order
    assert took < 10, f"shutdown took {took:.1f}s for a 2 s job"
    assert worker.problems() == [], "\n".join(worker.problems())


def test_sigterm_past_the_grace_period_interrupts_the_job(
    db_url: str, procs: Processes, app: App
) -> None:
    worker = procs.worker(db_url, "--grace", "1s")
    job = app.enqueue("sleep", {"seconds": 30})
    started = procs.out_dir / f"started-{job.id}-1"
    wait_until(
        lambda: worker.alive() and started.exists(),
        30,
        lambda: f"the job never started\n{worker.tail()}",
    )

    worker.send(signal.SIGTERM)
    sent = time.monotonic()
    assert worker.wait_exit(15) == 0, worker.tail()
    took = time.monotonic() - sent
    assert 0.9 <= took < 6, f"exited {took:.1f}s after SIGTERM with --grace 1s"

    back = app.get_job(job.id)
    assert back.status is JobStatus.SCHEDULED, back.to_json()
    assert back.due_at <= datetime.now(UTC), "an interrupted job is due again at once"
    assert (back.generation, back.attempts) == (1, 1), back.to_json()
    [attempt] = back.attempt_history
    assert attempt.status is AttemptStatus.FAILED, attempt
    assert attempt.error_category is ErrorCategory.INTERRUPTED, attempt
    assert not (procs.out_dir / f"finished-{job.id}-1").exists()
    retried = worker.events("job.retry_scheduled", job_id=job.id, generation=1)
    assert retried and retried[0]["error"] == "interrupted", worker.tail()
    stopped = worker.events("worker.stopped")
    assert stopped and stopped[0]["retried"] == 1, worker.tail()
    assert any("outlived the grace period" in line for line in worker.lines()), worker.tail()


def test_a_second_signal_exits_1_at_once_and_leaves_the_lease_to_expire(
    db_url: str, procs: Processes, app: App
) -> None:
    worker = procs.worker(db_url)  # default grace: 30 s
    job = app.enqueue("sleep", {"seconds": 30})
    started = procs.out_dir / f"started-{job.id}-1"
    wait_until(
        lambda: worker.alive() and started.exists(),
        30,
        lambda: f"the job never started\n{worker.tail()}",
    )
    worker.send(signal.SIGTERM)
    wait_until(
        lambda: any("received SIGTERM" in line for line in worker.lines()),
        10,
        lambda: f"the first SIGTERM was not acknowledged\n{worker.tail()}",
    )
    worker.send(signal.SIGTERM)
    sent = time.monotonic()
    assert worker.wait_exit(5) == 1, worker.tail()
    assert time.monotonic() - sent < 3, "a second signal must exit at once"

    held = app.get_job(job.id)
    assert held.status is JobStatus.RUNNING, held.to_json()
    [attempt] = held.attempt_history
    assert attempt.status is AttemptStatus.RUNNING, "the attempt is left for the reaper"
    assert worker.events("worker.stopped") == []

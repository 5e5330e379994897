"""`duetime schedules ...` as a public contract: real subprocesses on each store."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from integration.procs import Processes, describe, run_cli


def cli(db_url: str, *args: str) -> tuple[int, str, str]:
    done = run_cli([*args, "--database-url", db_url])
    return done.returncode, done.stdout, done.stderr


def ok(db_url: str, *args: str) -> str:
    done = run_cli([*args, "--database-url", db_url])
    assert done.returncode == 0, describe(done)
    return done.stdout


def test_preview_of_an_unsaved_rule_prints_rfc3339_instants(db_url: str) -> None:
    out = ok(
        db_url,
        "schedules",
        "preview",
        "--cron",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2026-03-06T12:00:00Z",
        "--count",
        "3",
        "--json",
    )
    assert json.loads(out) == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-09T02:30:00-04:00",
    ]
    skip = ok(
        db_url,
        "schedules",
        "preview",
        "--cron",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--dst-gap",
        "skip",
        "--after",
        "2026-03-06T12:00:00Z",
        "--count",
        "2",
        "--json",
    )
    assert json.loads(skip) == ["2026-03-07T02:30:00-05:00", "2026-03-09T02:30:00-04:00"]
    both = ok(
        db_url,
        "schedules",
        "preview",
        "--cron",
        "30 1 * * *",
        "--tz",
        "America/New_York",
        "--dst-fold",
        "both",
        "--after",
        "2026-10-31T12:00:00Z",
        "--count",
        "2",
        "--json",
    )
    assert json.loads(both) == ["2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"]
    table = ok(
        db_url,
        "schedules",
        "preview",
        "--cron",
        "0 9 * * *",
        "--tz",
        "Asia/Kolkata",
        "--after",
        "2026-03-01T00:00:00Z",
        "--count",
        "1",
    )
    assert "2026-03-01T09:00:00+05:30" in table and "2026-03-01T03:30:00+00:00" in table


def test_add_list_show_update_pause_resume_delete(db_url: str) -> None:
    added = json.loads(
        ok(
            db_url,
            "schedules",
            "add",
            "nightly",
            "--task",
            "report",
            "--cron",
            "0 2 * * *",
            "--tz",
            "Europe/London",
            "--args",
            '{"kind": "sales"}',
            "--misfire",
            "catch_up",
            "--catchup-window",
            "6h",
            "--overlap",
            "buffer_one",
            "--dst-gap",
            "skip",
            "--dst-fold",
            "both",
            "--jitter",
            "30s",
            "--json",
        )
    )
    assert added["cron"] == "0 2 * * *" and added["timezone"] == "Europe/London"
    assert (added["misfire"], added["overlap"], added["dst_gap"], added["dst_fold"]) == (
        "catch_up",
        "buffer_one",
        "skip",
        "both",
    )
    assert added["catchup_window_seconds"] == 6 * 3600 and added["jitter_seconds"] == 30
    listed = json.loads(ok(db_url, "schedules", "list", "--json"))
    assert [s["name"] for s in listed] == ["nightly"]
    assert listed[0]["next_run_at"] and listed[0]["last_run"] is None
    assert "nightly" in ok(db_url, "schedules", "list")
    assert "Europe/London" in ok(db_url, "schedules", "show", "nightly")
    updated = json.loads(ok(db_url, "schedules", "update", "nightly", "--every", "15m", "--json"))
    assert updated["cron"] is None and updated["every_seconds"] == 900
    assert updated["version"] == 2
    assert json.loads(ok(db_url, "schedules", "pause", "nightly", "--json"))["paused"] is True
    assert "paused" in ok(db_url, "schedules", "list")
    assert json.loads(ok(db_url, "schedules", "resume", "nightly", "--json"))["paused"] is False
    ok(db_url, "schedules", "delete", "nightly")
    assert json.loads(ok(db_url, "schedules", "list", "--json")) == []


def test_trigger_backfill_and_history(db_url: str) -> None:
    ok(
        db_url,
        "schedules",
        "add",
        "hourly",
        "--task",
        "report",
        "--cron",
        "0 * * * *",
        "--tz",
        "UTC",
        "--start",
        "2026-01-01T00:00:00Z",
    )
    job_id = int(ok(db_url, "schedules", "trigger", "hourly").strip())
    shown = json.loads(ok(db_url, "jobs", "show", str(job_id), "--json"))
    assert shown["schedule"] == "hourly" and shown["origin"] == "trigger"
    result = json.loads(
        ok(
            db_url,
            "schedules",
            "backfill",
            "hourly",
            "--from",
            "2026-02-01T00:00:00Z",
            "--to",
            "2026-02-01T03:00:00Z",
            "--json",
        )
    )
    assert (result["enqueued"], result["existing"]) == (4, 0)
    again = json.loads(
        ok(
            db_url,
            "schedules",
            "backfill",
            "hourly",
            "--from",
            "2026-02-01T00:00:00Z",
            "--to",
            "2026-02-01T03:00:00Z",
            "--json",
        )
    )
    assert (again["enqueued"], again["existing"]) == (0, 4)
    history = json.loads(ok(db_url, "schedules", "history", "hourly", "--json"))
    assert {(t["origin"], t["outcome"]) for t in history} == {
        ("trigger", "enqueued"),
        ("backfill", "enqueued"),
    }
    assert all(t["job_id"] for t in history)


MAY, APRIL = "2026-05-01T00:00:00Z", "2026-04-01T00:00:00Z"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "61 * * * *", "--tz", "UTC"], "invalid cron"),
        (["--cron", "0 * * * *", "--tz", "Mars/Base"], "unknown time zone"),
        (["--cron", "0 * * * *", "--tz", "+05:30"], "fixed UTC offset"),
        (["--every", "1h", "--tz", "UTC", "--start", MAY, "--end", APRIL], "is not after start"),
        (["--cron", "0 * * * *", "--tz", "UTC", "--args", "[1]"], "JSON object"),
        (["--cron", "0 * * * *", "--tz", "UTC", "--every", "5m"], "not allowed with"),
        (["--every", "0.5s", "--tz", "UTC"], "at most once a second"),
        (["--tz", "UTC"], "one of the arguments --cron --every is required"),
        (["--cron", "0 * * * *", "--tz", "UTC", "--overlap", "queue"], "invalid choice"),
    ],
)
def test_bad_schedules_are_usage_errors_and_nothing_is_stored(
    db_url: str, args: list[str], message: str
) -> None:
    """A bad flag value exits 2 whether argparse or the schedule's validation refuses it."""
    status, _, err = cli(db_url, "schedules", "add", "x", "--task", "t", *args)
    assert status == 2, err
    assert err.startswith("usage: duetime schedules add"), err
    assert message in err.splitlines()[-1], err
    assert json.loads(ok(db_url, "schedules", "list", "--json")) == []


def test_unknown_schedule_exits_1(db_url: str) -> None:
    status, _, err = cli(db_url, "schedules", "show", "nope")
    assert status == 1 and "schedule 'nope' does not exist" in err


def test_a_worker_runs_a_schedule_declared_in_code(
    db_url: str, procs: Processes, tmp_path: Path
) -> None:
    (tmp_path / "ticking.py").write_text(
        "import duetime, os\n"
        "app = duetime.App()\n"
        "@app.schedule('every-second', cron='* * * * * *', timezone='Europe/Paris')\n"
        "@app.task(name='tick')\n"
        "def tick() -> None:\n"
        "    ctx = duetime.current()\n"
        "    with open(os.environ['TICK_LOG'], 'a') as f:\n"
        "        f.write(f'{ctx.schedule} {ctx.nominal_at.isoformat()}\\n')\n"
    )
    log = tmp_path / "ticks.log"
    env = procs.env(TICK_LOG=str(log), PYTHONPATH=str(tmp_path))
    worker = procs.worker(db_url, "--plan-interval", "0.2s", app="ticking:app", env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    assert worker.terminate_and_wait() == 0, worker.tail()
    lines = log.read_text().splitlines()
    assert len(lines) >= 3
    assert all(line.startswith("every-second ") for line in lines)
    assert len(set(lines)) == len(lines)  # each tick ran once
    listed = json.loads(ok(db_url, "schedules", "list", "--json"))
    assert [s["name"] for s in listed] == ["every-second"]

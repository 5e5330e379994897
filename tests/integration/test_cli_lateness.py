"""A task's max_lateness as the CLI shows it: the derived deadline, and why a job expired."""

from __future__ import annotations

from datetime import timedelta

from duetime import App
from integration.test_cli import as_json, cli, ok


def test_jobs_show_gives_the_derived_deadline_and_the_expiry_reason(db_url: str) -> None:
    app = App(db_url)

    @app.task(name="remind", max_lateness="5m")
    def remind() -> None: ...

    now = app.clock.now()
    job = remind.enqueue(at=now - timedelta(minutes=10))  # already past its bound
    waiting = remind.enqueue(delay="1h")
    shown = as_json(cli(db_url, "jobs", "show", str(waiting.id), "--json"))
    assert shown["deadline_at"] == (waiting.due_at + timedelta(minutes=5)).isoformat()
    assert app.store.expire_overdue(app.clock.now(), 10) == 1  # what the reaper does
    app.close()
    expired = as_json(cli(db_url, "jobs", "show", str(job.id), "--json"))
    assert expired["status"] == "expired" and expired["attempt_history"] == []
    deadline = (job.due_at + timedelta(minutes=5)).isoformat()
    assert expired["deadline_at"] == deadline
    text = ok(cli(db_url, "jobs", "show", str(job.id))).stdout
    assert f"expired: not started by its deadline {deadline}" in text

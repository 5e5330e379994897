"""Sequences and unique windows at the edges (docs/workflows.md): `duetime enqueue
--sequence/--unique-for/--unique-key`, `duetime jobs show`, and POST /v1/jobs with sequence,
unique_for and unique_key; the same bounds at each; the dashboard's job page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime.core.retry import ErrorCategory
from duetime.core.states import Event
from integration.apiclient import Api, running_api
from integration.procs import describe
from integration.test_cli import as_json, cli, count_jobs, ok, usage_error
from integration.test_dashboard import Env, env

__all__ = ["env"]  # the fixture, shared with test_dashboard.py


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with running_api(store_url) as api:
        yield api


def test_cli_enqueue_into_a_sequence_and_unique(db_url: str) -> None:
    first = as_json(cli(db_url, "enqueue", "post", "--sequence", "acct-1", "--json"))
    second = as_json(cli(db_url, "enqueue", "post", "--sequence", "acct-1", "--json"))
    assert (first["status"], first["sequence"]) == ("scheduled", "acct-1")
    assert second["status"] == "waiting"
    shown = ok(cli(db_url, "jobs", "show", str(second["id"])))
    assert "acct-1 (1 ahead)" in shown.stdout, describe(shown)
    assert as_json(cli(db_url, "jobs", "show", str(second["id"]), "--json"))["sequence_ahead"] == 1

    made = as_json(
        cli(db_url, "enqueue", "mail", "--args", '{"to":"a"}', "--unique-for", "10m", "--json")
    )
    again = cli(db_url, "enqueue", "mail", "--args", '{"to":"a"}', "--unique-for", "10m")
    assert again.returncode == 0 and again.stdout == f"{made['id']}\n", describe(again)
    assert "within the unique window" in again.stderr
    keyed = ["--unique-for", "1h", "--unique-key", "daily"]
    one = ok(cli(db_url, "enqueue", "mail", "--args", '{"to":"b"}', *keyed)).stdout
    two = cli(db_url, "enqueue", "mail", "--args", '{"to":"c"}', *keyed).stdout
    assert one == two
    assert count_jobs(db_url) == 4


@pytest.mark.parametrize(
    "flags",
    [
        ["--unique-for", "0s"],
        ["--unique-for", "367d"],
        ["--unique-for", "soon"],
        ["--unique-for", "1m", "--key", "k"],
        ["--unique-key", "k"],
        ["--sequence", ""],
    ],
)
def test_cli_bad_values_exit_2_and_store_nothing(db_url: str, flags: list[str]) -> None:
    usage_error(cli(db_url, "enqueue", "mail", *flags))
    assert count_jobs(db_url) == 0


def test_api_enqueue_into_a_sequence_and_unique(api: Api) -> None:
    body = {"task": "post", "args": {"n": 1}, "sequence": "acct-1"}
    first = api.call("POST", "/v1/jobs", json=body)
    second = api.call("POST", "/v1/jobs", json=body)
    assert first.status_code == second.status_code == 201, second.text
    assert first.json()["sequence"] == "acct-1" and second.json()["status"] == "waiting"
    shown = api.call("GET", f"/v1/jobs/{second.json()['id']}").json()
    assert shown["sequence_ahead"] == 1
    unique = {"task": "mail", "args": {"to": "a"}, "unique_for": "10m"}
    made = api.call("POST", "/v1/jobs", json=unique)
    again = api.call("POST", "/v1/jobs", json={**unique, "unique_for": 600})
    assert (made.status_code, again.status_code) == (201, 200), again.text
    assert again.json()["id"] == made.json()["id"] and made.json()["unique_until"]
    for bad in (
        {"unique_for": 0},
        {"unique_for": "367d"},
        {"unique_for": True},
        {"unique_key": "k"},
    ):
        refused = api.call("POST", "/v1/jobs", json={"task": "mail", **bad})
        assert refused.status_code == 422, refused.text
    assert api.count_jobs() == 3


def test_the_dashboards_job_page_shows_the_sequence_and_position(env: Env) -> None:
    first = env.scheduled(sequence="acct-9")
    second = env.scheduled(sequence="acct-9")
    unique = env.scheduled(task="mail.send", unique_for="10m")
    c = env.logged_in()
    page = c.get(f"/jobs/{second.id}").text
    assert "<dt>sequence</dt>" in page and "acct-9" in page and "(1 ahead)" in page, page
    assert "(0 ahead)" in c.get(f"/jobs/{first.id}").text
    assert "<dt>unique until</dt>" in c.get(f"/jobs/{unique.id}").text
    assert "<dt>sequence</dt>" not in c.get(f"/jobs/{unique.id}").text


def test_the_dashboard_offers_to_cancel_a_dead_job_that_holds_its_sequence(env: Env) -> None:
    @env.app.task(name="post", sequence="{invoice}", sequence_on_dead="hold")
    def post(invoice: int, note: str) -> None:
        pass

    @env.app.task(name="plain")
    def plain(invoice: int, note: str) -> None:
        pass

    held = env.finished(Event.GIVE_UP, task="post", error_category=ErrorCategory.PERMANENT)
    dead = env.finished(Event.GIVE_UP, task="plain", error_category=ErrorCategory.PERMANENT)
    c = env.logged_in()
    assert "Cancel job" in c.get(f"/jobs/{held.id}").text
    assert "Cancel job" not in c.get(f"/jobs/{dead.id}").text


def test_cli_enqueue_from_file_lines_with_a_sequence(db_url: str, tmp_path: Path) -> None:
    lines = [
        '{"task": "post", "args": {"n": 1}, "sequence": "acct-1"}',
        '{"task": "post", "args": {"n": 2}, "sequence": "acct-1"}',
        '{"task": "mail", "args": {"to": "a"}, "unique_for": "10m"}',
        '{"task": "mail", "args": {"to": "a"}, "unique_for": "10m"}',
    ]
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    done = as_json(cli(db_url, "enqueue", "--from-file", str(path), "--json"))
    assert (done["created"], done["deduplicated"]) == (3, 1)
    second = as_json(cli(db_url, "jobs", "show", str(done["ids"][1]), "--json"))
    assert (second["status"], second["sequence"]) == ("waiting", "acct-1")
    assert done["ids"][2] == done["ids"][3]

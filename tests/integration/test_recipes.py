"""The recipes of docs/fastapi.md and docs/recipes/ run as written: the FastAPI and Flask apps
of examples/recipes/ (the pages include those files), each on a fresh SQLite database, and the
FastAPI and SQLAlchemy app on PostgreSQL."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from duetime import App, JobStatus
from duetime.admin.tokens import create_token
from duetime.runtime.worker import Worker
from integration.procs import migrate, wait_until
from jobhelpers import run_until
from kit import kit_named

RECIPES = Path(__file__).resolve().parents[2] / "examples" / "recipes"


def load_recipe(
    filename: str, tmp_path: Path, database_url: str | None = None
) -> Iterator[ModuleType]:
    """The recipe module, imported afresh, its App on a database of this test (`database_url`,
    else a new SQLite file)."""
    name = f"recipe_{filename.removesuffix('.py')}"
    spec = importlib.util.spec_from_file_location(name, RECIPES / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    jobs: App = module.jobs
    jobs.database_url = database_url or f"sqlite:///{tmp_path / 'recipe.db'}"
    try:
        yield module
    finally:
        jobs.close()
        del sys.modules[name]


@pytest.fixture
def fastapi_recipe(tmp_path: Path) -> Iterator[ModuleType]:
    yield from load_recipe("fastapi_app.py", tmp_path)


@pytest.fixture
def flask_recipe(tmp_path: Path) -> Iterator[ModuleType]:
    yield from load_recipe("flask_app.py", tmp_path)


@pytest.fixture
def sqlalchemy_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """examples/recipes/fastapi_sqlalchemy.py on a PostgreSQL database of this test (its
    engine reads DUETIME_DATABASE_URL as it is imported), without the shop's table."""
    url = kit_named("postgres").fresh_url(tmp_path)
    migrate(url)
    monkeypatch.setenv("DUETIME_DATABASE_URL", url)
    for module in load_recipe("fastapi_sqlalchemy.py", tmp_path, url):
        module.Base.metadata.drop_all(module.engine)  # left by an earlier test
        try:
            yield module
        finally:
            module.engine.dispose()


def run_job(jobs: App, job_id: int) -> None:
    worker = Worker(jobs, poll_interval=0.02)
    done = {JobStatus.SUCCEEDED, JobStatus.DEAD}
    asyncio.run(run_until(worker, lambda: jobs.get_job(job_id).status in done))


def test_fastapi_route_enqueues_once_per_order_and_a_worker_runs_it(
    fastapi_recipe: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs: App = fastapi_recipe.jobs
    with TestClient(fastapi_recipe.api) as client:
        first = client.post("/orders/42/confirm", json={"email": "ada@example.com"})
        again = client.post("/orders/42/confirm", json={"email": "ada@example.com"})
        assert first.status_code == 202, first.text
        assert first.json() == {"job_id": first.json()["job_id"], "status": "scheduled"}
        assert again.json()["job_id"] == first.json()["job_id"]  # the key: one job per order
        assert client.post("/orders/42/confirm", json={}).status_code == 422
    job_id = first.json()["job_id"]
    job = jobs.get_job(job_id)
    assert (job.task, job.args) == ("orders.confirm", {"order_id": 42, "email": "ada@example.com"})
    run_job(jobs, job_id)
    assert jobs.get_job(job_id).status is JobStatus.SUCCEEDED
    assert "confirming order 42 to ada@example.com (key default/orders.confirm:confirm-42)" in (
        capsys.readouterr().out
    )


def test_fastapi_serves_duetimes_api_and_dashboard_beside_its_routes(
    fastapi_recipe: ModuleType,
) -> None:
    jobs: App = fastapi_recipe.jobs
    _, secret = create_token(jobs, "default", "read")
    with TestClient(fastapi_recipe.api) as client:
        job_id = client.post("/orders/7/confirm", json={"email": "bob@example.com"}).json()[
            "job_id"
        ]
        seen = client.get(f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {secret}"})
        assert seen.status_code == 200, seen.text
        assert seen.json()["task"] == "orders.confirm"
        assert client.get(f"/v1/jobs/{job_id}").status_code == 401  # duetime's auth holds
        assert client.get("/healthz").json()["status"] == "ok"
        assert "duetime" in client.get("/login").text  # the dashboard's login page
        assert client.get("/static/dashboard.css").status_code == 200
        # the shop's own OpenAPI document is its own, not duetime's
        assert "/orders/{order_id}/confirm" in client.get("/openapi.json").json()["paths"]


def test_flask_view_enqueues_once_per_report_and_a_worker_runs_it(
    flask_recipe: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs: App = flask_recipe.jobs
    client = flask_recipe.web.test_client()
    first = client.post("/reports/2026-11", json={"email": "eve@example.com"})
    again = client.post("/reports/2026-11", json={"email": "eve@example.com"})
    assert first.status_code == 202, first.text
    assert first.get_json()["status"] == "scheduled"
    assert again.get_json()["job_id"] == first.get_json()["job_id"]
    refused = client.post("/reports/2026-11", json={})
    assert refused.status_code == 422 and "email" in refused.get_json()["error"]
    job_id = first.get_json()["job_id"]
    run_job(jobs, job_id)
    status = client.get(f"/reports/jobs/{job_id}")
    assert status.get_json() == {"job_id": job_id, "status": "succeeded", "attempts": 1}
    assert client.get("/reports/jobs/999").status_code == 404
    assert "building the report of 2026-11 for eve@example.com" in capsys.readouterr().out


def test_fastapi_sqlalchemy_order_and_job_commit_together_and_the_lifespan_worker_runs_it(
    sqlalchemy_recipe: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """The request's order and its job commit in the request's transaction (a refused request
    leaves neither), and the worker started in the app's lifespan runs the job."""
    recipe = sqlalchemy_recipe
    jobs: App = recipe.jobs
    with TestClient(recipe.api) as client:  # the lifespan: the shop's table and the worker
        placed = client.post("/orders", json={"email": "ada@example.com", "quantity": 2})
        assert placed.status_code == 201, placed.text
        refused = client.post("/orders", json={"email": "bob@example.com", "quantity": 99})
        assert refused.status_code == 409, refused.text
        order_id, job_id = placed.json()["order_id"], placed.json()["job_id"]
        wait_until(
            lambda: jobs.get_job(job_id).status is JobStatus.SUCCEEDED,
            15,
            "the lifespan's worker did not run the job",
        )
    with Session(recipe.engine) as db:
        emails = [o.email for o in db.scalars(select(recipe.Order))]
    assert emails == ["ada@example.com"]  # the refused request's order rolled back
    [job] = jobs.list_jobs(task="orders.ship")  # and its job with it
    assert (job.id, job.args) == (job_id, {"order_id": order_id})
    assert f"shipping order {order_id}" in capsys.readouterr().out

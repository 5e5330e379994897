"""The API in a database outage: writes it cannot commit get 503 (never a success), readiness
says so, and the API recovers by itself when PostgreSQL is back."""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from duetime import App
from duetime.admin.tokens import create_token
from duetime.chaos.pgcluster import Cluster
from duetime.server import ServerSettings, create_app
from duetime.store import open_store


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A private PostgreSQL this test may stop (never the shared one)."""
    root = Path(tempfile.mkdtemp(prefix="duetime-pg-"))
    c = Cluster(root)
    try:
        c.start()
        yield c
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_writes_get_503_during_an_outage_and_succeed_after(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(cluster.url)
    store.migrate()
    store.close()
    app = App(cluster.url, pool_timeout=3)
    secret = create_token(app, "acme", "write")[1]
    auth = {"Authorization": f"Bearer {secret}"}
    # raise_server_exceptions: an error that escaped the app's handlers (which uvicorn would log
    # as "Exception in ASGI application" with its traceback) fails the test
    server = create_app(app, ServerSettings())
    with TestClient(server, raise_server_exceptions=True) as client:
        first = client.post("/v1/jobs", json={"task": "t"}, headers=auth)
        assert first.status_code == 201
        assert client.get("/readyz").status_code == 200

        cluster.down()
        caplog.clear()
        caplog.set_level(logging.WARNING)
        try:
            started = time.monotonic()
            r = client.post(
                "/v1/jobs",
                json={"task": "t", "args": {"n": 2}},
                headers={**auth, "Idempotency-Key": "k2"},
            )
            took = time.monotonic() - started
            assert r.status_code == 503, r.text
            assert r.headers["retry-after"] == "5"
            assert "nothing was committed" in r.json()["detail"]
            assert took < 15, f"the outage answer took {took:.1f} s"
            assert (
                client.post(f"/v1/jobs/{first.json()['id']}/cancel", headers=auth).status_code
                == 503
            )
            assert client.get("/v1/jobs", headers=auth).status_code == 503
            ready = client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["status"] == "unavailable"
            assert client.get("/healthz").status_code == 200  # the process itself is fine
            # each 503 is one warning line of the server's, never an error or a traceback
            ours = [r for r in caplog.records if r.name == "duetime.server"]
            assert [r.levelno for r in ours] == [logging.WARNING] * 3, caplog.text
            assert all(r.exc_info is None for r in caplog.records), caplog.text
            assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
        finally:
            cluster.up()

        deadline = time.monotonic() + 30
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "the API did not recover"
            time.sleep(0.5)
        # the 503'd request never committed: the same key now creates the job (201, not 200)
        again = client.post(
            "/v1/jobs",
            json={"task": "t", "args": {"n": 2}},
            headers={**auth, "Idempotency-Key": "k2"},
        )
        assert again.status_code == 201, again.text
        listed = client.get("/v1/jobs", headers=auth).json()["items"]
        assert sorted(j["id"] for j in listed) == sorted([first.json()["id"], again.json()["id"]])
        assert (
            client.get(f"/v1/jobs/{first.json()['id']}", headers=auth).json()["status"]
            == "scheduled"
        )
    app.close()

"""`duetime serve` as a real process: it serves the API with tokens, refuses --no-auth on a
non-loopback address, and a worker runs what the API enqueued."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx

from duetime import App
from duetime.admin.tokens import create_token
from integration.procs import Processes, describe, run_cli, start_server


def test_serve_answers_with_tokens_and_a_worker_runs_the_job(
    db_url: str, procs: Processes, tmp_path: Path
) -> None:
    app = App(db_url)
    secret = create_token(app, "default", "write")[1]
    server, base = start_server(db_url, tmp_path)
    try:
        auth = {"Authorization": f"Bearer {secret}"}
        assert httpx.get(f"{base}/v1/jobs").status_code == 401
        assert httpx.get(f"{base}/readyz").json()["status"] == "ok"
        r = httpx.post(f"{base}/v1/jobs", json={"task": "noop"}, headers=auth)
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        worker = procs.worker(db_url)
        deadline = time.monotonic() + 30
        while httpx.get(f"{base}/v1/jobs/{job_id}", headers=auth).json()["status"] != "succeeded":
            assert time.monotonic() < deadline, worker.tail()
            time.sleep(0.2)
        job = httpx.get(f"{base}/v1/jobs/{job_id}", headers=auth).json()
        assert (
            job["attempt_history"][0]["worker_id"] == worker.events("worker.started")[0]["worker"]
        )
        assert httpx.get(f"{base}/openapi.json").json()["info"]["title"] == "duetime"
    finally:
        server.terminate()
        # uvicorn drains in-flight requests, then re-raises SIGTERM to exit
        assert server.wait(15) in (0, -signal.SIGTERM)
        app.close()


def test_no_auth_is_only_for_loopback(db_url: str, tmp_path: Path) -> None:
    done = run_cli(["serve", "--database-url", db_url, "--host", "0.0.0.0", "--no-auth"])
    assert done.returncode == 1, describe(done)
    assert "--no-auth is refused on 0.0.0.0" in done.stderr and len(done.stderr.splitlines()) == 1
    server, base = start_server(db_url, tmp_path, "--no-auth")
    try:
        r = httpx.post(f"{base}/v1/jobs", json={"task": "noop"})
        assert r.status_code == 201 and r.json()["tenant"] == "default"
    finally:
        server.terminate()
        server.wait(15)

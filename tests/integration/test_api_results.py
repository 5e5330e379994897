"""The REST API's results and progress (docs/workflows.md): GET /v1/jobs/{id} has a
succeeded job's `result` and the latest `progress`; lists carry the progress, not results."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from duetime.core.models import Outcome
from duetime.core.states import Event
from integration.apiclient import Api, running_api
from integration.test_api import run_attempt


@pytest.fixture
def api(store_url: str) -> Iterator[Api]:
    with running_api(store_url) as api:
        yield api


def test_a_job_has_its_result_and_progress(api: Api) -> None:
    app = api.app.scoped("acme")
    done = app.enqueue("report", queue="r1")
    run_attempt(
        api,
        done.id,
        Outcome(Event.SUCCEED, result='{"rows":120,"file":"<b>x</b>"}', progress=1.0),
    )
    running = app.enqueue("report", queue="r2")
    lease = run_attempt(api, running.id, None)
    assert api.app.store.record_progress([(lease, 0.25, "a quarter")], api.app.clock.now())

    body = api.call("GET", f"/v1/jobs/{done.id}").json()
    assert body["status"] == "succeeded"
    assert body["result"] == {"rows": 120, "file": "<b>x</b>"}
    assert body["progress"] == 1.0 and body["progress_message"] is None
    body = api.call("GET", f"/v1/jobs/{running.id}").json()
    assert body["result"] is None
    assert (body["progress"], body["progress_message"]) == (0.25, "a quarter")
    assert body["progress_at"] is not None

    page = api.call("GET", "/v1/jobs").json()["items"]
    by_id = {item["id"]: item for item in page}
    assert by_id[running.id]["progress"] == 0.25
    assert "result" not in by_id[done.id]  # lists stay small: a result is read one job at a time

"""Traces across a process boundary (docs/tracing.md): a job enqueued here, inside a request's
span, runs in a real `duetime worker` process whose app (apps/traceapp.py) configures a tracer
provider writing its spans to a JSON-lines file; the worker's spans join the request's trace.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import duetime
from integration.procs import Processes, wait_until
from traces import Traces


def worker_spans(out_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(out_dir.glob("spans-*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def test_the_workers_spans_join_the_enqueuing_trace(
    db_url: str, procs: Processes, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = Traces(monkeypatch)
    app = duetime.App(database_url=db_url)
    app.task(name="traced")(lambda n: None)
    app.task(name="flaky", max_attempts=2, retry=duetime.RetryPolicy(base=0.05, cap=0.05))(
        lambda: None
    )
    try:
        with traces.provider.get_tracer("web").start_as_current_span("POST /orders") as request:
            ok = app.enqueue("traced", {"n": 1})
            failing = app.enqueue("flaky")
        worker = procs.worker(db_url, app="traceapp:app")
        wait_until(
            lambda: app.get_job(ok.id).terminal and app.get_job(failing.id).terminal,
            30,
            lambda: f"the jobs did not end; worker log:\n{worker.tail()}",
        )
        worker.terminate_and_wait()
    finally:
        app.close()

    trace_id = f"{request.get_span_context().trace_id:032x}"
    enqueues = {
        s.attributes["duetime.job.id"]: f"{s.context.span_id:016x}"
        for s in traces.spans()
        if s.name.startswith("duetime.enqueue") and s.attributes
    }
    spans = worker_spans(procs.out_dir)
    assert {s["trace_id"] for s in spans} == {trace_id}  # one tree, across the processes

    [run] = [s for s in spans if s["name"] == "duetime.run traced"]
    assert run["kind"] == "CONSUMER" and run["parent_id"] == enqueues[ok.id]
    assert run["attributes"]["duetime.outcome"] == "succeeded"
    [inside] = [s for s in spans if s["name"] == "inside"]
    assert inside["parent_id"] == run["span_id"]

    retries = sorted(
        (s for s in spans if s["name"] == "duetime.run flaky"),
        key=lambda s: s["attributes"]["duetime.attempt"],
    )
    assert [s["attributes"]["duetime.outcome"] for s in retries] == ["retried", "dead"]
    assert {s["parent_id"] for s in retries} == {enqueues[failing.id]}
    assert all(s["status"] == "ERROR" and s["events"] == ["exception"] for s in retries)

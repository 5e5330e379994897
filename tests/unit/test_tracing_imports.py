"""Without the `otel` extra (or with it, in an application that does not trace), importing
duetime, enqueueing and running a job imports nothing of OpenTelemetry (docs/tracing.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import asyncio, sys

class NoOpenTelemetry:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"{name} is blocked: the otel extra is not installed")
        return None

if sys.argv[2] == "blocked":
    sys.meta_path.insert(0, NoOpenTelemetry())

import duetime
from duetime.runtime.worker import Worker

app = duetime.App(database_url="sqlite:///" + sys.argv[1])
app.migrate()
ran = []

@app.task(name="hello")
def hello(n: int) -> None:
    ran.append(n)

job = hello.enqueue({"n": 1})
hello.enqueue_many([{"n": 2}])

async def main() -> None:
    stop = asyncio.Event()
    worker = asyncio.create_task(Worker(app, poll_interval=0.01).run(stop))
    for _ in range(1000):
        if len(ran) == 2:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await worker

asyncio.run(main())
assert sorted(ran) == [1, 2], ran
assert app.get_job(job.id).trace_context is None
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
print("loaded:", loaded)
app.close()
"""


@pytest.mark.parametrize("mode", ["blocked", "installed"])
def test_running_a_job_imports_no_opentelemetry(tmp_path: Path, mode: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "jobs.db"), mode],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loaded: []" in done.stdout

"""`duetime nodes`: live, dead (SIGKILLed) and stopped worker processes."""

from __future__ import annotations

import json
import time

from integration.procs import Processes, describe, run_cli


def nodes(db_url: str, *flags: str) -> list[dict[str, object]]:
    done = run_cli(["nodes", "--json", "--database-url", db_url, *flags])
    assert done.returncode == 0, describe(done)
    result: list[dict[str, object]] = json.loads(done.stdout)
    return result


def test_nodes_lists_live_dead_and_stopped_workers(db_url: str, procs: Processes) -> None:
    killed = procs.worker(db_url, "--queues", "mail")
    stopped = procs.worker(db_url)
    deadline = time.monotonic() + 30
    while len(nodes(db_url)) < 2:
        assert time.monotonic() < deadline, "workers never registered"
        time.sleep(0.2)
    live = {n["pid"]: n for n in nodes(db_url)}
    assert live[killed.pid]["state"] == "live" and live[killed.pid]["queues"] == ["mail"]
    assert "noop" in live[killed.pid]["tasks"]  # the tasks of the worker's app (itapp)
    killed.kill_if_running()
    assert stopped.terminate_and_wait() == 0
    time.sleep(1.5)
    after = {n["pid"]: n for n in nodes(db_url, "--all", "--dead-after", "1s")}
    assert after[killed.pid]["state"] == "dead"
    assert after[stopped.pid]["state"] == "stopped"
    assert stopped.pid not in {n["pid"] for n in nodes(db_url, "--dead-after", "1s")}
    table = run_cli(["nodes", "--all", "--dead-after", "1s", "--database-url", db_url])
    assert "dead" in table.stdout and "stopped" in table.stdout
    assert "drain.record," in table.stdout  # the tasks column

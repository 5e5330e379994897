"""`duetime nodes`: live, dead (SIGKILLed) and stopped worker processes."""

from __future__ import annotations

import json

from integration.procs import Processes, describe, run_cli, wait_until


def nodes(db_url: str, *flags: str) -> list[dict[str, object]]:
    done = run_cli(["nodes", "--json", "--database-url", db_url, *flags])
    assert done.returncode == 0, describe(done)
    result: list[dict[str, object]] = json.loads(done.stdout)
    return result


def test_nodes_lists_live_dead_and_stopped_workers(db_url: str, procs: Processes) -> None:
    killed = procs.worker(db_url, "--queues", "mail")
    stopped = procs.worker(db_url)
    wait_until(lambda: len(nodes(db_url)) >= 2, 30, "workers never registered")
    live = {n["pid"]: n for n in nodes(db_url)}
    assert live[killed.pid]["state"] == "live" and live[killed.pid]["queues"] == ["mail"]
    assert "noop" in live[killed.pid]["tasks"]  # the tasks of the worker's app (itapp)
    killed.kill_if_running()
    assert stopped.terminate_and_wait() == 0

    def once_dead() -> dict[object, dict[str, object]] | None:
        """Every node, once the killed worker's last heartbeat is over 1 s old."""
        listed = {n["pid"]: n for n in nodes(db_url, "--all", "--dead-after", "1s")}
        return listed if listed[killed.pid]["state"] == "dead" else None

    after = wait_until(once_dead, 30, "the SIGKILLed worker never showed as dead")
    assert after[stopped.pid]["state"] == "stopped"
    assert stopped.pid not in {n["pid"] for n in nodes(db_url, "--dead-after", "1s")}
    table = run_cli(["nodes", "--all", "--dead-after", "1s", "--database-url", db_url])
    assert "dead" in table.stdout and "stopped" in table.stdout
    assert "drain.record," in table.stdout  # the tasks column

"""The raw ceiling (the `ceiling` workload, docs/performance.md "The raw ceiling"): duetime's own
claim and finish, from its store layer, with nothing else.

Each client process opens a store (`duetime.store.open_store`, the worker's own store class)
and, until a claim finds nothing, claims BATCH due jobs (`Store.claim`: the claim statement a
worker's claim runs when no flow control is set) and records their success in one batch
(`Store.finish_many`: the fenced finish a worker's batched completions run). No worker
process, no handler, no lease renewals, no event loop: what is left is the statements, the
store's own Python around them (building the claimed rows' records, encoding the finish
batch) and the database. The clients start together at an instant the orchestrator gives
them, after they have opened their stores.

Run in duetime's virtualenv (.venv):
    .venv/bin/python -m bench.ceiling client '{"url": ..., "worker": ..., "start_at": ...}'
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from bench.common import step_main

# jobs per claim and per finish: a worker's finish batch at most (runtime/completer.py), and
# about the size of its claims under a backlog at C = 100 (its free slots and those it holds
# ahead: runtime/slots.py); 100 a batch until 2026-12-05
BATCH = 400


def client(p: dict[str, Any]) -> dict[str, Any]:
    """Claim and finish batches of `batch` until a claim finds nothing; the jobs finished,
    and when this client started and ended (epoch seconds)."""
    from duetime.core.models import Outcome
    from duetime.core.states import Event
    from duetime.store import open_store

    batch = int(p.get("batch", BATCH))
    store = open_store(p["url"])
    try:
        store.held_leases(p["worker"])  # connected before the start
        delay = float(p["start_at"]) - time.time()
        if delay > 0:
            time.sleep(delay)
        started = time.time()
        finished = claims = 0
        while True:
            got = store.claim(
                worker_id=p["worker"], queues=None, limit=batch, now=datetime.now(UTC)
            )
            if not got:
                break
            claims += 1
            applied = store.finish_many(
                [(c.lease, Outcome(Event.SUCCEED)) for c in got], datetime.now(UTC)
            )
            finished += sum(applied)
        ended = time.time()
    finally:
        store.close()
    return {"finished": finished, "claims": claims, "started": started, "ended": ended}


STEPS = {"client": client}

if __name__ == "__main__":
    step_main(STEPS)

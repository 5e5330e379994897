"""What the orchestrator knows of a system under test (stdlib only: imported in duetime's venv).

A system's own code runs in subprocesses started with `python` (its virtualenv's
interpreter): its steps (`python -m <module> <step> '<json>'`) and its worker processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class System:
    name: str  # the table's column: duetime-postgres, pgqueuer, ...
    kind: str  # duetime, pgqueuer or procrastinate
    store: str  # postgres, sqlite or mysql: the kind of database it runs on
    python: Path  # the interpreter of its virtualenv
    module: str  # its step module, run as python -m
    worker_argv: Callable[[str], list[str]]  # database URL -> one worker process's argv
    # one integer from the system's own tables: jobs done so far (or, with
    # counts_remaining, jobs not yet done, so done = enqueued - that)
    done_query: str
    counts_remaining: bool = False

    def done(self, value: int, enqueued: int) -> int:
        return enqueued - value if self.counts_remaining else value

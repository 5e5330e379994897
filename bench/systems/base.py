"""What the orchestrator knows of a system under test (stdlib only: imported in duetime's venv).

A system's own code runs in subprocesses started with `python` (its virtualenv's
interpreter): its steps (`python -m <module> <step> '<json>'`) and its worker processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Setting:
    """One worker configuration of the drain comparison (docs/performance.md).

    kind "defaults": the system's worker as its own documentation starts it, no option set;
    "sweep": concurrency C (and, where the system has one, a batch of C jobs per fetch);
    "throttled": pgqueuer's configuration of the previous tables (batch 5, at most 10 at once).
    `procs` worker processes of that configuration run at once.
    """

    kind: str
    procs: int
    concurrency: int | None = None  # C of a sweep setting

    @property
    def key(self) -> str:
        head = f"c{self.concurrency}" if self.kind == "sweep" else self.kind
        return f"{head}-p{self.procs}"

    @property
    def label(self) -> str:
        procs = f"{self.procs} proc" + ("s" if self.procs > 1 else "")
        if self.kind == "sweep":
            return f"C = {self.concurrency}, {procs}"
        if self.kind == "throttled":
            return f"pgqueuer throttled (previous tables), {procs}"
        return f"defaults, {procs}"

    @staticmethod
    def parse(key: str) -> Setting:
        head, _, procs = key.rpartition("-p")
        if head.startswith("c") and head[1:].isdigit():
            return Setting("sweep", int(procs), int(head[1:]))
        if head in ("defaults", "throttled"):
            return Setting(head, int(procs))
        raise ValueError(f"not a drain setting: {key!r}")


@dataclass(frozen=True)
class Tuned:
    """A system's worker under one Setting: its argv and the parameters it really runs with
    (for the report; two settings with equal params are the same configuration)."""

    argv: Callable[[str], list[str]]  # database URL -> one worker process's argv
    params: dict[str, Any] = field(default_factory=dict)


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
    # its worker under a drain Setting (None: the system has no such configuration)
    tune: Callable[[Setting], Tuned | None] | None = None

    def done(self, value: int, enqueued: int) -> int:
        return enqueued - value if self.counts_remaining else value

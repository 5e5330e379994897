"""Shared by every side of the benchmark: both virtualenvs import this module (stdlib only).

- Handlers of every system append one line per job start to a per-process record file in
  `$BENCH_RECORD_DIR`: `<start wall clock> <due instant>` (Unix seconds; due is 0 when the
  system does not expose it). The orchestrator reads them after the workers stopped.
- Every measured step (enqueue, schema setup, claim latency) is a subprocess run with the
  system's own interpreter: `python -m bench.systems.<name>_sys <step> '<json params>'`, which
  prints one JSON object on its last stdout line.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

RECORD_DIR_ENV = "BENCH_RECORD_DIR"
DB_URL_ENV = "BENCH_DB_URL"

_record_lock = threading.Lock()
_record_file: TextIO | None = None


def record_start(due: float) -> None:
    """Note that a job starts now; `due` is its due instant (Unix seconds), 0 if unknown.

    Line-buffered: one write(2) per job, so nothing is lost whatever way the worker exits.
    """
    global _record_file
    now = time.time()
    directory = os.environ.get(RECORD_DIR_ENV)
    if not directory:
        return
    with _record_lock:
        if _record_file is None:
            path = Path(directory) / f"{os.getpid()}.txt"
            _record_file = path.open("a", buffering=1, encoding="ascii")
        _record_file.write(f"{now:.6f} {due:.6f}\n")


def read_records(directory: Path) -> list[tuple[float, float]]:
    """Every (start, due) pair written under `directory` by any process."""
    rows: list[tuple[float, float]] = []
    for path in sorted(directory.glob("*.txt")):
        for line in path.read_text(encoding="ascii").splitlines():
            parts = line.split()
            if len(parts) == 2:
                rows.append((float(parts[0]), float(parts[1])))
    return rows


def payloads(count: int, offset: int = 0, size: int = 0) -> list[dict[str, Any]]:
    """The job arguments every system enqueues: one small integer each; with `size`, padded
    (a "pad" string) so that each argument object is `size` bytes of compact JSON."""
    if not size:
        return [{"i": offset + i} for i in range(count)]
    out = []
    for i in range(offset, offset + count):
        bare = len(json.dumps({"i": i, "pad": ""}, separators=(",", ":")))
        out.append({"i": i, "pad": "x" * max(0, size - bare)})
    return out


def chunks(count: int, size: int) -> list[tuple[int, int]]:
    """(offset, length) pairs covering range(count) in pieces of at most `size`."""
    return [(start, min(size, count - start)) for start in range(0, count, size)]


Step = Callable[[dict[str, Any]], dict[str, Any]]


def step_main(steps: Mapping[str, Step]) -> None:
    """Entry point of a system's step module: run one step, print its result as JSON."""
    name = sys.argv[1]
    params: dict[str, Any] = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    result = steps[name](params)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()

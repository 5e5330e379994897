"""How busy the machine was with work other than the benchmark's, during one run.

The machine may be shared (other test suites, other benchmarks): their CPU use slows every
system measured meanwhile. Over one (workload, system) run this measures, in cores:
- busy: all CPU time used on the machine (/proc/stat);
- ours: this process and every child it waited for (steps, workers: getrusage);
- db: database server processes alive at the end (postgres, mariadbd, mysqld; their CPU
  since the start, or since they started), except PostgreSQL backends serving a database
  that is not the benchmark's (their process title names it): those count as other work;
- other: busy - ours - db. It also counts database backends that exited during the run, ours
  included (the enqueue steps' connections), so it is an upper bound.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

DB_SERVERS = {"postgres", "mariadbd", "mysqld"}
HZ = os.sysconf("SC_CLK_TCK")


def _busy_seconds() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / HZ


def _ours_seconds() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def _db_seconds(mine: str) -> dict[int, float]:
    """CPU seconds of database server processes, but not of other databases' backends."""
    found: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        if comm in DB_SERVERS:
            try:
                title = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if _serves_other_database(title, mine):
                continue
            rest = stat[stat.rindex(")") + 2 :].split()
            found[int(entry.name)] = (int(rest[11]) + int(rest[12])) / HZ  # utime, stime
    return found


def _serves_other_database(title: str, mine: str) -> bool:
    """A PostgreSQL backend's title: 'postgres: [CLUSTER:] USER DATABASE HOST(PORT) STATE'."""
    parts = title.replace("\0", " ").split()
    if not parts or parts[0] != "postgres:":
        return False  # the postmaster, or MariaDB (one process): shared
    parts = parts[1:]
    if parts and parts[0].endswith(":"):
        parts = parts[1:]  # Debian's cluster name, e.g. 15/main:
    if len(parts) < 3 or "(" not in parts[2]:
        return False  # a background process (checkpointer, walwriter, ...): shared
    return not parts[1].startswith(mine)


class CpuWatch:
    def __init__(self, mine: str = "bench_") -> None:
        self.mine = mine
        self.t0 = time.monotonic()
        self.busy0 = _busy_seconds()
        self.ours0 = _ours_seconds()
        self.db0 = _db_seconds(mine)

    def cores(self) -> dict[str, float]:
        wall = max(1e-6, time.monotonic() - self.t0)
        busy = _busy_seconds() - self.busy0
        ours = _ours_seconds() - self.ours0
        db = sum(s - self.db0.get(pid, 0.0) for pid, s in _db_seconds(self.mine).items())
        other = max(0.0, busy - ours - db)
        return {
            "busy": round(busy / wall, 2),
            "ours": round(ours / wall, 2),
            "db": round(db / wall, 2),
            "other": round(other / wall, 2),
            "cpus": float(os.cpu_count() or 1),
        }

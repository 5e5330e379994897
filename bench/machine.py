"""The machine's own references, measured in the same run as the workloads:

- pgbench's simple-update transactions per second (`pgbench -N`) with 2 and 8 clients on a
  scratch database, so job rates can be read against what this PostgreSQL commits;
- the disk's fdatasync rate: 8 KiB write + os.fdatasync in a loop, on a temporary file in
  the filesystem of PostgreSQL's data directory when it is on this machine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

from bench.dbs import Servers

log = logging.getLogger("bench")


def _pg_env(url: str) -> dict[str, str]:
    parts = urlsplit(url)
    env = dict(os.environ)
    env.update(
        {
            "PGHOST": parts.hostname or "127.0.0.1",
            "PGPORT": str(parts.port or 5432),
            "PGUSER": parts.username or "postgres",
        }
    )
    if parts.password:
        env["PGPASSWORD"] = parts.password
    return env


def pgbench(servers: Servers, run_id: str, seconds: int) -> dict[str, Any]:
    exe = shutil.which("pgbench")
    if exe is None:
        return {"note": "pgbench not installed"}
    db = servers.create("postgres", f"bench_{run_id}_pgbench")
    env = _pg_env(servers.pg_url)
    out: dict[str, Any] = {"seconds": seconds, "scale": 1}
    try:
        subprocess.run(
            [exe, "-i", "-q", db.name], env=env, check=True, capture_output=True, timeout=300
        )
        for clients in (2, 8):
            proc = subprocess.run(
                [exe, "-N", "-c", str(clients), "-j", "2", "-T", str(seconds), db.name],
                env=env,
                check=True,
                capture_output=True,
                text=True,
                timeout=seconds + 120,
            )
            match = re.search(r"tps = ([0-9.]+)", proc.stdout)
            out[f"tps_c{clients}"] = float(match.group(1)) if match else None
    except (subprocess.SubprocessError, OSError) as exc:
        out["note"] = f"pgbench failed: {exc}"
    finally:
        db.drop()
        servers.forget(db)
    return out


def _data_directory(servers: Servers) -> Path | None:
    try:
        with psycopg.connect(servers.pg_url, autocommit=True) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
    except psycopg.Error:
        return None
    path = Path(row[0]) if row else None
    return path if path is not None and path.exists() else None


def fdatasync_rate(servers: Servers, seconds: float) -> dict[str, Any]:
    """Writes of 8 KiB, each followed by fdatasync, per second."""
    data_dir = _data_directory(servers)
    where: Path
    if data_dir is not None:
        # the data directory's parent: same filesystem, and PostgreSQL's own folder untouched
        where = data_dir.parent
        if where.stat().st_dev != data_dir.stat().st_dev or not os.access(where, os.W_OK):
            where = data_dir
        fs_note = f"filesystem of {data_dir}"
    else:
        where = Path(tempfile.gettempdir())
        fs_note = f"{where} (PostgreSQL's data directory is not on this machine or not readable)"
    block = os.urandom(8192)
    fd, name = tempfile.mkstemp(prefix="bench-fsync-", dir=where)
    count = 0
    try:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            os.pwrite(fd, block, 0)
            os.fdatasync(fd)
            count += 1
        elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)
    return {"fdatasync_per_s": count / elapsed, "where": fs_note, "seconds": round(elapsed, 2)}


def measure(servers: Servers, run_id: str, quick: bool) -> dict[str, Any]:
    refs: dict[str, Any] = {"cpus": os.cpu_count()}
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                refs["mem_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    with contextlib.suppress(OSError, psycopg.Error):
        with psycopg.connect(servers.pg_url, autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            refs["postgres_version"] = row[0] if row else None
    try:
        refs["pgbench"] = pgbench(servers, run_id, 3 if quick else 10)
    except Exception as exc:  # the reference is optional: say why it is missing
        refs["pgbench"] = {"note": f"{type(exc).__name__}: {exc}"}
    try:
        refs["fsync"] = fdatasync_rate(servers, 1.0 if quick else 3.0)
    except OSError as exc:
        refs["fsync"] = {"note": f"{type(exc).__name__}: {exc}"}
    return refs

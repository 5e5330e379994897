"""An automatically failing-over PostgreSQL pair: pg_auto_failover (Debian's
`postgresql-15-auto-failover`), a monitor and two nodes, each run by its own `pg_autoctl run`
keeper, on free ports in a temporary directory (as root, as the `postgres` OS user).

It offers what the failover drill (tests/integration/test_failover.py) asks of a pair:
url() is the formation's multi-host URL (what `pg_autoctl show uri` gives), kill_primary()
stops the primary's keeper and server at once (`pg_autoctl stop --immediate`, a lost
machine), and promote() does not promote anything: it waits until the monitor has promoted
the other node by itself and that node accepts writes.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from duetime.chaos.pgcluster import find_bin_dir, free_ports

DATABASE = "duetime_failover"
PG_AUTOCTL = shutil.which("pg_autoctl") or "/usr/bin/pg_autoctl"


def available() -> str | None:
    """None when pg_auto_failover can run here, else why not."""
    if not Path(PG_AUTOCTL).exists():
        return "pg_autoctl is not installed (apt-get install postgresql-15-auto-failover)"
    if find_bin_dir() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl)"
    return None


class AutoFailoverPair:
    synchronous = True  # pg_auto_failover replicates synchronously while the secondary is up
    proxy = None

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="duetime-paf-"))
        self.root.chmod(0o755)
        bin_dir = find_bin_dir()
        assert bin_dir is not None
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_DATA_HOME": str(self.root / "data"),
            "XDG_RUNTIME_DIR": str(self.root / "run"),
        }
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self.prefix = [shutil.which("runuser") or "runuser", "-u", "postgres", "--"]
        # distinct: three ports picked one after another came back the same once in CI (the
        # monitor's and node1's, 33551: node1's server could not bind)
        self.monitor_port, *nodes = free_ports(3)
        self.ports = (nodes[0], nodes[1])
        self.primary_index = 0
        self.keepers: list[subprocess.Popen[bytes]] = []
        self.promoted_at: float | None = None
        self.killed_at: float | None = None
        self._closed = False
        atexit.register(self.close)

    # -- running pg_autoctl ---------------------------------------------------------------------

    def _autoctl(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [*self.prefix, "env", *(f"{k}={v}" for k, v in self.env.items() if k != "PATH"),
             f"PATH={self.env['PATH']}", PG_AUTOCTL, *args],
            cwd=self.root, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"pg_autoctl {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout

    def _run_keeper(self, pgdata: Path, name: str) -> None:
        command = [*self.prefix, "env", *(f"{k}={v}" for k, v in self.env.items())]
        command += [PG_AUTOCTL, "run", "--pgdata", str(pgdata)]
        with open(self.root / f"{name}.log", "wb") as log:
            keeper = subprocess.Popen(
                command,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.keepers.append(keeper)

    def start(self) -> AutoFailoverPair:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        self._autoctl(
            "create", "monitor", "--pgdata", str(self.root / "monitor"),
            "--pgport", str(self.monitor_port), "--hostname", "127.0.0.1",
            "--auth", "trust", "--no-ssl",
        )  # fmt: skip
        self._run_keeper(self.root / "monitor", "monitor")
        monitor = f"postgres://autoctl_node@127.0.0.1:{self.monitor_port}/pg_auto_failover"
        self._wait_sql(f"{monitor}?sslmode=disable", "SELECT 1", 1, 60)
        for i, port in enumerate(self.ports, start=1):
            self._autoctl(
                "create", "postgres", "--pgdata", str(self.root / f"node{i}"),
                "--pgport", str(port), "--hostname", "127.0.0.1", "--auth", "trust",
                "--no-ssl", "--dbname", DATABASE, "--name", f"node{i}",
                "--monitor", f"{monitor}?sslmode=disable",
            )  # fmt: skip
            self._run_keeper(self.root / f"node{i}", f"node{i}")
            if i == 1:
                self._wait_sql(self.node_url(0), "SELECT NOT pg_is_in_recovery()", True, 120)
        # the secondary streams, and the primary waits for it (synchronous replication)
        self._wait_sql(
            self.node_url(0),
            "SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')",
            1,
            180,
        )

    def _wait_sql(self, url: str, sql: str, want: object, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(url, autocommit=True, connect_timeout=3) as conn:
                    row = conn.execute(sql).fetchone()  # type: ignore[arg-type]
                    last = row[0] if row else None
                    if last == want:
                        return
            except psycopg.Error as exc:
                last = exc
            time.sleep(0.2)
        raise RuntimeError(f"{sql!r} on {url} was not {want!r} in {timeout}s (last: {last})")

    # -- what the drill asks ----------------------------------------------------------------------

    def node_url(self, index: int, db: str = DATABASE) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.ports[index]}/{db}"

    def url(self, db: str = DATABASE) -> str:
        first, second = self.ports
        return (
            f"postgresql://postgres@127.0.0.1:{first},127.0.0.1:{second}/{db}"
            "?target_session_attrs=read-write&connect_timeout=5"
        )

    def primary_url(self, db: str = DATABASE) -> str:
        return self.node_url(self.primary_index, db)

    def kill_primary(self) -> None:
        """The primary's machine is lost: its keeper and server stop at once."""
        self._autoctl("stop", "--pgdata", str(self.root / f"node{self.primary_index + 1}"),
                      "--immediate")  # fmt: skip
        self.killed_at = time.time()

    def promote(self) -> float:
        """Wait (up to 150 s) until the monitor has promoted the other node and it takes
        writes, as libpq's target_session_attrs=read-write judges it: pg_auto_failover keeps
        a promoted node read-only (default_transaction_read_only) until the old primary is
        known demoted or its demote timeout (30 s) has passed. Return how long that took since
        kill_primary()."""
        other = 1 - self.primary_index
        self._wait_sql(
            self.node_url(other),
            "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'",
            True,
            150,
        )
        self.promoted_at = time.time()
        self.primary_index = other
        return self.promoted_at - (self.killed_at or self.promoted_at)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for name in ("node1", "node2", "monitor"):
            if (self.root / name).exists():
                with contextlib.suppress(Exception):
                    self._autoctl("stop", "--pgdata", str(self.root / name), "--immediate",
                                  timeout=30)  # fmt: skip
        for keeper in self.keepers:
            with contextlib.suppress(Exception):
                keeper.wait(10)
            if keeper.poll() is None:
                keeper.kill()
                keeper.wait(10)
        # a server a keeper started and no stop reached: pg_ctl stop -m immediate
        bin_dir = find_bin_dir()
        for name in ("node1", "node2", "monitor"):
            data = self.root / name
            if (data / "postmaster.pid").exists() and bin_dir is not None:
                subprocess.run(
                    [*self.prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                     "-w", "stop"],
                    capture_output=True, timeout=60, check=False,
                )  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)

"""A replicated PostgreSQL pair for failover drills and `make chaos-failover`: a primary and a
streaming standby.

Both are private clusters of the installed PostgreSQL (initdb, pg_ctl, pg_basebackup -R) on
free ports in a temporary directory, trust authentication, run as the `postgres` OS user when
the tests run as root (as tests/pgserver.py's private cluster does). Two modes:

- synchronous: the primary names the standby in `synchronous_standby_names` and commits with
  `synchronous_commit=on`, so no commit is acknowledged before the standby has it;
- asynchronous: the standby streams through a `HoldableProxy`, which the test can hold so
  that WAL stops reaching the standby at a moment it chooses (the commits after it are lost
  when the primary dies), and release again.

kill_primary() is `pg_ctl stop -m immediate`; promote() is `pg_ctl promote -w` on the
standby, which becomes the primary; rebuild_standby() makes the dead node a standby of the new
primary again (pg_basebackup on the same port), so a run can fail over again. url() is the
libpq multi-host URL every duetime process is given, with `target_session_attrs=read-write`:
its two ports never change. close() (also registered with atexit) stops both servers and the
proxy and deletes the directory.
"""

from __future__ import annotations

import atexit
import contextlib
import selectors
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from duetime.chaos.pgcluster import Cluster, free_port

STANDBY_NAME = "standby1"
DATABASE = "duetime_failover"
COMMON = (
    "-c max_connections=200 -c wal_level=replica -c max_wal_senders=5 -c wal_keep_size=512MB"
    " -c hot_standby=on -c fsync=off"
)


class HoldableProxy:
    """A TCP proxy in a thread: forwards 127.0.0.1:port to a target until hold() is called;
    while held nothing is forwarded either way (bytes wait in the proxy, unread); release()
    forwards again; cut() closes every connection, discarding what was held."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._forwarding = threading.Event()
        self._forwarding.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name="pg-proxy", daemon=True)
        self._thread.start()

    def hold(self) -> None:
        self._forwarding.clear()

    def release(self) -> None:
        self._forwarding.set()

    @property
    def held(self) -> bool:
        return not self._forwarding.is_set()

    def cut(self) -> None:
        """Close every open connection (held bytes are dropped); new ones are still accepted."""
        with self._lock:
            for s in list(self._sockets):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._sockets.clear()

    def close(self) -> None:
        self._closed.set()
        self._forwarding.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            threading.Thread(
                target=self._pipe, args=(client, upstream), name="pg-proxy-pipe", daemon=True
            ).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        try:
            sel.register(a, selectors.EVENT_READ, b)
            sel.register(b, selectors.EVENT_READ, a)
            while not self._closed.is_set():
                if not self._forwarding.wait(0.05):
                    if a.fileno() < 0 or b.fileno() < 0:
                        return
                    continue  # held: read nothing, forward nothing
                for key, _ in sel.select(0.05):
                    src = key.fileobj
                    dst: socket.socket = key.data
                    assert isinstance(src, socket.socket)
                    if not self._forwarding.is_set():
                        break  # held between select and read: leave the bytes unread
                    data = src.recv(65536)
                    if not data:
                        return
                    dst.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            sel.close()
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()
            with self._lock:
                self._sockets.difference_update((a, b))


class Node(Cluster):
    """One server of the pair (a Cluster whose start options the pair chooses)."""

    listen = "127.0.0.1"  # listen_addresses (the pair adds an address a namespace reaches)

    def start_with(self, options: str) -> None:
        self.options = f"-p {self.port} -k {self.root} -c listen_addresses={self.listen} {options}"
        done = self._pg_ctl("-l", str(self.log), "-o", self.options, "-w", "-t", "60", "start")
        if done.returncode != 0:
            raise RuntimeError(f"could not start PostgreSQL: {done.stdout.strip()} {self.tail()}")

    def pg_ctl(self, *args: str) -> None:
        done = self._pg_ctl(*args)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl {' '.join(args)} failed: {done.stdout} {self.tail()}")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()


class ReplicatedPair:
    """A primary and a streaming standby; see the module docstring."""

    def __init__(
        self,
        *,
        synchronous: bool,
        proxied: bool | None = None,
        also_listen: tuple[str, str] | None = None,
    ) -> None:
        """also_listen=(address, network): both servers also listen on `address` (e.g. the
        host end of a network namespace's veth pair) and trust connections from `network`
        (e.g. its /30), so a worker inside the namespace reaches the pair (url(host=...))."""
        self.synchronous = synchronous
        self.also_listen = also_listen
        self.proxied = (not synchronous) if proxied is None else proxied
        self.root = Path(tempfile.mkdtemp(prefix="duetime-pgpair-"))
        self.root.chmod(0o755)  # the servers run as the postgres OS user when we are root
        (self.root / "primary").mkdir()
        (self.root / "standby").mkdir()
        self.primary = Node(self.root / "primary")
        self.standby: Node | None = Node(self.root / "standby")
        if also_listen is not None:
            for node in (self.primary, self.standby):
                node.listen = f"127.0.0.1,{also_listen[0]}"
        self.ports: tuple[int, int] = (0, 0)  # the URL's two ports, whichever node has each
        self.failovers = 0
        self.proxy: HoldableProxy | None = None
        self.promoted_at: float | None = None  # time.time() when promote() returned
        self.killed_at: float | None = None
        self._old: Node | None = None  # the primary kill_primary() stopped
        self._dead: Node | None = None  # the old primary after promote(), until rebuilt
        self._closed = False
        atexit.register(self.close)

    # -- building ---------------------------------------------------------------------------

    def start(self) -> ReplicatedPair:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        p = self.primary
        done = p._run(
            str(p.bin / "initdb"), "-D", str(p.data), "-A", "trust", "-U", "postgres",
            "-E", "UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stdout[-2000:]}")
        if self.also_listen is not None:  # pg_basebackup copies it to every standby
            with open(p.data / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {self.also_listen[1]} trust\n")
        p.port = free_port()
        primary_options = COMMON
        if self.synchronous:
            primary_options += (
                f" -c synchronous_standby_names={STANDBY_NAME} -c synchronous_commit=on"
            )
        p.start_with(primary_options)
        with psycopg.connect(self.primary_url("postgres"), autocommit=True) as conn:
            # no standby yet to acknowledge it: this session commits locally
            conn.execute("SET synchronous_commit = local")
            conn.execute(f"CREATE DATABASE {DATABASE}")
        assert self.standby is not None
        self.standby.port = free_port()
        self.ports = (p.port, self.standby.port)
        self._make_standby(self.standby)
        self.wait_streaming()

    def _make_standby(self, s: Node) -> None:
        """pg_basebackup -R from the primary into s (on s.port), start it, wait for streaming."""
        p = self.primary
        upstream = p.port
        if self.proxied:
            if self.proxy is not None:
                self.proxy.close()
            self.proxy = HoldableProxy(p.port)
            upstream = self.proxy.port
        done = s._run(
            str(s.bin / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(p.port), "-U", "postgres",
            "-D", str(s.data), "-R", "-X", "stream", "--no-sync", "--checkpoint=fast",
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"pg_basebackup failed: {done.stdout[-2000:]}")
        # -R wrote standby.signal and a primary_conninfo; this line (later, so it wins) names
        # the standby for synchronous_standby_names and points it at the proxy when there is one
        with open(s.data / "postgresql.auto.conf", "a") as conf:
            conf.write(
                f"primary_conninfo = 'host=127.0.0.1 port={upstream} user=postgres "
                f"application_name={STANDBY_NAME}'\n"
                "wal_retrieve_retry_interval = '500ms'\n"
                # a primary made synchronous by ALTER SYSTEM passed that on: not for a standby
                "synchronous_standby_names = ''\n"
            )
        s.start_with(COMMON)
        self.wait_streaming(any_state=True)

    # -- addresses --------------------------------------------------------------------------

    def primary_url(self, db: str = DATABASE) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.primary.port}/{db}"

    def standby_url(self, db: str = DATABASE) -> str:
        assert self.standby is not None, "no standby now (promoted; rebuild_standby())"
        return f"postgresql://postgres@127.0.0.1:{self.standby.port}/{db}"

    def url(self, db: str = DATABASE, host: str = "127.0.0.1") -> str:
        """The multi-host URL: whichever of the two accepts writes (on `host`: 127.0.0.1 or
        the also_listen address)."""
        first, second = self.ports
        return (
            f"postgresql://postgres@{host}:{first},{host}:{second}"
            f"/{db}?target_session_attrs=read-write&connect_timeout=5"
        )

    # -- replication ------------------------------------------------------------------------

    def _one(self, url: str, sql: str) -> Any:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(sql).fetchone()
        return row[0] if row else None

    def wait_streaming(self, timeout: float = 60, *, any_state: bool = False) -> None:
        """Wait until the standby streams, as a synchronous standby in synchronous mode (with
        any_state: in whatever state)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self._one(
                self.primary_url("postgres"),
                "SELECT sync_state FROM pg_stat_replication "  # noqa: S608 (a constant)
                f"WHERE application_name = '{STANDBY_NAME}' AND state = 'streaming'",
            )
            want = "sync" if self.synchronous else "async"
            if state == want or (any_state and state is not None):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the standby is not streaming ({state}) after {timeout}s: "
                    f"{self.standby.tail() if self.standby else ''}"
                )
            time.sleep(0.1)

    def wait_replayed(self, timeout: float = 30) -> None:
        """Wait until the standby has replayed everything the primary has written so far."""
        assert self.standby is not None
        target = self._one(self.primary_url("postgres"), "SELECT pg_current_wal_lsn()::text")
        deadline = time.monotonic() + timeout
        while True:
            behind = self._one(
                self.standby_url("postgres"),
                f"SELECT pg_last_wal_replay_lsn() < '{target}'::pg_lsn",
            )
            if behind is False:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby did not replay up to {target} in {timeout}s")
            time.sleep(0.05)

    # -- the failover -----------------------------------------------------------------------

    def kill_primary(self) -> None:
        """The primary dies at once (pg_ctl stop -m immediate): no shutdown checkpoint."""
        self.primary.pg_ctl("-m", "immediate", "-w", "stop")
        self._old = self.primary
        self.killed_at = time.time()
        if self.proxy is not None:
            self.proxy.cut()  # what the proxy still held never reaches the standby

    def promote(self) -> float:
        """Promote the standby (pg_ctl promote -w), which becomes the primary; return how long
        promotion took (s). The old primary's node waits for rebuild_standby()."""
        assert self.standby is not None, "no standby to promote"
        started = time.monotonic()
        self.standby.pg_ctl("-w", "-t", "60", "promote")
        self.promoted_at = time.time()
        self.primary, self.standby = self.standby, None
        self._dead = self._old
        self.failovers += 1
        return time.monotonic() - started

    def rebuild_standby(self) -> None:
        """Make the dead old primary a standby of the new one (a fresh pg_basebackup into its
        directory, on its port, so url() still names both), and, in synchronous mode, make the
        new primary wait for it again (ALTER SYSTEM synchronous_standby_names + reload). Until
        then the promoted primary commits alone."""
        node = self._dead
        assert node is not None and self.standby is None
        node.stop()
        shutil.rmtree(node.data, ignore_errors=True)
        self._make_standby(node)
        self.standby, self._dead = node, None
        if self.synchronous:
            with psycopg.connect(self.primary_url("postgres"), autocommit=True) as conn:
                conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'")
                conn.execute("SELECT pg_reload_conf()")
            self.wait_streaming()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.proxy is not None:
            self.proxy.close()
        for node in (self.primary, self.standby, self._dead):
            if node is not None:
                with contextlib.suppress(Exception):
                    node.stop()
        shutil.rmtree(self.root, ignore_errors=True)

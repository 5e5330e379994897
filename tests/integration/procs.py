"""Real processes for integration tests: start `duetime` workers and CLI runs, wait, clean up.

Nothing here is mocked: workers are `duetime worker` OS processes on a real database, logging
JSON lines to a file per process; tests synchronise by polling the store, marker files and
those logs, always with a deadline and a message that says what did not happen.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from duetime.chaos.pgcluster import free_port
from kit import kit_for

HERE = Path(__file__).resolve().parent
APPS_DIR = HERE / "apps"
DUETIME = Path(sys.executable).with_name("duetime")
APP_SPEC = "itapp:app"
OUT_ENV = "DUETIME_IT_OUT"

T = TypeVar("T")


# -- waiting ------------------------------------------------------------------------------------


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    message: str | Callable[[], str],
    interval: float = 0.05,
) -> T:
    """Poll `predicate` until it returns a truthy value (returned); fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout:g}s: {text}")
        time.sleep(interval)


# -- environment --------------------------------------------------------------------------------


def base_env(out_dir: Path | None = None, **extra: str) -> dict[str, str]:
    """This environment without DUETIME_DATABASE_URL (nor DUETIME_BROKER_URL), with the test
    apps importable."""
    unset = ("DUETIME_DATABASE_URL", "DUETIME_DEBUG", "DUETIME_BROKER_URL")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    paths = [str(APPS_DIR), *filter(None, [env.get("PYTHONPATH")])]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    if out_dir is not None:
        env[OUT_ENV] = str(out_dir)
    env.update(extra)
    return env


# -- worker processes ---------------------------------------------------------------------------


class WorkerProcess:
    """One `duetime worker` process whose stderr (JSON log lines) goes to `log_path`."""

    def __init__(self, popen: subprocess.Popen[bytes], log_path: Path, name: str) -> None:
        self.popen = popen
        self.log_path = log_path
        self.name = name
        self.sent: list[tuple[str, float]] = []  # (signal name, monotonic time)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def __repr__(self) -> str:
        return f"<worker {self.name} pid={self.pid} rc={self.popen.poll()}>"

    # logs

    def lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return []

    def records(self) -> list[dict[str, Any]]:
        """Every JSON log record so far (a trailing half-written line is skipped)."""
        found = []
        for line in self.lines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                found.append(record)
        return found

    def events(self, name: str | None = None, **fields: Any) -> list[dict[str, Any]]:
        return [
            r
            for r in self.records()
            if "event" in r
            and (name is None or r["event"] == name)
            and all(r.get(k) == v for k, v in fields.items())
        ]

    def problems(self) -> list[str]:
        """Log lines at level error/critical, and lines that are not JSON (e.g. tracebacks),
        but for a broker-side race the worker recovered from (broker_race_recovered)."""
        bad = []
        records: list[Any] = []
        for line in self.lines():
            try:
                record = json.loads(line)
            except ValueError:
                bad.append(line)
                records.append(None)
                continue
            records.append(record)
            if not isinstance(record, dict) or record.get("level") in ("error", "critical"):
                bad.append(line)
        return [line for line in bad if not broker_race_recovered(line, records)]

    def tail(self, n: int = 30) -> str:
        lines = self.lines()[-n:]
        return f"--- last {len(lines)} log lines of {self!r} ---\n" + "\n".join(lines)

    def wait_event(self, name: str, timeout: float, **fields: Any) -> dict[str, Any]:
        found = wait_until(
            lambda: self.events(name, **fields) or self._dead_check(),
            timeout,
            lambda: f"{self.name} did not log {name} {fields}\n{self.tail()}",
        )
        if not isinstance(found, list):
            raise AssertionError(f"{self.name} exited while waiting for {name}\n{self.tail()}")
        return found[0]

    def _dead_check(self) -> bool:
        return self.popen.poll() is not None

    def alive(self) -> bool:
        """True while the process runs; raises (with its log) once it has exited.

        Use it in wait_until predicates so a worker that died fails the wait at once.
        """
        if self.popen.poll() is not None:
            raise AssertionError(f"{self.name} exited early\n{self.tail()}")
        return True

    # signals and exit

    def send(self, sig: signal.Signals) -> None:
        self.sent.append((sig.name, time.monotonic()))
        self.popen.send_signal(sig)

    def state(self) -> str | None:
        """The process state letter from /proc (R, S, T for stopped, Z...), None when gone."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return None
        return stat.rsplit(")", 1)[1].split()[0]

    def stop(self) -> None:
        """SIGSTOP, and wait until the kernel reports the process stopped."""
        self.send(signal.SIGSTOP)
        wait_until(
            lambda: self.state() in ("T", "t"),
            5,
            lambda: f"{self.name} did not stop (state {self.state()})",
        )

    def cont(self) -> None:
        self.send(signal.SIGCONT)

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} did not exit within {timeout:g}s\n{self.tail()}"
            ) from None

    def terminate_and_wait(self, timeout: float = 30) -> int:
        self.send(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill_if_running(self) -> None:
        if self.popen.poll() is None:
            try:
                self.popen.send_signal(signal.SIGCONT)  # a stopped process must run to die
                self.popen.kill()
            except ProcessLookupError:
                pass
            self.popen.wait(10)


class Processes:
    """Starts worker processes for one test; leftovers are killed by finish()."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.out_dir = root / "out"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir = root / "logs"
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.started: list[WorkerProcess] = []

    def env(self, **extra: str) -> dict[str, str]:
        return base_env(self.out_dir, **extra)

    def worker(
        self,
        database_url: str | None,
        *args: str,
        name: str | None = None,
        app: str = APP_SPEC,
        poll_interval: str = "0.1s",
        env: dict[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> WorkerProcess:
        """Start `duetime worker --app itapp:app --database-url URL --log-format json ...`.

        With database_url=None the flag is left out (the URL then comes from `env`). `prefix`
        runs it through another program that then execs it (e.g. `ip netns exec NS`).
        """
        name = name or f"worker{len(self.started) + 1}"
        log_path = self.logs_dir / f"{name}.log"
        command = [*prefix, str(DUETIME), "worker", "--app", app, "--log-format", "json"]
        command += ["--poll-interval", poll_interval]
        if database_url is not None:
            command += ["--database-url", database_url]
        command += list(args)
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env if env is not None else self.env(),
                cwd=self.root,
            )
        proc = WorkerProcess(popen, log_path, name)
        self.started.append(proc)
        return proc

    def finish(self) -> None:
        for proc in self.started:
            proc.kill_if_running()


# -- the command line ---------------------------------------------------------------------------


def run_cli(
    args: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run `duetime ARGS...` to completion and return its exit status and output."""
    return subprocess.run(
        [str(DUETIME), *args],
        env=env if env is not None else base_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def describe(done: subprocess.CompletedProcess[str]) -> str:
    return (
        f"`{' '.join(map(str, done.args))}` exited {done.returncode}\n"
        f"stdout: {done.stdout!r}\nstderr: {done.stderr!r}"
    )


# -- the database, directly (aggregate checks that would take thousands of API calls) ---------


def query(database_url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one read-only query; write `?` for parameters (translated for the dialect)."""
    return kit_for(database_url).execute(database_url, sql, params)


def scalar(database_url: str, sql: str, params: Sequence[Any] = ()) -> Any:
    rows = query(database_url, sql, params)
    assert len(rows) == 1 and len(rows[0]) == 1, f"expected one value from {sql!r}, got {rows}"
    return rows[0][0]


def job_row_unlocked(database_url: str, job_id: int) -> bool:
    """True when no other connection holds a write lock that would block work on `job_id`
    (SQLite: the database write lock is free; others: the job's rows are not locked)."""
    return kit_for(database_url).row_unlocked(database_url, job_id)


def migrate(database_url: str) -> None:
    from duetime.store import open_store

    store = open_store(database_url)
    try:
        store.migrate()
    finally:
        store.close()


def broker_race_recovered(line: str, records: list[Any]) -> bool:
    """RabbitMQ 3.10 may answer a consume on a quorum queue that another connection declared a
    moment before with INTERNAL_ERROR (its log: badmatch {error,noproc}) and close the
    connection; aiormq logs that at error level. The worker logs broker.unavailable, connects
    again and consumes: a fault of the broker that duetime recovers from, not a problem of
    duetime's. Only that line, only when the recovery followed it in the same log."""
    if "aiormq.connection" not in line or "INTERNAL_ERROR" not in line:
        return False
    events = [r.get("event") for r in records if isinstance(r, dict)]
    after_unavailable = (
        events[events.index("broker.unavailable") :] if "broker.unavailable" in events else []
    )
    return "broker.consuming" in after_unavailable


def start_server(
    url: str, tmp_path: Path, *extra: str, wait: float = 90
) -> tuple[subprocess.Popen[bytes], str]:
    """`duetime serve` on a free port, once it answers /healthz (within `wait` seconds: a
    loaded 2-core machine can take long to import it): the process and its base URL."""
    port = free_port()
    log_path = tmp_path / f"serve-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(DUETIME), "serve", "--database-url", url, "--port", str(port), *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=base_env(),
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + wait
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(
                f"duetime serve (exit {proc.poll()}) did not answer /healthz: "
                f"{log_path.read_text()!r}"
            )
        time.sleep(0.1)

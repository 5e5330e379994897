"""Subprocesses: a system's measured steps and its worker processes, each started with the
system's own interpreter, and a probe that waits for jobs to be done."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import DB_URL_ENV, RECORD_DIR_ENV
from bench.dbs import Database
from bench.systems.base import System

log = logging.getLogger("bench")

ROOT = Path(__file__).resolve().parent.parent


class Failed(Exception):
    """A system could not do a workload: the message goes into the table as a note."""


def _env(url: str, record_dir: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "bench"), str(ROOT)])
    env[DB_URL_ENV] = url
    env["DUETIME_DATABASE_URL"] = url
    if record_dir is not None:
        env[RECORD_DIR_ENV] = str(record_dir)
    env.pop("VIRTUAL_ENV", None)
    return env


def run_step(system: System, step: str, params: dict[str, Any], timeout: float) -> Any:
    """Run one step in the system's interpreter; its JSON result."""
    argv = [str(system.python), "-m", system.module, step, json.dumps(params)]
    try:
        proc = subprocess.run(
            argv,
            cwd=ROOT,
            env=_env(params.get("url", ""), None),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise Failed(f"{step} timed out after {timeout:.0f} s") from None
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        log.error("%s %s failed:\n%s", system.name, step, proc.stderr[-4000:])
        raise Failed(f"{step} failed: {lines[-1] if lines else f'exit {proc.returncode}'}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def peak_rss_mib(pid: int) -> float | None:
    """VmHWM of a live process, in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Workers:
    """`count` worker processes of a system, logging to files under `log_dir`."""

    def __init__(
        self, system: System, db: Database, count: int, record_dir: Path, log_dir: Path
    ) -> None:
        self.system = system
        self.db = db
        self.count = count
        self.record_dir = record_dir
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def __enter__(self) -> Workers:
        self.record_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = _env(self.db.url, self.record_dir)
        for i in range(self.count):
            path = self.log_dir / f"{self.system.name}-worker{i}.log"
            with path.open("wb") as out:
                self.procs.append(
                    subprocess.Popen(
                        self.system.worker_argv(self.db.url),
                        cwd=ROOT,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
            self.logs.append(path)
        return self

    def check_alive(self) -> None:
        for proc, path in zip(self.procs, self.logs, strict=True):
            code = proc.poll()
            if code is not None:
                tail = path.read_text(errors="replace").strip().splitlines()[-3:]
                raise Failed(f"worker exited with {code}: {' | '.join(tail)[-300:]}")

    def peak_rss_mib(self) -> list[float]:
        found = [peak_rss_mib(p.pid) for p in self.procs]
        return [m for m in found if m is not None]

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        stop_processes(self.procs, self.system.name)
        self.procs = []


def stop_processes(procs: list[subprocess.Popen[bytes]], name: str) -> None:
    """SIGTERM to each of `procs` still running, then up to 40 s for all of them to end; one
    that does not is killed (and logged, as a worker of `name`)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 40
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s worker %d ignored SIGTERM; killing it", name, proc.pid)
            proc.kill()
            proc.wait()


PROBE_SHARE = 0.05  # the probe may keep one core busy this much of the time, at most


def pause_probe(started: float, took: float, interval: float) -> None:
    """Sleep until the next probe is due: `interval` s after the last one began (`started`,
    time.time()), or later when it was slow (`took` s), so that probing keeps at most
    PROBE_SHARE of one core busy."""
    wait = max(interval, took / PROBE_SHARE)
    time.sleep(max(0.0, wait - (time.time() - started)))


def wait_done(
    system: System,
    db: Database,
    enqueued: int,
    target: int,
    workers: Workers | None,
    timeout: float,
    interval: float = 0.1,
) -> list[tuple[float, int]]:
    """Poll the system's tables until `target` jobs are done: every `interval` s, or less
    often when the query is slow, so that the probe uses at most PROBE_SHARE of one core.

    Returns the samples (wall clock, jobs done). Raises Failed on a timeout or a dead worker.
    """
    samples: list[tuple[float, int]] = []
    deadline = time.time() + timeout
    while True:
        t = time.time()
        done = system.done(db.count(system.done_query), enqueued)
        took = time.time() - t
        samples.append((t, done))
        if done >= target:
            return samples
        if workers is not None:
            workers.check_alive()
        if t > deadline:
            raise Failed(f"timed out after {timeout:.0f} s with {done} of {target} jobs done")
        pause_probe(t, took, interval)

"""A process whose wall clock is off by a fixed amount, under libfaketime (the clock skew tests,
tests/integration/test_clock_skew.py, and the skewed workers of `make chaos-failover`).

skewed_env() returns an environment in which a Python process reads time.time() and
datetime.now() `skew` seconds off (LD_PRELOAD=libfaketime, FAKETIME="+30s"), its monotonic
clock left true. Needs libfaketime (`apt-get install -y faketime`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

# libfaketime 0.9.10 answers EINVAL to the absolute monotonic deadline CPython's time.sleep
# gives clock_nanosleep (and hangs it when the monotonic clock is faked too), while waits on a
# lock (threading, asyncio's selector) keep working: a skewed process sleeps on an Event
SLEEP_SHIM = """
import threading
import time


def _sleep(seconds):
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    threading.Event().wait(seconds)


time.sleep = _sleep
"""


def missing() -> str | None:
    """Why a skewed process cannot be started here, or None."""
    if not FAKETIME.exists():
        return f"{FAKETIME} is missing: install libfaketime (apt-get install -y faketime)"
    return None


def skewed_env(base: Mapping[str, str], site: Path, skew: float) -> dict[str, str]:
    """`base` with libfaketime shifting the wall clock by `skew` seconds; `site` is a directory
    for the time.sleep shim (a sitecustomize.py put first on PYTHONPATH)."""
    why = missing()
    if why is not None:
        raise RuntimeError(why)
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(SLEEP_SHIM)
    env = dict(base)
    env.update(LD_PRELOAD=str(FAKETIME), FAKETIME=f"{skew:+.0f}s", FAKETIME_DONT_FAKE_MONOTONIC="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), base.get("PYTHONPATH")) if p)
    return env

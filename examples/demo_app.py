"""The demo's tasks: one flaky, one doomed, one rate-limited, one plain (run delayed)."""

from __future__ import annotations

import asyncio

import duetime

app = duetime.App()  # DUETIME_DATABASE_URL is set by examples/demo.py

quick = duetime.RetryPolicy(base=0.5, cap=2.0)


@app.task(name="demo.flaky", retry=quick, max_attempts=5)
def flaky(order: str) -> str:
    """Fails twice (a transient network error), then succeeds."""
    if duetime.current().attempt <= 2:
        raise ConnectionError(f"payment provider unreachable while charging {order}")
    return "charged"


@app.task(name="demo.doomed", retry=quick, max_attempts=3)
def doomed(report: str) -> None:
    """Always fails: ends dead after its third attempt, every error kept."""
    raise ValueError(f"report {report!r} refers to a table that does not exist")


@app.task(name="demo.rate_limited", max_attempts=3)
async def rate_limited(user: int) -> None:
    """The first call is answered with HTTP 429 and Retry-After: 2; the retry honours it."""
    if duetime.current().attempt == 1:
        raise duetime.Retry(after=2, reason="HTTP 429 Too Many Requests (Retry-After: 2)")
    await asyncio.sleep(0.05)


@app.task(name="demo.reminder")
async def reminder(text: str) -> None:
    """A plain job; the demo enqueues it with a delay."""
    await asyncio.sleep(0.05)


@app.task(name="demo.invalid")
def invalid(email: str) -> None:
    """A permanent error: no retry can fix a malformed address."""
    raise duetime.PermanentError(f"{email!r} is not a valid e-mail address")

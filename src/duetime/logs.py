"""Structured logs: every transition is one record with an event name and key=value fields."""

from __future__ import annotations

import json
import logging
from typing import Any

from duetime.core.errors import DuetimeError


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log `event` with fields; text output reads `event k=v ...`, JSON output keeps the fields."""
    if not logger.isEnabledFor(level):
        return  # per-job events cost nothing when their level is off
    text = " ".join(f"{k}={_fmt(v)}" for k, v in fields.items())
    logger.log(level, "%s %s", event, text, extra={"duetime_event": event, "duetime": fields})


def error_field(exc: BaseException) -> str:
    """An exception as a log field: duetime's own errors whole (one line that says what was
    wrong and what to do), any other as its repr, cut at 200 characters."""
    return str(exc) if isinstance(exc, DuetimeError) else repr(exc)[:200]


def _fmt(value: Any) -> str:
    text = str(value)
    return json.dumps(text) if (" " in text or not text) else text


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        event = getattr(record, "duetime_event", None)
        if event:
            payload["event"] = event
            payload.update(getattr(record, "duetime", {}))
        else:
            payload["message"] = record.getMessage()
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


def configure(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    # one handler on the root logger, so libraries' warnings (psycopg's pool during an outage)
    # come out in the same format; duetime's own records at the chosen level
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    ours = logging.getLogger("duetime")
    ours.handlers[:] = []
    ours.setLevel(level.upper())
    ours.propagate = True

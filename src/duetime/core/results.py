"""A handler's return value as a stored result, and a handler's progress report: the bounds
and the checks, the same for the worker, the App, the CLI and the API (docs/workflows.md)."""

from __future__ import annotations

import json
import math
from typing import Any

from duetime.core.errors import ConfigurationError, InvalidRequest

# a result is stored as compact JSON of at most this many bytes (UTF-8), unless the App
# (result_max_bytes=) or the task (@app.task(result_max_bytes=)) says otherwise
DEFAULT_MAX_RESULT_BYTES = 64 * 1024
# no limit may be set above this: a result travels in the finish's batch, which every dialect
# must take in one statement (MariaDB's max_allowed_packet is 16 MiB by default)
MAX_RESULT_BYTES_CEILING = 4 * 1024 * 1024
# a progress message is cut at no point: a longer one is refused (the handler's bug to fix)
MAX_PROGRESS_MESSAGE = 200


class ResultRejected(Exception):
    """The handler's return value cannot be stored: the attempt fails permanently with this
    message (its job ends dead, as any permanent failure)."""


def check_result_limit(limit: int, what: str = "result_max_bytes") -> int:
    """`limit` as a result size limit, or ConfigurationError saying the bounds."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise ConfigurationError(f"{what} must be an integer number of bytes, not {limit!r}")
    if not 1 <= limit <= MAX_RESULT_BYTES_CEILING:
        raise ConfigurationError(
            f"{what} must be between 1 and {MAX_RESULT_BYTES_CEILING} bytes, not {limit}"
        )
    return limit


def encode_result(value: Any, limit: int) -> str | None:
    """The compact JSON text of a handler's return value, None for None; ResultRejected when
    it is not JSON-serialisable (NaN and infinities included) or its text is over `limit`
    bytes. Never cut: a result is stored whole or not at all."""
    if value is None:
        return None
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ResultRejected(
            f"the handler returned a {type(value).__name__} that is not JSON-serialisable "
            f"({exc}); return JSON data (dict, list, str, int, float, bool, None), or store it "
            "elsewhere and return its key"
        ) from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ResultRejected(
            f"the handler's result is {size} bytes of JSON, over the result limit of {limit} "
            "bytes; return less (store large data elsewhere and return its key), or raise the "
            "limit (result_max_bytes= on the App or the task)"
        )
    if not _utf8(text):  # JSON escapes a NUL, not an unpaired surrogate
        raise ResultRejected(
            "the handler's result holds an unpaired surrogate, which no database stores as "
            "text; return text without one"
        )
    return text


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def decode_result(text: Any) -> Any:
    """A stored result (JSON text, or None) as its value."""
    if text is None:
        return None
    return json.loads(text)


def check_progress(fraction: Any, message: Any = None) -> tuple[float, str | None]:
    """A progress report as stored: `fraction` a number from 0 to 1, `message` None or text of
    at most MAX_PROGRESS_MESSAGE characters; InvalidRequest otherwise."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise InvalidRequest(f"progress must be a number from 0 to 1, not {fraction!r}")
    value = float(fraction)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidRequest(f"progress must be a number from 0 to 1, not {fraction!r}")
    if message is not None:
        if not isinstance(message, str):
            raise InvalidRequest(f"a progress message must be text, not {type(message).__name__}")
        if len(message) > MAX_PROGRESS_MESSAGE:
            raise InvalidRequest(
                f"a progress message is at most {MAX_PROGRESS_MESSAGE} characters, not "
                f"{len(message)}; shorten it"
            )
        if "\x00" in message or not _utf8(message):
            raise InvalidRequest("a progress message cannot hold a NUL or an unpaired surrogate")
    return value, message

"""The async twin of a blocking method: the same code, run in a worker thread."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def async_twin(method: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """The async twin of a blocking method: the same code, run in a worker thread."""

    @functools.wraps(method)
    async def twin(*args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, *args, **kwargs)

    twin.__name__ = twin.__qualname__ = f"a{method.__name__}"
    return twin

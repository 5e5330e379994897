"""wait_shielded: how an attempt waits for its async handler, as wait_for(shield(handler))
would: the result or the error, a timeout that leaves the handler running, and a cancelled
caller that does not cancel the handler (asyncio only; no database)."""

from __future__ import annotations

import asyncio

import pytest

from duetime.runtime.attempt import wait_shielded


async def sleeper(seconds: float, result: str = "done") -> str:
    await asyncio.sleep(seconds)
    return result


async def failing() -> None:
    await asyncio.sleep(0)
    raise ValueError("boom")


def test_returns_the_result_of_a_handler_within_its_timeout() -> None:
    async def main() -> str:
        return await wait_shielded(asyncio.ensure_future(sleeper(0.01)), 5.0)  # type: ignore[no-any-return]

    assert asyncio.run(main()) == "done"


def test_waits_without_a_timeout() -> None:
    async def main() -> str:
        return await wait_shielded(asyncio.ensure_future(sleeper(0.01, "x")), None)  # type: ignore[no-any-return]

    assert asyncio.run(main()) == "x"


def test_a_handler_that_is_done_already_answers_at_once() -> None:
    async def main() -> str:
        handler = asyncio.ensure_future(sleeper(0, "early"))
        await asyncio.sleep(0.01)
        assert handler.done()
        return await wait_shielded(handler, 0.001)  # type: ignore[no-any-return]

    assert asyncio.run(main()) == "early"


def test_raises_what_the_handler_raised() -> None:
    async def main() -> None:
        await wait_shielded(asyncio.ensure_future(failing()), 5.0)

    with pytest.raises(ValueError, match="boom"):
        asyncio.run(main())


def test_a_timeout_raises_and_leaves_the_handler_running() -> None:
    async def main() -> None:
        handler = asyncio.ensure_future(sleeper(0.2))
        with pytest.raises(TimeoutError):
            await wait_shielded(handler, 0.01)
        assert not handler.done()
        assert await handler == "done"

    asyncio.run(main())


def test_a_handler_that_raises_timeout_error_itself_is_not_a_timeout_of_the_wait() -> None:
    async def times_out() -> None:
        raise TimeoutError("the handler's own HTTP call")

    async def main() -> None:
        handler = asyncio.ensure_future(times_out())
        with pytest.raises(TimeoutError, match="HTTP"):
            await wait_shielded(handler, 5.0)
        assert handler.done()

    asyncio.run(main())


def test_a_cancelled_handler_raises_cancelled_error() -> None:
    async def main() -> None:
        handler = asyncio.ensure_future(sleeper(5))
        asyncio.get_running_loop().call_later(0.01, handler.cancel)
        with pytest.raises(asyncio.CancelledError):
            await wait_shielded(handler, 5.0)

    asyncio.run(main())


def test_cancelling_the_caller_does_not_cancel_the_handler() -> None:
    async def main() -> None:
        handler = asyncio.ensure_future(sleeper(0.05))
        caller = asyncio.ensure_future(wait_shielded(handler, 5.0))
        await asyncio.sleep(0.01)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert not handler.done()
        assert await handler == "done"

    asyncio.run(main())

"""The listen supervisor's waits give way to a cancellation: a worker that stops closes every
listener, and a listener that swallowed its cancellation kept `Worker.shutdown` waiting forever."""

import asyncio

from tasksapp.engine.listener import _first_of


def test_a_cancelled_wait_for_the_first_acknowledgement_is_cancelled_at_every_step() -> None:
    """The stream ends first, the wait for its acknowledgement is being put away, and the worker
    stops just then: at whatever step of that the cancellation lands, the caller ends cancelled.
    (A CI run hung there: the supervisor went back to waiting for changes, `cancelling`.)"""

    async def cancelled_after(steps: int) -> bool:
        stream = asyncio.create_task(asyncio.sleep(0))
        waiting = asyncio.create_task(_first_of(stream, asyncio.Event()))
        await stream
        for _ in range(steps):
            await asyncio.sleep(0)
        if waiting.done():
            return True  # finished before the cancellation came: nothing to swallow
        waiting.cancel()
        await asyncio.wait([waiting], timeout=5)
        return waiting.cancelled()

    async def main() -> list[int]:
        return [steps for steps in range(8) if not await cancelled_after(steps)]

    assert asyncio.run(main()) == []

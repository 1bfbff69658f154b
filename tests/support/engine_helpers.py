"""Running the worker engine from synchronous tests, one step or a few seconds at a time."""

import asyncio
import time
from collections.abc import Callable

from tasksapp.engine.worker import Worker
from tasksapp.models import RemoteTask


def run_worker(seconds: float, **options: object) -> Worker:
    """Run a worker in this process for `seconds`, then stop it cleanly (leases released)."""

    async def main() -> Worker:
        worker = Worker(refresh_seconds=0.2, **options)  # type: ignore[arg-type]
        await worker.run(duration=seconds)
        return worker

    return asyncio.run(main())


STOP_SECONDS = 30  # a worker's own shutdown takes well under a second


def run_worker_until(condition: Callable[[], bool], timeout: float = 20.0, **options: object) -> Worker:
    """Run a worker until `condition()` (checked between steps) holds, or fail after `timeout`."""

    async def main() -> Worker:
        from asgiref.sync import sync_to_async

        worker = Worker(refresh_seconds=0.2, **options)  # type: ignore[arg-type]
        runner = asyncio.create_task(worker.run())
        deadline = time.monotonic() + timeout
        try:
            while not await sync_to_async(condition)():
                assert time.monotonic() < deadline, "the worker did not get there in time"
                assert not runner.done(), runner.exception() if runner.done() else "stopped"
                await asyncio.sleep(0.1)
        finally:
            worker.stop()
            try:  # Bound: a worker that does not stop fails the test instead of hanging the run
                await asyncio.wait_for(runner, STOP_SECONDS)
            except TimeoutError:
                raise AssertionError(f"the worker did not stop within {STOP_SECONDS} s") from None
        return worker

    return asyncio.run(main())


def status_of(task: RemoteTask) -> str:
    task.refresh_from_db()
    return task.status

"""The worker's heartbeat (what /healthz, /metrics and the overview judge it alive by) is written
on its own database thread, so a backlog of other database steps cannot hold it back."""

import asyncio
import time
from datetime import datetime

import pytest
from asgiref.sync import sync_to_async

from tasksapp.engine.worker import Worker
from tasksapp.lib.connections import db_step
from tasksapp.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db(transaction=True)


def last_beat() -> datetime | None:
    return WorkerHeartbeat.objects.values_list("last_beat_at", flat=True).first()


def test_a_busy_database_thread_does_not_hold_back_the_heartbeat() -> None:
    """After a database outage under load, hundreds of polls' writes wait for the worker's database
    thread; the beat queued behind them and the worker looked dead ("workers alive: 0")."""

    async def main() -> tuple[datetime | None, datetime | None]:
        worker = Worker(refresh_seconds=0.2, heartbeat_seconds=0.2)
        runner = asyncio.create_task(worker.run())
        read = sync_to_async(last_beat, thread_sensitive=False)
        try:
            first = await read()
            while first is None:
                await asyncio.sleep(0.05)
                first = await read()
            while await read() == first:  # the worker beats on its own, past its start-up
                await asyncio.sleep(0.05)
            before = await read()
            busy = db_step(time.sleep)  # the shared database thread, busy for 3 s
            backlog = asyncio.ensure_future(busy(3.0))
            await asyncio.sleep(2.0)
            during = await read()
            await backlog
        finally:
            worker.stop()
            await runner
        return before, during

    before, during = asyncio.run(main())
    assert before is not None and during is not None
    assert (during - before).total_seconds() >= 1.0, "no beat while the database thread was busy"

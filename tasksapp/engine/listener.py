"""One subscriptions/listen stream per server, covering that server's tasks; polling stays the baseline.

A stream is rebuilt (coalesced) when tasks are added; the old one closes once the new one's ack is
in, so nothing falls between them. After a reconnect every task is polled once, because nothing
is replayed. While a stream is healthy its tasks are polled only as a slow safety net.
"""

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async

from tasksapp import services
from tasksapp.engine.tracking import ServerState, TrackedTask, backoff_delay, poll_delay
from tasksapp.mcpclient import DetailedTask, ListenAck, ListenEnded, ListenUnsupported, McpError

if TYPE_CHECKING:
    from tasksapp.engine.worker import Worker

log = logging.getLogger(__name__)
COALESCE_SECONDS = 0.2


class ListenSupervisor:
    def __init__(self, worker: "Worker", server: ServerState) -> None:
        self.worker = worker
        self.server = server
        self.connected = False
        self._desired: set[str] = set()
        self._listening: set[str] = set()
        self._changed = asyncio.Event()
        self._streams: list[asyncio.Task[None]] = []
        self._failures = 0
        self._runner = asyncio.create_task(self._run())

    def want(self, remote_ids: set[str]) -> None:
        """The tasks the worker holds on this server; only additions need a new stream."""
        self._desired = remote_ids
        if remote_ids - self._listening:
            self._changed.set()

    async def close(self) -> None:
        self._runner.cancel()
        for stream in self._streams:
            stream.cancel()
        await asyncio.gather(self._runner, *self._streams, return_exceptions=True)
        self._uncover(set(self._listening))

    async def _run(self) -> None:
        while True:
            await self._changed.wait()
            await asyncio.sleep(COALESCE_SECONDS)
            self._changed.clear()
            ids = set(self._desired)
            if not ids:
                continue
            self._streams = [s for s in self._streams if not s.done()]
            self._streams.append(asyncio.create_task(self._stream(ids, previous=list(self._streams))))

    async def _stream(self, ids: set[str], previous: list[asyncio.Task[None]]) -> None:
        acked_at = 0.0
        try:
            async for event in self.server.client.listen(sorted(ids)):
                if isinstance(event, ListenAck):
                    acked_at = time.monotonic()
                    await self._acknowledged(ids, set(event.task_ids), previous)
                elif isinstance(event, ListenEnded):
                    break
                else:
                    await self._pushed(event)
        except asyncio.CancelledError:
            raise
        except ListenUnsupported:
            await self._unsupported()
            return
        except McpError as exc:
            log.info("listen stream to %s ended: %s", self.server.name, exc)
        except Exception:  # the loop boundary: a failed write must not end push for this server
            log.exception("listen stream to %s failed; reconnecting", self.server.name)
        self.connected = False
        self._uncover(ids)
        short_lived = not acked_at or time.monotonic() - acked_at < 5
        self._failures = self._failures + 1 if short_lived else 0
        await asyncio.sleep(backoff_delay(max(self._failures, 1)))
        self._listening -= ids
        self._changed.set()

    async def _acknowledged(
        self, ids: set[str], honoured: set[str], previous: list[asyncio.Task[None]]
    ) -> None:
        if not honoured & ids:
            # The server acks listen but will not push these tasks (the SDK drops taskIds): poll only.
            await self._unsupported()
            return
        was_covered = set(self._listening)
        self.connected = True
        self._listening = honoured & ids
        for stream in previous:
            stream.cancel()
        await sync_to_async(services.server_set_listen_support)(
            server_id=self.server.server_id, supported=True
        )
        for remote_id in self._listening:
            task = self._task(remote_id)
            if task is None:
                continue
            task.pushed = True
            if remote_id not in was_covered and not task.in_flight:
                self.worker.schedule(task, 0.0)  # catch up: nothing is replayed on a new stream

    async def _pushed(self, snapshot: DetailedTask) -> None:
        task = self._task(snapshot.task_id)
        if task is None:
            return
        self.worker.stats.pushes += 1
        await self.worker.apply(task, snapshot, "push")

    async def _unsupported(self) -> None:
        self.server.listen_wanted = False
        self.connected = False
        await sync_to_async(services.server_set_listen_support)(
            server_id=self.server.server_id, supported=False
        )

    def _uncover(self, ids: set[str]) -> None:
        for remote_id in ids:
            task = self._task(remote_id)
            if task is not None and task.pushed:
                task.pushed = False
                if not task.in_flight:
                    self.worker.schedule(task, poll_delay(task.poll_interval_ms, covered=False))

    def _task(self, remote_id: str) -> "TrackedTask | None":
        pk = self.server.remote_to_pk.get(remote_id)
        return self.worker.tasks.get(pk) if pk is not None else None

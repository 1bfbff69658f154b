"""One subscriptions/listen stream per server, covering that server's tasks; polling stays the baseline.

A stream is rebuilt (coalesced) when tasks are added; the old one closes once the new one's ack is
in, so nothing falls between them. After a reconnect every task is polled once, because nothing
is replayed. While a stream is healthy its tasks are polled only as a slow safety net.

One attempt at a time: a new stream is opened only after the previous attempt was acknowledged
or ended, never while the server is backing off, and an attempt whose acknowledgement does not
come within MCP_LISTEN_ACK_TIMEOUT_MS is closed. Only a definite refusal (HTTP 404/405, -32601)
means the server has no listen; an acknowledgement that names none of the tasks means it does not
know them (it restarted, or they expired): they are polled, and listen is tried again for tasks
added later.

A pushed snapshot is never written while the stream waits: it is kept (the newest per task, with
when the first unwritten one arrived) and one writer per stream writes what arrived meanwhile in
one database step, so the stream is read as fast as it arrives and the safety-net poll does not see
changes first on a worker short of CPU (docs/benchmarks.md, mirror lag).

A listener knows the worker only as a TaskBoard: the tasks it holds, their schedule, and where
pushed snapshots are written.
"""

import asyncio
import logging
import time
from collections.abc import AsyncGenerator
from typing import Protocol

from django.conf import settings

from tasksapp import services
from tasksapp.engine.store import db
from tasksapp.engine.tracking import ServerState, TrackedTask, backoff_delay, poll_delay
from tasksapp.mcpclient import DetailedTask, ListenAck, ListenEnded, ListenUnsupported, McpError

log = logging.getLogger(__name__)
COALESCE_SECONDS = 0.2
WRITE_BATCH = 100  # pushed snapshots written in one database step at most

type Pushed = tuple[TrackedTask, DetailedTask, float | None]  # task, snapshot, when it arrived


class TaskBoard(Protocol):
    """What a listen stream needs from the worker that holds its server's tasks."""

    def tracked(self, pk: int) -> TrackedTask | None:
        """The task this worker holds under `pk`, or None."""
        ...

    def schedule(self, task: TrackedTask, delay: float) -> None:
        """Poll `task` `delay` seconds from now (0: at once), replacing its current due time."""
        ...

    def count_push(self) -> None:
        """A pushed snapshot of a held task arrived."""
        ...

    async def apply_many(self, items: list[Pushed], source: str) -> None:
        """Write what moved of these (task, snapshot, monotonic arrival) items in one database step."""
        ...


class ListenSupervisor:
    def __init__(self, board: TaskBoard, server: ServerState) -> None:
        self.board = board
        self.server = server
        self.connected = False
        self.attempts = 0
        self._desired: set[str] = set()
        self._listening: set[str] = set()
        self._unknown: set[str] = set()  # acknowledged without them: the server does not know them
        self._changed = asyncio.Event()
        self._streams: list[asyncio.Task[None]] = []
        self._failures = 0
        self._retry_at = 0.0  # monotonic; the listener's own back-off after a failed attempt
        self._pending: dict[str, tuple[DetailedTask, float]] = {}  # pushed, not yet written
        self._writer: asyncio.Task[None] | None = None
        self._runner = asyncio.create_task(self._run())

    def want(self, remote_ids: set[str]) -> None:
        """The tasks the worker holds on this server; only additions need a new stream."""
        self._desired = remote_ids
        self._unknown &= remote_ids
        if remote_ids - self._listening - self._unknown:
            self._changed.set()

    async def close(self) -> None:
        self._runner.cancel()
        for stream in self._streams:
            stream.cancel()
        writer = [self._writer] if self._writer is not None else []
        for job in writer:
            job.cancel()
        await asyncio.gather(self._runner, *self._streams, *writer, return_exceptions=True)
        self._uncover(set(self._listening))

    async def _run(self) -> None:
        while True:
            await self._changed.wait()
            await asyncio.sleep(COALESCE_SECONDS)
            await self._wait_out_backoff()
            self._changed.clear()
            ids = self._desired - self._unknown
            if not ids - self._listening:
                continue
            previous = [s for s in self._streams if not s.done()]
            acked = asyncio.Event()
            stream = asyncio.create_task(self._stream(ids, previous, acked))
            self._streams = [*previous, stream]
            self.attempts += 1
            await _first_of(stream, acked)

    async def _wait_out_backoff(self) -> None:
        """Follow the server's back-off (shared with polling) and this listener's own."""
        # A deadline that may move either way (a failed poll extends the server's back-off, another
        # worker's answer ends it: engine.servers), not an event: looked at again every second.
        while (delay := max(self._retry_at, self.server.backoff_until) - time.monotonic()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(min(delay, 1.0))

    async def _stream(self, ids: set[str], previous: list[asyncio.Task[None]], acked: asyncio.Event) -> None:
        acked_at = 0.0
        events = self.server.client.listen(sorted(ids))
        ack_seconds = settings.MCP_LISTEN_ACK_TIMEOUT_MS / 1000
        try:
            async with asyncio.timeout(ack_seconds) as ack_deadline:
                async for event in events:
                    if isinstance(event, ListenAck):
                        ack_deadline.reschedule(None)
                        acked_at = time.monotonic()
                        acked.set()
                        if not await self._acknowledged(ids, set(event.task_ids), previous):
                            return
                    elif isinstance(event, ListenEnded):
                        break
                    else:
                        await self._pushed(event)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            log.info("listen to %s: no acknowledgement within %g s; closed it", self.server.name, ack_seconds)
        except ListenUnsupported:
            await self._unsupported()
            return
        except McpError as exc:
            log.info("listen stream to %s ended: %s", self.server.name, exc)
        except Exception:  # the loop boundary: a failed write must not end push for this server
            log.exception("listen stream to %s failed; reconnecting", self.server.name)
        finally:
            if isinstance(events, AsyncGenerator):
                await events.aclose()  # an abandoned stream releases its connection now, not at exit
        self._lost(ids, acked_at)

    def _lost(self, ids: set[str], acked_at: float) -> None:
        self.connected = False
        self._uncover(ids)
        short_lived = not acked_at or time.monotonic() - acked_at < 5
        self._failures = self._failures + 1 if short_lived else 0
        self._retry_at = time.monotonic() + backoff_delay(max(self._failures, 1))
        self._listening -= ids
        self._changed.set()

    async def _acknowledged(
        self, ids: set[str], honoured: set[str], previous: list[asyncio.Task[None]]
    ) -> bool:
        """Returns False when the server knows none of the tasks (the stream is then closed)."""
        self._unknown |= ids - honoured
        if not honoured & ids:
            log.info("listen to %s: the server knows none of %d tasks; polled", self.server.name, len(ids))
            return False
        was_covered = set(self._listening)
        self.connected = True
        self._listening = honoured & ids
        for stream in previous:
            stream.cancel()
        await db(services.server_set_listen_support)(server_id=self.server.server_id, supported=True)
        for remote_id in self._listening:
            task = self._task(remote_id)
            if task is None:
                continue
            task.pushed = True
            if remote_id not in was_covered and not task.in_flight:
                self.board.schedule(task, 0.0)  # catch up: nothing is replayed on a new stream
        return True

    async def _pushed(self, snapshot: DetailedTask) -> None:
        task = self._task(snapshot.task_id)
        if task is None:
            return
        self.board.count_push()
        earlier = self._pending.get(snapshot.task_id)
        self._pending[snapshot.task_id] = (snapshot, earlier[1] if earlier else time.monotonic())
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_pending())

    async def _write_pending(self) -> None:
        """Write the pushed snapshots in arrival order, the newest of each task only; what arrived
        while one database step ran goes in the next one (up to WRITE_BATCH)."""
        while self._pending:
            batch: list[Pushed] = []
            while self._pending and len(batch) < WRITE_BATCH:
                remote_id = next(iter(self._pending))
                snapshot, received = self._pending.pop(remote_id)
                if (task := self._task(remote_id)) is not None:
                    batch.append((task, snapshot, received))
            if not batch:
                continue
            try:
                await self.board.apply_many(batch, "push")
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop boundary: a failed write is caught up by a poll soon
                log.exception("writing %d pushed change(s) failed; polling them", len(batch))
                for task, _, _ in batch:
                    if not task.in_flight:
                        self.board.schedule(task, 1.0)

    async def _unsupported(self) -> None:
        self.server.listen_wanted = False
        self.connected = False
        await db(services.server_set_listen_support)(server_id=self.server.server_id, supported=False)

    def _uncover(self, ids: set[str]) -> None:
        for remote_id in ids:
            task = self._task(remote_id)
            if task is not None and task.pushed:
                task.pushed = False
                if not task.in_flight:
                    self.board.schedule(task, poll_delay(task.poll_interval_ms, covered=False))

    def _task(self, remote_id: str) -> TrackedTask | None:
        pk = self.server.remote_to_pk.get(remote_id)
        return self.board.tracked(pk) if pk is not None else None


async def _first_of(stream: asyncio.Task[None], acked: asyncio.Event) -> None:
    """Wait until the stream is acknowledged or has ended. A cancellation of the caller always
    propagates: the waiter is waited for with asyncio.wait, which does not raise its
    CancelledError, so none can be taken for the caller's own and swallowed."""
    waiter = asyncio.create_task(acked.wait())
    try:
        await asyncio.wait([stream, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        await asyncio.wait([waiter])

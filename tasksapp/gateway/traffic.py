"""Counting the gateway's requests in this process: per minute, server, agent, method and tool, with
a latency histogram; written to the database every MCP_GATEWAY_TRAFFIC_FLUSH_SECONDS by a task of
the process's own event loop (started by the first request), never on a request's path."""

import asyncio
import contextlib
import logging
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from tasksapp.lib.connections import CANNOT_WRITE, db_step
from tasksapp.services.traffic import Tally, TrafficKey, traffic_record

log = logging.getLogger(__name__)


class TrafficCounter:
    def __init__(self) -> None:
        self._tallies: dict[TrafficKey, Tally] = {}
        self._seen: dict[int, datetime] = {}
        self._flusher: asyncio.Task[None] | None = None

    def record(
        self, *, server: int, agent: int, method: str, tool: str, ms: float | None, error: bool
    ) -> None:
        now = timezone.now()
        key = (now.replace(second=0, microsecond=0), server, agent, method, tool)
        self._tallies.setdefault(key, Tally()).add(ms, error=error)
        self._seen[agent] = now
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(
                self._flush_forever(), name="gateway-traffic"
            )

    async def flush(self) -> None:
        tallies, seen, self._tallies, self._seen = self._tallies, self._seen, {}, {}
        if not tallies:
            return
        try:
            await db_step(traffic_record)(tallies=tallies, seen=seen)
        except CANNOT_WRITE as exc:  # the figures wait for the next flush
            log.warning("gateway: traffic figures not written yet (%s)", exc)
            for key, tally in tallies.items():
                mine = self._tallies.setdefault(key, Tally())
                mine.calls, mine.errors = mine.calls + tally.calls, mine.errors + tally.errors
                mine.total_ms += tally.total_ms
                mine.buckets = tally.merge(mine.buckets)
            self._seen = {**seen, **self._seen}

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(settings.MCP_GATEWAY_TRAFFIC_FLUSH_SECONDS)
            with contextlib.suppress(Exception):
                await self.flush()

"""In-memory state of what one worker watches: kept small, since a worker may hold 10,000 tasks."""

import asyncio
import random
import time
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings

from tasksapp.mcpclient import McpClient
from tasksapp.services.tasks import Fingerprint


@dataclass(slots=True)
class TrackedTask:
    pk: int
    server_id: int
    remote_id: str
    fingerprint: Fingerprint | None
    poll_interval_ms: int | None
    ttl_deadline: float | None  # wall-clock seconds; None when the TTL is unlimited or unknown
    due: float = 0.0  # monotonic seconds
    errors: int = 0
    in_flight: bool = False
    pushed: bool = False  # covered by a healthy listen stream
    nudged: bool = False  # asked to poll again while a poll was in flight: poll once more after it
    gateway: bool = False  # started by an agent: the gateway answers it from the mirror while fresh


def poll_delay(interval_ms: int | None, *, covered: bool) -> float:
    """Seconds until the next poll: the server's interval, floored, defaulted, jittered."""
    if covered:
        base = settings.MCP_POLL_SAFETY_NET_MS
    elif interval_ms is None:
        base = settings.MCP_POLL_DEFAULT_MS
    else:
        base = max(interval_ms, settings.MCP_POLL_FLOOR_MS)
    jitter = settings.MCP_POLL_JITTER
    return base * random.uniform(1 - jitter, 1 + jitter) / 1000


def backoff_delay(failures: int, retry_after: float | None = None) -> float:
    """Exponential back-off with jitter, never shorter than the server's Retry-After."""
    base = settings.MCP_BACKOFF_BASE_MS * 2 ** min(failures - 1, 20)
    delay: float = min(base, settings.MCP_BACKOFF_MAX_MS) * random.uniform(0.8, 1.2) / 1000
    return max(delay, retry_after or 0.0)


@dataclass(slots=True)
class ServerState:
    server_id: int
    name: str
    client: McpClient
    signature: tuple[object, ...]  # url, encrypted headers, era, timeouts: rebuild the client on change
    listen_wanted: bool
    recorded_failing: bool = False  # this worker's recorded view of the server is failing
    failed_at: datetime | None = None  # when this worker's current back-off began or grew
    yielded_to: datetime | None = None  # another worker's answer this worker's back-off ended for
    others_failing: bool = False  # it fails for another worker: record answers more often
    probing: bool = False
    failures: int = 0
    backoff_until: float = 0.0  # monotonic
    last_success_recorded: float = 0.0
    polls_in_flight: int = 0  # its client is closed only once they have ended
    idle: asyncio.Event = field(default_factory=asyncio.Event)  # set whenever no poll is in flight
    remote_to_pk: dict[str, int] = field(default_factory=dict)

    def poll_started(self) -> None:
        self.polls_in_flight += 1
        self.idle.clear()

    def poll_ended(self) -> None:
        self.polls_in_flight -= 1
        if not self.polls_in_flight:
            self.idle.set()

    def backing_off(self, now: float | None = None) -> bool:
        return self.backoff_until > (now if now is not None else time.monotonic())

"""The Redis channel layer with connections that survive quiet sockets and mass disconnects, and
that never drops a message in silence.

channels_redis builds a plain redis-py ConnectionPool, which raises "Too many connections" as
soon as more commands run at once than the pool holds: 500 websockets closing together then
fail to leave their groups, and the dead channels stay there until the group expires. A
BlockingConnectionPool makes the extra commands wait for a connection instead. The socket
timeout is set explicitly (settings.CHANNEL_LAYERS): redis-py 8 defaults it to 5 s, the same
as channels_redis's blocking read, so a quiet receive times out and the websocket dies.

Losses: channels_redis drops a message to a full channel (`capacity` messages waiting)
and says so only at INFO ("N of M channels over capacity in group G"); it also drops the oldest
message of a socket's local buffer when that is full, saying nothing. Both are counted where they
happen (the layer's group_send, from its script's count of full channels, and the buffer's put)
and logged at WARNING, as is every re-sync a process's live hub starts after noticing a gap
(tasksapp/live/hub.py). The counts live in Redis when the layer is Redis, so every process adds
to the same figures and any web process serves them in /metrics (tasksapp/metrics.py); with the
in-memory layer (one process) they live in the process.

Redis away: every process says so in a few lines, not a traceback per socket or per message
(`reachability`): one WARNING when it is first found unreachable, one every STILL_AWAY_SECONDS
while it stays so (counting what failed since), one INFO when it answers again (counting what
failed meanwhile).
"""

import asyncio
import collections
import functools
import logging
import threading
import time
from collections import Counter
from typing import Any

import redis.exceptions
from channels.layers import get_channel_layer
from channels_redis.core import BoundedQueue, RedisChannelLayer
from redis.asyncio import BlockingConnectionPool

log = logging.getLogger(__name__)

DROPPED = ("channel_full", "buffer_full")  # mcp_live_dropped_total{where}
RESYNCS = ("gap",)  # mcp_live_resyncs_total{reason}: a socket noticed a gap and caught up

LOG_EVERY_SECONDS = 60.0
STILL_AWAY_SECONDS = 30.0
# After Redis answers again, a failure of a step begun before (redis-py retries a refused
# connection for a while) is not a new outage: the few seconds after "back" fail silently.
SETTLE_SECONDS = 5.0
# What redis-py raises when Redis cannot be reached or stops answering (BusyLoadingError, a Redis
# still loading after a restart, is a ConnectionError too); anything else is a fault of its own.
UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
local_counts: Counter[str] = Counter()  # the in-memory layer's figures (one process)
_unflushed: Counter[str] = Counter()  # counted here, not yet added in Redis
_flushing: set["asyncio.Task[None]"] = set()


class Reachability:
    """This process's view of Redis, from what its users report: `failed` when a step of theirs
    found it unreachable (what: a plural noun for the count, "socket(s) closed"), `worked` when one
    got through. Called from the event loop and from the publisher's thread."""

    def __init__(
        self, still_away_seconds: float = STILL_AWAY_SECONDS, settle_seconds: float = SETTLE_SECONDS
    ) -> None:
        self.still_away_seconds = still_away_seconds
        self.settle_seconds = settle_seconds
        self.away_since: float | None = None
        self._lock = threading.Lock()
        self._reported = 0.0
        self._back_at = float("-inf")
        self._recent: Counter[str] = Counter()
        self._total: Counter[str] = Counter()

    def failed(self, what: str, exc: BaseException) -> None:
        now = time.monotonic()
        with self._lock:
            if self.away_since is None and now - self._back_at < self.settle_seconds:
                return
            self._recent[what] += 1
            self._total[what] += 1
            if self.away_since is None:
                self.away_since = self._reported = now
                log.warning(
                    "live: Redis is unreachable (%s): live updates and nudges wait; open pages "
                    "reconnect and catch up once it answers",
                    str(exc).strip().rstrip(".") or type(exc).__name__,
                )
                self._recent.clear()
            elif now - self._reported >= self.still_away_seconds:
                log.warning(
                    "live: Redis still unreachable after %.0f s: %s in the last %.0f s",
                    now - self.away_since,
                    _tally(self._recent),
                    now - self._reported,
                )
                self._reported = now
                self._recent.clear()

    def worked(self) -> None:
        if self.away_since is None:  # the usual case, without the lock
            return
        with self._lock:
            if self.away_since is None:
                return
            log.info(
                "live: Redis answers again after %.0f s; meanwhile %s",
                time.monotonic() - self.away_since,
                _tally(self._total),
            )
            self.away_since, self._back_at = None, time.monotonic()
            self._recent.clear()
            self._total.clear()


def _tally(counts: Counter[str]) -> str:
    return ", ".join(f"{n} {what}" for what, n in counts.most_common()) or "nothing failed"


reachability = Reachability()


# channels_redis 4.3's group_send script: each channel's message added unless the channel holds
# its capacity; returns how many channels were full (their message dropped).
GROUP_SEND_LUA = """
    local over_capacity = 0
    local current_time = ARGV[#ARGV - 1]
    local expiry = ARGV[#ARGV]
    for i=1,#KEYS do
        if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[i + #KEYS]) then
            redis.call('ZADD', KEYS[i], current_time, ARGV[i])
            redis.call('EXPIRE', KEYS[i], expiry)
        else
            over_capacity = over_capacity + 1
        end
    end
    return over_capacity
"""


class PooledRedisChannelLayer(RedisChannelLayer):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A socket's local buffer that overflows drops its oldest message: count it.
        self.receive_buffer: collections.defaultdict[str, _CountingQueue] = collections.defaultdict(
            functools.partial(_CountingQueue, self.capacity)
        )

    def create_pool(self, index: int) -> Any:
        host = dict(self.hosts[index])
        address = host.pop("address")
        return BlockingConnectionPool.from_url(address, **host)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Send to every channel of the group as channels_redis 4.3's group_send does (whose source
        tests/test_redislayer.py pins); a channel already holding `capacity` messages does not get
        it, and each such drop is counted ("channel_full") and logged at WARNING."""
        assert self.require_valid_group_name(group), "Group name not valid"
        key = self._group_key(group)
        connection = self.connection(self.consistent_hash(group))
        await connection.zremrangebyscore(key, min=0, max=int(time.time()) - self.group_expiry)
        channel_names = [x.decode("utf8") for x in await connection.zrange(key, 0, -1)]
        by_connection, messages, capacities = self._map_channel_keys_to_connection(channel_names, message)
        for index, channel_keys in by_connection.items():
            pipe = connection.pipeline()  # as channels_redis does: the previous connection
            for channel_key in channel_keys:
                pipe.zremrangebyscore(channel_key, min=0, max=int(time.time()) - int(self.expiry))
            await pipe.execute()
            args = [messages[k] for k in channel_keys] + [capacities[k] for k in channel_keys]
            connection = self.connection(index)
            full = await connection.eval(
                GROUP_SEND_LUA, len(channel_keys), *channel_keys, *args, time.time(), self.expiry
            )
            if full > 0:
                _unflushed["channel_full"] += int(full)
                log.warning(
                    "live: %s of %s channels in group %s were full: message dropped (the pages re-sync)",
                    full,
                    len(channel_names),
                    group,
                )
        if _unflushed:
            await flush(self)

    def counter_key(self, name: str) -> str:
        return f"{self.prefix}:mcp-live:{name}"


class _CountingQueue(BoundedQueue):  # type: ignore[misc]
    """A socket's local buffer. Every drop is counted; the WARNING comes once a minute a buffer
    at most (a socket that stopped reading would otherwise log every message sent to it)."""

    logged_at = float("-inf")
    unlogged = 0

    def put_nowait(self, item: Any) -> None:
        if self.full():
            count("buffer_full")
            self.unlogged += 1
            now = time.monotonic()
            if now - self.logged_at >= LOG_EVERY_SECONDS:
                log.warning(
                    "live: a socket's buffer was full: %d message(s) dropped, the oldest first "
                    "(the page re-syncs)",
                    self.unlogged,
                )
                self.logged_at, self.unlogged = now, 0
        super().put_nowait(item)


def count(name: str, n: int = 1) -> None:
    """Count a dropped message or a page's re-sync. Callable from sync code in the event loop: the
    Redis increment is scheduled, not awaited (and added by the next group_send if no loop runs)."""
    local_counts[name] += n
    layer = get_channel_layer()
    if not isinstance(layer, PooledRedisChannelLayer):
        return
    _unflushed[name] += n
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    task = loop.create_task(flush(layer))
    _flushing.add(task)  # held until done, so the event loop cannot lose it
    task.add_done_callback(_flushing.discard)


async def flush(layer: "PooledRedisChannelLayer") -> None:
    """Add what this process counted to the shared figures in Redis."""
    pending = dict(_unflushed)
    _unflushed.subtract(pending)
    for name in [name for name, n in _unflushed.items() if n <= 0]:
        del _unflushed[name]
    try:
        connection = layer.connection(0)
        for name, n in pending.items():
            if n:
                await connection.incrby(layer.counter_key(name), n)
    except UNREACHABLE as exc:  # retried with the next send
        _unflushed.update(pending)
        reachability.failed("counter update(s) postponed", exc)
    except Exception:  # the figures must never break a send; they are retried with the next one
        _unflushed.update(pending)
        log.exception("live: could not add the drop counters in Redis")


def counts() -> dict[str, int]:
    """The figures for /metrics: from Redis (every process's) or this process's (in-memory layer)."""
    layer = get_channel_layer()
    if not isinstance(layer, PooledRedisChannelLayer):
        return dict(local_counts)
    import redis

    host = dict(layer.hosts[0])
    client = redis.Redis.from_url(host["address"], socket_timeout=5, socket_connect_timeout=5)
    try:
        names = [*DROPPED, *(f"resync_{reason}" for reason in RESYNCS)]
        values = client.mget([layer.counter_key(name) for name in names])
    finally:
        client.close()
    return {name: int(value or 0) for name, value in zip(names, values, strict=True)}

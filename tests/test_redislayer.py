"""The Redis layer's own group_send (tasksapp/redislayer.py): it is channels_redis's, pinned to the
installed source, and a message a full channel does not take is counted and logged at WARNING
where the layer's script reports it."""

import asyncio
import hashlib
import inspect
import logging
import re
import secrets
from collections.abc import AsyncIterator

import pytest
from channels_redis.core import RedisChannelLayer

from tasksapp import redislayer
from tasksapp.redislayer import GROUP_SEND_LUA, PooledRedisChannelLayer

# sha256 of channels_redis 4.3.0's RedisChannelLayer.group_send source. When an upgrade changes it,
# compare it with PooledRedisChannelLayer.group_send (and GROUP_SEND_LUA), bring those in line,
# then pin the new source here.
PINNED = "c9623ea6ccfa73085599ef24a8e7c0a5b06ffae0cba6daef8a6a2d7e7a0dfc91"
CAPACITY = 2


def words(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_the_group_send_it_replaces_is_the_installed_one() -> None:
    source = inspect.getsource(RedisChannelLayer.group_send)
    assert words(GROUP_SEND_LUA) in words(source)
    assert hashlib.sha256(source.encode()).hexdigest() == PINNED, (
        "channels_redis's group_send changed: see PINNED"
    )


@pytest.fixture
async def layer() -> AsyncIterator[PooledRedisChannelLayer]:
    found = PooledRedisChannelLayer(
        hosts=[{"address": "redis://127.0.0.1:6379/15", "socket_timeout": 30}],
        capacity=CAPACITY,
        prefix=f"layer{secrets.token_hex(4)}",
    )
    yield found
    await found.flush()
    await found.close_pools()


@pytest.mark.redis
async def test_a_message_a_full_channel_does_not_take_is_counted_and_logged(
    layer: PooledRedisChannelLayer, caplog: pytest.LogCaptureFixture
) -> None:
    # Channels of their own, each its own Redis key (a process's local "!" channels share one).
    full, free = "crowd.full", "crowd.free"
    await layer.group_add("crowd", full)
    for n in range(CAPACITY):
        await layer.group_send("crowd", {"type": "filler", "n": n})
    await layer.group_add("crowd", free)
    connection = layer.connection(0)
    before = int(await connection.get(layer.counter_key("channel_full")) or 0)

    with caplog.at_level(logging.INFO):
        await layer.group_send("crowd", {"type": "one too many"})

    dropped = [(r.levelname, r.getMessage()) for r in caplog.records if "were full" in r.getMessage()]
    assert dropped == [
        ("WARNING", "live: 1 of 2 channels in group crowd were full: message dropped (the pages re-sync)")
    ]
    assert int(await connection.get(layer.counter_key("channel_full")) or 0) - before == 1
    assert not redislayer._unflushed
    async with asyncio.timeout(10):
        assert (await layer.receive(free))["type"] == "one too many"  # the channel with room got it
        assert [(await layer.receive(full))["n"] for _ in range(CAPACITY)] == list(range(CAPACITY))

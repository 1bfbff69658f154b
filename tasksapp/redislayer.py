"""The Redis channel layer with connections that survive quiet sockets and mass disconnects.

channels_redis builds a plain redis-py ConnectionPool, which raises "Too many connections" as
soon as more commands run at once than the pool holds: 500 websockets closing together then
fail to leave their groups, and the dead channels stay there until the group expires. A
BlockingConnectionPool makes the extra commands wait for a connection instead. The socket
timeout is set explicitly (settings.CHANNEL_LAYERS): redis-py 8 defaults it to 5 s, the same
as channels_redis's blocking read, so a quiet receive times out and the websocket dies.
"""

from typing import Any

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool


class PooledRedisChannelLayer(RedisChannelLayer):  # type: ignore[misc]
    def create_pool(self, index: int) -> Any:
        host = dict(self.hosts[index])
        address = host.pop("address")
        return BlockingConnectionPool.from_url(address, **host)

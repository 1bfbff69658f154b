"""The mirror never waits on the channel layer (issue 20 item 7): the live notifications travel
through Redis, the mirror's writes do not, so a Redis that hangs must not delay a completion.

The Redis here is real (a redis-server of this module's own) behind a TCP proxy that stalls: the
connections stay open and no byte moves, as when Redis hangs or the network path black-holes.
"""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tasksapp import events, services
from tasksapp.models import McpServer, RemoteTask
from tests.engine_helpers import run_worker_until
from tests.faults import StallProxy, stall_proxy
from tests.stack import PrivateRedis, private_redis

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    logs: Path = tmp_path_factory.mktemp("redis")
    with private_redis(logs) as server:
        yield server


@pytest.fixture
def stalled_layer(redis: PrivateRedis, settings: Any) -> Iterator[StallProxy]:
    with stall_proxy(redis.url) as proxy:
        settings.CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "tasksapp.redislayer.PooledRedisChannelLayer",
                "CONFIG": {
                    "hosts": [
                        {
                            "address": f"redis://127.0.0.1:{proxy.port}/0",
                            "socket_timeout": 10,  # the floor production allows (REDIS_SOCKET_TIMEOUT)
                            "socket_connect_timeout": 5,
                        }
                    ]
                },
            }
        }
        yield proxy
        proxy.resume()


def test_a_stalled_channel_layer_does_not_delay_a_completion(
    demo_registered: McpServer, stalled_layer: StallProxy
) -> None:
    """Fails on the old code: the first change's publication (on the database thread, in on_commit)
    waited for the stalled Redis (10 s socket timeout), and the completion behind it."""
    started = services.call_start(
        server=demo_registered,
        tool="slow_count",
        arguments={"n": 3, "delay": 0.3, "poll_interval_ms": 100},
        user=None,
    )
    assert started.task is not None
    stalled_layer.stall()
    began = time.monotonic()
    pk = started.task.pk
    run_worker_until(lambda: RemoteTask.objects.get(pk=pk).status == "completed", timeout=6)
    # The task takes 0.9 s on the server; the mirror follows within a poll or a push of that.
    assert time.monotonic() - began < 5
    assert events.publish_pending() > 0  # the notifications wait for Redis, the mirror did not
    stalled_layer.resume()
    deadline = time.monotonic() + 10
    while events.publish_pending():
        assert time.monotonic() < deadline, "the queued notifications never left"
        time.sleep(0.05)

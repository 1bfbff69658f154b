"""Mirror lag: the worker measures server change -> mirror commit and
push -> commit, by the path each change came by, and reports it (heartbeat, /metrics, overview);
and the mirror never waits on the channel layer: the live notifications travel through Redis, the
mirror's writes do not, so a Redis that hangs must not delay a completion.

The Redis here is real (a redis-server of this module's own) behind a TCP proxy that stalls: the
connections stay open and no byte moves, as when Redis hangs or the network path black-holes.
"""

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from tasksapp import events, services
from tasksapp.models import McpServer, RemoteTask, WorkerHeartbeat
from tests.mcpclient import hostile_server as hostile
from tests.support.engine_helpers import run_worker_until
from tests.support.faults import StallProxy, stall_proxy
from tests.support.opsdata import logged_in, person, samples
from tests.support.scripted import scripted, started_on
from tests.support.stack import PrivateRedis, private_redis

pytestmark = pytest.mark.django_db(transaction=True)


def test_pushed_changes_are_measured_and_reported(demo_registered: McpServer) -> None:
    """Fails on the old code: no lag or path figures anywhere."""
    started = services.call_start(
        server=demo_registered,
        tool="slow_count",
        arguments={"n": 6, "delay": 0.4, "poll_interval_ms": 100},
        user=None,
    )
    assert started.task is not None
    pk = started.task.pk

    def done() -> bool:
        beat = WorkerHeartbeat.objects.filter(changes_push__gte=2, mirror_p99_ms__isnull=False).first()
        return beat is not None and RemoteTask.objects.get(pk=pk).status == "completed"

    # Covered by a listen stream the task is polled every 30 s: its changes (every 0.4 s) and its
    # completion reach the mirror by push, not at the next poll.
    run_worker_until(done, timeout=15, heartbeat_seconds=0.2)
    beat = WorkerHeartbeat.objects.get()
    assert beat.mirror_p50_ms is not None and 0 <= beat.mirror_p50_ms < 5000
    assert beat.push_p99_ms is not None and beat.push_p99_ms < 5000
    assert beat.push_percent is not None and beat.push_percent >= 50
    WorkerHeartbeat.objects.update(stopped_at=None, last_beat_at=timezone.now())  # as if still running
    viewer = logged_in(person("vera", "viewer"))
    got = samples(viewer.get(reverse("tasks:metrics")).content.decode())
    worker = ("worker", beat.worker)
    assert got[("mcp_worker_changes_total", (("path", "push"), worker))] == beat.changes_push
    assert ("mcp_worker_changes_total", (("path", "safety_net"), worker)) in got
    p99 = beat.mirror_p99_ms or 0.0
    assert got[("mcp_worker_mirror_lag_seconds", (("quantile", "0.99"), worker))] == pytest.approx(p99 / 1000)
    assert ("mcp_worker_push_commit_seconds", (("quantile", "0.99"), worker)) in got
    page = viewer.get(reverse("tasks:overview")).content.decode()
    assert "server change → mirror: p50" in page
    assert f"{beat.push_percent} % by push" in page
    assert "data-mirror-behind" not in page
    WorkerHeartbeat.objects.update(mirror_p99_ms=42_000)
    with override_settings(MCP_MIRROR_LAG_WARN_MS=5000):
        page = viewer.get(reverse("tasks:overview")).content.decode()
    assert "the mirror is 42 s behind the servers" in page


@pytest.mark.parametrize(
    ("server_clock_seconds", "measured_seconds"),
    [(-590.0, 590.0), (-610.0, None), (0.5, 0.0), (3.0, None)],
    ids=["stamped 590 s ago", "stamped 610 s ago", "clock 0.5 s ahead", "clock 3 s ahead"],
)
def test_mirror_lag_is_measured_only_where_the_servers_clock_is_sane(
    transactional_db: None, server_clock_seconds: float, measured_seconds: float | None
) -> None:
    """server change -> mirror is the commit time minus the server's lastUpdatedAt, which comes from
    the server's clock: a change stamped more than 600 s before the commit (MIRROR_LAG_MAX_SECONDS)
    or more than 1 s after it (CLOCK_TOLERANCE_SECONDS) says that clock is off, and is left out
    (it still counts as a change); a clock slightly ahead counts as no lag."""

    def moved_on(message: dict[str, Any]) -> web.StreamResponse:
        stamp = timezone.now() + timedelta(seconds=server_clock_seconds)  # the server's clock
        moved = {"statusMessage": "counted 3/5", "lastUpdatedAt": stamp.isoformat(), "pollIntervalMs": 100}
        return hostile.json_reply(hostile.response(message, hostile.task(**moved)))

    # Started with an old stamp, so that no later snapshot looks older than the mirror's.
    server = scripted({"tasks/get": moved_on}, lastUpdatedAt="2020-01-01T00:00:00Z", pollIntervalMs=100)
    try:
        task = started_on(server)
        beaten = WorkerHeartbeat.objects.filter(changes_poll__gte=1)  # the beat after the change
        run_worker_until(beaten.exists, listen=False, heartbeat_seconds=0.2)
    finally:
        server.close()
    assert RemoteTask.objects.get(pk=task.pk).status_message == "counted 3/5"
    beat = WorkerHeartbeat.objects.get()
    assert beat.changes_poll == 1
    if measured_seconds is None:
        assert beat.mirror_max_ms is None
    else:
        assert beat.mirror_max_ms is not None
        assert measured_seconds * 1000 <= beat.mirror_max_ms < measured_seconds * 1000 + 5000


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


@pytest.mark.redis
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

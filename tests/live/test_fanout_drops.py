"""Nothing dropped in silence, on the real Redis channel layer: a page's channel
fills up, channels_redis drops what does not fit, the drop is logged at WARNING and counted in
/metrics, and the page, noticing the gap, re-syncs to the task's current state (counted too).
"""

import logging
import re
import secrets
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from tasksapp import events, metrics, services
from tasksapp.redislayer import PooledRedisChannelLayer
from tests.support.live import frames_until, make_task, signed_in, socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]

CAPACITY = 5


@pytest.fixture
def redis_layer(settings: Any) -> Iterator[None]:
    """The Redis layer with room for CAPACITY messages a channel, under a prefix of this test's own."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "tasksapp.redislayer.PooledRedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": "redis://127.0.0.1:6379/15", "socket_timeout": 30}],
                "capacity": CAPACITY,
                "prefix": f"drops{secrets.token_hex(4)}",
            },
        }
    }
    yield


def figure(text: str, name: str, label: str) -> float:
    found = re.search(rf'^{name}_total\{{[a-z]+="{label}"\}} (\S+)$', text, re.M)
    assert found, text
    return float(found.group(1))


def publish(task_id: int, count: int = 1) -> None:
    for _ in range(count):
        events._send([events.TASKS], {"type": "task.changed", "id": task_id})
    assert events.wait_sent()  # sent by the publisher thread (tasksapp/events.py)


def fill_and_lose(filler: Any, lost: Any) -> None:
    """From another thread, as the worker publishes from another process: the page's event loop is
    held meanwhile, so nothing is read from its channel. CAPACITY messages fill it (one more is
    taken at once by the read already waiting); the next three are dropped, among them the only
    message saying that `lost` expired."""
    publish(filler.pk, CAPACITY + 1)
    services.task_mark_expired(task=lost, reason="gone")
    assert events.wait_sent()
    publish(filler.pk, 2)


async def test_a_full_channel_is_logged_counted_and_the_page_re_syncs(
    redis_layer: None, caplog: pytest.LogCaptureFixture
) -> None:
    from channels.layers import get_channel_layer

    assert isinstance(get_channel_layer(), PooledRedisChannelLayer)
    _, client = await sync_to_async(signed_in)()
    filler, lost = await sync_to_async(make_task)(), await sync_to_async(make_task)()
    before = (await sync_to_async(metrics.exposition)()).decode()
    communicator = socket(client, "page=tasks")
    assert (await communicator.connect())[0]

    with caplog.at_level(logging.INFO):
        burst = threading.Thread(target=fill_and_lose, args=(filler, lost))
        burst.start()
        burst.join()  # holds this event loop while the page's channel fills up
        dropped = [r for r in caplog.records if "were full" in r.getMessage()]
        assert dropped and all(r.levelno == logging.WARNING for r in dropped), caplog.text

        # The page reads what its channel held; the next message shows the gap, and the page
        # catches up and shows what it lost.
        await frames_until(communicator, lambda frame: f"task-row-{filler.pk}" in frame)
        assert not [r for r in caplog.records if "were dropped" in r.getMessage()]
        await sync_to_async(publish)(filler.pk)
        frame = (await frames_until(communicator, lambda frame: f"task-row-{lost.pk}" in frame))[-1]
    row = re.search(rf'<tr id="task-row-{lost.pk}".*?</tr>', frame, re.S)
    assert row and 'data-status="expired"' in row.group(0), frame
    assert "3 message(s) to group tasks were dropped" in caplog.text
    await communicator.disconnect()

    after = (await sync_to_async(metrics.exposition)()).decode()
    assert (
        figure(after, "mcp_live_dropped", "channel_full") - figure(before, "mcp_live_dropped", "channel_full")
        >= 3  # three to the tasks group (and any to the other groups the page joined, e.g. inbox)
    )
    assert figure(after, "mcp_live_resyncs", "gap") - figure(before, "mcp_live_resyncs", "gap") == 1


def test_metrics_serve_the_live_counters_with_the_in_memory_layer(client: Client) -> None:
    text = metrics.exposition().decode()
    assert 'mcp_live_dropped_total{where="channel_full"}' in text
    assert 'mcp_live_resyncs_total{reason="gap"}' in text

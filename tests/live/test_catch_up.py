"""A catch-up on connect is complete or says it is not: a few chatty tasks must not hide a quiet
one's change. Through the real ASGI application and the `since` a page sends (its render time on
a late connect, the socket's own `live-sync` stamp on a reconnect, as static/tasksapp/app.js does).
"""

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from tasksapp import services
from tasksapp.mcpclient import parse_detailed_task
from tasksapp.models import RemoteTask, TaskEvent
from tasksapp.services.tasks import task_note
from tests.support.live import frames_until, make_task, signed_in, socket

pytestmark = pytest.mark.django_db(transaction=True)

CHATTY_NOTES = 60  # three chatty tasks: 180 events, well over the catch-up limit of 100 items


def chatter(tasks: list[RemoteTask], notes: int = CHATTY_NOTES) -> None:
    """Busy tasks, each with many timeline entries (as a task that reports progress makes)."""
    for _ in range(notes):
        for task in tasks:
            task_note(task=task, source="local", note="progress")


def finish(task: RemoteTask) -> None:
    """The quiet task completes, as the worker records a completed snapshot."""
    raw = {
        "taskId": task.remote_id,
        "status": "completed",
        "createdAt": datetime.now(UTC).isoformat(),
        "lastUpdatedAt": datetime.now(UTC).isoformat(),
        "result": {"content": [{"type": "text", "text": "done"}]},
    }
    assert services.task_apply_snapshot(task=task, snapshot=parse_detailed_task(raw), source="poll")


def running_for_an_hour(count: int) -> list[RemoteTask]:
    """Tasks started long before the page was rendered (their creation is no change to catch up)."""
    tasks = [make_task() for _ in range(count)]
    RemoteTask.objects.filter(pk__in=[task.pk for task in tasks]).update(
        created_at=datetime.now(UTC) - timedelta(hours=1)
    )
    return tasks


def busy_and_quiet() -> tuple[list[RemoteTask], RemoteTask]:
    quiet, *chatty = running_for_an_hour(4)
    chatter(chatty)
    finish(quiet)
    assert TaskEvent.objects.count() > 100  # the limit, in rows
    return chatty, quiet


def quiet_row_completed(quiet: RemoteTask) -> Any:
    pattern = re.compile(rf'<tr id="task-row-{quiet.pk}"[^>]*>.*?data-status="completed"', re.S)
    return lambda frame: bool(pattern.search(frame))


def since_of(frame: str) -> str:
    found = re.search(r'id="live-sync"[^>]*data-since="(\d+)"', frame)
    assert found, frame
    return found.group(1)


async def connect(client: Client, query: str) -> WebsocketCommunicator:
    communicator = socket(client, query)
    assert (await communicator.connect())[0]
    return communicator


async def test_a_socket_that_connects_late_gets_a_quiet_tasks_change_among_chatty_ones() -> None:
    _, client = await sync_to_async(signed_in)()
    rendered = int(time.time())  # the page's data-since; its socket connects after the changes
    _, quiet = await sync_to_async(busy_and_quiet)()
    communicator = await connect(client, f"page=tasks&since={rendered}")
    frames = await frames_until(communicator, quiet_row_completed(quiet))
    assert 'data-reload="live-region"' not in "".join(frames)  # four tasks: complete, no reload needed
    await communicator.disconnect()


async def test_a_reconnecting_socket_gets_a_quiet_tasks_change_among_chatty_ones() -> None:
    _, client = await sync_to_async(signed_in)()
    first = await connect(client, f"page=tasks&since={int(time.time())}")
    stamp = since_of((await frames_until(first, lambda frame: 'id="live-sync"' in frame))[-1])
    await first.disconnect()  # the network drops; meanwhile the tasks move
    _, quiet = await sync_to_async(busy_and_quiet)()
    again = await connect(client, f"page=tasks&since={stamp}")  # app.js sends the socket's stamp
    await frames_until(again, quiet_row_completed(quiet))
    await again.disconnect()


async def test_more_changed_tasks_than_the_limit_reload_the_region_however_few_the_rows(
    settings: Any,
) -> None:
    """Over the limit in tasks, not in rows: one chatty task's rows come first in time, then
    three quiet tasks change once each; the page must be told it missed something."""
    settings.LIVE_CATCH_UP_LIMIT = 3
    _, client = await sync_to_async(signed_in)()
    rendered = int(time.time())
    chatty, *quiet = await sync_to_async(running_for_an_hour)(4)
    await sync_to_async(chatter)([chatty], 10)
    for task in quiet:
        await sync_to_async(finish)(task)
    communicator = await connect(client, f"page=tasks&since={rendered}")
    await frames_until(communicator, lambda frame: 'data-reload="live-region"' in frame)
    await communicator.disconnect()


async def test_a_task_page_catches_up_on_its_quiet_task_among_chatty_ones() -> None:
    _, client = await sync_to_async(signed_in)()
    rendered = int(time.time())
    _, quiet = await sync_to_async(busy_and_quiet)()
    communicator = await connect(client, f"page=task&task={quiet.pk}&since={rendered}")
    card = (await frames_until(communicator, lambda frame: 'id="task-card"' in frame))[-1]
    assert 'data-status="completed"' in card
    await communicator.disconnect()

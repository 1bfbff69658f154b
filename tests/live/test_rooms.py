"""Rooms (tasksapp/live/rooms.py): the sockets of a process that show one page to one audience get
frames built once for all of them, and a socket's own page still decides what it is sent: a socket
that joins late gets the whole of what changed before it shares the room's differences, and a new
task's row goes to the top only of the pages rendered before the task started."""

import asyncio
import re
import time
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from dashboard.asgi import application
from tasksapp import services
from tasksapp.live import hub, rooms
from tasksapp.metrics import live_counts
from tasksapp.models import RemoteTask
from tests.support.live import ask, frames_until, make_task, signed_in, socket

pytestmark = pytest.mark.django_db(transaction=True)


async def quiet(*communicators: WebsocketCommunicator) -> None:
    """Every frame sent so far read (each socket's live-sync stamp, its catch-up)."""
    for communicator in communicators:
        while not await communicator.receive_nothing(timeout=0.6):
            await communicator.receive_from(timeout=1)


async def test_a_socket_joining_a_task_pages_room_late_gets_the_whole_page_then_the_differences() -> None:
    _, client = await sync_to_async(signed_in)()
    task = await sync_to_async(make_task)()
    first = socket(client, f"page=task&task={task.pk}")
    assert (await first.connect())[0]
    await sync_to_async(services.task_record_error)(task=task, error="before the second tab")
    whole = (await frames_until(first, lambda frame: "before the second tab" in frame))[-1]
    assert 'id="task-raw"' in whole and 'id="task-timeline"' in whole  # its first: the whole page

    second = socket(client, f"page=task&task={task.pk}")  # the same room (page, task, audience)
    assert (await second.connect())[0]
    await sync_to_async(services.task_record_error)(task=task, error="seen by both tabs")
    differences = (await frames_until(first, lambda frame: "seen by both tabs" in frame))[-1]
    joined = (await frames_until(second, lambda frame: "seen by both tabs" in frame))[-1]
    # The tab in step gets what changed (the card), not the raw JSON's section or the whole
    # timeline again; the tab that joined late has had nothing from the room yet, so it gets
    # everything (with the differences only, it would keep a stale raw section).
    assert 'id="task-card"' in differences
    assert 'id="task-raw"' not in differences and 'id="task-timeline"' not in differences
    assert 'id="task-raw"' in joined and 'id="task-timeline"' in joined

    before = {key: live_counts[key] for key in ("frames_built", "frames_sent")}
    await sync_to_async(services.task_record_error)(task=task, error="now both in step")
    for communicator in (first, second):
        frame = (await frames_until(communicator, lambda frame: "now both in step" in frame))[-1]
        assert 'id="task-raw"' not in frame
    built = live_counts["frames_built"] - before["frames_built"]
    assert built == 1 and live_counts["frames_sent"] - before["frames_sent"] == 2  # one frame, two tabs
    for communicator in (first, second):
        await communicator.disconnect()


async def test_a_new_task_goes_to_the_top_only_of_the_lists_rendered_before_it_started() -> None:
    _, client = await sync_to_async(signed_in)()
    older = socket(client, f"page=tasks&fresh=1&since={time.time() - 60:.6f}")
    assert (await older.connect())[0]
    task = await sync_to_async(make_task)()
    started = timezone.now() - timedelta(seconds=30)  # longer before the later page than it takes to render
    await sync_to_async(RemoteTask.objects.filter(pk=task.pk).update)(created_at=started)
    later = socket(client, f"page=tasks&fresh=1&since={time.time():.6f}")  # rendered with the task
    assert (await later.connect())[0]
    await quiet(older, later)

    await sync_to_async(services.task_record_error)(task=task, error="one poll failed")
    row = rf'<tr id="task-row-{task.pk}"'
    added = (await frames_until(older, lambda frame: f"task-row-{task.pk}" in frame))[-1]
    assert re.search(rf'<tbody hx-swap-oob="afterbegin:#task-rows">\s*{row}', added)
    replaced = (await frames_until(later, lambda frame: f"task-row-{task.pk}" in frame))[-1]
    assert f'{row} hx-swap-oob="true">' in replaced and "afterbegin" not in replaced
    for communicator in (older, later):
        await communicator.disconnect()


async def test_a_socket_whose_connect_fails_after_it_joined_its_room_leaves_the_room() -> None:
    """The connection breaks under the consumer while it is connecting (its catch-up's first frame
    cannot be written): the socket ends, and its room and the hub forget it. Left in, it kept its
    room "not in step", and every flush of that room built the whole-page parts for nobody."""
    _, client = await sync_to_async(signed_in)()
    scope = socket(client, f"page=tasks&fresh=1&since={time.time():.6f}").scope
    arrived: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await arrived.put({"type": "websocket.connect"})

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "websocket.send":  # the network edge: the peer reset the connection
            raise ConnectionResetError("the client went away during the handshake")

    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(application(scope, arrived.get, send), 10)
    assert rooms.rooms().rooms == {}
    assert not any(hub.hub().members.values())


def card(frame: str) -> str:
    found = re.search(r'<div class="card task-head" id="task-card".*?</div>\s*</div>', frame, re.S)
    assert found, frame[:500]
    return found.group(0)


async def test_the_card_is_rendered_once_for_every_role_with_each_roles_own_actions() -> None:
    """A task page's card is rendered once per change, language and zone, and each role's actions
    (all a role changes in it) are put in its place: an operator may cancel, a viewer may not."""
    _, viewer = await sync_to_async(signed_in)()
    _, operator = await sync_to_async(signed_in)("operator", "otto")
    task = await sync_to_async(make_task)()
    sockets = [socket(client, f"page=task&task={task.pk}") for client in (viewer, operator)]
    for communicator in sockets:
        assert (await communicator.connect())[0]
    await sync_to_async(services.task_record_error)(task=task, error="seen by both roles")
    seen, told = [
        card((await frames_until(communicator, lambda frame: "seen by both roles" in frame))[-1])
        for communicator in sockets
    ]
    assert 'id="cancel-button"' in told and 'id="cancel-button"' not in seen
    assert "Run again" in told and "Run again" not in seen
    assert "task-actions" not in seen + told  # the slot is filled, never sent
    page = await sync_to_async(operator.get)(f"/tasks/{task.pk}/")
    assert re.sub(r"\s+", " ", told.split('<div class="actions">')[1]) == re.sub(
        r"\s+", " ", card(page.content.decode()).split('<div class="actions">')[1]
    )  # the operator's actions as their page has them
    for communicator in sockets:
        await communicator.disconnect()


async def test_a_task_started_just_before_a_list_was_stamped_is_added_at_its_top() -> None:
    """A task committed between the list's time and its query, or stamped by a process whose clock
    is behind, started "before" the page yet is not on it. The page names the rows it shows; any
    other row started within the margin is added at the top (by the catch-up on connect here), and
    replaced in place from then on; a row the page names is replaced in place."""
    _, client = await sync_to_async(signed_in)()
    task = await sync_to_async(make_task)()
    page = socket(client, f"page=tasks&fresh=1&since={time.time() + 1:.6f}")  # stamped a second later
    assert (await page.connect())[0]
    added = (await frames_until(page, lambda frame: f"task-row-{task.pk}" in frame))[-1]
    assert "afterbegin:#task-rows" in added and f'<tr id="task-row-{task.pk}" hx-swap-oob="delete">' in added
    await sync_to_async(services.task_record_error)(task=task, error="failed again")
    again = (await frames_until(page, lambda frame: f"task-row-{task.pk}" in frame))[-1]
    assert f'<tr id="task-row-{task.pk}" hx-swap-oob="true">' in again and "afterbegin" not in again

    shows = socket(client, f"page=tasks&fresh=1&rows={task.pk},x,-3&since={time.time() + 1:.6f}")
    assert (await shows.connect())[0]  # a page that names the row: it has it
    await sync_to_async(services.task_record_error)(task=task, error="seen where it is")
    replaced = (await frames_until(shows, lambda frame: f"task-row-{task.pk}" in frame))[-1]
    assert f'<tr id="task-row-{task.pk}" hx-swap-oob="true">' in replaced and "afterbegin" not in replaced
    for communicator in (page, shows):
        await communicator.disconnect()


async def test_a_question_asked_just_before_an_inbox_was_stamped_is_added_to_it() -> None:
    """As for the list: an inbox names the tasks it shows; another task's question, seen within the
    margin before the page's time, is added at the end (by the catch-up on connect here); a task
    the page names is replaced where it is."""
    _, client = await sync_to_async(signed_in)("operator", "otto")
    task = await sync_to_async(make_task)()
    await sync_to_async(ask)(task)
    lacks = socket(client, f"page=inbox&since={time.time() + 1:.6f}")
    assert (await lacks.connect())[0]
    added = (await frames_until(lacks, lambda frame: f"inbox-task-{task.pk}" in frame))[-1]
    assert "beforeend:#inbox-items" in added and "Name?" in added
    shows = socket(client, f"page=inbox&items={task.pk}&since={time.time() + 1:.6f}")
    assert (await shows.connect())[0]
    replaced = (await frames_until(shows, lambda frame: f"inbox-task-{task.pk}" in frame))[-1]
    assert "beforeend" not in replaced and "Name?" in replaced
    for communicator in (lacks, shows):
        await communicator.disconnect()


def test_a_live_pages_time_is_taken_before_it_reads_anything() -> None:
    """The page's `live-sync` time (what its socket catches up from, and what tells a new row or
    question from one the page shows) comes before its first query: a change committed between
    the two reaches the page. Stamped as the template rendered, it came after the rows were read
    (they are built in the view), and a task committed in between was lost to the page."""
    from django.db import connection

    _, client = signed_in()
    for url in ("/tasks/", "/inbox/", "/"):
        queried: list[float] = []

        def timed(
            execute: Any, sql: str, params: Any, many: bool, context: Any, queried: list[float] = queried
        ) -> Any:
            queried.append(time.time())
            return execute(sql, params, many, context)

        with connection.execute_wrapper(timed):
            html = client.get(url).content.decode()
        found = re.search(r'id="live-sync" hidden data-since="([0-9.]+)"', html)
        assert found and queried, url
        assert float(found.group(1)) <= min(queried), url

"""The live layer without a browser: the real ASGI application (origin check, session cookie,
consumer) driven by channels' WebsocketCommunicator against the real database.

Changes are made through the services (which publish after commit), as the worker and views do.
"""

import logging
import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import Group, User
from django.test import Client

from tasksapp import events, services
from tasksapp.metrics import live_counts
from tasksapp.models import McpServer, RemoteTask, holder_key
from tasksapp.services.tasks import task_note
from tests.support.live import ask, closed_with, frames_until, make_task, signed_in, socket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def viewer() -> AsyncIterator[tuple[User, Client]]:
    yield await sync_to_async(signed_in)()


# --- the whole origin, not only the host -----------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:47871",  # another port of the same host
        "https://127.0.0.1:8123",  # another scheme
        "https://127.0.0.1:1",
        "http://evil.example:8123",
        "null",
    ],
)
async def test_a_socket_from_another_origin_is_refused(viewer: tuple[User, Client], origin: str) -> None:
    connected, _ = await socket(viewer[1], "page=tasks", origin=origin).connect()
    assert not connected


async def test_a_socket_from_the_dashboards_own_origin_is_accepted(viewer: tuple[User, Client]) -> None:
    communicator = socket(viewer[1], "page=tasks")
    connected, _ = await communicator.connect()
    assert connected
    await communicator.disconnect()


async def test_a_trusted_origin_is_accepted_and_an_unlisted_host_refused(
    viewer: tuple[User, Client], settings: Any
) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["https://dash.example.com"]
    trusted = socket(viewer[1], "page=tasks", origin="https://dash.example.com")
    assert (await trusted.connect())[0]
    await trusted.disconnect()
    other = socket(viewer[1], "page=tasks", origin="http://dash.example.com", host="dash.example.com")
    assert not (await other.connect())[0]  # neither trusted (scheme) nor an allowed host


# --- sockets end with the session -------------------------------------------------------------


async def test_logging_out_closes_the_sessions_sockets(viewer: tuple[User, Client]) -> None:
    client = viewer[1]
    _, other_client = await sync_to_async(signed_in)("operator", "otto")
    mine, others = socket(client, "page=tasks"), socket(other_client, "page=tasks")
    assert (await mine.connect())[0] and (await others.connect())[0]
    response = await sync_to_async(client.post)("/logout/")
    assert response.status_code == 302
    assert await closed_with(mine) == 4401
    assert await others.receive_nothing(timeout=0.3)  # another session stays open
    await others.disconnect()


async def test_deactivating_a_user_closes_their_sockets(viewer: tuple[User, Client]) -> None:
    user, client = viewer
    communicator = socket(client, "page=inbox")
    assert (await communicator.connect())[0]
    user.is_active = False
    await sync_to_async(user.save)()
    assert await closed_with(communicator) == 4401


async def test_the_session_is_checked_again_on_a_timer(viewer: tuple[User, Client], settings: Any) -> None:
    """A change no signal announces (a bulk update, a password changed in the database)."""
    settings.LIVE_SESSION_CHECK_SECONDS = 1
    user, client = viewer
    communicator = socket(client, "page=overview")
    assert (await communicator.connect())[0]
    assert await communicator.receive_nothing(timeout=1.3)  # checked once, still signed in
    await sync_to_async(User.objects.filter(pk=user.pk).update)(is_active=False)
    assert await closed_with(communicator, timeout=3) == 4401


async def test_a_socket_is_closed_when_its_lifetime_ends(viewer: tuple[User, Client], settings: Any) -> None:
    settings.LIVE_SOCKET_MAX_SECONDS = 1
    communicator = socket(viewer[1], "page=tasks")
    assert (await communicator.connect())[0]
    started = time.monotonic()
    assert await closed_with(communicator, timeout=3) == 4408
    assert time.monotonic() - started >= 0.9


# --- catching up, new tasks, what a pushed fragment carries ------------------------------------


async def test_a_page_catches_up_on_what_changed_before_its_socket_joined(
    viewer: tuple[User, Client],
) -> None:
    rendered = int(time.time())
    task = await sync_to_async(make_task)()
    await sync_to_async(services.task_mark_expired)(task=task, reason="gone from the server")
    communicator = socket(viewer[1], f"page=task&task={task.pk}&since={rendered}")
    assert (await communicator.connect())[0]
    seen = await frames_until(communicator, lambda frame: 'id="task-card"' in frame)
    assert 'id="live-sync"' in seen[0] and "expired" in seen[-1]
    await communicator.disconnect()


async def test_a_new_task_is_added_to_the_first_page_of_the_list_and_only_there(
    viewer: tuple[User, Client],
) -> None:
    since = int(time.time()) - 60
    fresh, filtered = socket(viewer[1], f"page=tasks&fresh=1&since={since}"), socket(viewer[1], "page=tasks")
    assert (await fresh.connect())[0] and (await filtered.connect())[0]
    await frames_until(fresh, lambda frame: 'id="live-sync"' in frame)
    task = await sync_to_async(make_task)()
    await sync_to_async(services.task_record_error)(task=task, error="one poll failed")
    added = (await frames_until(fresh, lambda frame: f"task-row-{task.pk}" in frame))[-1]
    # In a <template>, which parses a table row anywhere; tbody's children go first in #task-rows.
    assert re.search(
        rf'<template><tbody hx-swap-oob="afterbegin:#task-rows">\s*<tr id="task-row-{task.pk}"', added
    )
    replaced = await filtered.receive_from(timeout=5)
    assert f'<tr id="task-row-{task.pk}" hx-swap-oob="true">' in replaced and "afterbegin" not in replaced
    for communicator in (fresh, filtered):
        await communicator.disconnect()


async def test_pushed_forms_carry_no_csrf_token(viewer: tuple[User, Client]) -> None:
    user, client = viewer
    await sync_to_async(user.groups.add)(await sync_to_async(Group.objects.get)(name="operator"))
    assert (await sync_to_async(client.get)("/inbox/")).status_code == 200  # sets the csrftoken cookie
    task = await sync_to_async(make_task)()
    communicator = socket(client, "page=inbox")
    assert (await communicator.connect())[0]
    await sync_to_async(ask)(task)
    frame = await communicator.receive_from(timeout=5)
    assert 'class="answer-form"' in frame and "Accept and send" in frame  # the operator's form
    assert "csrfmiddlewaretoken" not in frame and client.cookies["csrftoken"].value not in frame
    await communicator.disconnect()


async def test_a_section_over_the_frame_cap_becomes_a_reload_hint(viewer: tuple[User, Client]) -> None:
    # Markup-heavy text: 100,000 characters (the page shows no more) are 600 KB once escaped.
    big = {"content": [{"type": "text", "text": '"' * 100_000}], "isError": False}
    task = await sync_to_async(make_task)(result=big)
    await sync_to_async(RemoteTask.objects.filter(pk=task.pk).update)(status="completed")
    communicator = socket(viewer[1], f"page=task&task={task.pk}")
    assert (await communicator.connect())[0]
    await sync_to_async(services.task_record_error)(task=task, error="first")
    frame = await communicator.receive_from(timeout=5)
    assert len(frame.encode()) <= 256 * 1024
    assert 'id="task-card"' in frame  # what fits is still sent
    hint = re.search(r'<div id="live-reload" hidden hx-swap-oob="true" data-reload="([^"]*)"', frame)
    assert hint and set(hint.group(1).split()) == {"task-result", "task-raw"}
    await sync_to_async(services.task_record_error)(task=task, error="second")
    second = await communicator.receive_from(timeout=5)  # the socket is still up, only the card changed
    assert 'id="task-card"' in second and "task-timeline" not in second
    await communicator.disconnect()


async def test_sockets_of_one_audience_share_one_render(viewer: tuple[User, Client]) -> None:
    task = await sync_to_async(make_task)()
    _, operator = await sync_to_async(signed_in)("operator", "otto")
    sockets = [socket(viewer[1], f"page=task&task={task.pk}") for _ in range(5)]
    operators = [socket(operator, f"page=task&task={task.pk}") for _ in range(2)]
    for communicator in sockets + operators:
        assert (await communicator.connect())[0]
    renders = live_counts["renders"]
    await sync_to_async(services.task_record_error)(task=task, error="shared")
    frames = {await communicator.receive_from(timeout=5) for communicator in sockets}
    assert len(frames) == 1  # the same bytes to everyone
    assert len({await communicator.receive_from(timeout=5) for communicator in operators}) == 1
    # The task read once for both audiences, and rendered once for each.
    assert live_counts["renders"] - renders == 3
    for communicator in sockets + operators:
        await communicator.disconnect()


async def test_a_dropped_message_is_logged_and_the_page_catches_up(
    viewer: tuple[User, Client], caplog: pytest.LogCaptureFixture
) -> None:
    task = await sync_to_async(make_task)()
    communicator = socket(viewer[1], "page=tasks")
    assert (await communicator.connect())[0]
    layer = get_channel_layer()
    message = {"type": "task.changed", "id": task.pk, "group": events.TASKS, "src": "elsewhere"}
    await layer.group_send(events.TASKS, {**message, "seq": 1})
    await communicator.receive_from(timeout=5)
    await sync_to_async(services.task_mark_expired)(task=task, reason="gone")  # while seq 2..4 are lost
    with caplog.at_level(logging.WARNING, logger="tasksapp.consumers"):
        await layer.group_send(events.TASKS, {**message, "seq": 5})
        frame = (await frames_until(communicator, lambda frame: "expired" in frame))[-1]
    assert f"task-row-{task.pk}" in frame
    assert "3 message(s) to group tasks were dropped" in caplog.text
    await communicator.disconnect()


# --- the Content-Security-Policy ---------------------------------------------------------------


def test_pages_carry_a_strict_content_security_policy() -> None:
    _, client = signed_in()
    task = make_task()
    for path in ("/login/", "/", "/tasks/", f"/tasks/{task.pk}/", "/inbox/", "/servers/"):
        response = client.get(path)
        assert response.status_code == 200, path
        policy = dict(part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";"))
        assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'", path
        assert policy["frame-ancestors"] == policy["object-src"] == policy["base-uri"] == "'none'", path
        assert "unsafe" not in response["Content-Security-Policy"]
        html = response.content.decode()
        assert " style=" not in html and "<script>" not in html and "every 5s" not in html, path
        if path != "/login/":
            assert '"allowEval": false' in html, path


async def test_a_task_page_re_reads_its_task_on_the_session_timer(
    viewer: tuple[User, Client], settings: Any
) -> None:
    """The last message of a burst dropped leaves no gap to notice: the timer catches it."""
    settings.LIVE_SESSION_CHECK_SECONDS = 1
    task = await sync_to_async(make_task)()
    communicator = socket(viewer[1], f"page=task&task={task.pk}")
    assert (await communicator.connect())[0]
    await sync_to_async(RemoteTask.objects.filter(pk=task.pk).update)(status="completed")  # no message
    await sync_to_async(task_note)(task=task, source="local", note="seen completed")
    frame = (await frames_until(communicator, lambda frame: 'id="task-card"' in frame))[-1]
    assert 'data-status="completed"' in frame
    await communicator.disconnect()


# --- a change sends what changed, the timeline entry by entry ----------------------------------


def new_event(task: RemoteTask, note: str) -> int:
    """Something recorded on the task's timeline, published after commit as the services do."""
    from django.db import transaction

    with transaction.atomic():
        event = task_note(task=task, source="local", note=note)
        events.publish_task_changed(task.pk)
    return event.pk


def message(task: RemoteTask, text: str) -> None:
    """The server says something new about the task (a poll answer with another statusMessage)."""
    from tasksapp.mcpclient import parse_detailed_task

    task = RemoteTask.objects.get(pk=task.pk)
    raw = {
        "taskId": task.remote_id,
        "status": "working",
        "statusMessage": text,
        "createdAt": "2026-11-29T23:00:00+00:00",
        "lastUpdatedAt": datetime.now(UTC).isoformat(),  # after the stamp the mirror holds
    }
    assert services.task_apply_snapshot(task=task, snapshot=parse_detailed_task(raw), source="poll")


def entries(frame: str) -> list[str]:
    return re.findall(r'<li id="(event-\d+)"(?! hx-swap-oob="delete")', frame)


async def test_a_new_timeline_entry_is_sent_alone_and_a_folded_message_replaces_its_entry(
    viewer: tuple[User, Client], settings: Any
) -> None:
    task = await sync_to_async(make_task)()
    communicator = socket(viewer[1], f"page=task&task={task.pk}")
    assert (await communicator.connect())[0]
    await sync_to_async(message)(task, "step 1")
    first = (await frames_until(communicator, lambda frame: "step 1" in frame))[-1]
    assert 'id="task-timeline"' in first  # the socket does not know what the page has: all of it
    (only,) = await sync_to_async(lambda: list(task.events.values_list("pk", flat=True)))()

    await sync_to_async(message)(task, "step 2")  # within a second: folded into the same entry
    folded = (await frames_until(communicator, lambda frame: "step 2" in frame))[-1]
    assert 'id="task-timeline"' not in folded and "beforeend" not in folded
    assert f'<li id="event-{only}" hx-swap-oob="true"' in folded and 'data-merged="1"' in folded
    assert entries(folded) == [f"event-{only}"]

    settings.MCP_TIMELINE_COALESCE_MS = 0
    await sync_to_async(message)(task, "step 3")
    added = (await frames_until(communicator, lambda frame: "step 3" in frame))[-1]
    newest = await sync_to_async(lambda: task.events.order_by("-pk").values_list("pk", flat=True)[0])()
    assert 'id="task-timeline"' not in added
    assert '<ol hx-swap-oob="beforeend:#timeline-events">' in added
    assert entries(added) == [f"event-{newest}"]  # the new entry only, not the one before it
    await communicator.disconnect()


async def test_the_timeline_keeps_the_pages_window_and_its_older_line(viewer: tuple[User, Client]) -> None:
    task = await sync_to_async(make_task)()
    first = [await sync_to_async(new_event)(task, f"note {n}") for n in range(52)]
    default = socket(viewer[1], f"page=task&task={task.pk}")
    older = socket(viewer[1], f"page=task&task={task.pk}&show=100")  # after "show older"
    for communicator in (default, older):
        assert (await communicator.connect())[0]
    await sync_to_async(new_event)(task, "note 52")
    for communicator in (default, older):
        await frames_until(communicator, lambda frame: 'id="task-timeline"' in frame)
    newest = await sync_to_async(new_event)(task, "note 53")

    frame = (await frames_until(default, lambda frame: "note 53" in frame))[-1]
    assert entries(frame) == [f"event-{newest}"]
    assert f'<li id="event-{first[3]}" hx-swap-oob="delete">' in frame  # the oldest shown leaves the page
    assert f'<li id="event-{first[4]}" hx-swap-oob="delete">' not in frame
    older_line = r'<p class="small" id="timeline-older" hx-swap-oob="true">4 older events not shown'
    assert re.search(older_line, frame)

    frame = (await frames_until(older, lambda frame: "note 53" in frame))[-1]
    assert entries(frame) == [f"event-{newest}"]
    assert 'hx-swap-oob="delete"' not in frame.replace(f'<li id="event-{newest}" hx-swap-oob="delete">', "")
    assert "older events not shown" not in frame
    for communicator in (default, older):
        await communicator.disconnect()


# --- on lists: a failing server's every active task is marked, however many -------------------


HOLDER = "worker-1"


def seeded(count: int) -> tuple[McpServer, list[int]]:
    """`count` active tasks and one finished one on one server, oldest first (no peer needed)."""
    server = McpServer.objects.create(name="many", url="http://127.0.0.1:9/mcp")
    tasks = []
    for n in range(count + 1):
        task = RemoteTask(
            server=server,
            tool_name="slow_count",
            status="completed" if n == 0 else "working",
            leased_by=HOLDER,  # as the worker that polls them leases them
        )
        task.set_remote_id(f"many-{n}")
        tasks.append(task)
    RemoteTask.objects.bulk_create(tasks)
    return server, list(RemoteTask.objects.filter(server=server).order_by("id").values_list("id", flat=True))


def server_mark(frame: str) -> bool:
    """A frame with a server's stale mark (rows carry a .stale-mark slot too: not those)."""
    return 'hx-swap-oob="innerHTML:#task-rows .stale-mark' in frame


def row(html: str, pk: int) -> str:
    start = html.index(f'<tr id="task-row-{pk}"')
    return html[start : html.index("</tr>", start)]


async def test_a_failing_server_marks_every_active_row_of_an_open_list_stale(
    viewer: tuple[User, Client],
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    server, (done, oldest, *_) = await sync_to_async(seeded)(600)  # more than the newest 500
    listing = f"/tasks/?server={server.pk}&sort=created"  # the oldest rows first
    html = (await sync_to_async(viewer[1].get)(listing)).content.decode()
    slot = f'<span class="stale-mark" data-server="{server.pk}" data-held-by="{holder_key(HOLDER)}">'
    assert slot + "</span>" in row(html, oldest) and "stale-flag" not in row(html, oldest)
    assert "stale-mark" not in row(html, done)  # a finished task is never stale
    communicator = socket(viewer[1], "page=tasks")
    assert (await communicator.connect())[0]

    until = timezone.now() + timedelta(seconds=5)
    await sync_to_async(services.server_record_failure)(
        server_id=server.pk, worker=HOLDER, error="cannot reach it", failures=1, backoff_until=until
    )
    frame = (await frames_until(communicator, lambda frame: server_mark(frame) and "stale since" in frame))[
        -1
    ]
    holder = holder_key(HOLDER)
    target = rf"innerHTML:#task-rows \.stale-mark\[data-server='{server.pk}'\]\[data-held-by='{holder}'\]"
    flag = r'<span class="stale-flag"[^>]*>(<time [^>]*>)?stale since'  # the time is a zone-labelled <time>
    assert re.search(rf'<span hx-swap-oob="{target}">{flag}', frame)
    html = (await sync_to_async(viewer[1].get)(listing)).content.decode()
    assert "stale since" in row(html, oldest)  # a reload says the same as the live mark

    await sync_to_async(services.server_record_success)(
        server_id=server.pk, worker=HOLDER, now=timezone.now()
    )
    frame = (await frames_until(communicator, server_mark))[-1]
    assert re.search(rf'<span hx-swap-oob="{target}"></span>', frame)  # the marks go
    await communicator.disconnect()

"""One subscription per process for the shared groups (tasksapp/live/hub.py): a
change is one channel-layer message per process, whatever the number of open pages; every page
still gets it; a lost message is noticed once per process, and all its pages catch up with one
query between them."""

import asyncio
import contextvars
import logging
import time

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone, translation

from tasksapp import events, services
from tasksapp.lib.connections import database_sync_to_async
from tasksapp.live import hub, rooms
from tasksapp.live import pages as pages_module
from tasksapp.metrics import live_counts
from tasksapp.models import RemoteTask
from tests.support.live import frames_until, make_task, signed_in, socket

pytestmark = pytest.mark.django_db(transaction=True)
PAGES = 6


def lose_a_change(task: RemoteTask) -> None:
    """A change whose message never arrives: written as the worker writes it, not published."""
    RemoteTask.objects.filter(pk=task.pk).update(status="failed", status_message="lost on the way")
    task.events.create(status="failed", status_message="lost on the way", source="poll")


def members(group: str) -> int:
    return len(get_channel_layer().groups.get(group, {}))  # the in-memory layer's membership


async def test_many_pages_are_one_member_of_the_shared_groups_and_all_get_each_change() -> None:
    _, client = await sync_to_async(signed_in)()
    task = await sync_to_async(make_task)()
    pages = [socket(client, "page=tasks") for _ in range(PAGES)] + [socket(client, "page=overview")]
    # (Hubs of earlier tests' event loops that never saw their last page out may linger here.)
    tasks, inbox = members(events.TASKS), members(events.INBOX)
    for communicator in pages:
        assert (await communicator.connect())[0]
    assert members(events.TASKS) == tasks + 1 and members(events.INBOX) == inbox + 1  # not one a page
    assert (
        members(events.session_group(client.cookies["sessionid"].value)) == PAGES + 1
    )  # per page, as before

    await sync_to_async(services.task_record_error)(task=task, error="seen by all")
    for communicator in pages[:PAGES]:
        await frames_until(communicator, lambda frame: f"task-row-{task.pk}" in frame)
    assert hub.hub().delivered >= 1

    for communicator in pages:
        await communicator.disconnect()
    assert members(events.TASKS) == tasks and members(events.INBOX) == inbox  # the last page out leaves


async def test_a_lost_message_is_noticed_once_and_every_page_catches_up_with_one_query(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, client = await sync_to_async(signed_in)()
    task = await sync_to_async(make_task)()
    pages = [socket(client, "page=tasks") for _ in range(PAGES)]
    for communicator in pages:
        assert (await communicator.connect())[0]
    layer = get_channel_layer()
    message = {"type": "task.changed", "id": task.pk, "group": events.TASKS, "src": "elsewhere"}
    await layer.group_send(events.TASKS, {**message, "seq": 1})
    for communicator in pages:
        await communicator.receive_from(timeout=5)
    await sync_to_async(lose_a_change)(task)

    before = {key: live_counts[key] for key in ("changed_since", "changed_since_reused")}
    with caplog.at_level(logging.WARNING):
        await layer.group_send(events.TASKS, {**message, "seq": 3})
        for communicator in pages:
            frame = (await frames_until(communicator, lambda frame: "lost on the way" in frame))[-1]
            assert f"task-row-{task.pk}" in frame
    lost = [r for r in caplog.records if "were dropped" in r.getMessage()]
    assert len(lost) == 1, [r.getMessage() for r in lost]  # once for the process, not once a page
    assert f"its {PAGES} socket(s) catch up" in lost[0].getMessage()
    # What changed since: one question for all six pages (they are one room), one query.
    assert live_counts["changed_since"] - before["changed_since"] == 1
    assert live_counts["changed_since_reused"] - before["changed_since_reused"] == 0
    for communicator in pages:
        await communicator.disconnect()


async def test_work_the_hub_starts_for_one_room_can_use_the_database_side_by_side() -> None:
    """A flush and a catch-up of one room, both started by the hub, each take a database step at
    the same time: spawned in one shared Context, the second was refused ("Single thread executor
    already being used, would deadlock"), and under load every list page stopped updating."""
    room = rooms.Room("k", pages_module.OverviewPage((), timezone.now()), contextvars.copy_context())
    step = database_sync_to_async(time.sleep)

    async def use() -> None:
        await step(0.2)

    await asyncio.gather(room.spawn(use()), room.spawn(use()))


def test_a_task_pages_timeline_entries_are_rendered_once_per_content_language_and_zone() -> None:
    """A busy task's page is re-rendered at every change; its entries were re-rendered each time
    (most of a loaded process's database thread in bench/fanout.py's profile). Now an entry is
    rendered again only when its event, the language or the time zone differs."""
    task = make_task()
    for n in range(3):
        task.events.create(status="working", status_message=f"step {n}", source="poll")
    page = pages_module.TaskPage((("viewer", True),), timezone.now(), pk=task.pk, show=50)

    def render(language: str, zone: str) -> tuple[dict[str, int], str]:
        before = {key: live_counts[key] for key in ("timeline_rendered", "timeline_reused")}
        with translation.override(language), timezone.override(zone):
            rendered = page._render()
        assert rendered is not None
        _, timeline = rendered
        spent = {key.removeprefix("timeline_"): live_counts[key] - before[key] for key in before}
        return spent, timeline.section

    first, section = render("en", "UTC")
    assert first["rendered"] == 3 and "step 2" in section
    again, same = render("en", "UTC")
    assert again == {"rendered": 0, "reused": 3} and same == section
    chinese, in_chinese = render("zh-hans", "UTC")
    assert chinese["rendered"] == 3 and in_chinese != section
    shanghai, in_shanghai = render("en", "Asia/Shanghai")
    assert shanghai["rendered"] == 3 and in_shanghai != section
    task.events.filter(status_message="step 2").update(merged=4)  # a folded message: its entry changes
    folded, with_count = render("en", "UTC")
    assert folded == {"rendered": 1, "reused": 2} and "latest of 5 messages" in with_count


async def test_under_a_steady_stream_of_changes_sockets_stay_on_the_grid_and_share_renders() -> None:
    """A change arriving while a round renders waits for the next tick: every socket's rounds stay
    on the shared grid, so one render per tick serves them all. (Going round at once, each overview
    socket rendered for itself as fast as it could, off the grid.)"""
    _, client = await sync_to_async(signed_in)()
    task = await sync_to_async(make_task)()
    pages = [socket(client, "page=overview") for _ in range(4)]
    for communicator in pages:
        assert (await communicator.connect())[0]
    layer = get_channel_layer()
    before = dict(live_counts)
    started = time.monotonic()
    for seq in range(1, 76):  # 75 changes in 1.5 s
        message = {"type": "task.changed", "id": task.pk, "group": events.TASKS, "src": "steady"}
        await layer.group_send(events.TASKS, {**message, "seq": seq})
        await asyncio.sleep(0.02)
    await asyncio.sleep(settings.LIVE_OVERVIEW_SECONDS * 1.2)  # the last round
    ticks = (time.monotonic() - started) / settings.LIVE_OVERVIEW_SECONDS
    renders = live_counts["renders"] - before.get("renders", 0)
    assert 1 <= renders <= ticks + 1, (renders, ticks)  # one a tick for all four, not one a socket
    for communicator in pages:
        await communicator.disconnect()


async def test_task_pages_share_the_process_subscription_and_each_keeps_its_own_tasks_changes() -> None:
    """A task's page listens through the hub too: a change is one channel-layer message per process,
    not one per tab on that task (Redis round trips were a quarter of a loaded Daphne's event loop),
    and each page sends only its own task's changes."""
    _, client = await sync_to_async(signed_in)()
    shown, other = await sync_to_async(make_task)(), await sync_to_async(make_task)()
    tasks = members(events.TASKS)
    watching = [socket(client, f"page=task&task={shown.pk}") for _ in range(3)]
    elsewhere = socket(client, f"page=task&task={other.pk}")
    for communicator in [*watching, elsewhere]:
        assert (await communicator.connect())[0]
    assert members(events.TASKS) == tasks + 1  # the hub, not four sockets
    assert members(f"task-{shown.pk}") == 0  # no group per task

    await sync_to_async(services.task_record_error)(task=shown, error="seen on every tab")
    for communicator in watching:
        await frames_until(communicator, lambda frame: "seen on every tab" in frame)
    assert await elsewhere.receive_nothing(timeout=1)  # not its task
    for communicator in [*watching, elsewhere]:
        await communicator.disconnect()

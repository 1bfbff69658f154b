"""A task's timeline stays bounded whatever the server sends: message-only
changes fold into one event a second, a task keeps at most MCP_TIMELINE_MAX_EVENTS events with a
summary of the ones removed, and its page shows the latest 50 with a plain "show older" link."""

import re
from datetime import timedelta
from itertools import pairwise
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from tasksapp import services
from tasksapp.models import McpServer, RemoteTask, TaskEvent
from tests.support.engine_helpers import run_worker_until

pytestmark = pytest.mark.django_db(transaction=True)


def counted(server: McpServer, n: int, *, delay: float) -> RemoteTask:
    task = services.call_start(
        server=server, tool="slow_count", arguments={"n": n, "delay": delay}, user=None
    ).task
    assert task is not None
    run_worker_until(lambda: RemoteTask.objects.get(pk=task.pk).status == "completed", timeout=30)
    return task


def message_events(task: RemoteTask) -> list[TaskEvent]:
    return list(task.events.filter(status="working", source__in=("poll", "push")).order_by("observed_at"))


def test_a_status_flood_makes_at_most_one_event_a_second(demo_registered: McpServer) -> None:
    task = counted(demo_registered, 300, delay=0.005)  # 300 messages, pushed as fast as they come
    events = message_events(task)
    task.refresh_from_db()
    assert task.finished_at is not None
    span = (task.finished_at - task.created_at).total_seconds()
    assert len(events) <= span + 2, [(e.observed_at, e.status_message, e.merged) for e in events]
    assert all(b.observed_at - a.observed_at >= timedelta(seconds=1) for a, b in pairwise(events))
    assert sum(event.merged for event in events) > 0  # folded, not lost: counted, latest kept
    latest = [int(m) for m in re.findall(r"counted (\d+)/300", events[-1].status_message)]
    assert latest and latest[0] > 1


def test_a_task_keeps_at_most_the_cap_with_a_summary_of_the_rest(
    demo_registered: McpServer, settings: object
) -> None:
    settings.MCP_TIMELINE_COALESCE_MS = 0  # type: ignore[attr-defined]  # every message an event
    settings.MCP_TIMELINE_MAX_EVENTS = 10  # type: ignore[attr-defined]
    task = counted(demo_registered, 40, delay=0.02)
    timeline = list(task.events.order_by("observed_at", "id"))
    assert len(timeline) <= 10, [(e.source, e.status_message) for e in timeline]
    assert timeline[0].source == "create" and timeline[-1].status == "completed"
    [summary] = [event for event in timeline if event.source == "trimmed"]
    assert timeline[1] == summary  # where the removed events were: after the creation
    # How many messages the worker saw depends on the machine's load (40 sent in 0.8 s, polled every
    # 100 ms and pushed); that some were removed and summarised is what the cap promises.
    assert summary.merged >= 1 and "older events removed" in summary.note
    assert "MCP_TIMELINE_MAX_EVENTS" in summary.note
    viewer = Client()
    user = User.objects.create_user("vera", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name="viewer"))
    viewer.force_login(user)
    page = viewer.get(reverse("tasks:detail", args=[task.pk])).content.decode()
    assert f"{summary.merged} older events removed" in page


def test_the_page_shows_the_latest_50_events_and_older_ones_on_request(
    demo_registered: McpServer, settings: object
) -> None:
    settings.MCP_TIMELINE_COALESCE_MS = 0  # type: ignore[attr-defined]
    task = counted(demo_registered, 100, delay=0.02)
    total = task.events.count()
    assert total > 50
    viewer = Client()
    user = User.objects.create_user("vera", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name="viewer"))
    viewer.force_login(user)
    url = reverse("tasks:detail", args=[task.pk])
    first = timeline_items(viewer.get(url).content.decode())
    assert len(first["items"]) == 50 and "completed" in first["items"][-1]
    assert first["older"] == f"?show={min(total, 100)}#task-timeline", first["older"]
    assert f"{total - 50} older event" in first["html"]
    everything = timeline_items(viewer.get(url + first["older"].split("#")[0]).content.decode())
    assert len(everything["items"]) == total and everything["older"] is None
    assert "created" in everything["items"][0] or "Create" in everything["items"][0]


def timeline_items(html: str) -> dict[str, Any]:
    section = html[html.index('id="task-timeline"') :]
    section = section[: section.index("</section>")]
    older = re.search(r'href="(\?show=\d+#task-timeline)"', section)
    return {
        "html": section,
        "items": re.findall(r"<li.*?</li>", section, re.S),
        "older": older.group(1) if older else None,
    }

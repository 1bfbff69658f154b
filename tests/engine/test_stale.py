"""Stale data is flagged: "last confirmed" (the last successful poll or push) is
kept apart from "last changed", and while a server is failing its active tasks are marked stale,
with since when, on the task list, the task's page and the overview."""

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tasksapp import services
from tasksapp.consumers import LiveConsumer
from tasksapp.models import McpServer, RemoteTask
from tests.peers.launch import RunningPeer
from tests.support.engine_helpers import run_worker_until
from tests.support.faults import outage_proxy

pytestmark = pytest.mark.django_db(transaction=True)


def viewer() -> Client:
    user = User.objects.create_user("vera", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)
    return client


def quiet_task(server: McpServer) -> RemoteTask:
    """A task whose server says nothing new for 30 s: every poll confirms, none changes."""
    arguments = {"delay": 30, "poll_interval_ms": 200}
    task = services.call_start(server=server, tool="run_forever", arguments=arguments, user=None).task
    assert task is not None
    return task


def test_unchanged_polls_move_last_confirmed_and_leave_last_changed(demo_registered: McpServer) -> None:
    task = quiet_task(demo_registered)
    changed = RemoteTask.objects.get(pk=task.pk).last_seen_at
    assert changed is not None

    def confirmed_later() -> bool:
        row = RemoteTask.objects.get(pk=task.pk)
        return row.last_confirmed_at is not None and row.last_confirmed_at > changed + timedelta(seconds=1)

    run_worker_until(confirmed_later, timeout=15, listen=False, heartbeat_seconds=0.3)
    row = RemoteTask.objects.get(pk=task.pk)
    assert row.last_seen_at == changed and row.status == "working"
    page = viewer().get(reverse("tasks:detail", args=[task.pk])).content.decode()
    confirmed = timezone.localtime(row.last_confirmed_at)
    assert f'last confirmed <span id="last-confirmed">{confirmed:%H:%M:%S}' in page
    assert f'last changed <span id="last-changed">{timezone.localtime(changed):%H:%M:%S}' in page
    assert "stale-flag" not in page and 'id="stale-warning"' not in page
    services.task_cancel(task=task, user=None)


def test_a_failing_servers_active_tasks_are_marked_stale_everywhere_until_it_recovers(
    transactional_db: None, demo_server: RunningPeer
) -> None:
    with outage_proxy(demo_server.url) as proxy:
        server = services.server_create(name="flaky", url=proxy.url(), headers={}, user=None)
        task = quiet_task(server)
        run_worker_until(lambda: bool(RemoteTask.objects.get(pk=task.pk).last_confirmed_at), listen=False)
        client = viewer()
        assert "stale-flag" not in pages(client, task)["list"]
        proxy.down()
        run_worker_until(lambda: McpServer.objects.get(pk=server.pk).consecutive_failures > 0, listen=False)
        row = RemoteTask.objects.get(pk=task.pk)
        since = f"{timezone.localtime(row.stale_since):%H:%M:%S}"
        assert row.stale_since == row.last_confirmed_at
        failing_since = McpServer.objects.get(pk=server.pk).failing_since
        assert failing_since is not None
        shown = pages(client, task)
        # A list row's mark is its server's (one live mark for all its rows: docs/live.md).
        assert f"stale since {timezone.localtime(failing_since):%H:%M:%S}" in shown["list"]
        assert f"stale since {since}" in shown["detail"] and 'id="stale-warning"' in shown["detail"]
        assert "flaky has been failing since" in shown["detail"] and "cannot reach" in shown["detail"]
        assert f"stale since {since}" in shown["overview"]
        assert "<b>1</b>stale" in shown["overview"]
        only_stale = client.get(reverse("tasks:list"), {"status": "stale"}).content.decode()
        assert f"task-row-{task.pk}" in only_stale
        assert row.last_confirmed_at is not None
        assert shown_json(task)["staleSince"] == row.last_confirmed_at.isoformat()
        proxy.up()
        run_worker_until(lambda: McpServer.objects.get(pk=server.pk).consecutive_failures == 0, listen=False)
        assert McpServer.objects.get(pk=server.pk).failing_since is None
        assert all("stale-flag" not in html for html in pages(client, task).values())
        assert shown_json(task)["staleSince"] is None
        services.task_cancel(task=task, user=None)


def shown_json(task: RemoteTask) -> dict[str, Any]:
    out = StringIO()
    call_command("tasks", "show", str(task.pk), "--json", stdout=out)
    data: dict[str, Any] = json.loads(out.getvalue())
    return data


def pages(client: Client, task: RemoteTask) -> dict[str, str]:
    urls = {
        "list": reverse("tasks:list"),
        "detail": reverse("tasks:detail", args=[task.pk]),
        "overview": reverse("tasks:overview"),
    }
    return {name: client.get(url).content.decode() for name, url in urls.items()}


async def test_open_pages_are_told_when_a_server_starts_failing(demo_registered: McpServer) -> None:
    task = await sync_to_async(quiet_task)(demo_registered)
    user = await sync_to_async(User.objects.create_user)("vic", password="pw-for-tests-only")
    await sync_to_async(user.groups.add)(await sync_to_async(Group.objects.get)(name="viewer"))
    communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), f"/ws/live/?page=task&task={task.pk}")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    until = timezone.now() + timedelta(seconds=5)
    await sync_to_async(RemoteTask.objects.filter(pk=task.pk).update)(leased_by="worker-1")
    await sync_to_async(services.server_record_failure)(
        server_id=demo_registered.pk,
        worker="worker-1",
        error="cannot reach it",
        failures=1,
        backoff_until=until,
    )
    html = await communicator.receive_from(timeout=5)
    while 'id="task-card"' not in html:
        html = await communicator.receive_from(timeout=5)
    assert "stale since" in html and 'id="stale-warning"' in html
    await communicator.disconnect()
    await sync_to_async(services.task_cancel)(task=task, user=None)

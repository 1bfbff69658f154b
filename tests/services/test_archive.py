"""Archiving a server: its tasks and history stay, read-only; the worker never polls or
listens to it; nothing more is sent to it; an admin can bring it back. Against the reference server."""

import contextlib
from collections.abc import Iterator

import pytest
from django.urls import reverse

from tasksapp import services
from tasksapp.models import McpServer, OperatorAction, RemoteTask
from tests.peers.launch import RunningPeer
from tests.support.engine_helpers import run_worker, run_worker_until
from tests.support.opsdata import logged_in, person

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(demo_registered: McpServer) -> Iterator[RemoteTask]:
    started = services.call_start(
        server=demo_registered,
        tool="run_forever",
        arguments={"delay": 0.2, "poll_interval_ms": 200},
        user=None,
    )
    assert started.task is not None
    yield started.task
    McpServer.objects.filter(pk=demo_registered.pk).update(archived=False)
    with contextlib.suppress(services.ServiceError):
        services.task_cancel(task=started.task, user=None)


def test_an_archived_server_is_never_polled_and_its_tasks_stay_read_only(
    running: RemoteTask, demo_server: RunningPeer
) -> None:
    admin, operator = logged_in(person("ada", "admin")), logged_in(person("otto", "operator"))
    url = reverse("tasks:server-archive", args=[running.server_id])
    assert "1 unfinished task will" in admin.get(url).content.decode()  # the confirmation page
    assert admin.post(url).status_code == 302
    assert McpServer.objects.get(pk=running.server_id).archived

    demo_server.clear()
    run_worker(1.0)
    counts = demo_server.method_counts()
    assert counts.get("tasks/get", 0) == 0 and counts.get("subscriptions/listen", 0) == 0, counts

    assert operator.get(reverse("tasks:detail", args=[running.pk])).status_code == 200
    assert f'id="task-row-{running.pk}"' in operator.get(reverse("tasks:list")).content.decode()
    assert "archived" in operator.get(reverse("tasks:servers")).content.decode()
    refused = operator.post(reverse("tasks:cancel", args=[running.pk]), follow=True).content.decode()
    assert "is archived" in refused
    with pytest.raises(services.NotAllowed, match="archived"):
        archived = McpServer.objects.get(pk=running.server_id)
        services.call_start(server=archived, tool="echo", arguments={"text": "hi"}, user=None)
    assert demo_server.method_counts() == counts  # no cancel, no call: nothing reached the server


def test_an_un_archived_server_is_polled_again(running: RemoteTask, demo_server: RunningPeer) -> None:
    admin = logged_in(person("ada", "admin"))
    url = reverse("tasks:server-archive", args=[running.server_id])
    admin.post(url)
    assert "Un-archive server" in admin.get(url).content.decode()
    admin.post(url)
    assert not McpServer.objects.get(pk=running.server_id).archived

    demo_server.clear()
    run_worker_until(lambda: demo_server.method_counts().get("tasks/get", 0) >= 2, listen=False)
    audited = OperatorAction.objects.filter(server_id=running.server_id, action__startswith="server_")
    assert list(audited.order_by("id").values_list("action", flat=True))[-2:] == [
        "server_archive",
        "server_unarchive",
    ]


def test_only_admins_archive(running: RemoteTask) -> None:
    url = reverse("tasks:server-archive", args=[running.server_id])
    for role in ("viewer", "operator"):
        assert logged_in(person(role, role)).post(url).status_code == 403
    assert not McpServer.objects.get(pk=running.server_id).archived

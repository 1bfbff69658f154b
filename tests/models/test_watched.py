"""The watched-server filter, one definition (tasksapp.models.watched_servers) for the worker, the
task lists, the inbox and the overview: enabled and not archived."""

import pytest

from tasksapp.models import McpServer, RemoteTask, watched_servers

pytestmark = pytest.mark.django_db


def test_watched_servers_are_enabled_and_not_archived() -> None:
    watched = McpServer.objects.create(name="watched", url="http://127.0.0.1:9/a")
    McpServer.objects.create(name="disabled", url="http://127.0.0.1:9/b", enabled=False)
    McpServer.objects.create(name="archived", url="http://127.0.0.1:9/c", archived=True)
    assert list(McpServer.objects.watched()) == [watched]
    tasks = {}
    for server in McpServer.objects.all():
        task = RemoteTask(server=server, tool_name="slow_count", status="working")
        task.set_remote_id(f"t-{server.name}")
        task.save()
        tasks[server.name] = task
    assert list(RemoteTask.objects.filter(watched_servers("server__"))) == [tasks["watched"]]
    assert list(RemoteTask.objects.active()) == [tasks["watched"]]

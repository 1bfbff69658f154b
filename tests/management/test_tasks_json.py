"""`manage.py tasks list --json` and `tasks show --json` describe a task with the same fields."""

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from tasksapp import services
from tasksapp.models import McpServer, RemoteTask

pytestmark = pytest.mark.django_db(transaction=True)


def command(*args: str) -> Any:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_created_at_is_the_servers_in_list_and_show(demo_registered: McpServer) -> None:
    started = services.call_start(server=demo_registered, tool="run_forever", arguments={}, user=None)
    assert started.task is not None
    listed = command("tasks", "list")
    shown = command("tasks", "show", str(started.task.pk))
    [row] = [row for row in listed if row["id"] == started.task.pk]
    task = RemoteTask.objects.get(pk=started.task.pk)
    assert row["createdAt"] == shown["createdAt"] == task.created_at_raw  # the server's createdAt
    assert row["mirroredAt"] == shown["mirroredAt"] == task.created_at.isoformat()
    services.task_cancel(task=task, user=None)

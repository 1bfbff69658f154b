"""Tasks waiting in the inbox, made as rows (no server asked): one with a question of any kind, or
many needing input with a form; and the tasks an inbox page lists."""

import re
import secrets
from typing import Any

from django.utils import timezone

from tasksapp.models import InputRequest, McpServer, RemoteTask

FORM = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}
CONTACT_FORM = {
    "message": "Please fill in your contact details.",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
}


def asking(server: McpServer, tool: str, method: str, params: dict[str, Any]) -> RemoteTask:
    """A task of `server` waiting on one question (`method` with `params`)."""
    task = RemoteTask(
        server=server, tool_name=tool, status="input_required", remote_created_at=timezone.now()
    )
    task.set_remote_id(secrets.token_urlsafe(12))
    task.save()
    request = InputRequest(task=task, method=method, params=params)
    request.set_key(secrets.token_urlsafe(8))
    request.save()
    return task


def open_tasks(server: McpServer, count: int, *, start: int = 0) -> list[RemoteTask]:
    """`count` tasks needing input; task i has i minutes of TTL left (so lower i is more urgent)."""
    now = timezone.now()
    tasks = []
    for i in range(start, start + count):
        task = RemoteTask(
            server=server,
            tool_name="ask_form",
            status="input_required",
            remote_created_at=now,
            ttl_ms=(i + 1) * 60_000,
        )
        task.set_remote_id(secrets.token_urlsafe(16))
        tasks.append(task)
    RemoteTask.objects.bulk_create(tasks)
    requests = []
    for task in tasks:
        request = InputRequest(task=task, method="elicitation/create", params=CONTACT_FORM)
        request.set_key(secrets.token_urlsafe(16))
        requests.append(request)
    InputRequest.objects.bulk_create(requests)
    return tasks


def shown(html: str) -> list[int]:
    """Task ids in the order the inbox page lists them."""
    return [int(pk) for pk in re.findall(r'id="inbox-task-(\d+)"', html)]

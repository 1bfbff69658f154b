"""The live layer without a browser: a signed-in Django test client, a task row, and a websocket
to the real ASGI application (dashboard.asgi) carrying that client's session cookie."""

import time
from collections.abc import Callable
from typing import Any

from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, User
from django.test import Client

from dashboard.asgi import application
from tasksapp import events
from tasksapp.models import McpServer, RemoteTask

HOST = "127.0.0.1:8123"
OWN = f"http://{HOST}"


def signed_in(role: str = "viewer", name: str = "vera") -> tuple[User, Client]:
    user = User.objects.create_user(name, password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name=role))
    client = Client(HTTP_HOST=HOST)
    client.force_login(user)
    return user, client


def make_task(**fields: Any) -> RemoteTask:
    server, _ = McpServer.objects.get_or_create(name="srv", url="http://127.0.0.1:9/mcp")
    task = RemoteTask(server=server, tool_name="slow_count", status="working", **fields)
    task.set_remote_id(f"remote-{time.monotonic_ns()}")
    task.save()
    return task


def socket(client: Client, query: str, *, origin: str = OWN, host: str = HOST) -> WebsocketCommunicator:
    cookie = "; ".join(f"{name}={morsel.value}" for name, morsel in client.cookies.items())
    headers = [(b"host", host.encode()), (b"origin", origin.encode()), (b"cookie", cookie.encode())]
    return WebsocketCommunicator(application, f"/ws/live/?{query}", headers=headers)


async def frames_until(communicator: WebsocketCommunicator, found: Callable[[str], bool]) -> list[str]:
    """Every frame up to and including the first for which `found` is true (5 s at most each)."""
    seen: list[str] = []
    while not seen or not found(seen[-1]):
        seen.append(await communicator.receive_from(timeout=5))
    return seen


async def closed_with(communicator: WebsocketCommunicator, timeout: float = 5) -> int:
    """The close code the server sent (frames before it are skipped)."""
    while True:
        message = await communicator.receive_output(timeout=timeout)
        if message["type"] == "websocket.close":
            return int(message.get("code", 1000))


def ask(task: RemoteTask) -> None:
    """The server asks a question (what the worker records from an input_required snapshot)."""
    from django.db import transaction

    from tasksapp.models import InputRequest

    schema = {"type": "object", "properties": {"name": {"type": "string", "title": "Name"}}}
    with transaction.atomic():
        request = InputRequest(
            task=task, method="elicitation/create", params={"message": "Name?", "requestedSchema": schema}
        )
        request.set_key("k1")
        request.save()
        RemoteTask.objects.filter(pk=task.pk).update(status="input_required")
        events.publish_task_changed(task.pk, inbox=True)

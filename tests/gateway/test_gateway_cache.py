"""What a gateway process keeps between requests (tasksapp/gateway/cache.py): a task answered
without a database step while the mirror is fresh, dropped as soon as the live hub hands the
process a change to it, and never one agent's answer to another."""

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction

from tasksapp import events
from tasksapp.gateway.app import GatewayApp
from tasksapp.live.hub import hub
from tasksapp.models import McpServer, RemoteTask
from tasksapp.services.agents import agent_create
from tests.gateway.support import envelope

pytestmark = pytest.mark.django_db(transaction=True)


async def call(app: GatewayApp, server: McpServer, token: str, method: str, params: dict[str, Any]) -> Any:
    """One request handed to the gateway's ASGI application in this process and event loop."""
    name = params.get("taskId") or params.get("name")
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": envelope()}}
    ).encode()
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", method.encode()),
        (b"mcp-name", str(name).encode()),
        (b"authorization", f"Bearer {token}".encode()),
    ]
    scope = {"type": "http", "method": "POST", "path": f"/gateway/{server.pk}/mcp", "headers": headers}
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


def change_by_hand(pk: int, message: str) -> None:
    """A write to the mirror as every service makes one: the row, then its publish after commit."""
    with transaction.atomic():
        RemoteTask.objects.filter(pk=pk).update(status_message=message)
        events.publish_task_changed(pk)


async def test_a_kept_task_is_dropped_as_soon_as_the_hub_hands_over_its_change(
    demo_registered: McpServer, settings: Any
) -> None:
    settings.MCP_GATEWAY_CACHE_MS = 600_000  # only the change message can make the change visible
    app = GatewayApp()
    _, token = await sync_to_async(agent_create)(name="keeper", servers=[demo_registered], user=None)
    _, other = await sync_to_async(agent_create)(name="prober", servers=[demo_registered], user=None)
    started = await call(
        app, demo_registered, token, "tools/call",
        {"name": "run_forever", "arguments": {"delay": 30, "poll_interval_ms": 60_000}},
    )  # fmt: skip
    task_id = started["result"]["taskId"]
    first = await call(app, demo_registered, token, "tasks/get", {"taskId": task_id})
    assert first["result"]["status"] == "working"
    kept = await call(app, demo_registered, token, "tasks/get", {"taskId": task_id})
    assert kept == first
    # Kept for its agent only: another's tasks/get is the unknown-task answer, as before.
    probe = await call(app, demo_registered, other, "tasks/get", {"taskId": task_id})
    assert probe["error"] == {"code": -32602, "message": "Task not found"}

    pk = await sync_to_async(lambda: RemoteTask.objects.get(agent__name="keeper").pk)()
    delivered = hub().delivered
    await sync_to_async(change_by_hand)(pk, "changed elsewhere")
    for _ in range(1000):  # until the hub has handed the change to this process's members
        if hub().delivered > delivered:
            break
        await asyncio.sleep(0.01)
    after = await call(app, demo_registered, token, "tasks/get", {"taskId": task_id})
    assert after["result"]["statusMessage"] == "changed elsewhere"
    await hub().leave(app.tasks.kept)

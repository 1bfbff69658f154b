"""The worker keeps up with what changes under it: a server edited while its tasks run, and an
answer or cancel that arrives while that task's poll is on the wire."""

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from asgiref.sync import sync_to_async
from django.utils import timezone

from tasksapp import services
from tasksapp.engine.worker import Worker
from tasksapp.models import McpServer, RemoteTask
from tests.mcpclient import hostile_server as hostile
from tests.peers.launch import RunningPeer
from tests.support.faults import ScriptedServer

pytestmark = pytest.mark.django_db(transaction=True)


async def until(condition: Callable[[], Awaitable[object]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.05)


def test_tasks_keep_being_polled_through_the_new_client_after_a_server_edit(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    task = services.call_start(server=demo_registered, tool="run_forever", arguments={}, user=None).task
    assert task is not None

    def polls_carrying(value: str | None) -> int:
        return sum(
            1
            for seen in demo_server.received()
            if seen.get("method") == "tasks/get" and seen["headers"].get("x-edition") == value
        )

    async def main() -> None:
        worker = Worker(refresh_seconds=0.2, listen=False)
        runner = asyncio.create_task(worker.run())
        try:
            await until(lambda: sync_to_async(polls_carrying)(None), 10, "the task is polled")
            # An edit that changes the client: new credentials (the same origin, so nothing is lost).
            await sync_to_async(services.server_update)(
                server=demo_registered,
                url=demo_registered.url,
                headers={"X-Edition": "2"},
                enabled=True,
                user=None,
            )
            # Polled through the new client well inside the lease (30 s): before, the edit dropped
            # the task from the worker while its lease stayed held, and nobody polled it until
            # the lease lapsed.
            await until(lambda: sync_to_async(polls_carrying)("2"), 5, "polled with the new headers")
        finally:
            worker.stop()
            await runner

    asyncio.run(main())
    assert RemoteTask.objects.get(pk=task.pk).leased_by == ""  # handed back at the clean stop


def test_a_server_disabled_gives_its_leases_back(demo_registered: McpServer) -> None:
    task = services.call_start(server=demo_registered, tool="run_forever", arguments={}, user=None).task
    assert task is not None

    def leased() -> bool:
        return RemoteTask.objects.get(pk=task.pk).leased_by != ""

    async def main() -> None:
        worker = Worker(refresh_seconds=0.2, listen=False)
        runner = asyncio.create_task(worker.run())
        try:
            await until(sync_to_async(leased), 10, "the task is claimed")
            await sync_to_async(McpServer.objects.filter(pk=demo_registered.pk).update)(enabled=False)
            await until(lambda: sync_to_async(lambda: not leased())(), 5, "the lease is given back")
        finally:
            worker.stop()
            await runner

    asyncio.run(main())


def test_a_nudge_while_the_task_is_being_polled_polls_it_again_at_once() -> None:
    """The server's answer to a poll already on the wire may predate the operator's answer or
    cancel: the worker must look again at once, not at the server's next interval (60 s here)."""
    now = timezone.now().isoformat()
    state = {"status": "working"}
    gets: list[str] = []
    hold = threading.Event()

    async def script(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        method = message.get("method", "")
        if method == "tools/list":
            tool = {"name": "job", "inputSchema": {"type": "object", "properties": {}}}
            return hostile.json_reply(hostile.response(message, {"tools": [tool]}))
        fields = {"createdAt": now, "lastUpdatedAt": now, "pollIntervalMs": 60_000}
        if method == "tools/call":
            started = {"resultType": "task", **hostile.task(**fields)}
            return hostile.json_reply(hostile.response(message, started))
        status = state["status"]  # what the server knows when the request arrives
        gets.append(status)
        if len(gets) == 1:
            await asyncio.to_thread(hold.wait, 10)
        done = {"result": {"content": [{"type": "text", "text": "done"}]}} if status == "completed" else {}
        answer = {"resultType": "complete", **hostile.task(**fields, **done, status=status)}
        return hostile.json_reply(hostile.response(message, answer))

    server = ScriptedServer(script)
    try:
        registered = services.server_create(name="scripted", url=server.url, headers={}, user=None)
        task = services.call_start(server=registered, tool="job", arguments={}, user=None).task
        assert task is not None

        async def main() -> None:
            worker = Worker(refresh_seconds=0.2, listen=False)
            runner = asyncio.create_task(worker.run())
            try:
                await until(lambda: asyncio.sleep(0, bool(gets)), 10, "the first poll is on the wire")
                state["status"] = "completed"  # e.g. the operator's cancel took effect meanwhile
                worker.nudged(task.pk)  # what the channel layer's task.nudge message calls
                hold.set()
                await until(
                    lambda: sync_to_async(lambda: RemoteTask.objects.get(pk=task.pk).status == "completed")(),
                    5,
                    "the second poll sees the change",
                )
            finally:
                hold.set()
                worker.stop()
                await runner

        asyncio.run(main())
    finally:
        server.close()
    assert gets == ["working", "completed"]

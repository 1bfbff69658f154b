"""A task server at the network edge whose answers a test scripts method by method (one tool, `job`;
every other method answered as a task server would), and a task started on it through the services."""

from collections.abc import Callable
from typing import Any

from aiohttp import web
from django.utils import timezone

from tasksapp import services
from tasksapp.models import RemoteTask
from tests.mcpclient import hostile_server as hostile
from tests.support.faults import ScriptedServer

TOOL = {"name": "job", "inputSchema": {"type": "object", "properties": {}}}
QUESTION = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "Name?", "requestedSchema": {"type": "object", "properties": {}}},
}


def scripted(
    answers: dict[str, Callable[[dict[str, Any]], web.StreamResponse]], **task_fields: object
) -> ScriptedServer:
    """A server at the network edge: tools/list and tools/call as usual, other methods as told."""
    now = timezone.now().isoformat()
    created = hostile.task(**{"createdAt": now, "lastUpdatedAt": now, **task_fields})

    async def script(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        method = message.get("method", "")
        if method in answers:
            return answers[method](message)
        if method == "tools/list":
            return hostile.json_reply(hostile.response(message, {"tools": [TOOL]}))
        if method == "tools/call":
            return hostile.json_reply(hostile.response(message, {"resultType": "task", **created}))
        return hostile.json_reply(hostile.response(message, {"resultType": "complete", **created}))

    return ScriptedServer(script)


def started_on(server: ScriptedServer) -> RemoteTask:
    registered = services.server_create(name="scripted", url=server.url, headers={}, user=None)
    task = services.call_start(server=registered, tool="job", arguments={}, user=None).task
    assert task is not None
    return task

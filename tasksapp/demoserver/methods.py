"""The request/response methods: discover, tools/list, tools/call and the three tasks/* methods."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from .envelope import Request
from .protocol import (
    SUPPORTED_VERSIONS,
    TASKS_EXTENSION,
    ErrorCode,
    JsonObject,
    RpcError,
    header_mismatch,
    invalid_params,
    missing_tasks_capability,
)
from .signing import InvalidToken, Signer
from .tasks import TaskBody, TaskContext, TaskStore
from .tools import TOOLS, TOOLS_BY_NAME, Tool
from .tools.registry import Arguments, Finish, GateCall, NeedInput

logger = logging.getLogger(__name__)

PAGE_SIZE = 5
_CURSOR_TTL_SECONDS = 24 * 3600
_REQUEST_STATE_TTL_SECONDS = 600
INSTRUCTIONS = (
    "Reference server for the MCP tasks extension (SEP-2663). Each tool is a scenario: "
    "immediate answers, long tasks with progress, input requests, failures, expiry and "
    "hostile text. Declare io.modelcontextprotocol/tasks to get tasks."
)
_ACK: JsonObject = {"resultType": "complete"}

Handler = Callable[[Request], Awaitable[JsonObject]]


class Methods:
    def __init__(self, store: TaskStore, signer: Signer, poll_interval_ms: int) -> None:
        self._store = store
        self._signer = signer
        self._poll_interval_ms = poll_interval_ms
        # tasks/* requests that came without Mcp-Name: accepted like fastmcp, but counted.
        self.missing_mcp_name: Counter[str] = Counter()
        self._handlers: dict[str, Handler] = {
            "server/discover": self._discover,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "tasks/get": self._tasks_get,
            "tasks/update": self._tasks_update,
            "tasks/cancel": self._tasks_cancel,
        }

    async def dispatch(self, request: Request) -> JsonObject:
        """Returns the result (without serverInfo) or raises RpcError."""
        handler = self._handlers.get(request.method)
        if handler is None:
            raise RpcError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {request.method}")
        return await handler(request)

    async def _discover(self, request: Request) -> JsonObject:
        return {
            "resultType": "complete",
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": {"tools": {"listChanged": False}, "extensions": {TASKS_EXTENSION: {}}},
            "instructions": INSTRUCTIONS,
            "ttlMs": 0,
            "cacheScope": "private",
        }

    async def _tools_list(self, request: Request) -> JsonObject:
        offset = self._cursor_offset(request.params.get("cursor"))
        page = TOOLS[offset : offset + PAGE_SIZE]
        result: JsonObject = {
            "resultType": "complete",
            "tools": [tool.definition() for tool in page],
            "ttlMs": 0,
            "cacheScope": "private",
        }
        if offset + PAGE_SIZE < len(TOOLS):
            payload = {"offset": offset + PAGE_SIZE}
            result["nextCursor"] = self._signer.seal("cursor", payload, _CURSOR_TTL_SECONDS)
        return result

    def _cursor_offset(self, cursor: Any) -> int:
        if cursor is None:
            return 0
        try:
            offset = self._signer.open("cursor", cursor).get("offset")
        except InvalidToken as exc:
            raise invalid_params("Invalid cursor") from exc
        if not isinstance(offset, int) or not 0 <= offset < len(TOOLS):
            raise invalid_params("Invalid cursor")
        return offset

    async def _tools_call(self, request: Request) -> JsonObject:
        name = request.params["name"]
        tool = TOOLS_BY_NAME.get(name)
        if tool is None:
            raise invalid_params(f"Unknown tool: {name}")
        if tool.creates_task and not request.has_tasks_capability:
            raise missing_tasks_capability(
                f"Tool '{name}' requires the tasks extension ({TASKS_EXTENSION}); "
                "the client did not declare it for this request."
            )
        arguments = tool.validate(request.params.get("arguments"))
        if tool.gate is not None:
            outcome = tool.gate(self._gate_call(tool, request, arguments))
            if isinstance(outcome, NeedInput):
                return self._input_required(tool, outcome)
            if isinstance(outcome, Finish):
                return {"resultType": "complete", **outcome.result}
            arguments = outcome.arguments
        if tool.immediate is not None:
            return {"resultType": "complete", **await tool.immediate(arguments)}
        start = tool.start(arguments, self._poll_interval_ms)
        record = self._store.create(start, _bind(tool, arguments))
        return {"resultType": "task", **record.snapshot()}

    def _gate_call(self, tool: Tool, request: Request, arguments: Arguments) -> GateCall:
        responses = request.params.get("inputResponses") or {}
        if not isinstance(responses, dict):
            raise invalid_params("params.inputResponses must be an object")
        state = None
        if "requestState" in request.params:
            try:
                state = self._signer.open(f"mrtr:{tool.name}", request.params["requestState"])
            except InvalidToken as exc:
                raise invalid_params(
                    "Invalid or expired requestState", {"reason": "invalid_request_state"}
                ) from exc
        return GateCall(arguments, responses, state)

    def _input_required(self, tool: Tool, outcome: NeedInput) -> JsonObject:
        state = self._signer.seal(f"mrtr:{tool.name}", outcome.state, _REQUEST_STATE_TTL_SECONDS)
        return {
            "resultType": "input_required",
            "inputRequests": outcome.requests,
            "requestState": state,
        }

    async def _tasks_get(self, request: Request) -> JsonObject:
        record = self._store.get(self._task_id(request))
        return {"resultType": "complete", **record.snapshot()}

    async def _tasks_update(self, request: Request) -> JsonObject:
        task_id = self._task_id(request)
        responses = request.params.get("inputResponses", {})
        if not isinstance(responses, dict):
            raise invalid_params("params.inputResponses must be an object")
        self._store.answer(task_id, responses)
        return dict(_ACK)

    async def _tasks_cancel(self, request: Request) -> JsonObject:
        self._store.cancel(self._task_id(request))
        return dict(_ACK)

    def _task_id(self, request: Request) -> str:
        """The checks every tasks/* request shares: capability, taskId, then Mcp-Name."""
        if not request.has_tasks_capability:
            raise missing_tasks_capability(
                f"{request.method} requires the tasks extension ({TASKS_EXTENSION}); "
                "the client did not declare it for this request."
            )
        task_id = request.params.get("taskId")
        if not isinstance(task_id, str):
            raise invalid_params(f"{request.method} needs params.taskId (a string)")
        if request.mcp_name is None:
            self.missing_mcp_name[request.method] += 1
            logger.warning("%s arrived without an Mcp-Name header (accepted)", request.method)
        elif request.mcp_name != task_id:
            raise header_mismatch("mcp-name header does not match the request body's 'taskId'")
        return task_id


def _bind(tool: Tool, arguments: Arguments) -> TaskBody:
    task = tool.task
    assert task is not None

    async def body(ctx: TaskContext) -> JsonObject:
        return await task(ctx, arguments)

    return body

"""The request/response methods: discover, tools/list, tools/call and the three tasks/* methods."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from . import catalog
from .envelope import Request
from .inputkinds import missing_capabilities, refusal
from .paramheaders import annotated, check_param_headers
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
from .tools.registry import Arguments, CallContext, Finish, GateCall, NeedInput

logger = logging.getLogger(__name__)

_CURSOR_TTL_SECONDS = 24 * 3600
_REQUEST_STATE_TTL_SECONDS = 600
INSTRUCTIONS = (
    "Reference server for the MCP tasks extension (SEP-2663). Each tool is a scenario: "
    "immediate answers, long tasks with progress, input requests, failures, expiry and "
    "hostile text. Declare io.modelcontextprotocol/tasks to get tasks. The test_* tools, "
    "resources and prompts are the fixtures of the official conformance suite."
)
CAPABILITIES: JsonObject = {
    "tools": {"listChanged": False},
    "prompts": {"listChanged": False},
    "resources": {"subscribe": False, "listChanged": False},
    "completions": {},
    "logging": {},
    "extensions": {TASKS_EXTENSION: {}},
}
_ACK: JsonObject = {"resultType": "complete"}

Handler = Callable[[Request], Awaitable[JsonObject]]


class Methods:
    def __init__(
        self,
        store: TaskStore,
        signer: Signer,
        poll_interval_ms: int,
        page_size: int = 100,
        *,
        permissive_inputs: bool = False,
    ) -> None:
        self._store = store
        self._permissive_inputs = permissive_inputs
        self._signer = signer
        self._poll_interval_ms = poll_interval_ms
        self._page_size = page_size
        # tasks/* requests that came without Mcp-Name: accepted like fastmcp, but counted.
        self.missing_mcp_name: Counter[str] = Counter()
        self._handlers: dict[str, Handler] = {
            "server/discover": self._discover,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "tasks/get": self._tasks_get,
            "tasks/update": self._tasks_update,
            "tasks/cancel": self._tasks_cancel,
            "resources/list": self._resources_list,
            "resources/templates/list": self._templates_list,
            "resources/read": self._resources_read,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "completion/complete": self._complete,
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
            "capabilities": CAPABILITIES,
            "instructions": INSTRUCTIONS,
            "ttlMs": 0,
            "cacheScope": "private",
        }

    async def _tools_list(self, request: Request) -> JsonObject:
        offset = self._cursor_offset(request.params.get("cursor"))
        page = TOOLS[offset : offset + self._page_size]
        result: JsonObject = {
            "resultType": "complete",
            "tools": [tool.definition() for tool in page],
            "ttlMs": 0,
            "cacheScope": "private",
        }
        if offset + self._page_size < len(TOOLS):
            payload = {"offset": offset + self._page_size}
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
        as_task = tool.runs_as_task(request.has_tasks_capability)
        if as_task and not request.has_tasks_capability:
            raise missing_tasks_capability(
                f"Tool '{name}' requires the tasks extension ({TASKS_EXTENSION}); "
                "the client did not declare it for this request."
            )
        schema = tool.definition()["inputSchema"]
        check_param_headers(annotated(schema), request.params.get("arguments"), request.param_headers)
        arguments = tool.validate(request.params.get("arguments"))
        call = self._call_context(f"mrtr:{tool.name}", request, arguments)
        if tool.gate is not None:
            outcome = tool.gate(GateCall(arguments, call.input_responses, call.state))
            if isinstance(outcome, NeedInput):
                return self._input_required(f"mrtr:{tool.name}", outcome, request)
            if isinstance(outcome, Finish):
                return {"resultType": "complete", **outcome.result}
            arguments = outcome.arguments
        if tool.respond is not None and not as_task:
            answer = await tool.respond(call)
            if isinstance(answer, NeedInput):
                return self._input_required(f"mrtr:{tool.name}", answer, request)
            return {"resultType": "complete", **answer}
        if tool.immediate is not None and not as_task:
            return {"resultType": "complete", **await tool.immediate(arguments)}
        start = tool.start(arguments, self._poll_interval_ms)
        checked = None if self._permissive_inputs else request.capabilities
        record = self._store.create(
            start, _bind(tool, arguments), tool=tool.name, arguments=arguments, capabilities=checked
        )
        return {"resultType": "task", **record.snapshot()}

    def _call_context(self, purpose: str, request: Request, arguments: Arguments) -> CallContext:
        """The MRTR parts of a request, checked: inputResponses an object of objects, the state sealed."""
        responses = request.params.get("inputResponses", {})
        if not isinstance(responses, dict):
            raise invalid_params("params.inputResponses must be an object")
        for key, value in responses.items():
            if not isinstance(value, dict):
                raise invalid_params(f"params.inputResponses[{key!r}] must be an object (the answer)")
        state = None
        if "requestState" in request.params:
            try:
                state = self._signer.open(purpose, request.params["requestState"])
            except InvalidToken as exc:
                raise invalid_params(
                    "Invalid or expired requestState", {"reason": "invalid_request_state"}
                ) from exc
        meta = request.params.get("_meta")
        return CallContext(
            arguments, responses, state, request.capabilities, meta if isinstance(meta, dict) else {}
        )

    def _input_required(self, purpose: str, outcome: NeedInput, request: Request) -> JsonObject:
        """The input_required answer; input kinds the request did not declare are refused (-32021)
        rather than sent, unless the server is permissive."""
        missing = (
            {} if self._permissive_inputs else missing_capabilities(outcome.requests, request.capabilities)
        )
        if missing:
            raise refusal(f"{request.method} '{request.params.get('name')}'", missing)
        result: JsonObject = {"resultType": "input_required", "inputRequests": outcome.requests}
        if outcome.state is not None:
            result["requestState"] = self._signer.seal(purpose, outcome.state, _REQUEST_STATE_TTL_SECONDS)
        return result

    # --- resources, prompts, completion (conformance fixtures) --------------------------

    async def _resources_list(self, request: Request) -> JsonObject:
        return {"resultType": "complete", "resources": catalog.RESOURCES, **catalog.CACHE_HINTS}

    async def _templates_list(self, request: Request) -> JsonObject:
        return {"resultType": "complete", "resourceTemplates": catalog.TEMPLATES, **catalog.CACHE_HINTS}

    async def _resources_read(self, request: Request) -> JsonObject:
        return {"resultType": "complete", **catalog.read_resource(request.params.get("uri"))}

    async def _prompts_list(self, request: Request) -> JsonObject:
        prompts = [prompt.definition() for prompt in catalog.PROMPTS]
        return {"resultType": "complete", "prompts": prompts, **catalog.CACHE_HINTS}

    async def _prompts_get(self, request: Request) -> JsonObject:
        prompt = catalog.PROMPTS_BY_NAME.get(request.params["name"])
        if prompt is None:
            raise invalid_params(f"Unknown prompt: {request.params['name']}")
        arguments = prompt.check(request.params.get("arguments"))
        purpose = f"mrtr-prompt:{prompt.name}"
        answer = await prompt.render(self._call_context(purpose, request, dict(arguments)))
        if isinstance(answer, NeedInput):
            return self._input_required(purpose, answer, request)
        return {"resultType": "complete", **answer}

    async def _complete(self, request: Request) -> JsonObject:
        return {"resultType": "complete", **catalog.complete(request.params)}

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

    def task_body(self, name: str, arguments: JsonObject) -> TaskBody | None:
        """The body a task of tool `name` runs with these arguments (a restart runs it again)."""
        tool = TOOLS_BY_NAME.get(name)
        return _bind(tool, arguments) if tool is not None and tool.task is not None else None

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

"""Typed values parsed from what a server sent, each keeping the original JSON in `raw`.

Every parser treats its input as untrusted: a wrong type, a missing field or an unknown
status raises InvalidResponse naming the field, never a KeyError or a TypeError.
"""

from dataclasses import dataclass
from typing import Any, Literal

from tasksapp.mcpclient.errors import InvalidResponse

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TASK_STATUSES: frozenset[str] = frozenset({"working", "input_required", "completed", "failed", "cancelled"})
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
INPUT_METHODS: frozenset[str] = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
MAX_ID_LENGTH = 1024
MAX_INPUT_REQUESTS = 100

JsonObject = dict[str, Any]


def require_object(value: Any, what: str) -> JsonObject:
    if not isinstance(value, dict):
        raise InvalidResponse(f"{what} is {_kind(value)}, expected an object")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _str(obj: JsonObject, key: str, what: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        state = "missing" if key not in obj else _kind(value)
        raise InvalidResponse(f"{what}.{key} is {state}, expected a string")
    return value


def _int(obj: JsonObject, key: str, what: str, *, nullable: bool = True) -> int | None:
    value = obj.get(key)
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidResponse(f"{what}.{key} is {value!r}, expected a non-negative integer")
    return value


def _id(obj: JsonObject, key: str, what: str) -> str:
    value = _str(obj, key, what)
    assert value is not None
    if not value or len(value) > MAX_ID_LENGTH:
        raise InvalidResponse(f"{what}.{key} must be 1 to {MAX_ID_LENGTH} characters long")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequest:
    """One entry of an inputRequests map: elicitation/create, sampling/createMessage or roots/list."""

    method: str
    params: JsonObject
    raw: JsonObject


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """A CallToolResult. `is_error` is a tool-level failure, not a protocol error."""

    content: list[JsonObject]
    structured_content: Any
    is_error: bool
    raw: JsonObject


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequired:
    """An MRTR round before any task exists: answer, then call again with the same request_state."""

    input_requests: dict[str, InputRequest]
    request_state: str | None
    raw: JsonObject


@dataclass(frozen=True, slots=True, kw_only=True)
class RpcErrorInfo:
    """The JSON-RPC error a failed task's execution hit (it describes the tool run, not our request)."""

    code: int
    message: str
    data: Any
    raw: JsonObject


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """The fields every task state carries. Timestamps stay the strings the server sent."""

    task_id: str
    status: TaskStatus
    status_message: str | None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None
    raw: JsonObject

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkingTask(Task):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequiredTask(Task):
    input_requests: dict[str, InputRequest]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletedTask(Task):
    result: ToolResult


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedTask(Task):
    error: RpcErrorInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelledTask(Task):
    pass


DetailedTask = WorkingTask | InputRequiredTask | CompletedTask | FailedTask | CancelledTask


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskCreated:
    """tools/call answered with a CreateTaskResult: persist `task.task_id` before anything else."""

    task: DetailedTask
    raw: JsonObject


CallOutcome = ToolResult | InputRequired | TaskCreated


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    name: str
    title: str | None
    description: str | None
    input_schema: JsonObject
    output_schema: JsonObject | None
    annotations: JsonObject | None
    raw: JsonObject

    @property
    def display_name(self) -> str:
        annotated = (self.annotations or {}).get("title")
        return self.title or (annotated if isinstance(annotated, str) else None) or self.name


@dataclass(frozen=True, slots=True, kw_only=True)
class Discovery:
    """What server/discover (or, for a legacy server, initialize) revealed."""

    era: Literal["modern", "legacy"]
    protocol_version: str
    supported_versions: list[str]
    capabilities: JsonObject
    tasks_supported: bool
    server_info: JsonObject | None
    instructions: str | None
    raw: JsonObject


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenAck:
    """The first frame of a listen stream: the task ids the server agreed to push."""

    subscription_id: str | int
    task_ids: list[str]
    raw: JsonObject


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenEnded:
    """The server closed the listen stream gracefully with its final response."""

    subscription_id: str | int
    raw: JsonObject


ListenEvent = ListenAck | DetailedTask | ListenEnded


def parse_input_requests(value: Any, what: str) -> dict[str, InputRequest]:
    requests = require_object(value, what)
    if len(requests) > MAX_INPUT_REQUESTS:
        raise InvalidResponse(f"{what} has {len(requests)} entries, more than {MAX_INPUT_REQUESTS}")
    parsed: dict[str, InputRequest] = {}
    for key, entry in requests.items():
        if not key or len(key) > MAX_ID_LENGTH:
            raise InvalidResponse(f"{what} has a key of length {len(key)}")
        entry = require_object(entry, f"{what}[{key!r}]")
        method = _str(entry, "method", f"{what}[{key!r}]")
        params = entry.get("params", {})
        if params is None:
            params = {}
        parsed[key] = InputRequest(
            method=method or "",
            params=require_object(params, f"{what}[{key!r}].params"),
            raw=entry,
        )
    return parsed


def parse_tool_result(value: Any, what: str = "result") -> ToolResult:
    obj = require_object(value, what)
    content = obj.get("content", [])
    if not isinstance(content, list) or not all(isinstance(block, dict) for block in content):
        raise InvalidResponse(f"{what}.content is {_kind(content)}, expected an array of objects")
    is_error = obj.get("isError", False)
    if is_error is None:
        is_error = False
    if not isinstance(is_error, bool):
        raise InvalidResponse(f"{what}.isError is {_kind(is_error)}, expected a boolean")
    return ToolResult(
        content=content,
        structured_content=obj.get("structuredContent"),
        is_error=is_error,
        raw=obj,
    )


def parse_rpc_error(value: Any, what: str = "error") -> RpcErrorInfo:
    obj = require_object(value, what)
    code = obj.get("code")
    if isinstance(code, bool) or not isinstance(code, int):
        raise InvalidResponse(f"{what}.code is {_kind(code)}, expected an integer")
    message = obj.get("message", "")
    if not isinstance(message, str):
        raise InvalidResponse(f"{what}.message is {_kind(message)}, expected a string")
    return RpcErrorInfo(code=code, message=message, data=obj.get("data"), raw=obj)


def parse_detailed_task(value: Any, what: str = "task") -> DetailedTask:
    """A DetailedTask from tasks/get, a CreateTaskResult, or a notifications/tasks frame."""
    obj = require_object(value, what)
    status = obj.get("status")
    if not isinstance(status, str) or status not in TASK_STATUSES:
        raise InvalidResponse(f"{what}.status is {status!r}, not one of {sorted(TASK_STATUSES)}")
    common: dict[str, Any] = {
        "task_id": _id(obj, "taskId", what),
        "status": status,
        "status_message": _str(obj, "statusMessage", what, required=False),
        "created_at": _str(obj, "createdAt", what),
        "last_updated_at": _str(obj, "lastUpdatedAt", what),
        "ttl_ms": _int(obj, "ttlMs", what),
        "poll_interval_ms": _int(obj, "pollIntervalMs", what),
        "raw": obj,
    }
    if status == "input_required":
        requests = parse_input_requests(obj.get("inputRequests"), f"{what}.inputRequests")
        return InputRequiredTask(**common, input_requests=requests)
    if status == "completed":
        return CompletedTask(**common, result=parse_tool_result(obj.get("result"), f"{what}.result"))
    if status == "failed":
        return FailedTask(**common, error=parse_rpc_error(obj.get("error"), f"{what}.error"))
    if status == "cancelled":
        return CancelledTask(**common)
    return WorkingTask(**common)


def parse_call_outcome(value: Any) -> CallOutcome:
    """Branch a tools/call result on resultType (a missing one means complete, as on legacy servers)."""
    obj = require_object(value, "result")
    kind = obj.get("resultType", "complete")
    if kind == "complete":
        return parse_tool_result(obj)
    if kind == "task":
        return TaskCreated(task=parse_detailed_task(obj, "result"), raw=obj)
    if kind == "input_required":
        state = obj.get("requestState")
        if state is not None and not isinstance(state, str):
            raise InvalidResponse(f"result.requestState is {_kind(state)}, expected a string")
        requests = obj.get("inputRequests")
        if requests is None and state is None:
            raise InvalidResponse("input_required result has neither inputRequests nor requestState")
        parsed = {} if requests is None else parse_input_requests(requests, "result.inputRequests")
        return InputRequired(input_requests=parsed, request_state=state, raw=obj)
    raise InvalidResponse(f"result.resultType is {kind!r}, not complete, input_required or task")


def parse_tool(value: Any, what: str) -> Tool:
    obj = require_object(value, what)
    name = _id(obj, "name", what)
    schema = require_object(obj.get("inputSchema", {"type": "object"}), f"{what}.inputSchema")
    output = obj.get("outputSchema")
    annotations = obj.get("annotations")
    return Tool(
        name=name,
        title=_str(obj, "title", what, required=False),
        description=_str(obj, "description", what, required=False),
        input_schema=schema,
        output_schema=None if output is None else require_object(output, f"{what}.outputSchema"),
        annotations=None if annotations is None else require_object(annotations, f"{what}.annotations"),
        raw=obj,
    )


def server_info_of(result: JsonObject) -> JsonObject | None:
    meta = result.get("_meta")
    info = meta.get("io.modelcontextprotocol/serverInfo") if isinstance(meta, dict) else None
    if info is None:
        info = result.get("serverInfo")  # legacy initialize puts it at the top level
    return info if isinstance(info, dict) else None

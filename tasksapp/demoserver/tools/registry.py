"""How a scenario tool is described: its schema, how it runs, and minimal argument checks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..protocol import JsonObject, invalid_params
from ..tasks import TaskContext, TaskStart

Arguments = dict[str, Any]
ImmediateFn = Callable[[Arguments], Awaitable[JsonObject]]
TaskFn = Callable[[TaskContext, Arguments], Awaitable[JsonObject]]
StartFn = Callable[[Arguments, int], TaskStart]
LOG_LEVEL = "io.modelcontextprotocol/logLevel"


@dataclass(frozen=True)
class GateCall:
    """A tools/call as an MRTR gate sees it; `state` is the verified requestState payload."""

    arguments: Arguments
    input_responses: Mapping[str, Any]
    state: dict[str, Any] | None


@dataclass(frozen=True)
class NeedInput:
    """An input_required answer; `state` becomes a sealed requestState (None: send none)."""

    requests: dict[str, JsonObject]
    state: dict[str, Any] | None


@dataclass(frozen=True)
class Proceed:
    arguments: Arguments


@dataclass(frozen=True)
class Finish:
    result: JsonObject


GateFn = Callable[[GateCall], NeedInput | Proceed | Finish]


@dataclass(frozen=True)
class CallContext:
    """What a request-scoped handler (a tool's `respond`, a prompt) may read of its request."""

    arguments: Arguments
    input_responses: Mapping[str, Any]
    state: dict[str, Any] | None
    capabilities: JsonObject
    meta: JsonObject

    def declares(self, capability: str) -> bool:
        return isinstance(self.capabilities.get(capability), dict)

    @property
    def progress_token(self) -> str | int | None:
        token = self.meta.get("progressToken")
        return token if isinstance(token, str | int) and not isinstance(token, bool) else None

    @property
    def log_level(self) -> str | None:
        level = self.meta.get(LOG_LEVEL)
        return level if isinstance(level, str) else None


RespondFn = Callable[[CallContext], Awaitable[JsonObject | NeedInput]]


def starting(message: str) -> StartFn:
    """The usual TaskStart: the given statusMessage and the caller's `poll_interval_ms`."""

    def start(arguments: Arguments, default_interval_ms: int) -> TaskStart:
        return TaskStart(message, arguments.get("poll_interval_ms", default_interval_ms))

    return start


def task_properties(delay: float, delay_text: str) -> dict[str, JsonObject]:
    """The two knobs every task tool takes, so tests can run scenarios fast."""
    return {
        "poll_interval_ms": {
            "type": "integer",
            "minimum": 1,
            "description": "Override the task's suggested pollIntervalMs.",
        },
        "delay": {"type": "number", "minimum": 0, "default": delay, "description": delay_text},
    }


_DEFAULT_START = starting("Started.")


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    properties: dict[str, JsonObject] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    immediate: ImmediateFn | None = None
    task: TaskFn | None = None
    start: StartFn = _DEFAULT_START
    gate: GateFn | None = None
    respond: RespondFn | None = None
    annotations: JsonObject | None = None
    # "optional": without the tasks capability the call runs `immediate` in the foreground.
    task_support: Literal["required", "optional"] = "required"
    input_schema: JsonObject | None = None  # served verbatim instead of one built from `properties`

    @property
    def creates_task(self) -> bool:
        return self.task is not None

    def runs_as_task(self, has_tasks_capability: bool) -> bool:
        return self.task is not None and (has_tasks_capability or self.task_support == "required")

    def definition(self) -> JsonObject:
        tool: JsonObject = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema
            or {"type": "object", "properties": self.properties, "required": list(self.required)},
        }
        if self.annotations is not None:
            tool["annotations"] = self.annotations
        return tool

    def validate(self, arguments: Any) -> Arguments:
        """Returns the arguments with defaults filled in; unknown keys are ignored."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise invalid_params(f"Tool '{self.name}': arguments must be an object")
        checked: Arguments = {}
        for name, schema in self.properties.items():
            if name in arguments:
                checked[name] = self._checked(name, schema, arguments[name])
            elif name in self.required:
                raise invalid_params(f"Tool '{self.name}': missing required argument '{name}'")
            elif "default" in schema:
                checked[name] = schema["default"]
        return checked

    def _checked(self, name: str, schema: JsonObject, value: Any) -> Any:
        expected = schema.get("type")
        if isinstance(expected, str) and not _TYPE_CHECKS[expected](value):
            raise invalid_params(f"Tool '{self.name}': argument '{name}' must be {expected}")
        if "minimum" in schema and value < schema["minimum"]:
            raise invalid_params(f"Tool '{self.name}': '{name}' must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise invalid_params(f"Tool '{self.name}': '{name}' must be <= {schema['maximum']}")
        return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda value: isinstance(value, str),
    "integer": _is_int,
    "number": _is_number,
    "boolean": lambda value: isinstance(value, bool),
}


def text_result(text: str, structured: Any = None, *, is_error: bool = False) -> JsonObject:
    result: JsonObject = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if structured is not None:
        result["structuredContent"] = structured
    return result


def form_request(message: str, schema: JsonObject) -> JsonObject:
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


def accepted_content(response: JsonObject) -> JsonObject | None:
    """The form content of an accepted ElicitResult, or None for decline/cancel."""
    content = response.get("content")
    if response.get("action") != "accept":
        return None
    return content if isinstance(content, dict) else {}

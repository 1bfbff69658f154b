"""The 2025-11-25 experimental tasks, translated into this library's (SEP-2663) types.

A 2025-11-25 server advertises `capabilities.tasks.requests.tools.call`, marks each tool with
`execution.taskSupport`, takes a `task` param on `tools/call` and answers `{"task": {…}}`; the
task is read with `tasks/get` (state) and `tasks/result` (the outcome), stopped with
`tasks/cancel`. Its fields are `ttl` and `pollInterval`, and "failed" also covers a tool result
with `isError`. Callers see the same DetailedTask variants as for a modern server, with `raw`
in the modern shape, so the mirror, the CLI and the UI need no second code path.
"""

import base64
import binascii
import json
from typing import Any

from tasksapp.mcpclient.errors import InvalidResponse, ProtocolError
from tasksapp.mcpclient.types import DetailedTask, JsonObject, parse_detailed_task, require_object

LEGACY_TASK_KEY = "io.modelcontextprotocol/legacyTask"
HANDLE_PREFIX = "legacy-task."
TASK_SUPPORT_VALUES = ("forbidden", "optional", "required")


def offers_tool_tasks(capabilities: Any) -> bool:
    """True when an initialize result's capabilities offer tasks for tools/call."""
    tasks = capabilities.get("tasks") if isinstance(capabilities, dict) else None
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    return isinstance(tools, dict) and isinstance(tools.get("call"), dict)


def task_support(tool_raw: JsonObject) -> str:
    """A tool's `execution.taskSupport`: "forbidden" (the default), "optional" or "required"."""
    execution = tool_raw.get("execution")
    support = execution.get("taskSupport") if isinstance(execution, dict) else None
    return support if support in TASK_SUPPORT_VALUES else "forbidden"


def handle(session: str | None, task_id: str, version: str) -> str:
    """The task id this client hands out for a legacy task: it names the session holding the task.

    A 2025-11-25 server may keep a task inside the session that created it (server-everything
    does), so whoever polls it later, in another process, must use that session.
    """
    if session is None:
        return task_id
    packed = json.dumps({"s": session, "t": task_id, "v": version}, separators=(",", ":")).encode()
    return HANDLE_PREFIX + base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")


def unpack(value: str) -> tuple[str, str, str] | None:
    """(session, server task id, protocol version) of a handle, or None for a plain task id."""
    if not value.startswith(HANDLE_PREFIX):
        return None
    encoded = value[len(HANDLE_PREFIX) :]
    try:
        packed = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(packed, dict):
        return None
    session, task_id, version = packed.get("s"), packed.get("t"), packed.get("v")
    if not (isinstance(session, str) and isinstance(task_id, str) and isinstance(version, str)):
        return None
    return session, task_id, version


def created_task(result: JsonObject, task_handle: str | None = None) -> DetailedTask:
    """The task of a legacy CreateTaskResult (`{"task": {…}}`)."""
    task = require_object(result.get("task"), "tools/call result.task")
    return translate(task, task_handle=task_handle)


def translate(
    task: JsonObject,
    *,
    result: Any = None,
    error: ProtocolError | None = None,
    task_handle: str | None = None,
) -> DetailedTask:
    """One legacy Task (plus, when terminal, what tasks/result gave) as a modern DetailedTask."""
    status = task.get("status")
    modern: JsonObject = {
        "taskId": task_handle or task.get("taskId"),
        "status": status,
        "createdAt": task.get("createdAt"),
        "lastUpdatedAt": task.get("lastUpdatedAt") or task.get("createdAt"),
        "ttlMs": task.get("ttl"),
        "_meta": {LEGACY_TASK_KEY: task},
    }
    for legacy_key, modern_key in (("statusMessage", "statusMessage"), ("pollInterval", "pollIntervalMs")):
        if task.get(legacy_key) is not None:
            modern[modern_key] = task[legacy_key]
    if status == "input_required":
        # Legacy input requests travel on the tasks/result stream, not in the task: none to list here.
        modern["inputRequests"] = {}
    elif status in ("completed", "failed") and error is not None:
        modern["status"], modern["error"] = "failed", error.to_json()
    elif status in ("completed", "failed"):
        outcome = require_object(result, "tasks/result result")
        if status == "failed" and outcome.get("isError") is not True:
            raise InvalidResponse("a failed legacy task's tasks/result is neither an error nor isError")
        # SEP-2663 keeps `failed` for protocol errors: a tool-level error is a completed task.
        modern["status"], modern["result"] = "completed", outcome
    return parse_detailed_task(modern, "legacy task")

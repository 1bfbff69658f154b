"""Fixture tools for the suite's `tasks-*` scenarios (SEP-2663) and its JSON Schema scenario.

`greet` never makes a task; `slow_compute` makes one when the request declares the tasks
extension and runs in the foreground otherwise; the others only run as tasks (-32021 without
the extension). `test_tool_with_task` gathers a name by MRTR, then starts a task (§4).
"""

from __future__ import annotations

import asyncio
import dataclasses

from ..protocol import ErrorCode, JsonObject
from ..tasks import TaskContext, TaskStart, ToolFailure
from .mrtr import MRTR_TOOL
from .registry import Arguments, Tool, accepted_content, form_request, task_properties, text_result

_SECONDS = {"type": "number", "minimum": 0, "maximum": 3600, "default": 1, "description": "How long to work."}
_LABEL = {"type": "string", "default": "job", "description": "A label echoed in the result."}


async def _greet(arguments: Arguments) -> JsonObject:
    return text_result(f"Hello, {arguments['name']}!", {"greeting": f"Hello, {arguments['name']}!"})


async def _compute_now(arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["seconds"])
    return text_result(f"Computed {arguments['label']} in {arguments['seconds']:g} s.")


async def _compute(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    seconds, label = arguments["seconds"], arguments["label"]
    if seconds >= 2:
        await asyncio.sleep(seconds / 2)
        ctx.say(f"{label}: half done")
        await asyncio.sleep(seconds / 2)
    else:
        await asyncio.sleep(seconds)
    return text_result(f"Computed {label} in {seconds:g} s.")


def _compute_start(arguments: Arguments, default_interval_ms: int) -> TaskStart:
    return TaskStart(f"{arguments['label']}: working", arguments.get("poll_interval_ms", default_interval_ms))


async def _failing(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    return text_result("failing_job: the job ran and reported an error.", is_error=True)


async def _protocol_error(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    raise ToolFailure(ErrorCode.INTERNAL_ERROR.value, "Simulated protocol error in protocol_error_job")


_CONFIRM: JsonObject = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Delete it?"}},
    "required": ["confirm"],
}
_NAME: JsonObject = {
    "type": "object",
    "properties": {"name": {"type": "string", "title": "Name"}},
    "required": ["name"],
}


async def _confirm_delete(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    filename = arguments["filename"]
    question = form_request(f"Really delete {filename}?", _CONFIRM)
    answer = (await ctx.ask({"confirm": question}, f"Waiting for confirmation to delete {filename}."))[
        "confirm"
    ]
    content = accepted_content(answer) or {}
    if content.get("confirm") is True:
        return text_result(f"Deleted {filename}.", {"deleted": True})
    return text_result(f"Kept {filename}.", {"deleted": False})


async def _multi_input(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    requests = {
        "name": form_request("Who is this for?", _NAME),
        "confirm": form_request("Go ahead?", _CONFIRM),
    }
    answers = await ctx.ask(requests, "Waiting for two answers.")
    return text_result("Got both answers.", {"answers": answers})


JSON_SCHEMA_2020_12: JsonObject = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


async def _schema_tool(arguments: Arguments) -> JsonObject:
    return text_result("Received a contact.")


_DELAY = "Seconds to wait before asking (or before finishing)."

TASK_FIXTURES: tuple[Tool, ...] = (
    Tool(
        name="greet",
        title="Greet",
        description="Tasks fixture: says hello at once; never creates a task.",
        properties={"name": {"type": "string", "description": "Who to greet."}},
        required=("name",),
        immediate=_greet,
    ),
    Tool(
        name="slow_compute",
        title="Slow compute",
        description="Tasks fixture: works `seconds`; a task when the client declares the extension.",
        properties={"seconds": _SECONDS, "label": _LABEL, **task_properties(0.0, "Unused.")},
        immediate=_compute_now,
        task=_compute,
        start=_compute_start,
        task_support="optional",
    ),
    Tool(
        name="failing_job",
        title="Failing job",
        description="Tasks fixture: a task that completes with a tool error (isError).",
        properties=task_properties(1.0, "Seconds before the error."),
        task=_failing,
    ),
    Tool(
        name="protocol_error_job",
        title="Protocol error job",
        description="Tasks fixture: a task that ends `failed` with a JSON-RPC error.",
        properties=task_properties(0.5, "Seconds before the failure."),
        task=_protocol_error,
    ),
    Tool(
        name="confirm_delete",
        title="Confirm delete",
        description="Tasks fixture: asks (input_required) before it deletes `filename`.",
        properties={"filename": {"type": "string", "default": "file.txt"}, **task_properties(0.1, _DELAY)},
        task=_confirm_delete,
    ),
    Tool(
        name="multi_input",
        title="Multi input",
        description="Tasks fixture: asks two questions at once; resumes when both are answered.",
        properties=task_properties(0.1, _DELAY),
        task=_multi_input,
    ),
    dataclasses.replace(
        MRTR_TOOL,
        name="test_tool_with_task",
        title="MRTR, then a task",
        description="Tasks fixture: asks for a name by MRTR, then greets it in a task.",
    ),
    Tool(
        name="json_schema_2020_12_tool",
        title="JSON Schema 2020-12",
        description="Fixture whose inputSchema uses $defs, $anchor, allOf/anyOf and if/then/else.",
        immediate=_schema_tool,
        input_schema=JSON_SCHEMA_2020_12,
    ),
)

"""`mrtr_then_task`: input gathered through MRTR rounds before any task exists (§4)."""

from __future__ import annotations

import asyncio
import secrets

from ..protocol import JsonObject
from ..tasks import TaskContext
from .registry import (
    Arguments,
    Finish,
    GateCall,
    NeedInput,
    Proceed,
    Tool,
    accepted_content,
    form_request,
    starting,
    task_properties,
    text_result,
)
from .schemas import NAME_FORM


def _ask_for_name() -> NeedInput:
    # A fresh key each round; the requestState remembers which one this round used.
    key = f"name-{secrets.token_hex(4)}"
    return NeedInput({key: form_request("What is your name?", NAME_FORM)}, {"key": key})


def _gate(call: GateCall) -> NeedInput | Proceed | Finish:
    key = call.state.get("key") if call.state else None
    response = call.input_responses.get(key) if isinstance(key, str) else None
    if not isinstance(response, dict):
        return _ask_for_name()
    if response.get("action") in ("decline", "cancel"):
        return Finish(text_result("No name was given, so there is nobody to greet."))
    content = accepted_content(response) or {}
    name = content.get("name")
    if not isinstance(name, str) or not name.strip():
        return _ask_for_name()
    return Proceed({**call.arguments, "name": name.strip()})


async def _greet(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    greeting = f"Hello, {arguments['name']}!"
    return text_result(greeting, {"greeting": greeting})


MRTR_TOOL = Tool(
    name="mrtr_then_task",
    title="MRTR, then Task",
    description=(
        "Asks for your name through an input_required result before creating a task; "
        "the retry carrying the answer returns a task that greets you."
    ),
    properties=task_properties(0.3, "Seconds the task waits before greeting."),
    task=_greet,
    start=starting("Preparing a greeting."),
    gate=_gate,
)

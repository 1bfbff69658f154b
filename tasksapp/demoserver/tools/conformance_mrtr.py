"""Fixture tools for the suite's `input-required-result-*` scenarios (MRTR, SEP-2322, §4).

Unlike the demo's own tools, these respect the client's declared capabilities: they only ask
for kinds of input the request declared, and answer -32021 when the one they need is missing.
"""

from __future__ import annotations

from typing import Any

from ..protocol import JsonObject
from .conformance_content import fixture, missing_capability
from .registry import CallContext, NeedInput, Tool, accepted_content, form_request, text_result

_CAPABILITY_OF = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def _form(message: str, field: str, kind: str = "string") -> JsonObject:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return form_request(message, schema)


def _sampling(text: str, max_tokens: int) -> JsonObject:
    messages = [{"role": "user", "content": {"type": "text", "text": text}}]
    return {"method": "sampling/createMessage", "params": {"messages": messages, "maxTokens": max_tokens}}


_ROOTS: JsonObject = {"method": "roots/list", "params": {}}


def _require(call: CallContext, requests: dict[str, JsonObject], tool: str) -> None:
    for request in requests.values():
        capability = _CAPABILITY_OF[request["method"]]
        if not call.declares(capability):
            raise missing_capability(capability, f"Tool '{tool}'")


def _answered(call: CallContext, keys: list[str]) -> dict[str, Any] | None:
    """The answers when every key has one, else None (the server asks again, SEP-2322)."""
    answers = {key: call.input_responses.get(key) for key in keys}
    return answers if all(isinstance(answer, dict) for answer in answers.values()) else None


def _reply_text(reply: JsonObject) -> str:
    content = reply.get("content")
    blocks = content if isinstance(content, list) else [content]
    return " ".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))


def _root_uris(reply: JsonObject) -> list[str]:
    roots = reply.get("roots")
    entries = roots if isinstance(roots, list) else []
    return [r["uri"] for r in entries if isinstance(r, dict) and isinstance(r.get("uri"), str)]


async def _elicitation(call: CallContext) -> JsonObject | NeedInput:
    requests = {"user_name": _form("What is your name?", "name")}
    _require(call, requests, "test_input_required_result_elicitation")
    answers = _answered(call, ["user_name"])
    if answers is None:
        return NeedInput(requests, None)
    content = accepted_content(answers["user_name"])
    if content is None:
        return text_result("No name was given.")
    return text_result(f"Hello, {content.get('name', 'stranger')}!")


async def _sampling_tool(call: CallContext) -> JsonObject | NeedInput:
    requests = {"capital_question": _sampling("What is the capital of France?", 100)}
    _require(call, requests, "test_input_required_result_sampling")
    answers = _answered(call, ["capital_question"])
    if answers is None:
        return NeedInput(requests, None)
    return text_result(f"The model said: {_reply_text(answers['capital_question'])}")


async def _list_roots(call: CallContext) -> JsonObject | NeedInput:
    requests = {"client_roots": _ROOTS}
    _require(call, requests, "test_input_required_result_list_roots")
    answers = _answered(call, ["client_roots"])
    if answers is None:
        return NeedInput(requests, None)
    uris = _root_uris(answers["client_roots"])
    return text_result(f"Received {len(uris)} roots: {', '.join(uris) or '(none)'}")


def _stateful(tool: str) -> Any:
    """Round 1 asks with a sealed requestState; round 2 must echo it (methods verify the seal)."""

    async def respond(call: CallContext) -> JsonObject | NeedInput:
        requests = {"confirm": _form("Please confirm", "ok", "boolean")}
        _require(call, requests, tool)
        answers = _answered(call, ["confirm"])
        if answers is None or call.state is None or call.state.get("round") != 1:
            return NeedInput(requests, {"round": 1})
        return text_result(
            f"state-ok: the requestState came back intact ({answers['confirm'].get('action')})."
        )

    return respond


async def _multiple(call: CallContext) -> JsonObject | NeedInput:
    wanted = {
        "user_name": _form("What is your name?", "name"),
        "greeting": _sampling("Generate a greeting", 50),
        "client_roots": _ROOTS,
    }
    requests = {key: r for key, r in wanted.items() if call.declares(_CAPABILITY_OF[r["method"]])}
    if not requests:
        raise missing_capability("elicitation", "Tool 'test_input_required_result_multiple_inputs'")
    keys = sorted(requests)
    if call.state is None or call.state.get("keys") != keys or _answered(call, keys) is None:
        return NeedInput(requests, {"keys": keys})
    return text_result(f"Received all {len(keys)} answers: {', '.join(keys)}.")


async def _multi_round(call: CallContext) -> JsonObject | NeedInput:
    step = call.state.get("step") if call.state else None
    if step == 2:
        answers = _answered(call, ["step2"])
        if answers is not None:
            color = (accepted_content(answers["step2"]) or {}).get("color", "no colour")
            return text_result(f"{call.state.get('name') if call.state else ''} likes {color}.")
        return NeedInput(
            {"step2": _form("Step 2: What is your favorite color?", "color")}, dict(call.state or {})
        )
    requests = {"step1": _form("Step 1: What is your name?", "name")}
    _require(call, requests, "test_input_required_result_multi_round")
    answers = _answered(call, ["step1"]) if step == 1 else None
    if answers is None:
        return NeedInput(requests, {"step": 1})
    name = (accepted_content(answers["step1"]) or {}).get("name", "someone")
    return NeedInput(
        {"step2": _form("Step 2: What is your favorite color?", "color")}, {"step": 2, "name": name}
    )


async def _capabilities(call: CallContext) -> JsonObject | NeedInput:
    wanted = {"question": _form("What is your name?", "name"), "summary": _sampling("Say hello.", 20)}
    requests = {key: r for key, r in wanted.items() if call.declares(_CAPABILITY_OF[r["method"]])}
    if not requests:
        raise missing_capability("sampling", "Tool 'test_input_required_result_capabilities'")
    if _answered(call, sorted(requests)) is None:
        return NeedInput(requests, None)
    return text_result(f"Asked only for what the client declared: {', '.join(sorted(requests))}.")


MRTR_FIXTURES: tuple[Tool, ...] = (
    fixture(
        "test_input_required_result_elicitation", "MRTR fixture: one elicitation (user_name).", _elicitation
    ),
    fixture("test_input_required_result_sampling", "MRTR fixture: one sampling request.", _sampling_tool),
    fixture("test_input_required_result_list_roots", "MRTR fixture: one roots/list request.", _list_roots),
    fixture(
        "test_input_required_result_request_state",
        "MRTR fixture: the retry must echo the sealed requestState.",
        _stateful("test_input_required_result_request_state"),
    ),
    fixture(
        "test_input_required_result_multiple_inputs",
        "MRTR fixture: elicitation, sampling and roots in one round.",
        _multiple,
    ),
    fixture(
        "test_input_required_result_multi_round", "MRTR fixture: two rounds, new state each.", _multi_round
    ),
    fixture(
        "test_input_required_result_tampered_state",
        "MRTR fixture: a tampered requestState is refused (-32602).",
        _stateful("test_input_required_result_tampered_state"),
    ),
    fixture(
        "test_input_required_result_capabilities",
        "MRTR fixture: asks only for the input kinds the client declared.",
        _capabilities,
    ),
)

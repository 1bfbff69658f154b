"""Fixture tools the official conformance suite calls: content of every kind, progress, logging,
and the diagnostic tools of its stateless scenario. Each does exactly what the suite's scenario
text asks for (@modelcontextprotocol/conformance, `server` scenarios)."""

from __future__ import annotations

import asyncio

from .. import streams
from ..protocol import JsonObject, RpcError, missing_client_capability
from .content import b64, tiny_png, tiny_wav
from .registry import CallContext, NeedInput, RespondFn, Tool, form_request, text_result

_NO_ARGUMENTS: JsonObject = {}


def missing_capability(capability: str, what: str) -> RpcError:
    """-32021 naming the capability as a ClientCapabilities object, as the schema defines it."""
    return missing_client_capability(
        f"{what} needs the client capability '{capability}', which this request did not declare.",
        {capability: {}},
    )


async def _simple_text(call: CallContext) -> JsonObject:
    return text_result("This is a simple text response for testing.")


async def _image(call: CallContext) -> JsonObject:
    return {"content": [{"type": "image", "data": b64(tiny_png()), "mimeType": "image/png"}]}


async def _audio(call: CallContext) -> JsonObject:
    return {"content": [{"type": "audio", "data": b64(tiny_wav()), "mimeType": "audio/wav"}]}


def _embedded(uri: str, mime: str, text: str) -> JsonObject:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime, "text": text}}


async def _embedded_resource(call: CallContext) -> JsonObject:
    block = _embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")
    return {"content": [block]}


async def _mixed(call: CallContext) -> JsonObject:
    return {
        "content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": b64(tiny_png()), "mimeType": "image/png"},
            _embedded("test://mixed-content-resource", "application/json", '{"test":"data","value":123}'),
        ]
    }


async def _error(call: CallContext) -> JsonObject:
    return text_result("This tool intentionally returns an error for testing", is_error=True)


async def _progress(call: CallContext) -> JsonObject:
    """0, 50 and 100 of 100 as notifications/progress on this request's own stream (§3.5)."""
    token = call.progress_token
    for done in (0, 50, 100):
        if token is not None:
            streams.emit("notifications/progress", {"progressToken": token, "progress": done, "total": 100})
        if done < 100:
            await asyncio.sleep(0.05)
    return text_result("Progress reported: 0, 50 and 100 of 100.")


async def _logging(call: CallContext) -> JsonObject:
    """Logs only when the request asked for it with _meta's logLevel (SEP-2575)."""
    for line in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        if call.log_level is not None:
            streams.emit("notifications/message", {"level": "info", "logger": "demoserver", "data": line})
        await asyncio.sleep(0.02)
    return text_result("Logging tool finished.")


_CONFIRM_FORM: JsonObject = {
    "type": "object",
    "properties": {"confirmed": {"type": "boolean", "title": "Confirmed"}},
    "required": ["confirmed"],
}


async def _needs_sampling(call: CallContext) -> JsonObject | NeedInput:
    if not call.declares("sampling"):
        raise missing_capability("sampling", "Tool 'test_missing_capability'")
    reply = call.input_responses.get("summary")
    if not isinstance(reply, dict):
        request = {
            "method": "sampling/createMessage",
            "params": {
                "messages": [
                    {"role": "user", "content": {"type": "text", "text": "Summarise MCP in 5 words."}}
                ],
                "maxTokens": 50,
            },
        }
        return NeedInput({"summary": request}, None)
    return text_result("The client's model answered.")


async def _streaming_elicitation(call: CallContext) -> JsonObject | NeedInput:
    if not call.declares("elicitation"):
        raise missing_capability("elicitation", "Tool 'test_streaming_elicitation'")
    answer = call.input_responses.get("confirm")
    if not isinstance(answer, dict):
        return NeedInput({"confirm": form_request("Continue?", _CONFIRM_FORM)}, None)
    return text_result(f"You answered: {answer.get('action', 'nothing')}.")


async def _custom_headers(arguments: JsonObject) -> JsonObject:
    shown = ", ".join(f"{name}={arguments[name]!r}" for name in sorted(arguments))
    return text_result(f"Arguments mirrored into Mcp-Param headers: {shown or 'none'}")


CUSTOM_HEADERS_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "region": {
            "type": "string",
            "description": "Routed on as Mcp-Param-Region.",
            "x-mcp-header": "Region",
        },
        "priority": {
            "type": "integer",
            "description": "Sent as Mcp-Param-Priority.",
            "x-mcp-header": "Priority",
        },
        "query": {"type": "string", "description": "Not mirrored into a header."},
    },
    "required": ["region"],
}


def fixture(name: str, description: str, respond: RespondFn) -> Tool:
    """A conformance fixture without arguments, answered in the foreground."""
    return Tool(
        name=name,
        title=name.replace("_", " ").capitalize(),
        description=description,
        respond=respond,
        input_schema={"type": "object", "properties": _NO_ARGUMENTS},
    )


CONTENT_TOOLS: tuple[Tool, ...] = (
    Tool(
        name="test_custom_headers",
        title="Custom headers",
        description="Fixture whose region and priority arguments travel as Mcp-Param headers (x-mcp-header).",
        properties=dict(CUSTOM_HEADERS_SCHEMA["properties"]),
        required=("region",),
        immediate=_custom_headers,
        input_schema=CUSTOM_HEADERS_SCHEMA,
    ),
    fixture("test_simple_text", "Conformance fixture: returns one text block.", _simple_text),
    fixture("test_image_content", "Conformance fixture: returns a PNG image.", _image),
    fixture("test_audio_content", "Conformance fixture: returns a WAV sound.", _audio),
    fixture(
        "test_embedded_resource", "Conformance fixture: returns an embedded resource.", _embedded_resource
    ),
    fixture("test_multiple_content_types", "Conformance fixture: text, image and resource.", _mixed),
    fixture("test_error_handling", "Conformance fixture: always a tool error (isError).", _error),
    fixture("test_tool_with_progress", "Conformance fixture: reports progress 0/50/100.", _progress),
    fixture("test_logging_tool", "Conformance fixture: logs only when logLevel is set.", _logging),
    fixture(
        "test_missing_capability",
        "Conformance fixture: needs the sampling capability (-32021 without it).",
        _needs_sampling,
    ),
    fixture(
        "test_streaming_elicitation",
        "Conformance fixture: asks a question through an input_required result.",
        _streaming_elicitation,
    ),
)

"""Immediate tools: echo as JSON, slow_echo as an SSE stream, argument checks."""

from __future__ import annotations

import pytest

from . import schemas
from .wire import Wire, sse_events


def test_echo_answers_at_once_without_the_tasks_capability(wire: Wire) -> None:
    response = wire.post(
        "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, name="echo", tasks=False
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    result = response.json()["result"]
    schemas.core("CallToolResult", result)
    assert result["resultType"] == "complete"
    assert result["content"] == [{"type": "text", "text": "hi"}]
    assert result["structuredContent"] == {"text": "hi"}
    assert result["isError"] is False


def test_slow_echo_is_answered_over_sse_with_crlf_and_a_ping_first(wire: Wire) -> None:
    params = {"name": "slow_echo", "arguments": {"text": "later", "seconds": 0.4}}
    response = wire.post("tools/call", params, name="slow_echo")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.content.startswith(b": ping\r\n\r\n")
    assert b"event: message\r\ndata: " in response.content
    assert response.content.endswith(b"\r\n\r\n")
    events = list(sse_events(response))
    assert events[0].comment == "ping"
    [reply] = [e.message for e in events if e.message]
    assert reply["result"]["structuredContent"] == {"text": "later"}


def test_quick_slow_echo_stays_json(wire: Wire) -> None:
    params = {"name": "slow_echo", "arguments": {"seconds": 0}}
    response = wire.post("tools/call", params, name="slow_echo")
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "slow echo"


def test_unknown_tool_is_invalid_params(wire: Wire) -> None:
    response = wire.post("tools/call", {"name": "nope", "arguments": {}}, name="nope")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("greet", {}),
        ("echo", {"text": 5}),
        ("slow_count", {"n": "five"}),
        ("slow_count", {"n": 2.5}),
        ("slow_count", {"n": True}),
        ("slow_count", {"delay": "soon"}),
        ("slow_count", {"poll_interval_ms": 0}),
        ("echo", ["not", "an", "object"]),
    ],
)
def test_wrong_arguments_are_invalid_params(wire: Wire, tool: str, arguments: object) -> None:
    response = wire.post("tools/call", {"name": tool, "arguments": arguments}, name=tool)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602

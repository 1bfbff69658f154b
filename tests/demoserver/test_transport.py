"""Transport and envelope checks, in the order of PROTOCOL.md §2.5, with the SDK's statuses."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from tasksapp.demoserver import RunningServer, run_in_thread

from .wire import PV, Wire, envelope


def raw_post(wire: Wire, body: Any, headers: dict[str, str] | list[tuple[str, str]]) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return wire.http.post(wire.url, content=content, headers=headers)


def test_other_http_methods_get_405_with_allow_post(wire: Wire) -> None:
    for method in ("GET", "DELETE", "PUT"):
        response = wire.http.request(method, wire.url)
        assert response.status_code == 405
        assert response.headers["allow"] == "POST"


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "*/*", None])
def test_accept_must_list_json_and_sse(wire: Wire, accept: str | None) -> None:
    headers = wire.headers("server/discover")
    del headers["Accept"]
    if accept:
        headers["Accept"] = accept
    response = raw_post(wire, wire.message("server/discover"), headers)
    assert response.status_code == 406
    assert response.content == b""


def test_non_json_content_type_is_plain_text_400(wire: Wire) -> None:
    headers = {**wire.headers("server/discover"), "Content-Type": "text/plain"}
    response = raw_post(wire, wire.message("server/discover"), headers)
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/plain")


def test_oversized_body_is_413(wire: Wire) -> None:
    body = wire.message("tools/call", {"name": "echo", "arguments": {"text": "x" * 1_100_000}})
    response = raw_post(wire, body, wire.headers("tools/call", "echo"))
    assert response.status_code == 413


def test_unparseable_body_is_parse_error_with_null_id(wire: Wire) -> None:
    response = raw_post(wire, b"{not json", wire.headers("server/discover"))
    assert response.status_code == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }


@pytest.mark.parametrize(
    "body",
    [
        [{"jsonrpc": "2.0", "id": 1, "method": "server/discover"}],
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "1.0", "id": 1, "method": "server/discover"},
        {"jsonrpc": "2.0", "id": None, "method": "server/discover"},
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": [1]},
    ],
    ids=["batch", "response", "old-version", "null-id", "array-params"],
)
def test_batches_and_malformed_messages_are_invalid_request(wire: Wire, body: Any) -> None:
    response = raw_post(wire, body, wire.headers("server/discover"))
    assert response.status_code == 400
    assert response.json()["id"] is None
    assert response.json()["error"]["code"] == -32600


def test_duplicate_routing_header_is_header_mismatch(wire: Wire) -> None:
    headers = [*wire.headers("tools/call", "echo").items(), ("Mcp-Name", "echo")]
    body = wire.message("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    response = raw_post(wire, body, headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020
    assert response.json()["id"] == body["id"]


@pytest.mark.parametrize(
    "drop", ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"]
)
def test_missing_envelope_key_is_invalid_params(wire: Wire, drop: str) -> None:
    meta = envelope()
    del meta[drop]
    body = {"jsonrpc": "2.0", "id": 5, "method": "server/discover", "params": {"_meta": meta}}
    response = raw_post(wire, body, wire.headers("server/discover"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


def test_missing_params_is_invalid_params(wire: Wire) -> None:
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}
    response = raw_post(wire, body, wire.headers("tools/list"))
    assert response.json()["error"]["code"] == -32602


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("MCP-Protocol-Version", None),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Mcp-Method", None),
        ("Mcp-Method", "tools/list"),
        ("Mcp-Name", None),
        ("Mcp-Name", "slow_echo"),
        ("Mcp-Name", "=?base64?!!!?="),
    ],
)
def test_routing_header_problems_are_header_mismatch(wire: Wire, header: str, value: str | None) -> None:
    headers = wire.headers("tools/call", "echo")
    if value is None:
        del headers[header]
    else:
        headers[header] = value
    body = wire.message("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    response = raw_post(wire, body, headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_base64_wrapped_mcp_name_is_decoded(wire: Wire) -> None:
    wrapped = "=?base64?" + base64.b64encode(b"echo").decode() + "?="
    result = wire.call("echo", {"text": "hi"}, headers={"Mcp-Name": wrapped})
    assert result["structuredContent"] == {"text": "hi"}


def test_header_mismatch_wins_over_unsupported_version(wire: Wire) -> None:
    body = wire.message("server/discover")
    body["params"]["_meta"] = envelope(version="2026-06-30")
    response = raw_post(wire, body, wire.headers("server/discover"))
    assert response.json()["error"]["code"] == -32020


def test_unsupported_version_lists_the_supported_one(wire: Wire) -> None:
    body = wire.message("server/discover")
    body["params"]["_meta"] = envelope(version="2026-06-30")
    headers = {**wire.headers("server/discover"), "MCP-Protocol-Version": "2026-06-30"}
    response = raw_post(wire, body, headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": [PV], "requested": "2026-06-30"}


@pytest.mark.parametrize("method", ["tasks/list", "tasks/result", "initialize", "ping"])
def test_unknown_methods_are_404_method_not_found(wire: Wire, method: str) -> None:
    response = wire.post(method, {"taskId": "x"}, name="x")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32601


def test_notifications_are_accepted_with_202(wire: Wire) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}
    response = raw_post(wire, body, wire.headers("notifications/cancelled"))
    assert response.status_code == 202
    assert response.content == b""


def test_unknown_paths_are_404(wire: Wire) -> None:
    assert wire.http.post(f"{wire.base}/other", json={}).status_code == 404


def test_every_result_carries_result_type_and_server_info(wire: Wire) -> None:
    params: dict[str, Any]
    for method, params in [("server/discover", {}), ("tools/list", {})]:
        result = wire.result(method, params)
        assert result["resultType"] == "complete"
        info = result["_meta"]["io.modelcontextprotocol/serverInfo"]
        assert info == {"name": "mcp-tasks-demoserver", "version": "1.0.0"}


def test_debug_endpoints_are_404_without_debug() -> None:
    server: RunningServer = run_in_thread()
    try:
        base = server.url.rsplit("/mcp", 1)[0]
        assert httpx.get(f"{base}/_debug/stats").status_code == 404
        assert httpx.post(f"{base}/_debug/close-streams").status_code == 404
    finally:
        server.stop()


def test_accept_header_may_carry_parameters(wire: Wire) -> None:
    headers = {**wire.headers("server/discover"), "Accept": "application/json;q=0.9, text/event-stream;q=1"}
    response = raw_post(wire, wire.message("server/discover"), headers)
    assert response.status_code == 200

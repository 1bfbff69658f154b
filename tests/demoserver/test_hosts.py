"""DNS-rebinding protection and what a legacy (initialize) client is told."""

from __future__ import annotations

import httpx
import pytest

from tasksapp.demoserver import run_in_thread

from .wire import PV, Wire


def discover(wire: Wire, **headers: str) -> httpx.Response:
    return wire.http.post(
        wire.url, json=wire.message("server/discover"), headers={**wire.headers("server/discover"), **headers}
    )


@pytest.mark.parametrize(
    ("host", "origin", "status"),
    [
        ("evil.example.com", None, 421),
        ("evil.example.com:80", "http://evil.example.com", 421),
        (None, "http://evil.example.com", 403),
        (None, "http://127.0.0.1.evil.example.com", 403),
        (None, "null", 403),
    ],
)
def test_a_foreign_host_or_origin_is_refused(
    wire: Wire, host: str | None, origin: str | None, status: int
) -> None:
    before = len(wire.debug("requests"))
    headers = {"Host": host} if host else {}
    if origin:
        headers["Origin"] = origin
    response = discover(wire, **headers)
    assert response.status_code == status
    assert len(wire.debug("requests")) == before, "a refused request never reaches the MCP handler"


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1", "[::1]"])
def test_loopback_hosts_and_origins_are_served(wire: Wire, name: str) -> None:
    port = wire.url.split(":")[2].split("/")[0]
    response = discover(wire, Host=f"{name}:{port}", Origin=f"http://{name}:{port}")
    assert response.status_code == 200
    assert response.json()["result"]["supportedVersions"] == [PV]


def test_a_named_host_is_served_when_allowed() -> None:
    server = run_in_thread(allowed_hosts=["mcp.internal"])
    try:
        url = server.url
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": PV,
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PV,
            "Mcp-Method": "server/discover",
            "Host": "mcp.internal:443",
        }
        assert httpx.post(url, json=body, headers=headers).status_code == 200
        assert httpx.post(url, json=body, headers={**headers, "Host": "other.internal"}).status_code == 421
    finally:
        server.stop()


def test_a_legacy_initialize_is_told_which_version_to_speak(wire: Wire) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "x", "version": "1"},
        },
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    response = wire.http.post(wire.url, json=body, headers=headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": [PV], "requested": "2025-11-25"}
    assert PV in error["message"]


def test_a_legacy_request_with_its_version_header_is_told_too(wire: Wire) -> None:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
        "Mcp-Method": "tools/list",
    }
    error = wire.http.post(wire.url, json=body, headers=headers).json()["error"]
    assert (error["code"], error["data"]["requested"]) == (-32022, "2025-06-18")


def test_initialize_inside_the_modern_envelope_is_method_not_found(wire: Wire) -> None:
    response = wire.post("initialize", {})
    assert (response.status_code, response.json()["error"]["code"]) == (404, -32601)

"""x-mcp-header (§2.4): every tools/call of such a tool carries its Mcp-Param-* headers, however
the client learned the tool's schema, against the reference server, which refuses calls without them."""

from typing import Any

import pytest
from aiohttp import web

from tasksapp.demoserver.tools.conformance_content import CUSTOM_HEADERS_SCHEMA
from tasksapp.mcpclient import (
    InvalidHeaderAnnotation,
    McpClient,
    ProtocolError,
    ToolResult,
    param_header_names,
    param_headers,
)
from tests.mcpclient.helpers import cli, lines
from tests.mcpclient.hostile_server import HostileServer, Message, json_reply, response, rpc_error
from tests.peers.launch import RunningPeer

TOOL = "test_custom_headers"


def annotated(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def test_each_argument_type_is_rendered_and_what_is_not_plain_ascii_is_encoded() -> None:
    schema = annotated(
        region={"type": "string", "x-mcp-header": "Region"},
        priority={"type": "integer", "x-mcp-header": "Priority"},
        dry={"type": "boolean", "x-mcp-header": "Dry-Run"},
        note={"type": "string"},
    )
    assert param_headers(schema, {"region": "上海", "priority": 3, "dry": False, "note": "x"}) == {
        "Mcp-Param-Region": "=?base64?5LiK5rW3?=",
        "Mcp-Param-Priority": "3",
        "Mcp-Param-Dry-Run": "false",
    }
    assert param_headers(schema, {"region": None}) == {}  # absent or null: no header


@pytest.mark.parametrize(
    ("properties", "why"),
    [
        ({"n": {"type": "number", "x-mcp-header": "N"}}, "string, integer or boolean"),
        ({"r": {"type": "string", "x-mcp-header": "Bad Name"}}, "not a header name"),
        (
            {
                "a": {"type": "string", "x-mcp-header": "Zone"},
                "b": {"type": "string", "x-mcp-header": "zone"},
            },
            "used twice",
        ),
    ],
)
def test_an_annotation_that_breaks_the_rules_is_refused(properties: dict[str, Any], why: str) -> None:
    with pytest.raises(InvalidHeaderAnnotation, match=why):
        param_header_names(annotated(**properties))


def sent_param_headers(server: RunningPeer) -> dict[str, str]:
    headers = server.last_request("tools/call")["headers"]
    return {name: value for name, value in headers.items() if name.startswith("mcp-param-")}


async def test_a_fresh_client_lists_the_tools_first_and_sends_the_headers(demo_server: RunningPeer) -> None:
    demo_server.clear()
    async with McpClient(demo_server.url) as client:
        outcome = await client.call_tool(TOOL, {"region": "eu-west", "priority": 2})
    assert isinstance(outcome, ToolResult) and not outcome.is_error, outcome.raw
    assert sent_param_headers(demo_server) == {"mcp-param-region": "eu-west", "mcp-param-priority": "2"}
    methods = [request["method"] for request in demo_server.received()]
    assert methods[-1] == "tools/call" and set(methods[:-1]) == {"server/discover", "tools/list"}


async def test_a_stored_schema_spares_the_tools_list(demo_server: RunningPeer) -> None:
    demo_server.clear()
    async with McpClient(demo_server.url) as client:
        outcome = await client.call_tool(TOOL, {"region": "ap"}, input_schema=CUSTOM_HEADERS_SCHEMA)
    assert isinstance(outcome, ToolResult) and not outcome.is_error
    assert sent_param_headers(demo_server) == {"mcp-param-region": "ap"}
    assert "tools/list" not in demo_server.method_counts()


async def test_a_stale_stored_schema_is_listed_again_and_the_call_retried_once(
    demo_server: RunningPeer,
) -> None:
    stale = annotated(region={"type": "string"})  # stored before the server added the header
    demo_server.clear()
    async with McpClient(demo_server.url) as client:
        outcome = await client.call_tool(TOOL, {"region": "us"}, input_schema=stale)
    assert isinstance(outcome, ToolResult) and not outcome.is_error
    methods = [request["method"] for request in demo_server.received()]
    assert methods[1] == "tools/call" and methods[-1] == "tools/call" and methods.count("tools/call") == 2
    assert set(methods[2:-1]) == {"tools/list"}  # every page of it, between the two calls
    assert sent_param_headers(demo_server) == {"mcp-param-region": "us"}


async def test_a_refusal_a_fresh_tool_list_cannot_explain_is_not_retried() -> None:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        if message["method"] == "tools/list":
            return json_reply(response(message, {"tools": [{"name": TOOL, "inputSchema": annotated()}]}))
        return json_reply(rpc_error(message, -32020, "mcp-name header is wrong"), status=400)

    async with HostileServer(script) as server, McpClient(server.url) as client:
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool(TOOL, {"region": "eu"}, input_schema=annotated())
    assert refused.value.code == -32020
    assert [m["method"] for m in server.messages] == ["server/discover", "tools/call", "tools/list"]


async def test_a_tool_whose_annotation_breaks_the_rules_is_never_called(demo_server: RunningPeer) -> None:
    broken = annotated(region={"type": "number", "x-mcp-header": "Region"})
    demo_server.clear()
    async with McpClient(demo_server.url) as client:
        with pytest.raises(InvalidHeaderAnnotation, match="cannot be called"):
            await client.call_tool(TOOL, {"region": 1}, input_schema=broken)
    assert "tools/call" not in demo_server.method_counts()


def test_the_command_line_calls_a_tool_with_header_arguments(demo_server: RunningPeer) -> None:
    run = cli(demo_server.url, "call", TOOL, '{"region": "eu-west", "priority": 7}')
    assert run.returncode == 0, run.stderr
    assert "priority=7, region='eu-west'" in lines(run.stdout)[0]["content"][0]["text"]

"""A legacy (2025-11-25) server: the client finds the era, shakes hands, and runs tools in the foreground."""

import httpx
import pytest

from tasksapp.mcpclient import ListenUnsupported, McpClient, McpError, ToolResult
from tests.peers.launch import RunningPeer


async def test_discover_falls_back_to_the_initialize_handshake(legacy_server: RunningPeer) -> None:
    legacy_server.clear()
    async with McpClient(legacy_server.url) as client:
        found = await client.discover()
    assert found.era == "legacy"
    assert found.protocol_version == "2025-11-25"
    assert found.tasks_supported is False
    assert found.server_info and found.server_info["name"] == "legacy-peer"
    methods = [r["method"] for r in legacy_server.received()]
    assert methods[:3] == ["server/discover", "initialize", "notifications/initialized"]


async def test_tools_work_without_an_explicit_discover(legacy_server: RunningPeer) -> None:
    legacy_server.clear()
    async with McpClient(legacy_server.url) as client:
        names = {tool.name for tool in await client.list_tools()}
        outcome = await client.call_tool("echo", {"text": "hi"})
    assert {"echo", "add"} <= names
    assert isinstance(outcome, ToolResult) and outcome.content[0]["text"] == "hi"
    call = legacy_server.last_request("tools/call")
    assert "_meta" not in call["body"]["params"]  # no modern envelope on the legacy path
    assert call["headers"]["mcp-protocol-version"] == "2025-11-25"
    assert call["headers"]["mcp-session-id"]


async def test_tasks_and_listen_are_refused_clearly_on_a_legacy_server(legacy_server: RunningPeer) -> None:
    async with McpClient(legacy_server.url) as client:
        await client.discover()
        with pytest.raises(McpError, match="legacy"):
            await client.get_task("anything")
        with pytest.raises(ListenUnsupported):
            async for _ in client.listen(["anything"]):
                pass


async def test_an_expired_session_is_renewed_once(legacy_server: RunningPeer) -> None:
    async with McpClient(legacy_server.url) as client:
        await client.list_tools()
        session = legacy_server.last_request("tools/list")["headers"]["mcp-session-id"]
        ended = httpx.delete(legacy_server.url, headers={"Mcp-Session-Id": session})
        assert ended.status_code == 200  # the server forgets the session, as on expiry
        outcome = await client.call_tool("add", {"a": 2, "b": 40})
    assert isinstance(outcome, ToolResult) and outcome.structured_content == {"result": 42}
    assert legacy_server.last_request("tools/call")["headers"]["mcp-session-id"] != session


async def test_closing_the_client_ends_the_legacy_session(legacy_server: RunningPeer) -> None:
    legacy_server.clear()
    async with McpClient(legacy_server.url) as client:
        await client.list_tools()
    session = legacy_server.last_request("tools/list")["headers"]["mcp-session-id"]
    deletes = [r for r in legacy_server.received() if r.get("http") == "DELETE"]
    assert [(r["headers"].get("mcp-session-id"), r["status"]) for r in deletes] == [(session, 200)]


async def test_task_methods_on_an_unknown_era_discover_first_and_send_nothing(
    legacy_server: RunningPeer,
) -> None:
    for attempt in ("get", "update", "cancel", "listen"):
        legacy_server.clear()
        async with McpClient(legacy_server.url) as client:  # era unknown: nothing said yet
            with pytest.raises(McpError, match="legacy"):
                if attempt == "get":
                    await client.get_task("some-task")
                elif attempt == "update":
                    await client.update_task("some-task", {})
                elif attempt == "cancel":
                    await client.cancel_task("some-task")
                else:
                    async for _ in client.listen(["some-task"]):
                        pass
        methods = [r["method"] for r in legacy_server.received() if r.get("http") == "POST"]
        assert methods == ["server/discover", "initialize", "notifications/initialized"], attempt

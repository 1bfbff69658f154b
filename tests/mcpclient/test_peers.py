"""Behaviour every SEP-2663 server shares, checked against both real peers over loopback HTTP:
the project's reference server and the third-party fastmcp-tasks server."""

from collections.abc import AsyncIterator

import pytest

from tasksapp.mcpclient import (
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
    CancelledTask,
    CompletedTask,
    FailedTask,
    InputKinds,
    McpClient,
    ProtocolError,
    TaskCreated,
    ToolResult,
)
from tests.mcpclient.helpers import wait_for_status
from tests.peers.launch import RunningPeer

KINDS = InputKinds(elicitation_form=True, elicitation_url=True)


@pytest.fixture(params=["demo_server", pytest.param("fastmcp_server", marks=pytest.mark.fastmcp)])
def peer(request: pytest.FixtureRequest) -> RunningPeer:
    peer: RunningPeer = request.getfixturevalue(request.param)
    return peer


@pytest.fixture
async def client(peer: RunningPeer) -> AsyncIterator[McpClient]:
    async with McpClient(peer.url, input_kinds=KINDS) as mcp:
        yield mcp


async def test_discover_finds_a_modern_task_server(client: McpClient) -> None:
    found = await client.discover()
    assert found.era == "modern"
    assert PROTOCOL_VERSION in found.supported_versions
    assert found.tasks_supported is True
    assert isinstance(found.server_info, dict) and found.server_info["name"]
    assert found.raw["capabilities"]["extensions"][TASKS_EXTENSION] == {}


async def test_every_request_carries_the_envelope_and_headers(client: McpClient, peer: RunningPeer) -> None:
    await client.discover()
    seen = peer.last_request("server/discover")
    headers, meta = seen["headers"], seen["body"]["params"]["_meta"]
    assert headers["mcp-protocol-version"] == PROTOCOL_VERSION
    assert headers["mcp-method"] == "server/discover"
    assert "mcp-name" not in headers
    assert headers["content-type"] == "application/json"
    assert {"application/json", "text/event-stream"} <= {a.strip() for a in headers["accept"].split(",")}
    assert meta["io.modelcontextprotocol/protocolVersion"] == PROTOCOL_VERSION
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcp-tasks-dashboard"
    caps = meta["io.modelcontextprotocol/clientCapabilities"]
    assert caps == {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}, "url": {}}}


async def test_list_tools_returns_every_scenario_tool(client: McpClient) -> None:
    names = {tool.name for tool in await client.list_tools()}
    assert {"echo", "slow_count", "fail_tool", "fail_rpc", "run_forever"} <= names


async def test_immediate_tool_returns_a_complete_result(client: McpClient, peer: RunningPeer) -> None:
    outcome = await client.call_tool("echo", {"text": "hi"})
    assert isinstance(outcome, ToolResult)
    assert outcome.is_error is False
    assert outcome.content[0]["text"] == "hi"
    assert peer.last_request("tools/call")["headers"]["mcp-name"] == "echo"


async def test_slow_tool_becomes_a_task_that_completes(client: McpClient, peer: RunningPeer) -> None:
    outcome = await client.call_tool("slow_count", {"n": 3, "delay": 0.2})
    assert isinstance(outcome, TaskCreated)
    task_id = outcome.task.task_id
    final, seen = await wait_for_status(client, task_id, "completed", "failed", "cancelled")
    assert isinstance(final, CompletedTask)
    assert final.result.content[0]["text"] == "counted to 3"
    assert any((t.status_message or "").startswith("counted") for t in seen)
    sent = peer.last_request("tasks/get")
    assert sent["headers"]["mcp-name"] == task_id
    assert sent["body"]["params"]["taskId"] == task_id
    caps = sent["body"]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert caps["extensions"] == {TASKS_EXTENSION: {}}


async def test_tool_error_completes_with_is_error(client: McpClient) -> None:
    outcome = await client.call_tool("fail_tool", {})
    assert isinstance(outcome, TaskCreated)
    final, _ = await wait_for_status(client, outcome.task.task_id, "completed", "failed")
    assert isinstance(final, CompletedTask)
    assert final.result.is_error is True


async def test_protocol_failure_ends_failed_with_the_error(client: McpClient) -> None:
    outcome = await client.call_tool("fail_rpc", {})
    assert isinstance(outcome, TaskCreated)
    final, _ = await wait_for_status(client, outcome.task.task_id, "completed", "failed")
    assert isinstance(final, FailedTask)
    assert isinstance(final.error.code, int) and final.error.message


async def test_cancel_stops_a_task_that_runs_forever(client: McpClient, peer: RunningPeer) -> None:
    outcome = await client.call_tool("run_forever", {})
    assert isinstance(outcome, TaskCreated)
    task_id = outcome.task.task_id
    await client.cancel_task(task_id)
    final, _ = await wait_for_status(client, task_id, "cancelled", "completed", "failed")
    assert isinstance(final, CancelledTask)
    assert peer.last_request("tasks/cancel")["headers"]["mcp-name"] == task_id
    await client.cancel_task(task_id)  # cancelling a finished task is acknowledged, changes nothing
    assert (await client.get_task(task_id)).status == "cancelled"


async def test_unknown_task_is_not_found(client: McpClient) -> None:
    with pytest.raises(ProtocolError) as caught:
        await client.get_task("no-such-task-0123456789")
    assert caught.value.code == -32602
    assert caught.value.is_not_found


async def test_methods_that_do_not_exist_give_method_not_found(client: McpClient) -> None:
    for method in ("tasks/list", "tasks/result"):
        with pytest.raises(ProtocolError) as caught:
            await client.request(method, {})
        assert caught.value.code == -32601
        assert caught.value.status == 404


async def test_task_methods_without_the_capability_are_refused(peer: RunningPeer) -> None:
    async with McpClient(peer.url, declare_tasks=False) as bare:
        with pytest.raises(ProtocolError) as caught:
            await bare.get_task("whatever-task-id")
    assert caught.value.is_missing_capability
    assert caught.value.code in (-32021, -32003)

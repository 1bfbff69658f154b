"""What is particular to the third-party fastmcp-tasks server (PROTOCOL.md §10), seen through McpClient."""

from collections.abc import AsyncIterator

import pytest

from tasksapp.mcpclient import (
    CompletedTask,
    InputKinds,
    InputRequiredTask,
    ListenUnsupported,
    McpClient,
    TaskCreated,
    ToolResult,
)
from tests.mcpclient.helpers import wait_for_status
from tests.peers.launch import RunningPeer


@pytest.fixture
async def client(fastmcp_server: RunningPeer) -> AsyncIterator[McpClient]:
    async with McpClient(fastmcp_server.url, input_kinds=InputKinds(elicitation_form=True)) as mcp:
        yield mcp


async def test_mid_task_elicitation_is_answered_with_tasks_update(
    client: McpClient, fastmcp_server: RunningPeer
) -> None:
    outcome = await client.call_tool("ask_name", {})
    assert isinstance(outcome, TaskCreated)
    task_id = outcome.task.task_id
    waiting, _ = await wait_for_status(client, task_id, "input_required")
    assert isinstance(waiting, InputRequiredTask)
    [(key, request)] = waiting.input_requests.items()
    assert key.startswith(task_id)  # fastmcp puts the task id inside the key (§10 #10)
    assert request.method == "elicitation/create"
    assert request.params["requestedSchema"]["required"] == ["name"]

    await client.update_task(task_id, {key: {"action": "accept", "content": {"name": "Luca"}}})
    sent = fastmcp_server.last_request("tasks/update")
    assert sent["headers"]["mcp-name"] == task_id
    assert sent["body"]["params"]["inputResponses"][key]["content"] == {"name": "Luca"}

    final, _ = await wait_for_status(client, task_id, "completed")
    assert isinstance(final, CompletedTask)
    assert final.result.content[0]["text"] == "Hello, Luca!"
    await client.update_task(task_id, {key: {"action": "accept", "content": {"name": "again"}}})


async def test_declined_elicitation_still_completes(client: McpClient) -> None:
    outcome = await client.call_tool("ask_name", {})
    assert isinstance(outcome, TaskCreated)
    waiting, _ = await wait_for_status(client, outcome.task.task_id, "input_required")
    assert isinstance(waiting, InputRequiredTask)
    await client.update_task(waiting.task_id, {key: {"action": "decline"} for key in waiting.input_requests})
    final, _ = await wait_for_status(client, waiting.task_id, "completed")
    assert "declined" in final.raw["result"]["content"][0]["text"]


async def test_listen_is_unsupported(client: McpClient) -> None:
    with pytest.raises(ListenUnsupported):
        async for _ in client.listen(["any-task"]):
            pass


async def test_unknown_tool_is_a_tool_error_not_a_protocol_error(client: McpClient) -> None:
    outcome = await client.call_tool("no_such_tool", {})
    assert isinstance(outcome, ToolResult) and outcome.is_error

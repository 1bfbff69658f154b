"""Flows only the reference server offers: push over listen, MRTR, SSE answers, every input kind."""

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from tasksapp.demoserver.tools import TOOLS
from tasksapp.mcpclient import (
    ALL_INPUT_KINDS,
    CompletedTask,
    DetailedTask,
    InputRequired,
    InputRequiredTask,
    ListenAck,
    ListenEnded,
    McpClient,
    ProtocolError,
    TaskCreated,
    ToolResult,
)
from tests.mcpclient.helpers import wait_for_status
from tests.peers.launch import RunningPeer


@pytest.fixture
async def client(demo_server: RunningPeer) -> AsyncIterator[McpClient]:
    async with McpClient(demo_server.url, input_kinds=ALL_INPUT_KINDS) as mcp:
        yield mcp


async def start(client: McpClient, tool: str, **arguments: object) -> str:
    outcome = await client.call_tool(tool, dict(arguments))
    assert isinstance(outcome, TaskCreated), outcome
    return outcome.task.task_id


async def answer_single(client: McpClient, task_id: str, response: dict[str, object]) -> InputRequiredTask:
    waiting, _ = await wait_for_status(client, task_id, "input_required")
    assert isinstance(waiting, InputRequiredTask)
    [key] = waiting.input_requests
    await client.update_task(task_id, {key: response})
    return waiting


async def test_listen_pushes_every_change_until_completed(
    client: McpClient, demo_server: RunningPeer
) -> None:
    task_id = await start(client, "slow_count", n=3, delay=0.2)
    seen: list[DetailedTask] = []
    async with asyncio.timeout(15):
        stream = client.listen([task_id, "unknown-task-id"])
        ack = await anext(stream)
        assert isinstance(ack, ListenAck) and ack.task_ids == [task_id]
        async for event in stream:
            assert not isinstance(event, ListenAck | ListenEnded)
            seen.append(event)
            if event.is_terminal:
                break
        await stream.aclose()
    assert seen[-1].status == "completed" and isinstance(seen[-1], CompletedTask)
    assert [t.status_message for t in seen[:-1]][-1] == "counted 3/3" or len(seen) >= 3
    listen = demo_server.last_request("subscriptions/listen")
    assert listen["body"]["params"]["notifications"] == {"taskIds": [task_id, "unknown-task-id"]}
    assert "mcp-name" not in listen["headers"]


async def test_listen_ends_gracefully_when_the_server_closes_it(
    client: McpClient, demo_server: RunningPeer
) -> None:
    task_id = await start(client, "run_forever", delay=0.5)
    async with asyncio.timeout(10):
        stream = client.listen([task_id])
        assert isinstance(await anext(stream), ListenAck)
        httpx.post(f"{demo_server.base}/_debug/close-streams")
        events = [event async for event in stream]
    assert isinstance(events[-1], ListenEnded)
    await client.cancel_task(task_id)


async def test_mrtr_input_before_the_task_then_retry_creates_it(
    client: McpClient, demo_server: RunningPeer
) -> None:
    first = await client.call_tool("mrtr_then_task", {})
    assert isinstance(first, InputRequired) and first.request_state
    [(key, request)] = first.input_requests.items()
    assert request.method == "elicitation/create"
    again = await client.call_tool("mrtr_then_task", {}, request_state=first.request_state)
    assert isinstance(again, InputRequired)  # no answer yet: asked again
    outcome = await client.call_tool(
        "mrtr_then_task",
        {},
        input_responses={key: {"action": "accept", "content": {"name": "Grace"}}},
        request_state=first.request_state,
    )
    assert isinstance(outcome, TaskCreated)
    retry = demo_server.last_request("tools/call")["body"]["params"]
    assert retry["requestState"] == first.request_state
    final, _ = await wait_for_status(client, outcome.task.task_id, "completed")
    assert "Hello, Grace!" in final.raw["result"]["content"][0]["text"]


async def test_a_tampered_request_state_is_refused(client: McpClient) -> None:
    first = await client.call_tool("mrtr_then_task", {})
    assert isinstance(first, InputRequired) and first.request_state
    with pytest.raises(ProtocolError) as caught:
        await client.call_tool("mrtr_then_task", {}, request_state=first.request_state + "x")
    assert caught.value.code == -32602
    assert caught.value.data == {"reason": "invalid_request_state"}


async def test_a_slow_immediate_call_is_answered_over_sse(client: McpClient) -> None:
    outcome = await client.call_tool("slow_echo", {"text": "late", "seconds": 0.5})
    assert isinstance(outcome, ToolResult) and outcome.content[0]["text"] == "late"


async def test_form_elicitation_with_every_field_type(client: McpClient) -> None:
    task_id = await start(client, "ask_form", delay=0.1)
    waiting, _ = await wait_for_status(client, task_id, "input_required")
    assert isinstance(waiting, InputRequiredTask)
    [request] = waiting.input_requests.values()
    schema = request.params["requestedSchema"]
    kinds = {prop.get("type") for prop in schema["properties"].values()}
    assert {"string", "number", "integer", "boolean", "array"} <= kinds
    await client.update_task(task_id, {k: {"action": "decline"} for k in waiting.input_requests})
    final, _ = await wait_for_status(client, task_id, "completed")
    assert final.raw["result"]["isError"] is False


async def test_two_requests_at_once_and_a_partial_update(client: McpClient) -> None:
    task_id = await start(client, "ask_two", delay=0.1)
    waiting, _ = await wait_for_status(client, task_id, "input_required")
    assert isinstance(waiting, InputRequiredTask) and len(waiting.input_requests) == 2
    first, second = sorted(waiting.input_requests)
    await client.update_task(task_id, {first: {"action": "accept", "content": {"answer": "one"}}})
    still = await client.get_task(task_id)
    assert isinstance(still, InputRequiredTask) and set(still.input_requests) == {second}
    await client.update_task(task_id, {second: {"action": "accept", "content": {"answer": "two"}}})
    final, _ = await wait_for_status(client, task_id, "completed")
    assert isinstance(final, CompletedTask)


async def test_sampling_roots_and_url_requests_are_answered(client: McpClient) -> None:
    sampling = await start(client, "ask_sampling", delay=0.1)
    roots = await start(client, "ask_roots", delay=0.1)
    url = await start(client, "ask_url", delay=0.1)
    reply: dict[str, object] = {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "human",
        "stopReason": "endTurn",
    }
    asked = await answer_single(client, sampling, reply)
    assert next(iter(asked.input_requests.values())).method == "sampling/createMessage"
    await answer_single(client, roots, {"roots": [{"uri": "file:///srv/repo", "name": "repo"}]})
    asked_url = await answer_single(client, url, {"action": "accept"})
    assert next(iter(asked_url.input_requests.values())).params["mode"] == "url"
    for task_id, text in ((sampling, "Paris"), (roots, "file:///srv/repo")):
        final, _ = await wait_for_status(client, task_id, "completed")
        assert text in str(final.raw["result"])
    await wait_for_status(client, url, "completed")


async def test_poll_interval_changes_during_the_task(client: McpClient) -> None:
    task_id = await start(client, "changing_interval", delay=0.2)
    _, seen = await wait_for_status(client, task_id, "completed")
    assert len({t.poll_interval_ms for t in seen}) >= 2


async def test_a_short_ttl_task_expires_into_not_found(client: McpClient) -> None:
    task_id = await start(client, "short_ttl", ttl_ms=300)
    assert (await client.get_task(task_id)).ttl_ms == 300
    # Asked until it is gone (a real wait, bounded): the server drops it once its TTL has passed.
    with pytest.raises(ProtocolError) as caught:
        for _ in range(100):
            await client.get_task(task_id)
            await asyncio.sleep(0.05)
    assert caught.value.is_not_found


async def test_tools_list_follows_cursors_across_pages(client: McpClient, demo_server: RunningPeer) -> None:
    demo_server.clear()
    tools = await client.list_tools()
    assert len(tools) == len(TOOLS)
    pages = [r for r in demo_server.received() if r["method"] == "tools/list"]
    assert len(pages) >= 3 and "cursor" in pages[-1]["body"]["params"]


async def test_a_task_id_outside_header_safe_ascii_is_base64_encoded(
    client: McpClient, demo_server: RunningPeer
) -> None:
    with pytest.raises(ProtocolError) as caught:
        await client.get_task("tâche ünknown")
    assert caught.value.code == -32602  # decoded and matched, then not found: no -32020
    header = demo_server.last_request("tasks/get")["headers"]["mcp-name"]
    assert header.startswith("=?base64?") and header.endswith("?=")


async def test_unknown_tool_is_invalid_params(client: McpClient) -> None:
    with pytest.raises(ProtocolError) as caught:
        await client.call_tool("no_such_tool", {})
    assert caught.value.code == -32602

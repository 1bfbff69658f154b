"""@modelcontextprotocol/server-everything 2026.8.31 (npm; TypeScript SDK 1.x, revision 2025-11-25
with its experimental tasks): its task tools run as tasks through the legacy task methods, and are
mirrored, polled, cancelled and shown like any other task."""

from typing import Any

import httpx
import pytest

from tasksapp.mcpclient import CompletedTask, McpClient, ProtocolError, TaskCreated
from tasksapp.mcpclient.legacy import unpack
from tests.interop.helpers import manage, status_is
from tests.mcpclient.helpers import wait_for_status
from tests.peers.launch import RunningPeer
from tests.support.engine_helpers import run_worker_until

pytestmark = pytest.mark.interop


@pytest.fixture
def everything(transactional_db: None, everything_server: RunningPeer) -> Any:
    return manage("servers", "add", "everything", everything_server.url)


def test_discovery_sees_a_legacy_server_with_tasks(everything: dict[str, Any]) -> None:
    assert (everything["era"], everything["tasksSupported"]) == ("legacy", True)
    assert "simulate-research-query" in everything["tools"]
    assert everything["listenSupported"] is False


def test_a_required_task_tool_runs_as_a_task_the_worker_follows(everything: dict[str, Any]) -> None:
    started = manage("call", "everything", "simulate-research-query", '{"topic": "tides"}')
    assert started["outcome"] == "task", started
    task_id = started["task"]["id"]
    assert started["task"]["status"] == "working" and started["task"]["ttlMs"] == 300000
    run_worker_until(lambda: status_is(task_id, "completed", "failed", "cancelled"), timeout=30)
    shown = manage("tasks", "show", str(task_id))
    assert shown["status"] == "completed", shown
    assert "Research Report: tides" in shown["result"]["content"][0]["text"]
    messages = [event["statusMessage"] for event in shown["events"]]
    # Progress came through tasks/get polls (which stages a 1 s poll catches depends on timing).
    assert messages[0] == "Gathering sources..." and len(set(messages)) >= 2
    assert shown["events"][-1]["status"] == "completed"


def test_a_legacy_task_is_cancelled_like_any_other(everything: dict[str, Any]) -> None:
    started = manage("call", "everything", "simulate-research-query", '{"topic": "reefs"}')
    task_id = started["task"]["id"]
    cancelled = manage("tasks", "cancel", str(task_id))
    assert cancelled["cancelRequested"] is True
    run_worker_until(lambda: status_is(task_id, "completed", "failed", "cancelled"), timeout=30)
    assert manage("tasks", "show", str(task_id))["status"] == "cancelled"


async def test_the_client_maps_legacy_tasks_to_modern_ones(everything_server: RunningPeer) -> None:
    async with McpClient(everything_server.url) as client:
        outcome = await client.call_tool("simulate-research-query", {"topic": "owls"})
        assert isinstance(outcome, TaskCreated)
        assert outcome.raw["resultType"] == "task" and outcome.raw["ttlMs"] == 300000
        final, seen = await wait_for_status(client, outcome.task.task_id, "completed", "failed", timeout=30)
    assert isinstance(final, CompletedTask) and final.result.is_error is False
    assert {"pollIntervalMs", "lastUpdatedAt"} <= set(final.raw) and "ttl" not in final.raw
    assert final.raw["_meta"]["io.modelcontextprotocol/legacyTask"]["ttl"] == 300000
    assert any(task.status_message == "Gathering sources..." for task in seen)
    # The task lived in a session of its own, ended (DELETE) once the task was seen finished.
    unpacked = unpack(final.task_id)
    assert unpacked is not None
    session, _, version = unpacked
    probe = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": session,
        "MCP-Protocol-Version": version,
    }
    gone = httpx.post(everything_server.url, json=probe, headers=headers)
    assert gone.status_code == 400 and "No valid session ID" in gone.json()["error"]["message"]
    with pytest.raises(ProtocolError) as caught:  # the task went with its session: not found
        async with McpClient(everything_server.url) as client:
            await client.get_task(final.task_id)
    assert caught.value.is_not_found


async def test_plain_tools_still_answer_in_the_foreground(everything_server: RunningPeer) -> None:
    async with McpClient(everything_server.url) as client:
        outcome = await client.call_tool("get-sum", {"a": 2, "b": 40})
    assert not isinstance(outcome, TaskCreated)
    assert "42" in outcome.content[0]["text"]  # type: ignore[union-attr]

"""The official Python SDK's own server (mcp==2.3.0, revision 2026-07-28, no tasks): input asked
for before a call starts (MRTR, §4), one question and two at once, accepted and declined, through
manage.py (`call`, then `pending show` and `pending answer`) and the client."""

import json
from typing import Any

import pytest

from tasksapp.mcpclient import InputRequired, McpClient, ToolResult
from tests.interop.helpers import manage
from tests.peers.launch import RunningPeer

pytestmark = pytest.mark.interop


@pytest.fixture
def sdk(transactional_db: None, sdk_server: RunningPeer) -> Any:
    return manage("servers", "add", "sdk", sdk_server.url)


def ask(tool: str, arguments: str = "{}") -> tuple[int, dict[str, Any]]:
    started = manage("call", "sdk", tool, arguments)
    assert started["outcome"] == "input_required", started
    pending = started["pendingCall"]
    assert manage("pending", "show", str(pending["id"]))["inputRequests"] == pending["inputRequests"]
    return pending["id"], pending["inputRequests"]


def answer(pending_id: int, responses: dict[str, Any]) -> str:
    done = manage("pending", "answer", str(pending_id), json.dumps(responses))
    assert done["outcome"] == "result", done
    text: str = done["result"]["content"][0]["text"]
    return text


def test_discovery_sees_a_modern_server_without_tasks(sdk: dict[str, Any]) -> None:
    assert (sdk["era"], sdk["tasksSupported"]) == ("modern", False)
    assert {"book_table", "plan_trip"} <= set(sdk["tools"])


def test_one_question_accepted(sdk: dict[str, Any]) -> None:
    pending_id, requests = ask("book_table", '{"party": 4}')
    assert list(requests) == ["day"] and requests["day"]["method"] == "elicitation/create"
    reply = {"day": {"action": "accept", "content": {"day": "Friday"}}}
    assert answer(pending_id, reply) == "Booked a table for 4 on Friday."


def test_one_question_declined(sdk: dict[str, Any]) -> None:
    pending_id, _ = ask("book_table")
    assert answer(pending_id, {"day": {"action": "decline"}}) == "Nothing booked: you chose decline."


def test_two_questions_accepted(sdk: dict[str, Any]) -> None:
    pending_id, requests = ask("plan_trip")
    assert set(requests) == {"where", "nights"}
    reply = {
        "where": {"action": "accept", "content": {"city": "Lisbon"}},
        "nights": {"action": "accept", "content": {"nights": 3}},
    }
    assert answer(pending_id, reply) == "Planned 3 nights in Lisbon (state trip-v1)."  # requestState echoed


def test_two_questions_one_declined(sdk: dict[str, Any]) -> None:
    pending_id, _ = ask("plan_trip")
    reply = {"where": {"action": "accept", "content": {"city": "Oslo"}}, "nights": {"action": "decline"}}
    assert answer(pending_id, reply) == "No trip planned: you declined nights."


async def test_the_client_runs_the_rounds(sdk_server: RunningPeer) -> None:
    async with McpClient(sdk_server.url) as client:
        first = await client.call_tool("plan_trip", {})
        assert isinstance(first, InputRequired) and (first.request_state or "").startswith("v1.")  # sealed
        answers = {
            "where": {"action": "accept", "content": {"city": "Rome"}},
            "nights": {"action": "accept", "content": {"nights": 2}},
        }
        done = await client.call_tool(
            "plan_trip", {}, input_responses=answers, request_state=first.request_state
        )
    assert (
        isinstance(done, ToolResult)
        and done.content[0]["text"] == "Planned 2 nights in Rome (state trip-v1)."
    )

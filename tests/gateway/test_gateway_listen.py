"""subscriptions/listen through the gateway: served from the mirror's changes, for the agent's own
tasks only, also in front of a server that has no listen of its own (fastmcp-tasks)."""

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tasksapp.models import Agent, McpServer
from tasksapp.services.agents import agent_create, agent_revoke
from tests.gateway.support import envelope, error, headers_for, post, result

pytestmark = pytest.mark.django_db(transaction=True)


def listen(url: str, token: str, task_ids: list[str]) -> Iterator[dict[str, Any]]:
    """The frames of one listen stream, as JSON-RPC messages, until the caller stops reading."""
    params = {"notifications": {"taskIds": task_ids}, "_meta": envelope()}
    body = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": params}
    timeout = httpx.Timeout(30, read=30)
    with httpx.stream(
        "POST", url, json=body, headers=headers_for("subscriptions/listen", params, token), timeout=timeout
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        data: list[str] = []
        for line in response.iter_lines():
            if line.startswith("data:"):
                data.append(line[5:].strip())
            elif line == "" and data:
                yield json.loads("\n".join(data))
                data = []


def frames_until_finished(url: str, token: str, task_ids: list[str]) -> list[dict[str, Any]]:
    frames = []
    for frame in listen(url, token, task_ids):
        frames.append(frame)
        if frame["method"] == "notifications/tasks" and frame["params"]["status"] in ("completed", "failed"):
            return frames
    raise AssertionError(f"the stream ended early: {frames}")


def test_an_agent_hears_its_own_task_change_until_it_finishes_and_nothing_of_others(
    demo_url: str, token: str, demo_registered: McpServer
) -> None:
    _, other = agent_create(name="other", servers=[demo_registered], user=None)
    theirs = result(post(demo_url, other, "tools/call", {"name": "run_forever", "arguments": {"delay": 30}}))
    mine = result(
        post(demo_url, token, "tools/call", {"name": "slow_count", "arguments": {"n": 3, "delay": 0.3}})
    )
    frames = frames_until_finished(demo_url, token, [mine["taskId"], theirs["taskId"], "no-such-task"])
    ack, *pushes = frames
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"taskIds": [mine["taskId"]]}
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"
    assert {p["params"]["taskId"] for p in pushes} == {mine["taskId"]}
    assert all(p["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1" for p in pushes)
    assert "resultType" not in pushes[-1]["params"]
    assert pushes[-1]["params"]["result"]["content"][0]["text"] == "counted to 3"
    messages = [p["params"].get("statusMessage") for p in pushes]
    assert len(messages) == len(set(messages)) >= 2  # each change once, a repeat never
    post(demo_url, other, "tasks/cancel", {"taskId": theirs["taskId"]})


def test_listen_in_front_of_fastmcp_tasks_which_has_none_of_its_own(
    gateway_base: str, fastmcp_registered: McpServer
) -> None:
    _, token = agent_create(name="bot", servers=[fastmcp_registered], user=None)
    url = f"{gateway_base}/gateway/{fastmcp_registered.pk}/mcp"
    started = result(
        post(url, token, "tools/call", {"name": "slow_count", "arguments": {"n": 2, "delay": 0.2}})
    )
    assert started["resultType"] == "task"
    ack, *pushes = frames_until_finished(url, token, [started["taskId"]])
    assert ack["params"]["notifications"]["taskIds"] == [started["taskId"]]
    assert pushes[-1]["params"]["status"] == "completed"


def test_listen_for_tasks_without_the_tasks_capability_is_refused(demo_url: str, token: str) -> None:
    response = post(
        demo_url, token, "subscriptions/listen", {"notifications": {"taskIds": ["x"]}}, capabilities={}
    )
    assert (response.status_code, error(response)["code"]) == (400, -32021)


def test_a_listen_stream_opened_before_its_agent_was_revoked_ends_soon_after(
    demo_url: str, bot: tuple[Agent, str]
) -> None:
    agent, token = bot
    started = result(post(demo_url, token, "tools/call", {"name": "run_forever", "arguments": {"delay": 30}}))
    frames = listen(demo_url, token, [started["taskId"]])
    assert next(frames)["method"] == "notifications/subscriptions/acknowledged"
    agent_revoke(agent=agent, user=None)  # in another process, as from the CLI
    rest: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: rest.extend(frames), daemon=True)
    reader.start()
    reader.join(20)  # keep-alives every 15 s would hold a stream that does not end open for ever
    assert not reader.is_alive(), "the stream outlived the revocation"
    assert all(frame["method"] == "notifications/tasks" for frame in rest)
    assert post(demo_url, token, "tools/list").status_code == 401

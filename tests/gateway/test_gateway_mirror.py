"""Calls through the gateway reach the upstream with the dashboard's credentials; a task an agent
starts is in the mirror, attributed to it, before the agent hears of it; tasks/get is answered from
the mirror while it is fresh; an agent sees only its own tasks."""

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from tasksapp import services
from tasksapp.models import Agent, McpServer, OperatorAction, RemoteTask
from tasksapp.services.agents import agent_create
from tests.gateway.support import error, post, result
from tests.peers.launch import RunningPeer

pytestmark = pytest.mark.django_db(transaction=True)


def start(url: str, token: str, tool: str, arguments: dict[str, object]) -> dict[str, object]:
    created = result(post(url, token, "tools/call", {"name": tool, "arguments": arguments}))
    assert created["resultType"] == "task", created
    return created


def test_calls_go_upstream_with_the_dashboards_credentials_never_the_agents_token(
    gateway_base: str, demo_server: RunningPeer
) -> None:
    server = services.server_create(
        name="guarded", url=demo_server.url, headers={"X-Upstream-Key": "dashboard-secret"}, user=None
    )
    _, token = agent_create(name="bot", servers=[server], user=None)
    url = f"{gateway_base}/gateway/{server.pk}/mcp"
    demo_server.clear()
    listed = result(post(url, token, "tools/list"))
    echoed = result(post(url, token, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
    assert [t["name"] for t in listed["tools"]][:1] == ["echo"]
    assert echoed["content"][0]["text"] == "hi"
    seen = demo_server.received()
    assert [r["method"] for r in seen] == ["tools/list", "tools/call"]
    for request in seen:
        assert request["headers"]["x-upstream-key"] == "dashboard-secret"
        assert token not in repr(request)
        assert request["headers"]["mcp-method"] == request["method"]
    assert seen[1]["headers"]["mcp-name"] == "echo"
    assert OperatorAction.objects.filter(agent__name="bot", action="start", detail__outcome="result").exists()


def test_a_task_is_mirrored_for_its_agent_before_the_agent_is_answered(
    demo_url: str, bot: tuple[Agent, str]
) -> None:
    agent, token = bot
    created = start(demo_url, token, "run_forever", {"delay": 30})
    task = RemoteTask.objects.get(agent=agent)
    assert task.remote_id == created["taskId"]
    assert (task.tool_name, task.started_by) == ("run_forever", None)
    assert OperatorAction.objects.filter(agent=agent, action="start", task=task).exists()
    post(demo_url, token, "tasks/cancel", {"taskId": created["taskId"]})


def test_tasks_get_is_answered_from_the_mirror_while_fresh_and_read_through_when_older(
    demo_url: str, token: str, demo_server: RunningPeer
) -> None:
    created = start(demo_url, token, "run_forever", {"delay": 30, "poll_interval_ms": 60_000})
    demo_server.clear()
    answers = [result(post(demo_url, token, "tasks/get", {"taskId": created["taskId"]})) for _ in range(5)]
    assert {a["status"] for a in answers} == {"working"}
    assert all(a["taskId"] == created["taskId"] and a["resultType"] == "complete" for a in answers)
    assert (
        demo_server.method_counts().get("tasks/get", 0) == 0
    )  # confirmed at its creation, a minute ago at most
    # The last confirmation two poll intervals ago: the next tasks/get asks the server, once.
    RemoteTask.objects.update(last_polled_at=timezone.now() - timedelta(minutes=2))
    # A change by hand publishes nothing: the gateway sees it once what it kept has expired.
    time.sleep(settings.MCP_GATEWAY_CACHE_MS / 1000 + 0.1)
    result(post(demo_url, token, "tasks/get", {"taskId": created["taskId"]}))
    result(post(demo_url, token, "tasks/get", {"taskId": created["taskId"]}))
    assert demo_server.method_counts().get("tasks/get", 0) == 1
    post(demo_url, token, "tasks/cancel", {"taskId": created["taskId"]})


def test_a_finished_task_reads_as_the_server_said_it(demo_url: str, token: str) -> None:
    created = start(demo_url, token, "slow_count", {"n": 1, "delay": 0.05, "poll_interval_ms": 100})
    deadline = time.monotonic() + 20
    while True:
        got = result(post(demo_url, token, "tasks/get", {"taskId": created["taskId"]}))
        if got["status"] == "completed" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert got["status"] == "completed"
    assert got["result"]["content"][0]["text"] == "counted to 1"


def test_another_agents_task_is_not_found_exactly_like_an_unknown_one(
    demo_url: str, token: str, demo_registered: McpServer
) -> None:
    created = start(demo_url, token, "run_forever", {"delay": 30})
    _, other = agent_create(name="nosy", servers=[demo_registered], user=None)
    theirs = post(demo_url, other, "tasks/get", {"taskId": created["taskId"]})
    unknown = post(demo_url, other, "tasks/get", {"taskId": "no-such-task"})
    assert theirs.status_code == unknown.status_code == 400
    assert error(theirs) == error(unknown) == {"code": -32602, "message": "Task not found"}
    for method in ("tasks/cancel", "tasks/update"):
        params = {"taskId": created["taskId"], "inputResponses": {}}
        assert error(post(demo_url, other, method, params))["code"] == -32602
    assert RemoteTask.objects.get().cancel_requested_at is None
    post(demo_url, token, "tasks/cancel", {"taskId": created["taskId"]})


def test_a_dashboard_task_is_invisible_through_the_gateway(
    demo_url: str, token: str, task: RemoteTask
) -> None:
    assert error(post(demo_url, token, "tasks/get", {"taskId": task.remote_id}))["code"] == -32602


def test_mcp_param_headers_are_checked_against_the_stored_schema_as_a_server_checks_them(
    demo_url: str, token: str, demo_server: RunningPeer
) -> None:
    call = {"name": "test_custom_headers", "arguments": {"region": "eu-west", "priority": 3}}
    demo_server.clear()
    both = {"Mcp-Param-Region": "eu-west", "Mcp-Param-Priority": "3"}
    assert not result(post(demo_url, token, "tools/call", call, headers=both)).get("isError")
    sent = demo_server.last_request("tools/call")["headers"]
    assert (sent["mcp-param-region"], sent["mcp-param-priority"]) == ("eu-west", "3")
    wrong = post(demo_url, token, "tools/call", call, headers={**both, "Mcp-Param-Region": "us-east"})
    missing = post(demo_url, token, "tools/call", call, headers={"Mcp-Param-Region": "eu-west"})
    for refused in (wrong, missing):
        assert (refused.status_code, error(refused)["code"]) == (400, -32020)
    assert demo_server.method_counts()["tools/call"] == 1

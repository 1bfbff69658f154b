"""Who answers a gateway task's questions: `either` (the default: the agent sees them, so does the
inbox, the first answer wins), `people` (withheld from the agent, answered in the inbox) and
`agent` (only the agent; the inbox shows them read-only). Per server, with per-tool exceptions."""

import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tasksapp import services
from tasksapp.models import Agent, InputRequest, McpServer, RemoteTask
from tasksapp.services.agents import gateway_policy_set
from tests.gateway.support import TASKS, post, result
from tests.peers.launch import RunningPeer

pytestmark = pytest.mark.django_db(transaction=True)
DECLINE = {"action": "decline"}


def mirrored_question(url: str, token: str) -> tuple[dict[str, Any], RemoteTask]:
    """An ask_form task through the gateway, once its question is in the mirror."""
    # The agent declares form elicitation: a server may ask it only for kinds it declared.
    call = {"name": "ask_form", "arguments": {"delay": 0.05}}
    created = result(post(url, token, "tools/call", call, capabilities={**TASKS, "elicitation": {}}))
    deadline = time.monotonic() + 20
    while not InputRequest.objects.filter(state="open").exists():
        assert time.monotonic() < deadline, "the question never reached the mirror"
        result(post(url, token, "tasks/get", {"taskId": created["taskId"]}))  # reads through
        time.sleep(0.1)
    return created, RemoteTask.objects.get()


def test_under_people_the_agent_never_sees_the_question_and_a_persons_answer_lets_it_go_on(
    demo_url: str, token: str, demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    gateway_policy_set(server=demo_registered, policy="people", tools={}, user=None)
    created, task = mirrored_question(demo_url, token)
    seen = result(post(demo_url, token, "tasks/get", {"taskId": created["taskId"]}))
    assert (seen["status"], "inputRequests" in seen) == ("working", False)
    assert "person is answering" in seen["statusMessage"]
    (row,) = InputRequest.objects.all()
    demo_server.clear()
    ignored = {"taskId": created["taskId"], "inputResponses": {row.key: {"action": "accept", "content": {}}}}
    assert result(post(demo_url, token, "tasks/update", ignored)) == {"resultType": "complete"}
    assert demo_server.method_counts().get("tasks/update", 0) == 0  # the agent may not answer
    services.task_answer(task=task, key=row.key, response=DECLINE, user=None)
    deadline = time.monotonic() + 20
    while (got := result(post(demo_url, token, "tasks/get", {"taskId": created["taskId"]})))[
        "status"
    ] != "completed":
        assert time.monotonic() < deadline, got
        assert "inputRequests" not in got
        time.sleep(0.1)
    assert "declined" in got["result"]["content"][0]["text"]


def test_under_agent_people_cannot_answer_and_the_inbox_shows_the_question_read_only(
    demo_url: str, bot: tuple[Agent, str], demo_registered: McpServer
) -> None:
    agent, token = bot
    gateway_policy_set(server=demo_registered, policy="agent", tools={}, user=None)
    created, task = mirrored_question(demo_url, token)
    (row,) = InputRequest.objects.all()
    with pytest.raises(services.NotAllowed, match="Agent bot answers this task's questions"):
        services.task_answer(task=task, key=row.key, response=DECLINE, user=None)
    user = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(user)
    page = client.get("/inbox/").content.decode()
    assert "Agent bot answers this question" in page
    assert f"/inputs/{row.pk}/answer/" not in page
    refused = client.post(f"/inputs/{row.pk}/answer/", {"action": "decline"}, follow=True).content.decode()
    assert "Agent bot answers this task" in refused
    assert InputRequest.objects.get().state == "open"
    seen = result(post(demo_url, token, "tasks/get", {"taskId": created["taskId"]}))
    assert list(seen["inputRequests"]) == [row.key]
    answer = {"taskId": created["taskId"], "inputResponses": {row.key: DECLINE}}
    assert result(post(demo_url, token, "tasks/update", answer)) == {"resultType": "complete"}
    assert InputRequest.objects.get().answered_by_agent == agent


def test_a_tool_exception_overrides_the_servers_policy(
    demo_url: str, token: str, demo_registered: McpServer
) -> None:
    gateway_policy_set(server=demo_registered, policy="either", tools={"ask_form": "people"}, user=None)
    created, _ = mirrored_question(demo_url, token)
    seen = result(post(demo_url, token, "tasks/get", {"taskId": created["taskId"]}))
    assert "inputRequests" not in seen
    assert demo_registered.input_policy("ask_two") == "either"
    with pytest.raises(services.ServiceError, match="not a policy"):
        gateway_policy_set(server=demo_registered, policy="nobody", tools={}, user=None)
    post(demo_url, token, "tasks/cancel", {"taskId": created["taskId"]})

"""An agent's answers and cancels go upstream exactly once, beside the people's: the first answer
to a key wins, whoever gives it, and the later one is acknowledged and dropped."""

import time
from typing import Any

import pytest

from tasksapp import services
from tasksapp.models import Agent, InputRequest, OperatorAction, RemoteTask
from tests.gateway.support import TASKS, post, result
from tests.peers.launch import RunningPeer

pytestmark = pytest.mark.django_db(transaction=True)
DECLINE = {"action": "decline"}
FORMS = {**TASKS, "elicitation": {"form": {}}}  # an agent that can answer form elicitations


def asking_task(url: str, token: str) -> dict[str, Any]:
    """An ask_form task, polled through the gateway until it asks."""
    created = result(post(url, token, "tools/call", {"name": "ask_form", "arguments": {"delay": 0.05}}))
    deadline = time.monotonic() + 20
    while True:
        got = result(post(url, token, "tasks/get", {"taskId": created["taskId"]}, capabilities=FORMS))
        if got["status"] == "input_required":
            return got
        assert time.monotonic() < deadline, got
        time.sleep(0.1)


def wait_status(url: str, token: str, task_id: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        got = result(post(url, token, "tasks/get", {"taskId": task_id}))
        if got["status"] == status:
            return got
        assert time.monotonic() < deadline, got
        time.sleep(0.1)


def test_an_agents_answer_is_sent_once_and_a_person_is_then_told_who_answered(
    demo_url: str, bot: tuple[Agent, str], demo_server: RunningPeer
) -> None:
    agent, token = bot
    asked = asking_task(demo_url, token)
    (key,) = asked["inputRequests"]
    demo_server.clear()
    answer = {"taskId": asked["taskId"], "inputResponses": {key: DECLINE}}
    assert result(post(demo_url, token, "tasks/update", answer, capabilities=FORMS)) == {
        "resultType": "complete"
    }
    assert result(post(demo_url, token, "tasks/update", answer, capabilities=FORMS)) == {
        "resultType": "complete"
    }
    assert demo_server.method_counts().get("tasks/update") == 1
    row = InputRequest.objects.get()
    assert (row.state, row.answered_by_agent, row.response) == ("answered", agent, DECLINE)
    task = RemoteTask.objects.get()
    with pytest.raises(services.NotAllowed, match="Agent bot already answered"):
        services.task_answer(task=task, key=key, response=DECLINE, user=None)
    assert OperatorAction.objects.filter(agent=agent, action="decline", task=task).count() == 1
    done = wait_status(demo_url, token, asked["taskId"], "completed")
    assert "declined" in done["result"]["content"][0]["text"]


def test_a_persons_answer_first_makes_the_agents_a_dropped_acknowledgement(
    demo_url: str, token: str, demo_server: RunningPeer
) -> None:
    asked = asking_task(demo_url, token)
    (key,) = asked["inputRequests"]
    services.task_answer(task=RemoteTask.objects.get(), key=key, response=DECLINE, user=None)
    demo_server.clear()
    answer = {"taskId": asked["taskId"], "inputResponses": {key: {"action": "accept", "content": {}}}}
    assert result(post(demo_url, token, "tasks/update", answer, capabilities=FORMS)) == {
        "resultType": "complete"
    }
    assert demo_server.method_counts().get("tasks/update", 0) == 0
    assert InputRequest.objects.get().response == DECLINE
    got = result(post(demo_url, token, "tasks/get", {"taskId": asked["taskId"]}))
    assert key not in got.get("inputRequests", {})  # answered: never offered again


def test_a_cancel_is_sent_once_and_recorded_under_the_agent(
    demo_url: str, bot: tuple[Agent, str], demo_server: RunningPeer
) -> None:
    agent, token = bot
    created = result(post(demo_url, token, "tools/call", {"name": "run_forever", "arguments": {"delay": 30}}))
    demo_server.clear()
    for _ in range(2):
        assert result(post(demo_url, token, "tasks/cancel", {"taskId": created["taskId"]})) == {
            "resultType": "complete"
        }
    assert demo_server.method_counts().get("tasks/cancel") == 1
    assert RemoteTask.objects.get().cancel_requested_at is not None
    assert OperatorAction.objects.filter(agent=agent, action="cancel", ok=True).count() == 1
    assert wait_status(demo_url, token, created["taskId"], "cancelled")["status"] == "cancelled"


def test_an_agent_that_declared_no_form_elicitation_is_not_shown_the_question_nor_may_answer_it(
    demo_url: str, token: str, demo_server: RunningPeer
) -> None:
    """Under `either` the upstream was told people can answer forms; the agent, which did not say it
    can, sees the task working while a person answers, and its answer to the key is dropped."""
    asked = asking_task(demo_url, token)
    (key,) = asked["inputRequests"]
    formless = post(demo_url, token, "tasks/get", {"taskId": asked["taskId"]}, capabilities=TASKS)
    assert result(formless)["status"] == "working" and "inputRequests" not in result(formless)
    assert "person" in result(formless)["statusMessage"]
    demo_server.clear()
    answer = {"taskId": asked["taskId"], "inputResponses": {key: DECLINE}}
    assert result(post(demo_url, token, "tasks/update", answer, capabilities=TASKS)) == {
        "resultType": "complete"
    }
    assert demo_server.method_counts().get("tasks/update", 0) == 0
    assert InputRequest.objects.get().state == "open"  # still the people's to answer

"""Third-party agents through the gateway, against real peers: fastmcp's own client driving a
fastmcp-tasks server with `call_tool_task`. The agent's task is in the mirror under its name while
it runs; a person answers its question in the dashboard; the agent's own wait ends with that
answer's outcome; under `people` the agent never sees the question."""

import json
import subprocess
import time

import pytest

from tasksapp import services
from tasksapp.models import InputRequest, McpServer, RemoteTask
from tasksapp.services.agents import agent_create, gateway_policy_set
from tests.peers.launch import ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.fastmcp]
PEER_PYTHON = str(ROOT / ".venv-peer" / "bin" / "python")


def fastmcp_agent(url: str, token: str, tool: str, arguments: dict[str, object]) -> subprocess.Popen[str]:
    argv = [
        PEER_PYTHON,
        str(ROOT / "tests" / "peers" / "fastmcp_agent.py"),
        url,
        token,
        tool,
        json.dumps(arguments),
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_fastmcps_client_runs_a_task_through_the_gateway_to_its_end(
    gateway_base: str, fastmcp_registered: McpServer
) -> None:
    agent, token = agent_create(name="fastmcp-agent", servers=[fastmcp_registered], user=None)
    url = f"{gateway_base}/gateway/{fastmcp_registered.pk}/mcp"
    run = fastmcp_agent(url, token, "slow_count", {"n": 2, "delay": 0.2})
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    started, ended = (json.loads(line) for line in out.splitlines())
    task = RemoteTask.objects.get()
    assert (task.agent, task.remote_id) == (agent, started["taskId"])
    assert not ended["isError"] and any("2" in (text or "") for text in ended["texts"]), ended
    assert task.status == "completed"  # in the mirror: the agent's polls read it through


def test_under_people_a_person_answers_and_the_fastmcp_agents_wait_ends_with_that_outcome(
    gateway_base: str, fastmcp_registered: McpServer
) -> None:
    gateway_policy_set(server=fastmcp_registered, policy="people", tools={}, user=None)
    _, token = agent_create(name="fastmcp-agent", servers=[fastmcp_registered], user=None)
    run = fastmcp_agent(f"{gateway_base}/gateway/{fastmcp_registered.pk}/mcp", token, "ask_name", {})
    deadline = time.monotonic() + 60
    while not InputRequest.objects.filter(state="open").exists():  # the agent's polls read through
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "the question never reached the inbox"
        time.sleep(0.2)
    row = InputRequest.objects.get()
    services.task_answer(
        task=row.task, key=row.key, response={"action": "accept", "content": {"name": "Ada"}}, user=None
    )
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    ended = json.loads(out.splitlines()[-1])
    assert not ended["isError"] and "Ada" in " ".join(t or "" for t in ended["texts"]), ended

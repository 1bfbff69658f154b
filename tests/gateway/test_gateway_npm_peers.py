"""Third-party agents from npm through the gateway, against the reference server: the official
TypeScript SDK v2 client with @modelcontextprotocol/ext-tasks (tests/peers/npm/ts2_agent.mjs), and
the Inspector CLI 2.12.0 (`--cli --protocol-era modern`, which runs a task-backed tools/call to its
end through ext-tasks but has no tasks/* verbs of its own). Each agent's task is in the mirror
under its name; a person's answer in the dashboard ends the agent's own wait with that answer's
outcome; under `people` the agent never sees the question."""

import json
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tasksapp import services
from tasksapp.models import Agent, InputRequest, McpServer, RemoteTask
from tasksapp.services.agents import agent_create, gateway_policy_set
from tests.peers.launch import NPM_DIR, node_binary, npm_package

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.interop]
STARTED: list[subprocess.Popen[str]] = []
CONTACT = {"action": "accept", "content": {"name": "Ada", "email": "ada@example.com"}}


@pytest.fixture
def agent(demo_registered: McpServer) -> tuple[Agent, str]:
    return agent_create(name="npm-agent", servers=[demo_registered], user=None)


@pytest.fixture
def url(gateway_base: str, demo_registered: McpServer) -> str:
    return f"{gateway_base}/gateway/{demo_registered.pk}/mcp"


def ts2_agent(url: str, token: str, tool: str, arguments: dict[str, Any], answer: Any = None) -> "Run":
    argv = [node_binary(), str(NPM_DIR / "ts2_agent.mjs"), url, token, tool, json.dumps(arguments)]
    npm_package("@modelcontextprotocol/ext-tasks")
    return Run(argv + ([json.dumps(answer)] if answer is not None else []))


def inspector(url: str, token: str, *args: str, home: str) -> "Run":
    entry = npm_package("@modelcontextprotocol/inspector") / "clients" / "launcher" / "build" / "index.js"
    argv = [node_binary(), str(entry), "--cli", url, "--transport", "http", "--protocol-era", "modern"]
    # HOME: the Inspector keeps a catalog under ~/.mcp-inspector; the test's own, not the user's.
    return Run([*argv, "--header", f"Authorization: Bearer {token}", *args], env={"HOME": home})


class Run:
    """A peer process; `lines()` its stdout as JSON lines once it has ended."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        STARTED.append(self.process)
        self.out = self.err = ""

    def wait(self) -> str:
        self.out, self.err = self.process.communicate(timeout=90)
        assert self.process.returncode == 0, self.err
        return self.out

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.wait().splitlines()]


@pytest.fixture
def home(tmp_path: Any) -> str:
    return str(tmp_path)


def a_person_answers(run: Run, response: dict[str, Any]) -> InputRequest:
    """Waits for the task's question in the inbox (the agent's polls read it through), answers it."""
    deadline = time.monotonic() + 60
    while not InputRequest.objects.filter(state="open").exists():
        assert run.process.poll() is None, run.process.communicate()
        assert time.monotonic() < deadline, "the question never reached the inbox"
        time.sleep(0.2)
    row = InputRequest.objects.get(state="open")
    services.task_answer(task=row.task, key=row.key, response=response, user=None)
    return row


def test_the_typescript_sdk_client_with_ext_tasks_runs_a_task_through_the_gateway_to_its_end(
    url: str, agent: tuple[Agent, str]
) -> None:
    started, *views, ended = ts2_agent(url, agent[1], "slow_count", {"n": 2, "delay": 0.2}).lines()
    task = RemoteTask.objects.get()
    assert started == {"kind": "task", "taskId": task.remote_id}
    assert task.agent == agent[0] and task.status == "completed"
    assert {"status": "completed"} in views
    assert ended == {"outcome": "completed", "texts": ["counted to 2"], "isError": False}


def test_under_either_the_typescript_agent_answers_its_own_question(
    url: str, agent: tuple[Agent, str]
) -> None:
    lines = ts2_agent(url, agent[1], "ask_form", {"delay": 0.1}, answer=CONTACT).lines()
    assert {"asked": "elicitation"} in lines
    assert lines[-1]["texts"] == ["Thanks! Received 2 answers."]
    row = InputRequest.objects.get()
    assert (row.state, row.answered_by_agent) == ("answered", agent[0])


def test_under_people_a_person_answers_and_the_typescript_agents_wait_ends_with_that_outcome(
    url: str, agent: tuple[Agent, str], demo_registered: McpServer
) -> None:
    gateway_policy_set(server=demo_registered, policy="people", tools={}, user=None)
    run = ts2_agent(url, agent[1], "ask_form", {"delay": 0.1}, answer={"action": "decline"})
    a_person_answers(run, CONTACT)
    lines = run.lines()
    assert not [line for line in lines if "asked" in line], lines  # never shown the question
    assert lines[-1] == {"outcome": "completed", "texts": ["Thanks! Received 2 answers."], "isError": False}


def test_a_question_of_a_kind_the_agent_did_not_declare_goes_to_people_only(
    url: str, agent: tuple[Agent, str]
) -> None:
    """The agent declares form elicitation only: under `either` a sampling request waits for a person
    (the upstream was told people can sample), and the agent is not handed a kind it cannot take."""
    run = ts2_agent(url, agent[1], "ask_sampling", {"delay": 0.1})
    reply = {"role": "assistant", "content": {"type": "text", "text": "a haiku"}, "model": "person"}
    a_person_answers(run, reply)
    lines = run.lines()
    assert not [line for line in lines if "asked" in line], lines
    assert lines[-1]["outcome"] == "completed" and "a haiku" in " ".join(lines[-1]["texts"]), lines


def test_the_inspector_cli_lists_tools_and_calls_one_through_the_gateway(
    url: str, agent: tuple[Agent, str], home: str
) -> None:
    listed = json.loads(inspector(url, agent[1], "--method", "tools/list", home=home).wait())
    assert "echo" in {tool["name"] for tool in listed["tools"]}
    echo = ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hello"]
    answered = json.loads(inspector(url, agent[1], *echo, home=home).wait())
    assert answered["content"] == [{"type": "text", "text": "hello"}] and not answered["isError"]
    counted = ["--method", "tools/call", "--tool-name", "slow_count", "--tool-arg", "n=2", "delay=0.2"]
    result = json.loads(inspector(url, agent[1], *counted, home=home).wait())
    assert result["content"][0]["text"] == "counted to 2"
    task = RemoteTask.objects.get()
    assert (task.tool_name, task.agent, task.status) == ("slow_count", agent[0], "completed")


def test_under_people_the_inspector_waits_while_a_person_answers_its_tools_question(
    url: str, agent: tuple[Agent, str], demo_registered: McpServer, home: str
) -> None:
    gateway_policy_set(server=demo_registered, policy="people", tools={}, user=None)
    ask = ["--method", "tools/call", "--tool-name", "ask_form", "--tool-arg", "delay=0.1"]
    run = inspector(url, agent[1], *ask, home=home)
    row = a_person_answers(run, CONTACT)
    result = json.loads(run.wait())
    assert result["content"][0]["text"] == "Thanks! Received 2 answers."
    assert row.task.agent == agent[0]


@pytest.fixture(autouse=True)
def _no_stray_peers() -> Iterator[None]:
    """A test that failed half-way leaves no agent process behind."""
    yield
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait()

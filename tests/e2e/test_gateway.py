"""An agent's task through the gateway, as an operator meets it in a real browser: a third-party
agent (fastmcp's client with call_tool_task) starts a task through the demo's gateway; it appears
live in the open task list, under the agent's name; the server's policy gives its question to
people, so the agent never sees it; a person answers it in the inbox; the agent's own wait ends
with that answer's outcome."""

import json
import subprocess
import sys
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Demo, expect_live
from tests.e2e.test_inbox import fill_contact_form
from tests.peers.launch import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.fastmcp]


def manage(demo: Demo, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=demo.env,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def test_an_agents_task_appears_live_and_a_persons_answer_in_the_inbox_ends_the_agents_wait(
    logged_in: Callable[..., Page], demo: Demo
) -> None:
    server = next(
        s for s in json.loads(manage(demo, "servers", "list", "--json")) if s["name"] == "reference"
    )
    token = manage(demo, "agents", "add", "e2e-agent", "--server", "reference").strip().splitlines()[-1]
    page = logged_in()
    page.goto(f"/servers/{server['id']}/tools/")
    gateway = page.locator("#gateway")
    expect(gateway.locator("#gateway-url")).to_have_text(f"{demo.base}/gateway/{server['id']}/mcp")
    gateway.get_by_label("Who answers the questions of gateway tasks").select_option("people")
    gateway.get_by_role("button", name="Save").click()
    expect(page.get_by_text("was saved")).to_be_visible()

    page.goto("/tasks/")
    expect_live(page)
    url = f"{demo.base}/gateway/{server['id']}/mcp"
    agent = subprocess.Popen(
        [str(ROOT / ".venv-peer" / "bin" / "python"), str(ROOT / "tests" / "peers" / "fastmcp_agent.py"),
         url, token, "ask_form", json.dumps({"delay": 0.1})],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        row = page.locator("#task-rows tr").filter(has_text="by agent e2e-agent")
        expect(row).to_contain_text("ask_form")  # live: no reload
        pk = (row.get_attribute("id") or "").removeprefix("task-row-")
        page.goto("/inbox/")
        # This task's question, not another ask_form's that earlier tests left in the shared demo's inbox.
        question = page.locator(f"#inbox-task-{pk} .inbox-item").first
        expect(question).to_be_visible()
        if not question.evaluate("details => details.open"):  # the first one is open already
            question.locator("summary").click()
        fill_contact_form(question)
        out, err = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
    assert agent.returncode == 0, err
    started, ended = (json.loads(line) for line in out.splitlines())
    assert started["taskId"]
    assert not ended["isError"] and "Thanks! Received" in " ".join(t or "" for t in ended["texts"]), ended

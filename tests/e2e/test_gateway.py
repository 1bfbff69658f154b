"""An agent's task through the gateway, as an operator meets it in a real browser: a third-party
agent (fastmcp's client with call_tool_task) starts a task through the demo's gateway, with a
token made on the Agents page (and the Inspector command the server's page shows lists the tools); it appears
live in the open task list, under the agent's name; the server's policy gives its question to
people, so the agent never sees it; a person answers it in the inbox; the agent's own wait ends
with that answer's outcome."""

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Demo, expect_live, fill_contact_form
from tests.peers.launch import ROOT, node_binary, npm_package

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
    logged_in: Callable[..., Page], demo: Demo, tmp_path: Path
) -> None:
    server = next(
        s for s in json.loads(manage(demo, "servers", "list", "--json")) if s["name"] == "reference"
    )
    page = logged_in()
    # As a new user: the agent made on the Agents page, its token copied from there.
    page.goto("/agents/")
    page.get_by_label("Name", exact=True).fill("e2e-agent")
    page.get_by_label("reference", exact=True).check()
    page.get_by_role("button", name="Add and show its token").click()
    token = page.locator("#token-value").inner_text().strip()
    assert token.startswith("mcpgw_")
    page.goto(f"/servers/{server['id']}/tools/")
    gateway = page.locator("#gateway")
    expect(gateway.locator("#gateway-url")).to_have_text(f"{demo.base}/gateway/{server['id']}/mcp")
    # The Inspector command the page shows, pasted with the token (npx's package: the pinned one).
    gateway.get_by_text("Host configuration").click()
    pasted = gateway.locator("pre code").nth(2).inner_text().replace("TOKEN", token)
    argv = shlex.split(pasted)
    assert argv[:2] == ["npx", "@modelcontextprotocol/inspector"], pasted
    entry = npm_package("@modelcontextprotocol/inspector") / "clients" / "launcher" / "build" / "index.js"
    listed = subprocess.run(
        [node_binary(), str(entry), *argv[2:]], capture_output=True, text=True, timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "ask_form" in {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
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

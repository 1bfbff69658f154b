"""WCAG 2.2 level A and AA on every page, light and dark, measured by axe-core in Chromium.

axe-core comes from npm, pinned in tests/peers/npm (`bash .ci/setup --test` installs it). It is
loaded as an init script, the way a browser extension would be: the dashboard's
Content-Security-Policy stays as strict as in production (no inline script is allowed, so a
<script> tag could not load it). Contrast (1.4.3), names and labels, landmarks, ARIA: whatever
axe's WCAG rules check, on pages that have something to show (a question waiting for an answer,
an open inbox row, a failed task, a finished one, the shortcuts dialog, the confirmation pages).
"""

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import ROOT, VIEWER, Demo, badge, login, open_tool, run_tool

pytestmark = pytest.mark.browser

AXE = Path(os.environ.get("AXE_CORE_JS") or ROOT / "tests/peers/npm/node_modules/axe-core/axe.min.js")
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]
RUN_AXE = """async tags => {
  const result = await axe.run(document, {runOnly: {type: "tag", values: tags}, resultTypes: ["violations"]});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 6).map(
      n => n.target.join(" ") + " — " + (n.failureSummary || "").replace(/\\s+/g, " ")),
  }));
}"""
SCHEMES: tuple[Literal["light"], Literal["dark"]] = ("light", "dark")


def with_axe(context: BrowserContext) -> BrowserContext:
    assert AXE.is_file(), f"axe-core is not installed at {AXE}: run bash .ci/setup --test"
    context.add_init_script(path=str(AXE))
    return context


def violations(page: Page) -> list[str]:
    found: list[dict[str, Any]] = page.evaluate(RUN_AXE, TAGS)
    return [f"{v['id']} ({v['impact']}): {v['help']}\n    " + "\n    ".join(v["nodes"]) for v in found]


def check(page: Page, where: str, problems: dict[str, list[str]]) -> None:
    found = violations(page)
    if found:
        problems[where] = found


def fixtures(page: Page) -> dict[str, int]:
    """Tasks that give the pages something to show: a question waiting, a finished and a failed task,
    a call waiting for input before its task exists, and the id of the open question."""
    asking = run_tool(page, "reference", "ask_form", delay=0.2)
    expect(badge(page)).to_have_text("needs input")
    failed = run_tool(page, "reference", "fail_rpc")
    expect(badge(page)).to_have_text("failed")
    done = run_tool(page, "reference", "rich_result", delay=0.1)
    expect(badge(page)).to_have_text("completed")
    link = page.locator("#task-card a[href*='/servers/']").first.get_attribute("href") or ""
    open_tool(page, "reference", "mrtr_then_task")
    page.locator("#run-button").click()
    expect(page).to_have_url(re.compile(r"/calls/\d+/$"))
    call = int(re.findall(r"/calls/(\d+)/", page.url)[0])
    page.goto("/inbox/")
    question = page.locator("input.inbox-pick").first.get_attribute("value") or ""
    ids = {"asking": asking, "failed": failed, "done": done, "call": call, "question": int(question)}
    return {**ids, "server": int(re.findall(r"\d+", link)[0])}


def pages(ids: dict[str, int]) -> list[str]:
    server = ids["server"]
    return [
        "/",
        "/tasks/",
        f"/tasks/{ids['asking']}/",
        f"/tasks/{ids['failed']}/",
        f"/tasks/{ids['done']}/",
        f"/tasks/{ids['asking']}/cancel/",
        f"/tasks/bulk/?action=cancel&tasks={ids['asking']}&tasks={ids['done']}",
        "/inbox/",
        "/servers/",
        "/servers/add/",
        f"/servers/{server}/edit/",
        f"/servers/{server}/tools/",
        f"/servers/{server}/archive/",
        f"/servers/{server}/tools/ask_form/run/",
        f"/calls/{ids['call']}/",  # a question asked before the task exists
        f"/inbox/bulk/?ids={ids['question']}",
        "/audit/",
        "/agents/",
        "/preferences/",
        "/notifications/",
        "/shortcuts/",
        "/tasks/999999999/",  # the 404 page
    ]


def test_every_page_meets_wcag_aa_in_both_themes(
    new_context: Callable[..., BrowserContext], demo: Demo
) -> None:
    page = with_axe(new_context(viewport={"width": 1280, "height": 900})).new_page()
    login(page, "demo", demo.password)
    ids = fixtures(page)
    problems: dict[str, list[str]] = {}
    for scheme in SCHEMES:
        page.emulate_media(color_scheme=scheme)
        for path in pages(ids):
            page.goto(path)
            check(page, f"{path} ({scheme})", problems)
        # An inbox row opened (its answer form), and the shortcuts dialog.
        page.goto("/inbox/")
        page.locator("details.inbox-item > summary").first.click()
        expect(page.locator("details.inbox-item[open] .input-request")).to_be_visible()
        check(page, f"/inbox/ with a question open ({scheme})", problems)
        page.keyboard.press("Escape")
        page.keyboard.press("?")
        expect(page.locator("#shortcuts-dialog")).to_be_visible()
        check(page, f"the shortcuts dialog ({scheme})", problems)
        # A tool's result shown on its own page (no task), and a server's discovery preview.
        open_tool(page, "reference", "echo")
        page.locator("#run-button").click()
        expect(page.locator("#immediate-result")).to_be_visible()
        check(page, f"an immediate result ({scheme})", problems)
        page.goto("/servers/add/")
        page.get_by_label("Name").fill("a11y-preview")
        page.get_by_label("MCP endpoint URL").fill(demo.mcp_url)
        page.get_by_role("button", name="Discover (preview)").click()
        expect(page.locator("#discovery-preview")).to_be_visible()
        check(page, f"a discovery preview ({scheme})", problems)

    # What a viewer sees (a 403 among it), and the log-in page of someone logged out.
    viewer = with_axe(new_context(viewport={"width": 390, "height": 844})).new_page()
    login(viewer, VIEWER, demo.password)
    anonymous = with_axe(new_context(viewport={"width": 1280, "height": 900})).new_page()
    for scheme in SCHEMES:
        viewer.emulate_media(color_scheme=scheme)
        for path in ("/", "/tasks/", "/servers/add/"):
            viewer.goto(path)
            check(viewer, f"{path} as a viewer at 390 px ({scheme})", problems)
        anonymous.emulate_media(color_scheme=scheme)
        anonymous.goto("/login/")
        check(anonymous, f"/login/ ({scheme})", problems)
    report = "\n".join(f"{where}:\n  " + "\n  ".join(found) for where, found in problems.items())
    assert not problems, f"WCAG A/AA violations (axe-core):\n{report}"

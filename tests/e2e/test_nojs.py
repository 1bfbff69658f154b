"""Every form works without JavaScript: log in, add a server, run a tool, answer, cancel, log out.

A page without JS does not update itself, so a second (JS) browser waits for each change live and
the JS-less page is then reloaded, as its user would.
"""

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Demo, badge, run_tool

pytestmark = pytest.mark.browser


def test_every_form_works_without_javascript(logged_in: Callable[..., Page], demo: Demo) -> None:
    page = logged_in(java_script_enabled=False)  # the log-in form itself, without JS
    watcher = logged_in()

    page.goto("/servers/add/")
    page.get_by_label("Name").fill("nojs-reference")
    page.get_by_label("MCP endpoint URL").fill(demo.mcp_url)
    page.get_by_role("button", name="Discover (preview)").click()
    expect(page.locator("#discovery-preview")).to_contain_text("Era: modern")
    page.get_by_role("button", name="Discover and save").click()
    expect(page.locator(".messages")).to_contain_text("Server nojs-reference added")

    pk = run_tool(page, "nojs-reference", "ask_form", delay=0.2)
    watcher.goto(f"/tasks/{pk}/")
    expect(badge(watcher)).to_have_text("needs input")
    page.reload()
    question = page.locator("#task-inputs .input-request")
    question.get_by_label("Full name").fill("Grace Hopper")
    question.get_by_label("Email").fill("grace@example.com")
    question.get_by_role("button", name="Accept and send").click()
    expect(page).to_have_url(re.compile(rf"/tasks/{pk}/$"))
    expect(page.locator(".messages")).to_contain_text(f"Answer sent to nojs-reference for task #{pk}.")
    expect(badge(watcher)).to_have_text("completed")
    page.reload()
    expect(badge(page)).to_have_text("completed")
    expect(page.locator("#task-result")).to_contain_text('"name": "Grace Hopper"')

    pk = run_tool(page, "nojs-reference", "run_forever", delay=1.0)
    page.get_by_role("link", name="Cancel task…").click()
    page.locator("#confirm-cancel").click()
    expect(page.locator(".messages")).to_contain_text(f"Cancel requested for task #{pk}.")
    watcher.goto(f"/tasks/{pk}/")
    expect(badge(watcher)).to_have_text("cancelled")
    page.reload()
    expect(badge(page)).to_have_text("cancelled")

    page.goto("/tasks/")
    page.get_by_label("Status", exact=True).select_option("cancelled")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"status=cancelled"))
    expect(page.locator(f"#task-row-{pk} .badge")).to_have_text("cancelled")

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/login/"))
    expect(page.get_by_role("button", name="Log in")).to_be_visible()

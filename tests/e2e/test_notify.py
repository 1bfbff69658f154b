"""Browser notifications in a real browser, against `manage.py demo`: an operator
chooses "a task fails" and browser notifications on the settings page and allows them; a task they
start fails; every open tab of theirs is told (one notification: the tag is shared), clicking it
opens the failed task, and another user who chose nothing is told nothing.

The browser's Notification API is the edge of the system: it is replaced by a recorder (headless
Chromium has no notification centre to look at); everything up to `new Notification(...)` is real.
"""

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import OPERATOR, VIEWER, Demo, expect_live, login, run_tool

pytestmark = pytest.mark.browser

RECORDER = """
window.__notes = [];
window.Notification = class {
  constructor(title, options) { this.title = title; Object.assign(this, options); window.__notes.push(this); }
  close() {}
  // Kept per origin, as the browser keeps the permission.
  static get permission() { return localStorage.getItem("e2e-allowed") ? "granted" : "default"; }
  static requestPermission() { localStorage.setItem("e2e-allowed", "1"); return Promise.resolve("granted"); }
};
"""


def recording(
    new_context: Callable[..., BrowserContext], user: str, demo: Demo
) -> tuple[BrowserContext, Page]:
    context = new_context()
    context.add_init_script(RECORDER)
    page = context.new_page()
    login(page, user, demo.password)
    return context, page


def notes(page: Page) -> list[str]:
    return list(page.evaluate("window.__notes.map((note) => `${note.tag} ${note.body}`)"))


def test_a_failed_task_is_told_in_every_open_tab_of_who_asked_and_opens_the_task(
    new_context: Callable[..., BrowserContext], demo: Demo
) -> None:
    context, settings = recording(new_context, OPERATOR, demo)
    settings.goto("/notifications/")
    settings.get_by_label("a task fails").check()
    settings.get_by_label("Browser notifications on this dashboard").check()
    settings.get_by_role("button", name="Save").click()
    expect(settings.locator(".messages")).to_contain_text("Notification settings saved.")
    expect(settings.locator("#notify-state")).to_have_text("not allowed yet")
    settings.get_by_role("button", name="Allow browser notifications").click()
    expect(settings.locator("#notify-state")).to_have_text("allowed")

    watching = context.new_page()
    watching.goto("/tasks/")
    expect_live(watching)
    _, viewer = recording(new_context, VIEWER, demo)  # chose nothing, allowed everything
    viewer.evaluate("localStorage.setItem('e2e-allowed', '1')")
    viewer.goto("/tasks/")
    expect_live(viewer)

    runner = context.new_page()
    pk = run_tool(runner, "reference", "fail_rpc", delay=0.3)
    expect(runner.locator("#task-card .badge")).to_have_text("failed")

    told = f"mcp-failed-{pk} Task #{pk} (fail_rpc) on reference failed."
    for page in (watching, runner):  # every open tab: one notification each, one tag for all
        shown = "(told) => window.__notes.some((note) => `${note.tag} ${note.body}` === told)"
        page.wait_for_function(shown, arg=told, timeout=20_000)
        assert notes(page) == [told]
    watching.evaluate("window.__notes.at(-1).onclick()")
    expect(watching).to_have_url(re.compile(rf"/tasks/{pk}/$"))
    assert notes(viewer) == []


def test_the_demo_sends_its_email_and_webhooks_to_the_outbox_sink_it_shows(
    logged_in: Callable[..., Page], demo: Demo
) -> None:
    settings = logged_in("demo")
    settings.goto("/notifications/")
    expect(settings.locator("#demo-outbox")).to_contain_text("its email goes to a local outbox sink")
    settings.locator("#demo-outbox").get_by_role("link", name=demo.sink).click()  # the page it names
    expect(settings.locator("h1")).to_have_text("What the demo sent")
    settings.goto("/notifications/")
    settings.get_by_label("a task fails").check()
    settings.get_by_label("Email to").fill("ops@example.com")
    settings.get_by_label("Webhook URL (Slack-compatible)").fill(f"{demo.sink}webhook")
    settings.get_by_role("button", name="Save").click()
    expect(settings.locator(".messages")).to_contain_text("Notification settings saved.")

    pk = run_tool(settings, "reference", "fail_rpc", delay=0.3)
    told = f"Task #{pk} (fail_rpc) on reference failed."
    settings.goto(demo.sink)
    sent = settings.locator("tbody tr").filter(has_text=told)
    expect(sent.filter(has_text="ops@example.com")).to_have_count(1, timeout=30_000)  # the email
    expect(sent.filter(has_text=f"{demo.sink}webhook")).to_have_count(1)  # the webhook
    expect(sent.first).to_contain_text(f"{demo.base}/tasks/{pk}/")  # its link leads back to the demo

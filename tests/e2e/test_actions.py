"""Cancelling a task, and what a viewer may not do (hidden buttons, refused forged POSTs)."""

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import VIEWER, badge, run_tool

pytestmark = pytest.mark.browser

# A POST the way a script on the viewer's own page would send it: same origin, session cookie,
# and the CSRF token of the page (every page has one, in the log-out form).
FORGED_POST = """async ([url, fields]) => {
    const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
    const body = new URLSearchParams({csrfmiddlewaretoken: token, ...fields});
    const response = await fetch(url, {method: "POST", body, headers: {"X-CSRFToken": token}});
    return {status: response.status, text: await response.text()};
}"""


def test_cancel_a_task_through_the_confirmation_page(logged_in: Callable[..., Page]) -> None:
    page = logged_in()
    pk = run_tool(page, "reference", "run_forever", delay=0.5)
    expect(badge(page)).to_have_text("working")
    expect(page.locator("#task-card .status-message")).to_contain_text(re.compile(r"tick \d+"))

    page.get_by_role("link", name="Cancel task…").click()
    expect(page).to_have_url(re.compile(rf"/tasks/{pk}/cancel/$"))
    expect(page.locator("h1")).to_have_text(f"Cancel task #{pk} (run_forever on reference)?")
    page.locator("#confirm-cancel").click()

    expect(page).to_have_url(re.compile(rf"/tasks/{pk}/$"))
    expect(page.locator(".messages")).to_contain_text(f"Cancel requested for task #{pk}.")
    expect(badge(page)).to_have_text("cancelled")
    timeline = page.locator("#task-timeline li")
    expect(timeline.filter(has_text="cancel requested by demo")).to_have_count(1)
    expect(timeline.filter(has_text="Cancelled at the client's request.")).not_to_have_count(0)
    # The history reads in order: the request, then the server's confirmation, which stays last.
    # Read in one go (a live frame may swap the section while Playwright reads entry by entry, and a
    # detached entry's text is its raw source: CI, once), whitespace as the page shows it.
    texts = page.evaluate(TIMELINE_TEXTS)
    requested = [i for i, text in enumerate(texts) if "cancel requested by demo" in text]
    cancelled = [i for i, text in enumerate(texts) if re.search(r"\bcancelled via ", text)]
    assert requested and cancelled, texts
    assert requested[0] < cancelled[0], texts
    assert cancelled[-1] == len(texts) - 1, texts
    expect(page.get_by_role("link", name="Cancel task…")).to_have_count(0)
    page.goto("/tasks/")
    expect(page.locator(f"#task-row-{pk} .badge")).to_have_text("cancelled")


TIMELINE_TEXTS = (
    "() => [...document.querySelectorAll('#task-timeline li')]"
    ".map(entry => entry.textContent.replace(/\\s+/g, ' ').trim())"
)


def forge(page: Page, url: str, **fields: str) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(FORGED_POST, [url, fields])
    return result


def test_a_viewer_sees_no_actions_and_forged_posts_are_refused(logged_in: Callable[..., Page]) -> None:
    admin = logged_in()
    running = run_tool(admin, "reference", "run_forever", delay=2)
    asking = run_tool(admin, "reference", "ask_form", delay=0.2)
    expect(badge(admin)).to_have_text("needs input")

    viewer = logged_in(VIEWER)
    expect(viewer.locator("header .who")).to_contain_text("(viewer)")
    viewer.goto(f"/tasks/{running}/")
    expect(badge(viewer)).to_have_text("working")
    for name in ("Cancel task…", "Run again"):
        expect(viewer.get_by_role("link", name=name)).to_have_count(0)
    expect(viewer.get_by_role("link", name="Download JSON")).to_be_visible()

    viewer.goto(f"/tasks/{asking}/")
    question = viewer.locator("#task-inputs .input-request")
    expect(question).to_contain_text("Please fill in your contact details.")
    expect(question.locator("form, button, input, select")).to_have_count(0)

    viewer.goto("/inbox/")
    question = viewer.locator(f"#inbox-task-{asking} .input-request")
    expect(question).to_contain_text("Please fill in your contact details.")
    expect(viewer.locator("#inbox-items").get_by_role("button")).to_have_count(0)
    input_pk = (question.get_attribute("id") or "").removeprefix("input-ir")

    viewer.goto("/servers/")
    expect(viewer.get_by_role("link", name="Add a server")).to_have_count(0)
    expect(viewer.get_by_role("link", name="Edit")).to_have_count(0)
    viewer.get_by_role("link", name="reference", exact=True).click()
    expect(viewer.locator("tbody").get_by_text("slow_count", exact=True)).to_be_visible()
    expect(viewer.get_by_role("link", name="Run")).to_have_count(0)
    expect(viewer.get_by_role("button", name="Discover again")).to_have_count(0)
    tools_url = viewer.url

    refused = {
        "cancel": forge(viewer, f"/tasks/{running}/cancel/"),
        "answer": forge(viewer, f"/inputs/{input_pk}/answer/", action="decline"),
        "run": forge(viewer, f"{tools_url}slow_count/run/", n="1", delay="0"),
    }
    for what, response in refused.items():
        assert response["status"] == 403, (what, response["status"], response["text"][:500])
        assert "Your role does not allow this" in response["text"], (what, response["text"][:500])

    viewer.goto(f"/tasks/{running}/")
    expect(badge(viewer)).to_have_text("working")
    expect(viewer.locator("#task-timeline")).not_to_contain_text("cancel requested")
    viewer.goto(f"/tasks/{asking}/")
    expect(badge(viewer)).to_have_text("needs input")
    admin.goto("/audit/?action=cancel")
    expect(admin.locator("main tbody")).not_to_contain_text(VIEWER)  # not the shortcuts dialog's table

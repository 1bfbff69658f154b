"""Under the strict Content-Security-Policy, live updates and the fallback poll
still work, and no page breaks the policy: nothing evaluated, no inline script or style."""

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import ConsoleMessage, Page, expect

from tests.e2e.conftest import OPERATOR, badge, expect_live, expect_not_navigated, mark_window, run_tool

pytestmark = pytest.mark.browser

RECORD_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", function (event) {
  (window.__csp = window.__csp || []).push(event.violatedDirective + " " + event.blockedURI);
});
"""


def watched(page: Page, violations: list[str]) -> Page:
    page.add_init_script(RECORD_VIOLATIONS)

    def console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text or "Refused to" in message.text:
            violations.append(message.text)

    page.on("console", console)
    return page


def test_live_updates_and_the_fallback_poll_work_under_a_strict_csp(logged_in: Callable[..., Page]) -> None:
    violations: list[str] = []
    page = watched(logged_in(OPERATOR), violations)
    response = page.goto("/tasks/")
    assert response is not None
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe" not in policy and "frame-ancestors 'none'" in policy

    pk = run_tool(page, "reference", "slow_count", n=2, delay=0.5)
    expect_live(page)
    expect(badge(page)).to_have_text("completed")  # pushed over the socket

    polling = watched(page.context.new_page(), violations)
    polling.route_web_socket(re.compile(r"/ws/live/"), lambda socket: socket.close())
    later = run_tool(page, "reference", "slow_count", n=1, delay=1.0)
    polling.goto(f"/tasks/{later}/")
    expect(polling.locator("body")).to_have_attribute("data-live", "down")
    mark_window(polling)
    expect(badge(polling)).to_have_text("completed")  # fetched by the fallback poll
    expect_not_navigated(polling)

    rich = run_tool(page, "reference", "rich_result", delay=0.1)
    expect(page.locator("#task-result img.result-image")).to_be_visible()  # a data: image is allowed
    for path in ("/", "/inbox/", "/servers/", f"/tasks/{pk}/", f"/tasks/{rich}/"):
        page.goto(path)
        expect_live(page)
    page.get_by_role("link", name="reference", exact=True).click()
    expect(page.locator("h1")).to_contain_text("reference")
    for watched_page in (page, polling):
        violations += watched_page.evaluate("window.__csp || []")
    assert violations == []

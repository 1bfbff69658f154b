"""Quiet consoles. The browser's: live updates never target an element the page does not have (a
row on another page of the list, a question filtered out, an entry to delete before it is added),
so htmx reports nothing. The demo's: a sign-in logs nothing, an expected refusal one line."""

from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import VIEWER, Demo, badge, expect_live, login, run_tool

pytestmark = pytest.mark.browser


def watched(context: BrowserContext, path: str) -> Page:
    page = context.new_page()
    page.goto(path)
    expect_live(page)
    return page


def test_no_console_error_while_pages_follow_tasks_live(
    new_context: Callable[..., BrowserContext], demo: Demo, browser_log: list[str]
) -> None:
    context = new_context()
    runner = context.new_page()
    login(runner, "demo", demo.password)
    pages = [
        watched(context, path)
        for path in ("/tasks/", "/tasks/?tool=no-such-tool", "/inbox/", "/inbox/?kind=url", "/")
    ]
    pk = run_tool(runner, "reference", "slow_count", n=6, delay=0.2)
    expect_live(runner)
    asking = run_tool(context.new_page(), "reference", "ask_form", delay=0)
    expect(badge(runner)).to_have_text("completed")  # a dozen live changes on its own page
    expect(pages[0].locator(f"#task-row-{pk} .badge")).to_have_text("completed")
    expect(pages[2].locator(f"#inbox-task-{asking}")).to_be_visible()
    expect(runner.locator("#timeline-events li").last).to_contain_text("completed")

    errors = [line for line in browser_log if "] error: " in line or "] page error: " in line]
    assert not errors, "\n".join(errors)


def test_a_sign_in_logs_nothing_and_a_refusal_one_line(
    new_context: Callable[..., BrowserContext], demo: Demo
) -> None:
    before = len(demo.output)
    page = new_context().new_page()
    login(page, VIEWER, demo.password)
    refused = page.goto("/servers/add/")  # admins only
    assert refused is not None and refused.status == 403
    expect(page.locator("main")).to_contain_text("Your role does not allow this")
    page.goto("/tasks/")  # a request after the refusal: its lines are all written by now
    logged = demo.output[before:]
    assert not [line for line in logged if "AXES" in line], logged
    forbidden = [line for line in logged if "Forbidden" in line]
    assert len(forbidden) == 1 and "/servers/add/" in forbidden[0], logged
    assert not [line for line in logged if "Traceback" in line or "PermissionDenied" in line], logged


def test_questions_arriving_live_at_an_empty_inbox_replace_its_line_quietly(
    new_context: Callable[..., BrowserContext], demo: Demo, browser_log: list[str]
) -> None:
    # The "nothing is waiting" line was removed by every question added live: the second found
    # nothing to remove, and htmx said so (oobErrorNoTarget).
    context = new_context()
    login(context.new_page(), "demo", demo.password)
    inbox = watched(context, "/inbox/?tool=ask_sampling")  # a tool no other browser test runs
    expect(inbox.locator("#inbox-empty")).to_be_visible()
    asking = [run_tool(context.new_page(), "reference", "ask_sampling") for _ in range(2)]
    for pk in asking:
        expect(inbox.locator(f"#inbox-task-{pk}")).to_be_visible()
    expect(inbox.locator("#inbox-empty")).to_be_hidden()
    inbox.wait_for_timeout(500)  # console messages reach the test after the page shows the rows
    errors = [line for line in browser_log if "] error: " in line or "] page error: " in line]
    assert not errors, "\n".join(errors)

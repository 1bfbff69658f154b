"""Pages follow a task live over the websocket: no reload, no navigation, in every open browser."""

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import (
    OPERATOR,
    Demo,
    badge,
    expect_live,
    expect_not_navigated,
    mark_window,
    run_tool,
)

pytestmark = pytest.mark.browser


def test_register_a_server_run_a_tool_and_watch_it_finish_live(
    logged_in: Callable[..., Page], demo: Demo
) -> None:
    page = logged_in()
    page.get_by_role("link", name="Servers", exact=True).click()
    page.get_by_role("link", name="Add a server").click()
    page.get_by_label("Name").fill("ui-reference")
    page.get_by_label("MCP endpoint URL").fill(demo.mcp_url)
    page.get_by_role("button", name="Discover (preview)").click()
    preview = page.locator("#discovery-preview")
    expect(preview.locator("p").first).to_contain_text("Era: modern (2026-07-28)")
    expect(preview).to_contain_text("tasks supported")
    expect(preview.get_by_text("slow_count", exact=True)).to_be_visible()
    expect(page).to_have_url(re.compile(r"/servers/add/$"))  # a preview saves nothing

    page.get_by_role("button", name="Discover and save").click()
    expect(page.locator(".messages")).to_contain_text("Server ui-reference added (2026-07-28,")
    expect(page.locator("h1")).to_contain_text("ui-reference")

    pk = run_tool(page, "ui-reference", "slow_count", n=4, delay=1.0)
    expect(page.locator("#task-card h1")).to_contain_text(f"Task #{pk} · slow_count")
    listing = page.context.new_page()
    listing.goto("/tasks/")
    row_badge = listing.locator(f"#task-row-{pk} .badge")
    expect(badge(page)).to_have_text("working")
    expect(row_badge).to_have_text("working")
    for watching in (page, listing):
        expect_live(watching)
        mark_window(watching)

    expect(badge(page)).to_have_text("completed")
    expect(badge(page)).to_have_attribute("data-status", "completed")
    expect(page.locator("#task-result")).to_contain_text("counted to 4")
    expect(page.locator("#task-result")).to_contain_text('"count": 4')
    expect(page.locator("#task-timeline li").last).to_contain_text("completed")
    expect(page.get_by_role("link", name="Cancel task…")).to_have_count(0)
    expect(row_badge).to_have_text("completed")
    expect(listing.locator(f"#task-row-{pk}")).to_contain_text("ui-reference")
    for watching in (page, listing):
        expect_not_navigated(watching)


def test_a_second_user_sees_a_task_progress_live(logged_in: Callable[..., Page]) -> None:
    admin = logged_in()
    other = logged_in(OPERATOR)
    # The other user's list is open and live before the task exists, and the task runs long enough
    # (about 6 s) for its pages to open on a loaded machine while it is still working.
    other_list = other.context.new_page()
    other_list.goto("/tasks/")
    expect_live(other_list)
    mark_window(other_list)
    pk = run_tool(admin, "reference", "slow_count", n=6, delay=1.0)
    expect(other_list.locator(f"#task-row-{pk} .badge")).to_have_text("working")
    other.goto(f"/tasks/{pk}/")
    for page in (admin, other):
        expect_live(page)
        mark_window(page)
    watching = (admin, other, other_list)
    expect(badge(other)).to_have_text("working")
    expect(other.locator("#task-card .status-message")).to_contain_text(re.compile(r"counted \d/6"))

    expect(badge(other)).to_have_text("completed")
    expect(other.locator("#task-result")).to_contain_text("counted to 6")
    expect(other_list.locator(f"#task-row-{pk} .badge")).to_have_text("completed")
    expect(badge(admin)).to_have_text("completed")
    for page in watching:
        expect_not_navigated(page)


def test_answered_in_one_browser_the_question_leaves_the_others_inbox(
    logged_in: Callable[..., Page],
) -> None:
    admin = logged_in()
    other = logged_in(OPERATOR)
    pk = run_tool(admin, "reference", "ask_form", delay=0.2)
    expect(badge(admin)).to_have_text("needs input")
    other.goto("/inbox/")
    question = other.locator(f"#inbox-task-{pk} .input-request")
    expect(question).to_contain_text("Please fill in your contact details.")
    expect_live(other)
    mark_window(other)

    admin.get_by_role("link", name="Inbox", exact=True).click()
    admin.wait_for_load_state("load")  # a click before the deferred scripts ran answers without htmx
    admin.locator(f"#inbox-task-{pk} summary").first.click()  # rows fold their forms away
    admin.locator(f"#inbox-task-{pk}").get_by_role("button", name="Decline").click()
    expect(admin.locator("#inbox-status")).to_contain_text(f"Answer sent to reference for task #{pk}.")

    expect(question).to_have_count(0)
    expect_not_navigated(other)
    admin.goto(f"/tasks/{pk}/")
    expect(badge(admin)).to_have_text("completed")
    expect(admin.locator("#task-result")).to_contain_text("You declined the contact form; nothing was done.")


def test_the_live_indicator_says_live_once_the_socket_is_up(logged_in: Callable[..., Page]) -> None:
    page = logged_in()
    for path in ("/", "/tasks/", "/inbox/", "/servers/"):
        page.goto(path)
        expect_live(page)
    page.get_by_role("link", name="reference", exact=True).click()
    expect(page.locator("h1")).to_contain_text("reference")
    expect(page.locator("#live-indicator")).to_have_count(0)  # a page with nothing live has no socket
    expect(page.locator("body")).to_have_attribute("data-live", "off")

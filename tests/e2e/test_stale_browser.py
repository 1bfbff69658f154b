"""A task whose server stops answering is flagged stale on the open page, live, and on the list
and the overview; the flag goes when the server is back."""

import time
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Demo, badge, expect_live, expect_not_navigated, mark_window, run_tool
from tests.support.faults import outage_proxy

pytestmark = pytest.mark.browser


def test_a_failing_servers_task_is_marked_stale_while_it_fails(
    logged_in: Callable[..., Page], demo: Demo
) -> None:
    page = logged_in()
    with outage_proxy(demo.mcp_url) as proxy:
        page.goto("/servers/add/")
        page.get_by_label("Name").fill("flaky")
        page.get_by_label("MCP endpoint URL").fill(proxy.url())
        page.get_by_role("button", name="Discover and save").click()
        expect(page.locator(".messages")).to_contain_text("Server flaky added")
        pk = run_tool(page, "flaky", "run_forever", delay=30)
        expect(badge(page)).to_have_text("working")
        expect(page.locator("#last-confirmed")).to_be_visible()
        stale = page.locator("#task-card .stale-flag")
        expect(stale).to_have_count(0)

        lister = logged_in()
        lister.goto("/tasks/")
        expect_live(lister)
        mark_window(lister)
        row_stale = lister.locator(f"#task-row-{pk} .stale-flag")
        expect(row_stale).to_have_count(0)

        proxy.down()
        down_at = time.monotonic()
        expect(stale).to_contain_text("stale since")  # live: no reload
        expect(page.locator("#stale-warning")).to_contain_text("flaky has been failing since")
        expect(badge(page)).to_have_text("working")  # what the server said last, still shown
        expect(row_stale).to_contain_text("stale since")  # the server's mark, live, in its rows
        expect_not_navigated(lister)
        lister.reload()
        expect(row_stale).to_contain_text("stale since")
        overview = logged_in()
        overview.goto("/")
        expect(overview.locator('[data-tile="stale"] b')).not_to_have_text("0")
        expect_live(lister)
        mark_window(lister)

        proxy.up()
        # The worker retries a failing server after an exponential back-off (MCP_BACKOFF_BASE_MS
        # doubling, +-20%): the retry pending when the server comes back may be up to ~1.2 times
        # the outage away. A loaded machine makes the outage (the checks above) long.
        back = (15 + 1.3 * (time.monotonic() - down_at)) * 1000
        expect(stale).to_have_count(0, timeout=back)
        expect(row_stale).to_have_count(0)
        expect_not_navigated(lister)
        page.get_by_role("link", name="Cancel task…").click()
        page.locator("#confirm-cancel").click()
        expect(badge(page)).to_have_text("cancelled")

"""A task's timeline is sent entry by entry: after a burst of status messages,
a page that watched it all, a page that joined half-way and a fresh load show the same entries."""

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import OPERATOR, badge, expect_live, expect_not_navigated, mark_window, run_tool

pytestmark = pytest.mark.browser


def test_two_browsers_see_the_same_timeline_after_a_burst(logged_in: Callable[..., Page]) -> None:
    watcher = logged_in()
    # 40 messages in about 4 s: new entries (one a second at most) and folded messages in between.
    pk = run_tool(watcher, "reference", "slow_count", n=40, delay=0.1)
    expect_live(watcher)
    mark_window(watcher)
    joiner = logged_in(OPERATOR)
    joiner.goto(f"/tasks/{pk}/")
    expect_live(joiner)
    mark_window(joiner)
    for page in (watcher, joiner):
        expect(badge(page)).to_have_text("completed")
        expect(page.locator("#timeline-events li").last).to_contain_text("completed")

    fresh = logged_in()
    fresh.goto(f"/tasks/{pk}/")
    entries = fresh.locator("#timeline-events li")
    expect(entries.last).to_contain_text("completed")
    texts = [" ".join(text.split()) for text in entries.all_inner_texts()]
    ids = entries.evaluate_all("items => items.map(item => item.id)")
    assert len(texts) >= 3, texts  # created, some messages (folded or not: timing decides), completed
    for page in (watcher, joiner):
        expect(page.locator("#timeline-events li")).to_have_count(len(texts))
        shown = page.locator("#timeline-events li")
        assert shown.evaluate_all("items => items.map(item => item.id)") == ids
        assert [" ".join(text.split()) for text in shown.all_inner_texts()] == texts
        expect_not_navigated(page)

"""Bulk actions on the task list, as an operator does them in a browser."""

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import badge, run_tool

pytestmark = pytest.mark.browser


def test_select_tasks_confirm_once_and_each_is_cancelled(logged_in: Callable[..., Page]) -> None:
    page = logged_in()
    picked = [run_tool(page, "reference", "run_forever", delay=30) for _ in range(2)]
    page.goto("/tasks/")
    for pk in picked:
        page.get_by_label(f"Select task #{pk}", exact=True).check()
    page.get_by_role("button", name="Cancel selected…").click()
    for pk in picked:  # one confirmation page that lists them
        expect(page.locator(f"#bulk-task-{pk}")).to_contain_text("cancel")
    page.get_by_role("button", name="Yes, cancel them").click()
    expect(page.locator(".messages")).to_contain_text("Cancel requested for 2 tasks.")
    for pk in picked:
        page.goto(f"/tasks/{pk}/")
        expect(badge(page)).to_have_text("cancelled")

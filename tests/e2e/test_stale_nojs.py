"""Without JavaScript, controls that need it are not shown: no empty live pill, no
Copy button that does nothing. With JavaScript both are there."""

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import run_tool

pytestmark = pytest.mark.browser


def test_javascript_only_controls_are_hidden_without_javascript(logged_in: Callable[..., Page]) -> None:
    with_js = logged_in()
    pk = run_tool(with_js, "reference", "slow_count", n=1, delay=0.1)
    copy = with_js.get_by_role("button", name="Copy")
    expect(copy).to_be_visible()
    expect(with_js.locator("#live-indicator")).to_be_visible()

    without_js = logged_in(java_script_enabled=False)
    without_js.goto(f"/tasks/{pk}/")
    expect(without_js.locator("#raw-json")).to_be_visible()  # the JSON itself is there to select
    expect(without_js.get_by_role("button", name="Copy")).to_be_hidden()
    expect(without_js.locator("#live-indicator")).to_be_hidden()

"""The theme and the time zone, per user, in a real browser.

- the light/dark button switches at once with JavaScript (no reload), is remembered on the server
  (across a reload, and in another browser of the same user), and works as a plain form without it;
- the browser's zone is used until the user chooses one, every time says its zone, relative times
  carry the absolute time on hover;
- "?" shows the keyboard shortcuts, "g t" goes to the tasks.
"""

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import OPERATOR, VIEWER, expect_not_navigated, mark_window

pytestmark = pytest.mark.browser
DARK = "[data-theme=dark]"


def dark_background(page: Page) -> bool:
    colour = page.evaluate("getComputedStyle(document.body).backgroundColor")
    return max(int(n) for n in re.findall(r"\d+", colour)[:3]) < 80


def test_dark_toggle_is_instant_and_remembered_and_works_without_javascript(
    logged_in: Callable[..., Page],
) -> None:
    page = logged_in(VIEWER, viewport={"width": 390, "height": 844}, color_scheme="light")
    page.goto("/tasks/")
    assert not dark_background(page)
    page.locator("header .menu > summary").click()  # on a phone the button is in the menu
    mark_window(page)
    with page.expect_response(lambda r: r.url.endswith("/preferences/theme/") and r.status == 204):
        page.get_by_role("button", name="Dark").click()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert dark_background(page)
    expect_not_navigated(page)
    page.reload()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert dark_background(page)

    # The same person in a browser without JavaScript (and a dark system): remembered there too,
    # and the button, a plain form, switches back.
    nojs = logged_in(VIEWER, java_script_enabled=False, color_scheme="dark")
    nojs.set_viewport_size({"width": 1400, "height": 900})
    nojs.goto("/")
    expect(nojs.locator("html")).to_have_attribute("data-theme", "dark")
    expect(nojs.get_by_role("button", name="Dark")).to_be_hidden()
    nojs.get_by_role("button", name="Light").click()
    expect(nojs).to_have_url(re.compile(r"/$"))
    expect(nojs.locator("html")).to_have_attribute("data-theme", "light")
    assert not dark_background(nojs)
    page.reload()
    expect(page.locator("html")).to_have_attribute("data-theme", "light")


def test_times_follow_the_browser_zone_then_the_chosen_one_and_shortcuts(
    logged_in: Callable[..., Page],
) -> None:
    page = logged_in(OPERATOR, timezone_id="Asia/Shanghai", viewport={"width": 1400, "height": 900})
    page.goto("/preferences/")  # it shows the time now, as every page shows times
    when = page.locator("#zone-in-use time")
    expect(when).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d CST$"))
    expect(when).to_have_attribute("title", re.compile(r"Asia/Shanghai"))
    expect(when).to_have_attribute("datetime", re.compile(r"\+08:00$"))
    expect(page.locator("#zone-in-use")).to_contain_text("Asia/Shanghai, your browser's zone")
    page.get_by_label("Time zone").select_option("America/Sao_Paulo")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".messages")).to_contain_text("Preferences saved.")
    expect(when).to_have_text(re.compile(r" -03$"))
    expect(when).to_have_attribute("title", re.compile(r"America/Sao_Paulo"))
    expect(when).to_have_attribute("datetime", re.compile(r"-03:00$"))

    # Back to the browser's zone, so other tests see the default.
    page.goto("/preferences/")
    page.get_by_label("Time zone").select_option("")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".messages")).to_contain_text("Preferences saved.")

    # "?" opens the shortcuts, Escape closes them, "g" then "t" goes to the tasks.
    page.goto("/")
    expect(page.locator("#chart-title")).to_contain_text("Asia/Shanghai")
    dialog = page.locator("#shortcuts-dialog")
    expect(dialog).to_be_hidden()
    page.keyboard.press("?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Keyboard shortcuts")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.keyboard.press("g")
    page.keyboard.press("t")
    expect(page).to_have_url(re.compile(r"/tasks/$"))

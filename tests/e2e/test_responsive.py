"""Every page at 390 px and at 1400 px, light and dark, English and Chinese: no sideways
scrolling, the menu reachable, tables stacked on a phone, the status tiles in one row on a desktop.

One task that waited for input gives the task page, the inbox and the lifecycle bar something to show;
then one logged-in page walks every page at each width in light (a sample in dark), switching width
and colour scheme in place.
"""

import re
from collections.abc import Callable
from typing import Literal

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from tests.e2e.conftest import badge, run_tool

pytestmark = pytest.mark.browser

PHONE: ViewportSize = {"width": 390, "height": 844}
DESKTOP: ViewportSize = {"width": 1400, "height": 900}
OVERFLOW = "document.scrollingElement.scrollWidth - window.innerWidth"
# The body's background: dark means every channel below 80.
BACKGROUND = "getComputedStyle(document.body).backgroundColor"


def pages(pk: int, server_pk: int) -> list[str]:
    return [
        "/",
        "/tasks/",
        f"/tasks/{pk}/",
        "/inbox/",
        "/servers/",
        "/servers/add/",
        f"/servers/{server_pk}/edit/",
        f"/servers/{server_pk}/tools/",
        f"/servers/{server_pk}/tools/ask_form/run/",
        "/audit/",
        "/preferences/",
        "/shortcuts/",
        "/login/",  # the log-in form (shown again while logged in)
    ]


def is_dark(page: Page) -> bool:
    channels = [int(n) for n in re.findall(r"\d+", page.evaluate(BACKGROUND))[:3]]
    return max(channels) < 80


def answered_task(page: Page) -> tuple[int, int]:
    """A reference-server task that asked for input and got it: (task pk, server pk)."""
    pk = run_tool(page, "reference", "ask_form", delay=0.2)
    expect(badge(page)).to_have_text("needs input")
    page.set_viewport_size(PHONE)
    page.goto("/inbox/")  # with an open question: the heaviest inbox
    assert page.evaluate(OVERFLOW) <= 0, "the inbox with a question scrolls sideways at 390 px"
    page.goto(f"/tasks/{pk}/")
    question = page.locator("#task-inputs .input-request")
    # A person takes a while to answer (not synchronisation: the wait itself is what the lifecycle
    # bar must show; answered within half a second, it rounds to "input 0s").
    page.wait_for_timeout(1500)
    question.get_by_label("Full name").fill("Grace Hopper")
    question.get_by_label("Email").fill("grace@example.com")
    question.get_by_role("button", name="Accept and send").click()
    expect(badge(page)).to_have_text("completed")
    link = page.locator("#task-card a[href*='/servers/']").first.get_attribute("href") or ""
    return pk, int(re.findall(r"\d+", link)[0])


def test_every_page_fits_a_phone_and_a_desktop_in_light_and_dark(logged_in: Callable[..., Page]) -> None:
    page = logged_in()  # one log-in (it costs seconds); width and colour scheme change in place
    pk, server_pk = answered_task(page)
    schemes: tuple[Literal["light"], Literal["dark"]] = ("light", "dark")
    for scheme in schemes:
        page.emulate_media(color_scheme=scheme)
        for viewport in (PHONE, DESKTOP):
            page.set_viewport_size(viewport)
            where = f"at {viewport['width']} px ({scheme})"
            # Light: every page at both widths. Dark changes colours, not layout: a sample of pages.
            walk = pages(pk, server_pk) if scheme == "light" else pages(pk, server_pk)[:4]
            for path in walk:
                page.goto(path, wait_until="domcontentloaded")  # the stylesheet has applied by then
                assert page.evaluate(OVERFLOW) <= 0, f"{path} scrolls sideways {where}"
                colour = page.evaluate(BACKGROUND)
                assert is_dark(page) == (scheme == "dark"), f"{path} is not {scheme} ({colour}) {where}"
            check_menu_and_tables(page, viewport["width"], pk)
    # In Chinese (other words, other widths): every page at both widths, light.
    page.emulate_media(color_scheme="light")
    page.goto("/")
    page.locator("#language-select").select_option("zh-hans")
    page.locator("#language-select").locator("xpath=ancestor::form").locator("button").click()
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    for viewport in (PHONE, DESKTOP):
        page.set_viewport_size(viewport)
        for path in pages(pk, server_pk):
            page.goto(path, wait_until="domcontentloaded")
            expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
            where = f"at {viewport['width']} px in Chinese"
            assert page.evaluate(OVERFLOW) <= 0, f"{path} scrolls sideways {where}"


def check_menu_and_tables(page: Page, width: int, pk: int) -> None:
    page.goto("/")
    log_out = page.get_by_role("button", name="Log out")
    menu = page.locator("header .menu > summary")
    if width < 900:
        expect(log_out).to_be_hidden()  # collapsed
        menu.click()
        expect(log_out).to_be_visible()
        expect(page.get_by_role("link", name="Audit log")).to_be_visible()
        assert page.evaluate(OVERFLOW) <= 0, "the open menu scrolls sideways"
        page.goto("/tasks/")
        # A row is a card: id, tool and status need no words; the other cells say their column (a
        # live update may replace the row meanwhile: ask the page as it is).
        page.wait_for_function(
            """pk => { const td = document.querySelector(`#task-row-${pk} td[data-label="Server"]`);
                       return td && getComputedStyle(td, "::before").content === '"Server: "'; }""",
            arg=pk,
        )
        expect(page.locator("table thead")).not_to_be_in_viewport()
    else:
        expect(menu).to_be_hidden()
        expect(log_out).to_be_visible()
        tops = page.locator("#status-tiles .tile").evaluate_all("tiles => tiles.map(t => t.offsetTop)")
        assert len(tops) == 9 and len(set(tops)) == 1, f"status tiles are not in one row: {tops}"
        page.goto(f"/tasks/{pk}/")
        bar = page.locator("#task-lifecycle")
        expect(bar.locator("rect.working").first).to_be_visible()
        expect(bar.locator("rect.input")).to_have_count(1)
        expect(bar.locator("[data-kind=input]")).not_to_contain_text("input 0s")

"""How the pages read, measured in Chromium: table cells break between words only, the hourly
chart's labels stay readable and apart (in a half-hour zone too), times keep one format through
live updates, the TTL is named once, the language switch sits inside the page, and "select all"
works with JavaScript and without it."""

import itertools
import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from tests.e2e.conftest import OPERATOR, badge, run_tool

pytestmark = pytest.mark.browser

PHONE: ViewportSize = {"width": 390, "height": 844}
LAPTOP: ViewportSize = {"width": 1280, "height": 800}
WIDE: ViewportSize = {"width": 1920, "height": 1080}
# Words of up to this many characters never break; longer tokens (URLs, ids) may, or they would not fit.
BROKEN_WORDS = """() => {
  const broken = [];
  for (const cell of document.querySelectorAll("td, th")) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.data.matchAll(/\\S+/g)) {
        if (match[0].length > 24) { continue; }
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const boxes = [...range.getClientRects()].filter(r => r.width > 0);
        const lines = new Set(boxes.map(r => Math.round(r.top)));
        if (lines.size > 1) { broken.push(`"${match[0]}" in "${cell.textContent.trim().slice(0, 60)}"`); }
      }
    }
  }
  return broken;
}"""
HOUR_LABELS = """() => [...document.querySelectorAll(".chart g.bar text, .chart-x li")]
  .filter(el => el.textContent.trim() && getComputedStyle(el).visibility === "visible")
  .map(el => { const box = el.getBoundingClientRect();
               return {text: el.textContent.trim(), left: box.left, right: box.right, height: box.height,
                       size: parseFloat(getComputedStyle(el).fontSize)}; })"""
DURATION = re.compile(r"^(\d+s|\d+m \d+s|\d+h \d+m|\d+d \d+h)$")


def server_pk(page: Page) -> int:
    page.goto("/servers/")
    link = page.locator("#live-region").get_by_role("link", name="reference", exact=True)
    href = link.get_attribute("href")
    return int(re.findall(r"\d+", href or "")[0])


def test_table_cells_break_between_words_only(logged_in: Callable[..., Page]) -> None:
    page = logged_in(viewport=LAPTOP)
    run_tool(page, "reference", "fail_tool")  # "completed with tool error", the widest badge
    pk = server_pk(page)
    for viewport in (LAPTOP, WIDE, PHONE):
        page.set_viewport_size(viewport)
        for path in ("/", "/tasks/", "/servers/", f"/servers/{pk}/tools/", "/audit/"):
            page.goto(path)
            broken = page.evaluate(BROKEN_WORDS)
            assert not broken, f"{path} at {viewport['width']} px breaks words: {broken[:8]}"


def test_the_hourly_chart_labels_are_readable_and_apart_in_a_half_hour_zone(
    logged_in: Callable[..., Page],
) -> None:
    page = logged_in(viewport=LAPTOP, timezone_id="Asia/Kolkata")  # UTC+5:30: labels like 05:30
    page.goto("/")
    expect(page.locator("#chart-title")).to_contain_text(re.compile(r"Asia/(Kolkata|Calcutta)"))
    for viewport in (PHONE, LAPTOP, WIDE):
        page.set_viewport_size(viewport)
        labels: list[dict[str, Any]] = page.evaluate(HOUR_LABELS)
        where = f"at {viewport['width']} px"
        assert len(labels) >= 4, f"too few hour labels {where}: {labels}"
        assert any(":30" in label["text"] for label in labels), labels
        for label in labels:
            assert label["size"] >= 11 and label["height"] >= 11, f"too small {where}: {label}"
        ordered = sorted(labels, key=lambda label: label["left"])
        for before, after in itertools.pairwise(ordered):
            together = f"{before['text']} and {after['text']} run together {where}"
            assert after["left"] >= before["right"] + 4, together


def test_times_keep_one_format_through_live_updates_and_the_ttl_is_named_once(
    logged_in: Callable[..., Page],
) -> None:
    page = logged_in(viewport=LAPTOP)
    page.add_init_script(
        """window.__seen = [];
        new MutationObserver(() => document.querySelectorAll("#task-card [data-since]").forEach(
          el => window.__seen.push(el.textContent)))
          .observe(document, {subtree: true, childList: true, characterData: true});"""
    )
    run_tool(page, "reference", "slow_count", n=40, delay=0.25)
    expect(badge(page)).to_have_text("working")
    # Several live updates of the task card (each a fresh server rendering), and ticks between them.
    page.wait_for_function("() => window.__seen.length >= 12")
    seen: list[str] = page.evaluate("window.__seen")
    assert all(DURATION.match(text) for text in seen), f"running times change format: {sorted(set(seen))}"
    ttl = page.locator("#task-card [data-deadline]")
    expect(ttl).to_have_text(re.compile(r"^TTL \d+m \d+s left$"))
    card = page.locator("#task-card").inner_text()
    assert card.count("TTL") == 1, card


def test_the_language_switch_sits_inside_the_page(logged_in: Callable[..., Page]) -> None:
    page = logged_in(viewport=WIDE)
    page.goto("/tasks/")
    main = page.locator("main h1").bounding_box()
    select = page.locator("#language-select").bounding_box()
    assert main and select
    assert select["width"] <= 240, select
    assert select["x"] >= main["x"], (select, main)
    page.set_viewport_size(PHONE)
    select = page.locator("#language-select").bounding_box()
    assert select and select["x"] >= 8, select


def ticked(page: Page, form: str) -> list[bool]:
    result: list[bool] = page.locator(f"input[type=checkbox][form={form}]").evaluate_all(
        "boxes => boxes.map(box => box.checked)"
    )
    return result


def test_select_all_ticks_every_row_with_javascript_and_without(logged_in: Callable[..., Page]) -> None:
    page = logged_in(OPERATOR, viewport=LAPTOP)
    run_tool(page, "reference", "slow_count", n=3, delay=0.1)
    run_tool(page, "reference", "ask_form", delay=0.1)
    expect(badge(page)).to_have_text("needs input")
    page.goto("/tasks/")
    pick_all = page.locator("#pick-all")
    pick_all.check()
    assert len(ticked(page, "bulk-tasks")) >= 2 and all(ticked(page, "bulk-tasks"))
    rows = len(ticked(page, "bulk-tasks"))
    expect(page.locator("#picked-count")).to_have_text(f"{rows} selected")
    page.locator("input[form=bulk-tasks]").first.uncheck()
    assert page.evaluate("document.getElementById('pick-all').indeterminate")
    pick_all.check()
    page.get_by_role("button", name="Run selected again…").click()
    expect(page.locator("#bulk-tasks-list tbody tr")).to_have_count(rows)

    page.goto("/inbox/")
    page.locator("#inbox-pick-all").check()
    assert ticked(page, "inbox-bulk") and all(ticked(page, "inbox-bulk"))

    nojs = logged_in(OPERATOR, viewport=LAPTOP, java_script_enabled=False)
    nojs.goto("/tasks/")
    expect(nojs.locator("#pick-all")).to_be_hidden()
    nojs.get_by_role("link", name="Select every task on this page").click()
    expect(nojs).to_have_url(re.compile(r"picked=all"))
    boxes = ticked(nojs, "bulk-tasks")
    assert len(boxes) >= 2 and all(boxes)
    nojs.get_by_role("button", name="Run selected again…").click()
    expect(nojs.locator("#bulk-tasks-list tbody tr")).to_have_count(len(boxes))
    nojs.goto("/inbox/")
    nojs.get_by_role("link", name="Select every form on this page").click()
    assert ticked(nojs, "inbox-bulk") and all(ticked(nojs, "inbox-bulk"))

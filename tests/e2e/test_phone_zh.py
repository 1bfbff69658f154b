"""The other corner of the proof matrix: the features an operator uses most, on a 390 px
phone, in dark mode, in Chinese. Search and filters, bulk cancel through one confirmation page,
export of the filtered list, and the audit log's filters: each page stays dark, in Chinese, and never
scrolls sideways. (test_bulk.py, test_inbox.py and test_responsive.py cover the desktop, English and
light corners; test_i18n.py the log-in.)"""

import csv
import io
import re
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import OPERATOR, Demo, run_tool

pytestmark = pytest.mark.browser
PHONE = {"width": 390, "height": 844}
OVERFLOW = "document.scrollingElement.scrollWidth - window.innerWidth"
BACKGROUND = "getComputedStyle(document.body).backgroundColor"


def looks_right(page: Page) -> None:
    """Chinese, dark, and nothing wider than the phone."""
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    channels = [int(n) for n in re.findall(r"\d+", page.evaluate(BACKGROUND))[:3]]
    assert max(channels) < 80, f"{page.url} is not dark"
    assert page.evaluate(OVERFLOW) <= 0, f"{page.url} scrolls sideways at 390 px"


def test_search_bulk_cancel_export_and_audit_on_a_chinese_phone_in_dark(
    logged_in: Callable[..., Page], new_context: Callable[..., BrowserContext], demo: Demo
) -> None:
    desk = logged_in(OPERATOR)
    picked = sorted(run_tool(desk, "reference", "run_forever", delay=30) for _ in range(2))

    phone = new_context(locale="zh-CN", viewport=PHONE, color_scheme="dark").new_page()
    phone.goto("/login/")
    phone.locator("#id_username").fill(OPERATOR)
    phone.locator("#id_password").fill(demo.password)
    phone.get_by_role("button", name="登录").click()
    expect(phone).not_to_have_url(re.compile(r"/login/"))

    # Search: a tool substring and the person who started them.
    phone.goto("/tasks/")
    looks_right(phone)
    phone.locator("#f-tool").fill("forev")
    phone.locator("#f-user").select_option(label=OPERATOR)
    phone.locator("#f-status").select_option("working")
    phone.get_by_role("button", name="筛选").click()
    expect(phone).to_have_url(re.compile(r"tool=forev"))
    for pk in picked:
        expect(phone.locator(f"#task-row-{pk}")).to_contain_text("run_forever")
    looks_right(phone)
    filtered = phone.url

    # Bulk cancel: pick both, one confirmation page that lists them, one click.
    for pk in picked:
        phone.get_by_label(f"选择任务 #{pk}", exact=True).check()
    phone.get_by_role("button", name="取消所选…").click()
    for pk in picked:
        expect(phone.locator(f"#bulk-task-{pk}")).to_be_visible()
    looks_right(phone)
    phone.get_by_role("button", name="是，取消它们").click()  # noqa: RUF001 -- Chinese punctuation
    expect(phone.locator(".messages")).to_contain_text("已为 2 个任务请求取消。")
    for pk in picked:
        phone.goto(f"/tasks/{pk}/")
        expect(phone.locator("#task-card .badge")).to_have_text("已取消")
        looks_right(phone)

    # Export what the filter shows (now cancelled, so filter on the tool and the person only).
    phone.goto(filtered.replace("status=working", "status="))
    with phone.expect_download() as download:
        phone.locator("#list-sorting").get_by_role("link", name="CSV").click()
    text = download.value.path().read_text(encoding="utf-8-sig")  # with the byte-order mark
    rows = list(csv.DictReader(io.StringIO(text)))
    exported = {int(row["id"]): row for row in rows}
    assert set(picked) <= set(exported), rows[:3]
    assert all(exported[pk]["status"] == "cancelled" for pk in picked)

    # The audit log, filtered to cancels: both are there, by this operator.
    phone.goto("/audit/")
    phone.locator("#a-action").select_option("cancel")
    phone.get_by_role("button", name="筛选").click()
    for pk in picked:
        entry = phone.locator("tbody tr").filter(has=phone.locator(f"a[href='/tasks/{pk}/']"))
        expect(entry).to_contain_text(OPERATOR)
    looks_right(phone)

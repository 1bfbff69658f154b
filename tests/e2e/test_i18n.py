"""In Chinese on a phone: a zh-CN browser at 390 px gets Simplified Chinese from log-in on, and the
language switch (a plain form) changes it."""

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.e2e.conftest import Demo

pytestmark = pytest.mark.browser


def test_a_chinese_phone_browser_gets_chinese_and_can_switch(
    new_context: Callable[..., BrowserContext], demo: Demo
) -> None:
    page = new_context(locale="zh-CN", viewport={"width": 390, "height": 844}).new_page()
    page.goto("/login/")
    expect(page.locator("h1")).to_have_text("登录")
    page.get_by_label("用户名").fill("demo")
    page.get_by_label("密码").fill(demo.password)
    page.get_by_role("button", name="登录").click()
    expect(page).not_to_have_url(re.compile(r"/login/"))
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")

    page.goto("/servers/")
    expect(page.locator("h1")).to_have_text("服务器")
    expect(page.locator("#live-indicator")).to_have_text("实时")  # app.js's words: ui-strings
    expect(page.locator("#live-region thead")).to_contain_text("健康状况")
    expect(page.locator("#live-region .badge").first).to_have_text(re.compile(r"^(正常|未知|故障|退避中)$"))
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing scrolls sideways

    page.locator("#language-select").select_option("en")
    page.get_by_role("button", name="切换").click()
    expect(page.locator("h1")).to_have_text("Servers")
    expect(page).to_have_url(re.compile(r"/servers/$"))
    expect(page.locator("html")).to_have_attribute("lang", "en")

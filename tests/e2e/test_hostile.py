"""Server text is data: markup from hostile_text stays inert text on every page that shows it."""

from collections.abc import Callable

import pytest
from playwright.sync_api import Dialog, Page, expect

from tests.e2e.conftest import badge, expect_live, open_tool, task_pk

pytestmark = pytest.mark.browser

# Anything the browser would execute or load: event-handler attributes, javascript: URLs,
# inline scripts, and the <img src=x> the payloads carry.
ACTIVE_CONTENT = """() => {
    const all = [...document.querySelectorAll("*")];
    return {
        handlers: all.filter(el => [...el.attributes].some(a => a.name.toLowerCase().startsWith("on")))
            .map(el => el.outerHTML.slice(0, 120)),
        javascriptUrls: all.filter(el => ["href", "src", "action", "formaction"].some(
            name => (el.getAttribute(name) || "").trim().toLowerCase().startsWith("javascript:")))
            .map(el => el.outerHTML.slice(0, 120)),
        // A JSON data block (the page's UI strings) is never executed; any other inline script would be.
        inlineScripts: [...document.scripts].filter(s => !s.src && s.type !== "application/json")
            .map(s => s.textContent.slice(0, 120)),
        injectedImages: [...document.images].filter(img => img.getAttribute("src") === "x").length,
    };
}"""


def expect_inert(page: Page) -> None:
    expect(page.locator('a[href^="javascript:"]')).to_have_count(0)
    expect(page.locator("img[onerror]")).to_have_count(0)
    found = page.evaluate(ACTIVE_CONTENT)
    assert found == {"handlers": [], "javascriptUrls": [], "inlineScripts": [], "injectedImages": 0}, (
        page.url,
        found,
    )


def test_hostile_server_text_stays_text(logged_in: Callable[..., Page]) -> None:
    page = logged_in()
    dialogs: list[str] = []

    def refuse(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)

    page.goto("/servers/")
    page.get_by_role("link", name="reference", exact=True).click()
    expect(page.get_by_text('<script>alert("title")</script> Hostile', exact=True)).to_be_visible()
    expect(page.get_by_text("<img src=x onerror=alert(1)>")).to_be_visible()
    expect_inert(page)

    open_tool(page, "reference", "hostile_text")
    expect(page.locator("h1")).to_contain_text('Run <script>alert("title")</script> Hostile')
    expect_inert(page)
    page.locator("#run-form").get_by_label("delay", exact=True).fill("0.5")
    page.locator("#run-button").click()
    pk = task_pk(page)
    expect_live(page)
    task_page = page.url

    # The question arrives over the websocket: the live partials escape like the page does.
    question = page.locator("#task-inputs .input-request")
    expect(question.locator(".message")).to_have_text(
        'Please confirm <script>alert("elicitation")</script> or open '
        '<a href="javascript:alert(1)">this link</a> [or this one](javascript:alert(1))'
    )
    expect(page.locator("#task-card .status-message")).to_have_text('<img src=x onerror=alert("waiting")>')
    expect(page.locator("#task-timeline")).to_contain_text('<script>alert("status")</script>')
    expect_inert(page)

    page.reload()
    for text in ('<b onmouseover=alert("field")>Answer</b>', '<img src=x onerror=alert("description")>'):
        expect(question.get_by_text(text)).to_be_visible()
    expect(question.locator("option", has_text='<script>alert("option")</script>')).to_have_count(1)
    expect_inert(page)

    page.get_by_role("link", name="Inbox", exact=True).click()
    page.wait_for_load_state("load")  # a click before the deferred scripts ran answers without htmx
    item = page.locator(f"#inbox-task-{pk}")
    item.locator("summary").first.click()  # the inbox's rows fold their forms away
    expect(item.locator(".message")).to_contain_text('<script>alert("elicitation")</script>')
    expect(item.get_by_text('<b onmouseover=alert("field")>Answer</b>')).to_be_visible()
    answer = item.get_by_role("textbox").first
    expect(answer).to_have_value('"><script>alert("default")</script>')
    expect_inert(page)
    item.get_by_role("button", name="Accept and send").click()
    expect(page.locator("#inbox-status")).to_contain_text(f"Answer sent to reference for task #{pk}.")

    page.goto(task_page)
    expect(badge(page)).to_have_text("completed")
    result = page.locator("#task-result")
    expect(result.get_by_text('<script>alert("result")</script>', exact=True)).to_be_visible()
    expect(result.get_by_text('<script>alert("link")</script>', exact=True)).to_be_visible()
    expect(result.get_by_text("javascript:alert(1)", exact=True)).to_be_visible()
    expect(result).to_contain_text("(not a web link)")
    expect(result).to_contain_text('"html": "<script>alert(\\"structured\\")</script>"')
    expect(result.get_by_role("link")).to_have_count(0)
    expect_inert(page)

    page.goto("/tasks/")
    expect(page.locator(f"#task-row-{pk}")).to_contain_text("hostile_text")
    expect_inert(page)
    page.goto("/")
    expect_inert(page)
    assert dialogs == []

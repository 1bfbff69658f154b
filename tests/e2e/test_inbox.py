"""The inbox: the live badge, the compact list answered in place, the keyboard,
the bulk answer, a 390 px screen; and answering a question on the task's page."""

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, Route, expect

from tests.e2e.conftest import (
    badge,
    expect_live,
    expect_not_navigated,
    fill_contact_form,
    mark_window,
    run_tool,
)

pytestmark = pytest.mark.browser


def expect_answers_in_result(page: Page) -> None:
    expect(badge(page)).to_have_text("completed")
    result = page.locator("#task-result")
    expect(result).to_contain_text("Thanks! Received")
    expect(result).to_contain_text('"name": "Ada Lovelace"')
    expect(result).to_contain_text('"email": "ada@example.com"')
    expect(result).to_contain_text('"plan": "pro"')


def badge_count(page: Page) -> int:
    return int(page.locator("#inbox-badge").get_attribute("data-count") or 0)


def test_an_answer_whose_response_comes_after_the_live_push_still_says_it_was_sent(
    logged_in: Callable[..., Page],
) -> None:
    """The answer's push removes its row before the answer's own response arrives (seen in full-suite
    runs): the response still lands, says what happened, and the keyboard moves to the next question.
    The response is held at the network edge until the push has done its work."""
    page = logged_in()
    first = run_tool(page, "reference", "ask_form", delay=0.1)
    second = run_tool(page, "reference", "ask_form", delay=0.1)
    expect(badge(page)).to_have_text("needs input")
    held: list[Route] = []
    page.route(re.compile(r"/inputs/\d+/answer/$"), lambda route: held.append(route))
    page.goto("/inbox/")
    expect_live(page)
    mark_window(page)
    row = page.locator(f"#inbox-task-{first}")
    row.locator("summary").click()
    row.get_by_role("button", name="Decline").click()
    while not held:
        page.wait_for_timeout(50)
    answer = held[0].fetch()  # sent now: the server takes it and the live socket says so
    expect(row.locator(".input-request")).to_have_count(0)  # the push removed the row first
    held[0].fulfill(response=answer)
    expect(page.locator("#inbox-status")).to_contain_text(f"Answer sent to reference for task #{first}.")
    expect(page.locator(f"#inbox-task-{second} summary")).to_be_focused()
    expect_not_navigated(page)


def test_the_badge_counts_live_and_an_answer_in_the_compact_list_replaces_only_its_row(
    logged_in: Callable[..., Page],
) -> None:
    page = logged_in()
    watcher = page.context.new_page()
    watcher.goto("/servers/")  # any page: the nav badge follows the inbox over the socket
    expect_live(watcher)
    mark_window(watcher)
    before = badge_count(watcher)
    first = run_tool(page, "reference", "ask_form", delay=0.1)
    second = run_tool(page, "reference", "ask_form", delay=0.1)
    expect(badge(page)).to_have_text("needs input")
    expect(watcher.locator("#inbox-badge")).to_have_text(str(before + 2))
    expect_not_navigated(watcher)

    page.get_by_role("link", name="Inbox", exact=True).click()
    expect_live(page)
    mark_window(page)
    row = page.locator(f"#inbox-task-{first}")
    expect(row.locator(".input-request")).to_be_hidden()  # compact: folded until opened
    # Keyboard: j/k move between rows, Enter opens one (its first field gets focus), Esc closes it.
    summaries = page.locator("#inbox-items details.inbox-item > summary")
    page.keyboard.press("j")
    expect(summaries.first).to_be_focused()
    row.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(row.get_by_label("Full name")).to_be_focused()
    page.keyboard.press("Escape")
    expect(row.locator(".input-request")).to_be_hidden()
    expect(row.locator("summary")).to_be_focused()
    page.keyboard.press("Enter")
    fill_contact_form(row.locator(".input-request"))
    expect(page.locator("#inbox-status")).to_contain_text(f"Answer sent to reference for task #{first}.")
    expect(row.locator(".input-request")).to_have_count(0)
    expect(page.locator(f"#inbox-task-{second} summary")).to_be_visible()  # the rest stays as it was
    expect_not_navigated(page)  # no reload: the scroll position and the other rows are kept
    expect(watcher.locator("#inbox-badge")).to_have_text(str(before + 1))

    page.goto(f"/tasks/{first}/")
    expect_answers_in_result(page)
    page.goto("/inbox/")
    page.locator(f"#inbox-task-{second} summary").click()
    page.locator(f"#inbox-task-{second}").get_by_role("button", name="Decline").click()
    expect(page.locator(f"#inbox-task-{second} .input-request")).to_have_count(0)


def test_one_answer_for_several_questions_with_the_same_form(logged_in: Callable[..., Page]) -> None:
    page = logged_in()
    asked = [run_tool(page, "reference", "ask_form", delay=0.1) for _ in range(2)]
    expect(badge(page)).to_have_text("needs input")
    page.goto("/inbox/")
    for pk in asked:
        page.locator(f"#inbox-task-{pk} input.inbox-pick").check()
    page.get_by_role("button", name="Answer the selected together").click()
    expect(page.locator("#bulk-targets li")).to_have_count(2)
    form = page.locator("#bulk-form")
    form.get_by_label("Full name").fill("Ada Lovelace")
    form.get_by_label("Email").fill("ada@example.com")
    form.get_by_label("Plan").select_option("pro")
    form.get_by_role("button", name="Accept and send to each").click()
    expect(page).to_have_url(re.compile(r"/inbox/$"))
    expect(page.locator(".messages")).to_contain_text("The answer was sent to 2 questions.")
    for pk in asked:
        page.goto(f"/tasks/{pk}/")
        expect_answers_in_result(page)


def test_the_inbox_fits_a_390_px_screen(logged_in: Callable[..., Page]) -> None:
    page = logged_in(viewport={"width": 390, "height": 800})
    pk = run_tool(page, "reference", "ask_url", delay=0.1)  # a long link: the widest question
    expect(badge(page)).to_have_text("needs input")
    page.goto("/inbox/")
    page.locator(f"#inbox-task-{pk} summary").click()
    expect(page.locator(f"#inbox-task-{pk} .input-request")).to_be_visible()
    # The inbox's own content never runs off the side (the header is the "shell" helper's, item 2).
    rights = "Array.from(document.querySelectorAll('#main *')).map(e => e.getBoundingClientRect().right)"
    widest = page.evaluate(f"Math.max(...{rights})")
    assert widest <= 390, widest
    assert page.evaluate("document.querySelector('#main').scrollWidth") <= 390
    page.locator(f"#inbox-task-{pk}").get_by_role("button", name="Decline").click()
    expect(page.locator(f"#inbox-task-{pk} .input-request")).to_have_count(0)


def test_a_question_that_arrives_live_on_the_task_page_is_answered_there(
    logged_in: Callable[..., Page],
) -> None:
    page = logged_in()
    pk = run_tool(page, "reference", "ask_form", delay=1.5)
    expect_live(page)
    expect(page.locator("#task-inputs .input-request")).to_have_count(0)
    mark_window(page)

    question = page.locator("#task-inputs .input-request")
    expect(question).to_be_visible()
    expect(badge(page)).to_have_text("needs input")
    expect_not_navigated(page)
    fill_contact_form(question)
    expect(page).to_have_url(re.compile(rf"/tasks/{pk}/$"))
    expect(page.locator(".messages")).to_contain_text(f"Answer sent to reference for task #{pk}.")
    expect_answers_in_result(page)

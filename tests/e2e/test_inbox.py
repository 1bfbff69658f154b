"""Answering a task's mid-run question (elicitation) from the inbox and from the task's page."""

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.e2e.conftest import badge, expect_live, expect_not_navigated, mark_window, run_tool

pytestmark = pytest.mark.browser


def fill_contact_form(question: Locator) -> None:
    expect(question).to_contain_text("Please fill in your contact details.")
    question.get_by_label("Full name").fill("Ada Lovelace")
    question.get_by_label("Email").fill("ada@example.com")
    question.get_by_label("Plan").select_option("pro")
    question.get_by_role("button", name="Accept and send").click()


def expect_answers_in_result(page: Page) -> None:
    expect(badge(page)).to_have_text("completed")
    result = page.locator("#task-result")
    expect(result).to_contain_text("Thanks! Received")
    expect(result).to_contain_text('"name": "Ada Lovelace"')
    expect(result).to_contain_text('"email": "ada@example.com"')
    expect(result).to_contain_text('"plan": "pro"')


def test_answer_a_question_from_the_inbox(logged_in: Callable[..., Page]) -> None:
    page = logged_in()
    pk = run_tool(page, "reference", "ask_form", delay=0.2)
    expect(badge(page)).to_have_text("needs input")

    page.get_by_role("link", name="Inbox", exact=True).click()
    fill_contact_form(page.locator(f"#inbox-task-{pk} .input-request"))
    expect(page).to_have_url(re.compile(r"/inbox/$"))
    expect(page.locator(".messages")).to_contain_text(f"Answer sent to reference for task #{pk}.")
    expect(page.locator(f"#inbox-task-{pk} .input-request")).to_have_count(0)

    page.goto(f"/tasks/{pk}/")
    expect_answers_in_result(page)


def test_a_new_question_appears_in_an_open_inbox_and_is_answered_there(
    logged_in: Callable[..., Page],
) -> None:
    page = logged_in()
    inbox = page.context.new_page()
    inbox.goto("/inbox/")
    expect_live(inbox)
    mark_window(inbox)
    pk = run_tool(page, "reference", "ask_form", delay=0.2)

    question = inbox.locator(f"#inbox-task-{pk} .input-request")
    expect(question).to_be_visible()  # arrives over the websocket, without a reload
    expect_not_navigated(inbox)
    fill_contact_form(question)
    expect(inbox.locator(".messages")).to_contain_text(f"Answer sent to reference for task #{pk}.")
    expect_answers_in_result(page)


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

"""What an open page shows stays what the server said: new tasks appear
in another browser's list, a change made before the socket joined is caught up, an ended session
says so, and a section too big for one frame is fetched by the page while the socket stays up."""

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, Route, WebSocket, expect

from tests.e2e.conftest import (
    OPERATOR,
    Demo,
    badge,
    expect_live,
    expect_not_navigated,
    mark_window,
    run_tool,
)

pytestmark = pytest.mark.browser

LIVE_SOCKET = re.compile(r"/ws/live/")
FRAME_CAP = 256 * 1024


def test_a_task_started_in_one_browser_appears_in_anothers_task_list(logged_in: Callable[..., Page]) -> None:
    starter, watcher = logged_in(), logged_in(OPERATOR)
    watcher.goto("/tasks/")
    expect_live(watcher)
    mark_window(watcher)

    pk = run_tool(starter, "reference", "slow_count", n=2, delay=0.5)

    row = watcher.locator(f"#task-row-{pk}")
    expect(watcher.locator("#task-rows > tr").first).to_have_id(f"task-row-{pk}")  # at the top
    expect(row).to_contain_text("slow_count")
    expect(row.locator(".badge")).to_have_text("completed")  # and kept up to date once there
    expect(watcher.locator(f"#task-row-{pk}")).to_have_count(1)
    expect_not_navigated(watcher)


def test_a_change_between_render_and_connect_is_caught_up(logged_in: Callable[..., Page]) -> None:
    starter, watcher = logged_in(), logged_in(OPERATOR)
    pk = run_tool(starter, "reference", "ask_form", delay=0.2)
    expect(badge(starter)).to_have_text("needs input")  # it waits for a person: nothing moves meanwhile

    # The page is rendered while the task waits; its scripts (and so its socket and the fallback
    # poll) are held back while the task is answered and finishes: only a catch-up on connect can
    # bring the change. (Routing turns the browser cache off, so app.js is requested.)
    held: list[Route] = []
    watcher.route(re.compile(r"/static/tasksapp/app\.js"), lambda route: held.append(route))
    watcher.goto(f"/tasks/{pk}/", wait_until="commit")
    expect(badge(watcher)).to_have_text("needs input")
    expect(watcher.locator("#live-indicator")).to_have_text("")  # not connected yet

    starter.get_by_role("link", name="Inbox", exact=True).click()
    starter.wait_for_load_state("load")  # a click before the deferred scripts ran answers without htmx
    starter.locator(f"#inbox-task-{pk} summary").first.click()  # rows fold their forms away
    starter.locator(f"#inbox-task-{pk}").get_by_role("button", name="Decline").click()
    expect(starter.locator("#inbox-status")).to_contain_text(f"Answer sent to reference for task #{pk}.")
    starter.goto(f"/tasks/{pk}/")
    expect(badge(starter)).to_have_text("completed")
    expect(badge(watcher)).to_have_text("needs input")  # the held page has not moved
    while not held:
        watcher.wait_for_timeout(50)  # the request for app.js, a condition and not a fixed delay
    for route in held:
        route.continue_()

    expect_live(watcher)
    expect(badge(watcher)).to_have_text("completed")
    expect(watcher.locator("#task-result")).to_contain_text("You declined the contact form")


def test_signed_out_elsewhere_a_page_says_so_and_links_back(
    logged_in: Callable[..., Page], demo: Demo
) -> None:
    live = logged_in(OPERATOR)
    live.goto("/tasks/")
    expect_live(live)
    polling = live.context.new_page()  # its socket is refused, so it keeps fetching the page
    polling.route_web_socket(LIVE_SOCKET, lambda socket: socket.close())
    polling.goto("/inbox/")
    expect(polling.locator("body")).to_have_attribute("data-live", "down")

    elsewhere = live.context.new_page()
    elsewhere.goto("/servers/")
    elsewhere.get_by_role("button", name="Log out").click()
    expect(elsewhere).to_have_url(re.compile(r"/login/"))

    for page, path in ((live, "/tasks/"), (polling, "/inbox/")):
        notice = page.locator("#signed-out")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text("You were signed out")
        expect(page.locator("#live-indicator")).to_have_text("signed out")
        expect(page.locator("#live-region")).to_be_visible()  # never a blank page
        expect(notice.get_by_role("link", name="Sign in again")).to_have_attribute(
            "href", re.compile(rf"/login/\?next={re.escape(path)}$")
        )
    live.locator("#signed-out").get_by_role("link", name="Sign in again").click()
    live.get_by_label("Username").fill(OPERATOR)
    live.get_by_label("Password").fill(demo.password)
    live.get_by_role("button", name="Log in").click()
    expect(live).to_have_url(re.compile(r"/tasks/$"))
    expect_live(live)


def test_a_section_over_the_frame_cap_is_fetched_and_the_socket_stays_up(
    logged_in: Callable[..., Page],
) -> None:
    page = logged_in(OPERATOR)
    sizes: list[int] = []
    hints: list[str] = []

    def watch(socket: WebSocket) -> None:
        def received(payload: str | bytes) -> None:
            text = payload if isinstance(payload, str) else payload.decode()
            sizes.append(len(text.encode()))
            hints.extend(re.findall(r'id="live-reload"[^>]*data-reload="([^"]*)"', text))

        socket.on("framereceived", received)

    page.on("websocket", watch)
    # Markup-heavy text: 60,000 quotes are 360 KB of result once escaped, and as much again of
    # arguments and raw JSON.
    pk = run_tool(page, "reference", "slow_compute", seconds=1, label='"' * 60_000)
    expect_live(page)
    mark_window(page)

    expect(badge(page)).to_have_text("completed")
    expect(page.locator("#task-result")).to_contain_text('Computed """')
    expect(page.locator("#task-result")).to_contain_text('""" in 1 s.')
    expect(page.locator("#live-indicator")).to_have_text("live")  # the socket stayed up
    expect_not_navigated(page)
    assert any("task-result" in hint.split() for hint in hints), hints
    assert sizes and max(sizes) <= FRAME_CAP, max(sizes)
    assert page.locator("#task-card h1").inner_text().startswith(f"Task #{pk}")


def test_a_question_pushed_into_an_open_inbox_can_be_answered_there(logged_in: Callable[..., Page]) -> None:
    """Pushed forms carry no CSRF token; app.js gives them the page's own when submitted."""
    starter, answerer = logged_in(), logged_in(OPERATOR)
    answerer.goto("/inbox/")
    expect_live(answerer)
    pk = run_tool(starter, "reference", "ask_form", delay=0.2)
    question = answerer.locator(f"#inbox-task-{pk} .input-request")
    expect(question).to_contain_text("Please fill in your contact details.")
    assert question.locator("input[name=csrfmiddlewaretoken]").count() == 0  # arrived over the socket
    answerer.locator(f"#inbox-task-{pk} summary").first.click()  # rows fold their forms
    question.get_by_role("button", name="Decline").click()
    expect(answerer.locator(".messages")).to_contain_text(f"Answer sent to reference for task #{pk}.")
    expect(badge(starter)).to_have_text("completed")

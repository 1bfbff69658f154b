"""The inbox for real volumes: the nav badge (rendered and pushed live), the compact
list with its filters and pre-task (MRTR) questions, answering in place, and the bulk answer."""

import re
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tasksapp import events, services
from tasksapp.consumers import LiveConsumer
from tasksapp.models import InputRequest, McpServer, PendingCall, RemoteTask
from tasksapp.presenters.inbox import open_count
from tests.peers.launch import RunningPeer
from tests.support.engine_helpers import run_worker_until
from tests.support.forms import browser_submit
from tests.support.inbox import FORM, asking

pytestmark = pytest.mark.django_db(transaction=True)
OTHER_FORM = {
    "message": "Age?",
    "requestedSchema": {"type": "object", "properties": {"age": {"type": "integer"}}},
}
URL = {"mode": "url", "url": "https://example.com/x", "message": "Connect", "elicitationId": "e1"}
SAMPLING = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}


def operator_client(name: str = "op") -> Client:
    user = User.objects.create_user(name)
    user.groups.add(Group.objects.get(name="operator"))
    client = Client()
    client.force_login(user)
    return client


def shown(html: str) -> set[int]:
    return {int(pk) for pk in re.findall(r'id="inbox-task-(\d+)"', html)}


def badge(html: str) -> str:
    found = re.search(r'<a id="inbox-badge"[^>]*>(\d+)</a>', html)
    assert found, "no badge"
    return found.group(0)


def test_the_list_filters_by_server_tool_and_kind_and_lists_pre_task_questions() -> None:
    one = McpServer.objects.create(name="one", url="http://127.0.0.1:9/mcp")
    two = McpServer.objects.create(name="two", url="http://127.0.0.1:9/other")
    form = asking(one, "ask_form", "elicitation/create", FORM)
    url = asking(one, "ask_url", "elicitation/create", URL)
    sampling = asking(two, "ask_llm", "sampling/createMessage", SAMPLING)
    roots = asking(two, "ask_form", "roots/list", {})
    call = PendingCall.objects.create(
        server=two,
        tool_name="mrtr_tool",
        input_requests={"q": {"method": "elicitation/create", "params": FORM}},
    )
    client = operator_client()
    everything = client.get("/inbox/").content.decode()
    assert shown(everything) == {form.pk, url.pk, sampling.pk, roots.pk}
    assert f'id="inbox-call-{call.pk}"' in everything and "mrtr_tool" in everything
    assert "<details" in everything and "<summary>" in everything  # compact: forms fold away

    def listed(**query: str | int) -> tuple[set[int], bool]:
        html = client.get("/inbox/", query).content.decode()
        return shown(html), f'id="inbox-call-{call.pk}"' in html

    assert listed(server=one.pk) == ({form.pk, url.pk}, False)
    assert listed(tool="ask_form") == ({form.pk, roots.pk}, False)
    assert listed(kind="form") == ({form.pk}, False)
    assert listed(kind="url") == ({url.pk}, False)
    assert listed(kind="sampling") == ({sampling.pk}, False)
    assert listed(kind="roots") == ({roots.pk}, False)
    assert listed(kind="mrtr") == (set(), True)
    assert listed(server=two.pk, tool="mrtr_tool") == (set(), True)
    assert listed(kind="<script>") == ({form.pk, url.pk, sampling.pk, roots.pk}, True)  # unknown: ignored


def test_every_page_shows_the_open_question_count_in_the_navigation() -> None:
    server = McpServer.objects.create(name="s", url="http://127.0.0.1:9/mcp")
    client = operator_client()
    assert "hidden" in badge(client.get("/tasks/").content.decode())  # nothing waits: no badge shown
    task = asking(server, "ask_form", "elicitation/create", FORM)
    asking(server, "ask_form", "elicitation/create", FORM)
    PendingCall.objects.create(server=server, tool_name="t", input_requests={"q": {"method": "roots/list"}})
    for path in ("/", "/tasks/", "/inbox/", "/servers/", f"/tasks/{task.pk}/", "/audit/"):
        shown_badge = badge(client.get(path).content.decode())
        assert ">3</a>" in shown_badge and "hidden" not in shown_badge, path
    with CaptureQueriesContext(connection) as counted:  # every page pays it: questions and calls at once
        assert open_count() == 3
    assert len(counted.captured_queries) == 1
    RemoteTask.objects.filter(pk=task.pk).update(status="completed")  # its question no longer counts
    assert ">2</a>" in badge(client.get("/tasks/").content.decode())


async def test_the_badge_is_pushed_to_every_kind_of_page_when_a_question_opens() -> None:
    server = await McpServer.objects.acreate(name="s", url="http://127.0.0.1:9/mcp")
    user = await sync_to_async(User.objects.create_user)("viewer")
    await sync_to_async(user.groups.add)(await Group.objects.aget(name="viewer"))
    sockets = []
    for query in ("page=tasks", "page=overview", "page=servers", "page=task&task=1"):
        communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), f"/ws/live/?{query}")
        communicator.scope["user"] = user
        connected, _ = await communicator.connect()
        assert connected
        sockets.append(communicator)
    task = await sync_to_async(asking)(server, "ask_form", "elicitation/create", FORM)
    await sync_to_async(events.publish_task_changed)(task.pk, inbox=True)
    for communicator in sockets:
        frame = ""
        while 'id="inbox-badge"' not in frame:
            frame = await communicator.receive_from(timeout=5)
        assert 'hx-swap-oob="true"' in frame and ">1</a>" in badge(frame)
        await communicator.disconnect()


def test_an_answer_in_place_returns_only_its_task_and_without_js_comes_back_to_the_same_place(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    for _ in range(3):
        services.call_start(server=demo_registered, tool="ask_form", arguments={"delay": 0}, user=None)
    run_worker_until(lambda: InputRequest.objects.filter(state="open").count() == 3, listen=False)
    first, second, third = InputRequest.objects.order_by("first_seen_at", "id")
    client = operator_client()
    html = client.get("/inbox/").content.decode()
    assert 'hx-target="#inbox-status"' in html  # never replaced by the live socket (it may remove rows)
    wrong = {"action": "accept", "next": "/inbox/", "in_place": "1", f"ir{first.pk}-email": "not an email"}
    refused = client.post(
        reverse("tasks:answer", args=[first.pk]), wrong, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Please correct the answer; nothing was sent." in refused and "errorlist" in refused
    assert re.search(rf'id="inbox-item-{first.pk}"\s+open', refused)  # open with its errors, not preserved
    assert InputRequest.objects.filter(state="open").count() == 3
    fields = {"action": "decline", "next": "/inbox/", "in_place": "1"}
    in_place = client.post(reverse("tasks:answer", args=[first.pk]), fields, HTTP_HX_REQUEST="true")
    body = in_place.content.decode()
    assert in_place.status_code == 200 and "<html" not in body
    assert body.lstrip().startswith('<div id="inbox-status"')  # the target; the rows come out of band
    assert f'id="inbox-task-{first.task_id}" class="inbox-task" hx-swap-oob="true"' in body
    assert f"input-ir{first.pk}" not in body
    assert f"Answer sent to demo for task #{first.task_id}." in body
    assert f"inbox-task-{second.task_id}" not in body  # nothing else is replaced
    # Without JavaScript: a plain POST and a redirect to the row that took the answered one's place.
    plain = client.post(reverse("tasks:answer", args=[second.pk]), {"action": "decline", "next": "/inbox/"})
    assert plain.status_code == 302 and plain["Location"] == f"/inbox/#inbox-task-{third.task_id}"
    assert InputRequest.objects.filter(state="answered").count() == 2


def _updates_per_task(peer: RunningPeer) -> dict[str, int]:
    counts: dict[str, int] = {}
    for request in peer.received():
        if request.get("method") == "tasks/update":
            task_id = str(request["body"]["params"].get("taskId"))
            counts[task_id] = counts.get(task_id, 0) + 1
    return counts


def test_a_bulk_answer_is_sent_to_each_selected_question_exactly_once(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    for _ in range(3):
        services.call_start(server=demo_registered, tool="ask_form", arguments={"delay": 0}, user=None)
    run_worker_until(lambda: InputRequest.objects.filter(state="open").count() == 3, listen=False)
    ids = [str(pk) for pk in InputRequest.objects.values_list("pk", flat=True)]
    demo_server.clear()
    client, other = operator_client(), operator_client("op2")
    page = client.get(reverse("tasks:inbox-bulk"), {"ids": ids}).content.decode()
    assert page.count('name="ids"') == 3 and 'name="bulk-name"' in page
    form = re.search(r'<form method="post"[^>]*id="bulk-form".*?</form>', page, re.S)
    assert form
    filled = browser_submit(
        form.group(0), {"bulk-name": "Ada", "bulk-email": "ada@example.com", "action": "accept"}
    )
    answer = {key: filled.getlist(key) for key in filled}
    outcomes: list[int] = []
    barrier = threading.Barrier(2)

    def submit(who: Client) -> None:  # two people (or a double click) submit the same bulk answer
        barrier.wait()
        try:
            outcomes.append(who.post(reverse("tasks:inbox-bulk"), answer).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(who,)) for who in (client, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == [302, 302]
    assert InputRequest.objects.filter(state="answered").count() == 3
    per_task = _updates_per_task(demo_server)
    assert sorted(per_task.values()) == [1, 1, 1], per_task
    again = client.post(reverse("tasks:inbox-bulk"), answer, follow=True).content.decode()
    assert "Select open form questions" in again  # none is open any more: nothing is sent again
    assert sorted(_updates_per_task(demo_server).values()) == [1, 1, 1]
    responses = InputRequest.objects.values_list("response", flat=True)
    assert {response["content"]["name"] for response in responses if response} == {"Ada"}


def test_a_bulk_answer_refuses_questions_with_different_forms() -> None:
    server = McpServer.objects.create(name="s", url="http://127.0.0.1:9/mcp")
    one = asking(server, "a", "elicitation/create", FORM).input_requests.get()
    two = asking(server, "b", "elicitation/create", OTHER_FORM).input_requests.get()
    client = operator_client()
    response = client.get(reverse("tasks:inbox-bulk"), {"ids": [one.pk, two.pk]})
    assert response.status_code == 409 and 'id="bulk-groups"' in response.content.decode()
    posted = client.post(reverse("tasks:inbox-bulk"), {"ids": [one.pk, two.pk], "action": "decline"})
    assert posted.status_code == 409 and not InputRequest.objects.exclude(state="open").exists()
    viewer = User.objects.create_user("v")
    viewer.groups.add(Group.objects.get(name="viewer"))
    looker = Client()
    looker.force_login(viewer)
    assert looker.post(reverse("tasks:inbox-bulk"), {"ids": [one.pk], "action": "decline"}).status_code == 403


async def test_a_question_pushed_into_a_filtered_inbox_is_added_only_if_it_matches_the_filter() -> None:
    server = await McpServer.objects.acreate(name="s", url="http://127.0.0.1:9/mcp")
    client = await sync_to_async(operator_client)()
    html = (await sync_to_async(client.get)("/inbox/?tool=wanted")).content.decode()
    live_url = re.search(r'ws-connect="([^"]+)"', html)
    assert live_url, "the inbox has a live socket"
    user = await sync_to_async(lambda: User.objects.get(username="op"))()
    communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), live_url.group(1).replace("&amp;", "&"))
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    other = await sync_to_async(asking)(server, "other", "elicitation/create", FORM)
    await sync_to_async(events.publish_task_changed)(other.pk, inbox=True)
    wanted = await sync_to_async(asking)(server, "wanted", "elicitation/create", FORM)
    await sync_to_async(events.publish_task_changed)(wanted.pk, inbox=True)
    frames = ""
    while f'<div id="inbox-task-{wanted.pk}" hx-swap-oob="delete">' not in frames:  # inserted
        frames += await communicator.receive_from(timeout=5)
    await communicator.disconnect()
    # The other task's question was never inserted (at most an update for a row this page does not have).
    assert f'<div id="inbox-task-{other.pk}" hx-swap-oob="delete">' not in frames
    assert frames.count("beforeend:#inbox-items") == 1


def test_a_question_before_a_task_expires_unanswered_and_says_so(
    demo_registered: McpServer, demo_server: RunningPeer, settings: Any
) -> None:
    from datetime import timedelta

    settings.MCP_PENDING_CALL_TTL_SECONDS = 600
    started = services.call_start(server=demo_registered, tool="mrtr_then_task", arguments={}, user=None)
    call = started.pending
    assert call is not None
    client = operator_client()
    inbox = client.get("/inbox/").content.decode()
    assert f'id="inbox-call-{call.pk}"' in inbox and ">1</a>" in badge(inbox)

    # Eleven minutes later nobody has answered: it leaves the inbox and its count at once.
    PendingCall.objects.filter(pk=call.pk).update(updated_at=timezone.now() - timedelta(minutes=11))
    inbox = client.get("/inbox/").content.decode()
    assert f'id="inbox-call-{call.pk}"' not in inbox and "hidden" in badge(inbox)
    calls_before = demo_server.method_counts().get("tools/call", 0)
    refused = client.post(reverse("tasks:pending-answer", args=[call.pk]), {}, follow=True).content.decode()
    assert "the question expired" in refused and "nothing was sent" in refused
    assert "Start the call again" in refused and 'class="answer-form"' not in refused
    assert PendingCall.objects.get(pk=call.pk).state == "expired"
    assert demo_server.method_counts().get("tools/call", 0) == calls_before
    with pytest.raises(services.NotAllowed, match="expired"):
        services.pending_call_answer(pending=call, responses={}, user=None)


def test_a_question_before_a_task_can_be_dismissed_whatever_its_kind(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    tool = "test_input_required_result_sampling"  # a sampling request: no Dismiss of its own
    started = services.call_start(server=demo_registered, tool=tool, arguments={}, user=None)
    call = started.pending
    assert call is not None
    assert [r["method"] for r in call.input_requests.values()] == ["sampling/createMessage"]
    client = operator_client()
    inbox = client.get("/inbox/").content.decode()
    assert reverse("tasks:pending-dismiss", args=[call.pk]) in inbox
    calls_before = demo_server.method_counts().get("tools/call", 0)

    done = client.post(reverse("tasks:pending-dismiss", args=[call.pk]), {"next": "/inbox/"}, follow=True)
    page = done.content.decode()
    assert f"Dismissed: {tool} will not start." in page
    assert f'id="inbox-call-{call.pk}"' not in page and "hidden" in badge(page)
    assert PendingCall.objects.get(pk=call.pk).state == "dismissed"
    assert demo_server.method_counts().get("tools/call", 0) == calls_before  # nothing was sent
    again = client.post(reverse("tasks:pending-dismiss", args=[call.pk]), follow=True).content.decode()
    assert "This question was dismissed; nothing was sent." in again
    from tasksapp.models import OperatorAction

    assert OperatorAction.objects.filter(pending_call=call, action="answer_cancel").count() == 1

"""Pages and actions against a real database: login everywhere, roles enforced, CSRF on forms."""

import re
from urllib.parse import parse_qs

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser, Group, User
from django.test import Client
from django.urls import reverse

from tasksapp import services
from tasksapp.consumers import LiveConsumer
from tasksapp.models import InputRequest, McpServer, RemoteTask
from tests.peers.launch import RunningPeer
from tests.support.engine_helpers import run_worker_until

pytestmark = pytest.mark.django_db(transaction=True)


def user_with(role: str) -> User:
    user = User.objects.create_user(role, password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name=role))
    return user


def client_for(role: str, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user_with(role))
    return client


def pages(task: RemoteTask) -> list[str]:
    return [
        reverse("tasks:overview"),
        reverse("tasks:list"),
        reverse("tasks:detail", args=[task.pk]),
        reverse("tasks:inbox"),
        reverse("tasks:servers"),
        reverse("tasks:server-tools", args=[task.server_id]),
        reverse("tasks:audit"),
        reverse("tasks:raw", args=[task.pk]),
    ]


def actions(task: RemoteTask) -> list[str]:
    return [
        reverse("tasks:cancel", args=[task.pk]),
        reverse("tasks:tool-run", args=[task.server_id, "echo"]),
        reverse("tasks:server-add"),
        reverse("tasks:server-edit", args=[task.server_id]),
        reverse("tasks:server-refresh", args=[task.server_id]),
    ]


def test_every_page_and_action_needs_a_login(task: RemoteTask) -> None:
    anonymous = Client()
    for url in pages(task) + actions(task):
        response = anonymous.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url
        assert anonymous.post(url).status_code == 302, url


def test_a_viewer_reads_everything_but_may_not_act(task: RemoteTask) -> None:
    viewer = client_for("viewer")
    for url in pages(task):
        assert viewer.get(url).status_code == 200, url
    detail = viewer.get(reverse("tasks:detail", args=[task.pk])).content.decode()
    assert "Cancel task" not in detail and "Run again" not in detail
    for url in actions(task):
        assert viewer.post(url, {"name": "x", "url": "http://127.0.0.1:9/mcp"}).status_code == 403, url
    task.refresh_from_db()
    assert task.cancel_requested_at is None


def test_raw_json_hides_the_task_id_from_viewers(task: RemoteTask) -> None:
    viewer, operator = client_for("viewer"), client_for("operator")
    raw = reverse("tasks:raw", args=[task.pk])
    assert task.remote_id not in viewer.get(raw).content.decode()
    assert task.remote_id in operator.get(raw).content.decode()
    for client in (viewer, operator):  # pages never show it, whoever looks
        for url in (reverse("tasks:list"), reverse("tasks:detail", args=[task.pk])):
            shown = client.get(url)
            assert shown.status_code == 200 and f"#{task.pk}" in shown.content.decode(), url
            assert task.remote_id not in shown.content.decode(), url


def test_an_operator_cancels_with_confirmation(task: RemoteTask) -> None:
    operator = client_for("operator")
    confirm = operator.get(reverse("tasks:cancel", args=[task.pk]))
    assert confirm.status_code == 200 and "Yes, cancel it" in confirm.content.decode()
    task.refresh_from_db()
    assert task.cancel_requested_at is None  # a GET changes nothing
    response = operator.post(reverse("tasks:cancel", args=[task.pk]))
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.cancel_requested_at is not None


def test_forms_refuse_a_post_without_the_csrf_token(task: RemoteTask) -> None:
    operator = client_for("operator", csrf=True)
    assert operator.post(reverse("tasks:cancel", args=[task.pk])).status_code == 403
    task.refresh_from_db()
    assert task.cancel_requested_at is None


def test_running_a_tool_handles_the_three_outcomes(demo_registered: McpServer) -> None:
    operator = client_for("operator")
    immediate = operator.post(
        reverse("tasks:tool-run", args=[demo_registered.pk, "echo"]), {"text": "hello there"}
    )
    assert immediate.status_code == 200 and "hello there" in immediate.content.decode()
    task = operator.post(reverse("tasks:tool-run", args=[demo_registered.pk, "slow_count"]), {"n": "2"})
    assert task.status_code == 302, task.content.decode()[-3000:]
    assert "/tasks/" in task["Location"]
    pending = operator.post(reverse("tasks:tool-run", args=[demo_registered.pk, "mrtr_then_task"]), {})
    assert pending.status_code == 302, pending.content.decode()[-2500:]
    assert "/calls/" in pending["Location"]
    page = operator.get(pending["Location"]).content.decode()
    assert "input needed before it can start" in page


def test_a_tool_whose_arguments_travel_as_headers_runs_from_its_form(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    operator = client_for("operator")
    run = reverse("tasks:tool-run", args=[demo_registered.pk, "test_custom_headers"])
    answered = operator.post(run, {"region": "eu-west", "priority": "4"})
    assert answered.status_code == 200
    assert "priority=4, region=&#x27;eu-west&#x27;" in answered.content.decode()
    headers = demo_server.last_request("tools/call")["headers"]
    assert (headers["mcp-param-region"], headers["mcp-param-priority"]) == ("eu-west", "4")


def test_the_task_list_filters_and_searches_by_exact_task_id(task: RemoteTask) -> None:
    viewer = client_for("viewer")
    by_id = viewer.post(reverse("tasks:find"), {"task_id": task.remote_id})
    assert by_id.status_code == 302 and by_id["Location"] == reverse("tasks:detail", args=[task.pk])
    by_message = viewer.get(reverse("tasks:list"), {"q": "run_forever"}).content.decode()
    assert f"task-row-{task.pk}" in by_message and task.remote_id not in by_message
    other = viewer.get(reverse("tasks:list"), {"status": "completed"}).content.decode()
    assert f"task-row-{task.pk}" not in other


async def test_the_websocket_refuses_anonymous_users() -> None:
    communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/?page=tasks")
    communicator.scope["user"] = AnonymousUser()
    connected, code = await communicator.connect()
    assert not connected and code == 4403


async def test_the_websocket_sends_the_changed_row_as_an_oob_swap(task: RemoteTask) -> None:
    viewer = await sync_to_async(user_with)("viewer")
    communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/?page=tasks")
    communicator.scope["user"] = viewer
    connected, _ = await communicator.connect()
    assert connected
    await sync_to_async(services.task_cancel)(task=task, user=None)
    html = await communicator.receive_from(timeout=5)
    assert f'id="task-row-{task.pk}"' in html and 'hx-swap-oob="true"' in html
    assert "cancel requested" in html
    await communicator.disconnect()


def test_an_answer_someone_else_sent_is_not_sent_again(demo_registered: McpServer) -> None:
    from tests.support.engine_helpers import run_worker_until

    started = services.call_start(
        server=demo_registered, tool="ask_form", arguments={"delay": 0.05}, user=None
    )
    assert started.task is not None
    run_worker_until(lambda: InputRequest.objects.filter(state="open").exists())
    request = InputRequest.objects.get()
    url = reverse("tasks:answer", args=[request.pk])
    first = client_for("operator").post(url, {"action": "decline", "next": "/inbox/"}, follow=True)
    assert "Answer sent" in first.content.decode()
    second_client = Client()
    second_user = User.objects.create_user("second", password="pw-for-tests-only")
    second_user.groups.add(Group.objects.get(name="operator"))
    second_client.force_login(second_user)
    second = second_client.post(url, {"action": "decline", "next": "/inbox/"}, follow=True).content.decode()
    assert "already answered" in second and "nothing was sent" in second


def test_odd_tool_names_from_a_server_still_get_working_run_links(demo_registered: McpServer) -> None:
    McpServer.objects.filter(pk=demo_registered.pk).update(
        tools=[{"name": "ns/tool?x#y", "inputSchema": {"type": "object"}}, {"title": "no name"}, "junk"]
    )
    operator = client_for("operator")
    page = operator.get(reverse("tasks:server-tools", args=[demo_registered.pk]))
    assert page.status_code == 200
    link = reverse("tasks:tool-run", args=[demo_registered.pk, "ns/tool?x#y"])
    assert link in page.content.decode().replace("&amp;", "&")
    assert operator.get(link).status_code == 200


# --- small defects --------------------------------------------------------------------------------


def test_an_elicitation_cancel_is_recorded_as_cancelled_not_declined(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    started = services.call_start(server=demo_registered, tool="ask_form", arguments={"delay": 0}, user=None)
    assert started.task is not None
    run_worker_until(lambda: InputRequest.objects.filter(state="open").exists(), listen=False)
    operator = client_for("operator")
    request = InputRequest.objects.get()
    operator.post(reverse("tasks:answer", args=[request.pk]), {"action": "cancel", "next": "/inbox/"})
    sent = demo_server.last_request("tasks/update")["body"]["params"]["inputResponses"]
    assert list(sent.values()) == [{"action": "cancel"}]
    timeline = operator.get(reverse("tasks:detail", args=[started.task.pk])).content.decode()
    assert "cancelled elicitation/create" in timeline and "declined" not in timeline
    audit = operator.get(reverse("tasks:audit")).content.decode()
    row = audit[audit.index("<tbody") :]
    assert "cancelled a question" in row and "declined" not in row


def started_tasks(server: McpServer, count: int) -> None:
    for _ in range(count):
        services.call_start(server=server, tool="slow_count", arguments={"n": 1, "delay": 0}, user=None)


def test_sort_links_replace_the_sort_and_the_pager_names_the_order(demo_registered: McpServer) -> None:
    started_tasks(demo_registered, 51)  # a second page
    viewer = client_for("viewer")
    by_tool = viewer.get(reverse("tasks:list"), {"sort": "tool", "status": "active"}).content.decode()
    links = re.findall(r'href="\?([^"]*)"', by_tool.replace("&amp;", "&"))
    assert links and all(parse_qs(link).get("sort", [""]).__len__() == 1 for link in links), links
    headers = {parse_qs(link)["sort"][0] for link in links if "page" not in parse_qs(link)}
    assert headers == {"-created", "-tool", "server", "status"}, links
    assert all(parse_qs(link)["status"] == ["active"] for link in links), links
    assert "older" not in by_tool and "next →" in by_tool  # not sorted by age: no "older"
    newest_first = viewer.get(reverse("tasks:list")).content.decode()
    assert "older →" in newest_first
    oldest_first = viewer.get(reverse("tasks:list"), {"sort": "created"}).content.decode()
    assert "newer →" in oldest_first and "older →" not in oldest_first


def test_a_user_without_a_role_is_told_to_ask_for_one() -> None:
    nobody = Client()
    nobody.force_login(User.objects.create_user("nora", password="pw-for-tests-only"))
    for url in (reverse("tasks:overview"), reverse("tasks:list")):
        shown = nobody.get(url)
        html = shown.content.decode()
        assert shown.status_code == 403
        assert "ask an administrator for a role" in html and "nora <small>(no role)</small>" in html, html
        assert "()" not in html and "remotetask" not in html


def test_a_role_that_may_not_act_is_told_what_it_lacks(task: RemoteTask) -> None:
    refused = client_for("viewer").post(reverse("tasks:cancel", args=[task.pk])).content.decode()
    assert "viewer" in refused and "cancel tasks" in refused and "cancel_remotetask" not in refused


def test_the_pending_page_after_an_mrtr_answer_shows_the_result_as_content(
    demo_registered: McpServer,
) -> None:
    operator = client_for("operator")
    pending = operator.post(reverse("tasks:tool-run", args=[demo_registered.pk, "mrtr_then_task"]), {})
    assert pending.status_code == 302 and "/calls/" in pending["Location"], pending.content.decode()[-2000:]
    form = operator.get(pending["Location"]).content.decode()
    action = re.search(r'name="([^"]+-action)" value="decline"', form)
    assert action, form
    # Declined, the tool finishes without a task: its result is what the page must show.
    answered = operator.post(pending["Location"] + "answer/", {action.group(1): "decline"}, follow=True)
    html = answered.content.decode()
    assert answered.status_code == 200
    assert "No name was given, so there is nobody to greet." in html
    assert "input needed before it can start" not in html, html
    assert "&#x27;type&#x27;" not in html and "'type'" not in html  # no Python dict
    assert '<pre class="text-block" tabindex="0">No name was given' in html


def test_an_expired_task_says_whether_its_server_lost_it_or_its_ttl_ran_out() -> None:
    from datetime import timedelta

    from django.utils import timezone

    from tests.support.opsdata import server, task

    now = timezone.now()
    alpha, viewer = server(), client_for("viewer")
    forgotten = "the server no longer knows this task (-32602)"
    lost = task(alpha, expired=True, expired_at=now, remote_created_at=now - timedelta(minutes=1))
    RemoteTask.objects.filter(pk=lost.pk).update(ttl_ms=15 * 60 * 1000, last_error=forgotten)
    ran_out = task(alpha, expired=True, expired_at=now, remote_created_at=now - timedelta(seconds=3))
    RemoteTask.objects.filter(pk=ran_out.pk).update(ttl_ms=2000, last_error=forgotten)

    page = viewer.get(reverse("tasks:detail", args=[lost.pk])).content.decode()
    assert "although its TTL had 14m 0s left: the server was probably restarted" in page
    page = viewer.get(reverse("tasks:detail", args=[ran_out.pk])).content.decode()
    assert "Its TTL ran out at <time" in page and "restarted" not in page


def test_adding_the_dashboards_own_address_says_so_and_contacts_nothing() -> None:
    admin = client_for("admin")
    form = {"name": "loop", "url": "http://localhost:8000/", "headers": ""}
    page = admin.post(reverse("tasks:server-add"), form, headers={"host": "localhost:8000"}).content.decode()
    assert "This is the dashboard&#x27;s own address, not an MCP server&#x27;s." in page
    assert not McpServer.objects.filter(name="loop").exists()


def test_the_json_arguments_form_shows_the_schema_and_what_is_required() -> None:
    from tests.support.opsdata import server

    schema = {
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "description": "How to <b>retry</b>.",
                "properties": {"retries": {"type": "integer"}},
            },
            "label": {"type": ["string", "null"], "default": "run"},
        },
        "required": ["config", "token"],
    }
    alpha = server()
    McpServer.objects.filter(pk=alpha.pk).update(tools=[{"name": "deep", "inputSchema": schema}])
    page = client_for("operator").get(reverse("tasks:tool-run", args=[alpha.pk, "deep"])).content.decode()
    outline = page[page.index('id="json-arguments-outline"') : page.index("</table>")]
    cells = [re.sub(r"<[^>]+>", " ", row) for row in re.findall(r"<tr>(.*?)</tr>", outline, re.S)]
    rows = [" ".join(cell.split()) for cell in cells]
    assert rows[1:] == [
        "config object * required How to &lt;b&gt;retry&lt;/b&gt;.",
        "label string or null optional default &quot;run&quot;",
    ]
    assert "Also required, though the schema does not describe them: <code>token</code>" in page
    assert "&quot;retries&quot;" in page  # the whole schema, escaped, under a <details>
    assert "(token, config, label)" in page  # why it is JSON: the arguments no field can show

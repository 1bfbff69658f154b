"""Servers under a curious admin and a hostile server: credentials stay home, edits are audited,
tool lists are bounded, private addresses can be refused,
a rename is saved and audited."""

import json
from typing import Any

import pytest
from aiohttp import web
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from tasksapp import services
from tasksapp.models import OperatorAction, RemoteTask
from tests.mcpclient.hostile_server import HostileServer, Message, json_reply, response, task
from tests.support.hostile_thread import serving

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "Bearer s3cret-token-abcd"


async def tools_script(request: web.Request, message: Message) -> web.StreamResponse:
    if message.get("method") == "tools/call":
        return json_reply(response(message, {"resultType": "task", **task()}))
    return json_reply(response(message, {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}))


def admin_client() -> tuple[Client, User]:
    user = User.objects.create_user("ada", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name="admin"))
    client = Client()
    client.force_login(user)
    return client, user


def sent_authorization(server: HostileServer) -> list[str | None]:
    return [headers.get("Authorization") for headers in server.headers]


def test_a_new_origin_never_receives_the_stored_credentials() -> None:
    client, user = admin_client()
    with serving(tools_script) as home, serving(tools_script) as elsewhere:
        server = services.server_create(
            name="home", url=home.url, headers={"Authorization": SECRET}, user=user
        )
        assert set(sent_authorization(home)) == {SECRET}

        edit = reverse("tasks:server-edit", args=[server.pk])
        moved = client.post(
            edit, {"name": "home", "url": elsewhere.url, "headers": "", "enabled": "on"}, follow=True
        )

        assert sent_authorization(elsewhere) and set(sent_authorization(elsewhere)) == {None}
        assert "the stored headers were removed rather than sent there" in moved.content.decode()
        server.refresh_from_db()
        assert server.url == elsewhere.url and server.headers == {}

        back = home.url + "?again=1"  # same origin as the credentials given now: they go along
        client.post(
            edit, {"name": "home", "url": back, "headers": f"Authorization: {SECRET}", "enabled": "on"}
        )
        client.post(edit, {"name": "home", "url": home.url, "headers": "", "enabled": "on"})
        assert sent_authorization(home)[-1] == SECRET
    server.refresh_from_db()
    assert server.headers == {"Authorization": SECRET}
    edits = OperatorAction.objects.filter(action="server_edit").order_by("id")
    assert [edit.ok for edit in edits] == [True, True, True]
    assert "Authorization: ••••••••abcd → none" in edits[0].detail["summary"]
    assert SECRET not in json.dumps([edit.detail for edit in edits])


def test_renaming_a_server_is_saved_and_audited_with_what_changed() -> None:
    client, user = admin_client()
    with serving(tools_script) as remote:
        server = services.server_create(name="old-name", url=remote.url, headers={}, user=user)
        edit = reverse("tasks:server-edit", args=[server.pk])
        saved = client.post(edit, {"name": "new-name", "url": remote.url, "headers": ""}, follow=True)
    assert "Server new-name saved." in saved.content.decode()
    server.refresh_from_db()
    assert (server.name, server.enabled) == ("new-name", False)
    entry = OperatorAction.objects.filter(action="server_edit").get()
    assert entry.user == user and entry.ok
    assert entry.detail["changes"] == {"name": ["old-name", "new-name"], "enabled": [True, False]}
    audit_page = client.get(reverse("tasks:audit")).content.decode()
    assert "name: old-name → new-name; enabled: yes → no" in audit_page


def test_failed_edits_and_refreshes_are_audited() -> None:
    client, user = admin_client()
    with serving(tools_script) as remote:
        server = services.server_create(name="one", url=remote.url, headers={}, user=user)
        services.server_create(name="two", url=remote.url, headers={}, user=user)
        edit = reverse("tasks:server-edit", args=[server.pk])
        taken = client.post(edit, {"name": "two", "url": remote.url, "headers": "", "enabled": "on"})
        assert "A server named &#x27;two&#x27; already exists." in taken.content.decode()
        client.post(reverse("tasks:server-refresh", args=[server.pk]), follow=True)
    gone = client.post(reverse("tasks:server-refresh", args=[server.pk]), follow=True)
    assert "Discovery failed" in gone.content.decode()
    unreachable = client.post(
        edit, {"name": "one", "url": "http://127.0.0.1:9/mcp", "headers": "", "enabled": "on"}
    )
    assert "Discovery failed" in unreachable.content.decode()
    rows = list(
        OperatorAction.objects.exclude(action="server_add").order_by("id").values_list("action", "ok")
    )
    assert rows == [
        ("server_edit", False),
        ("server_refresh", True),
        ("server_refresh", False),
        ("server_edit", False),
    ]
    failed = OperatorAction.objects.filter(ok=False, action="server_edit").order_by("id").last()
    assert failed is not None and "Discovery failed" in failed.detail["error"]
    assert failed.detail["changes"] == {"url": [server.url, "http://127.0.0.1:9/mcp"]}
    server.refresh_from_db()
    assert server.name == "one" and server.url != "http://127.0.0.1:9/mcp"


def huge_tools(pages: int, per_page: int, description_bytes: int) -> Any:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        if message.get("method") == "tools/call":
            return json_reply(response(message, {"resultType": "task", **task()}))
        page = int(message["params"].get("cursor") or 0)
        tools = [
            {
                "name": f"tool-{page}-{n}",
                "description": "x" * description_bytes,
                "inputSchema": {"type": "object"},
            }
            for n in range(per_page)
        ]
        more = {"nextCursor": str(page + 1)} if page + 1 < pages else {}
        return json_reply(response(message, {"tools": tools, **more}))

    return script


@pytest.mark.parametrize(
    ("pages", "per_page", "size", "kept"),
    [(10, 400, 1000, 1000), (10, 100, 40_000, 52)],  # too many tools; too many bytes (2 MiB cap)
)
def test_a_huge_tool_list_is_cut_and_the_page_says_so(
    pages: int, per_page: int, size: int, kept: int
) -> None:
    client, user = admin_client()
    with serving(huge_tools(pages, per_page, size)) as remote:
        server = services.server_create(name="huge", url=remote.url, headers={}, user=user)
        asked = [m["params"].get("cursor") for m in remote.messages if m.get("method") == "tools/list"]
    assert len(server.tools) == kept and len(json.dumps(server.tools)) <= 2 * 1024 * 1024
    assert len(asked) < pages  # paging stopped once past the bound
    page = client.get(reverse("tasks:server-tools", args=[server.pk])).content.decode()
    assert f"only the first {kept} are shown and can be run" in page


def test_the_task_page_does_not_load_the_server_tool_list() -> None:
    client, user = admin_client()
    with serving(huge_tools(1, 10, 100)) as remote:
        server = services.server_create(name="srv", url=remote.url, headers={}, user=user)
        started = services.call_start(server=server, tool="tool-0-1", arguments={}, user=user)
    assert started.task is not None
    for url in (
        reverse("tasks:detail", args=[started.task.pk]),
        reverse("tasks:raw", args=[started.task.pk]),
    ):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        loaded = " ".join(query["sql"] for query in queries.captured_queries)
        assert '"tasksapp_mcpserver"."tools"' not in loaded, url
        assert '"tasksapp_remotetask"."raw"' in loaded, url
    assert RemoteTask.objects.count() == 1


def test_private_addresses_can_be_refused(settings: SettingsWrapper) -> None:
    settings.MCP_BLOCK_PRIVATE_ADDRESSES = True
    with serving(tools_script) as remote:
        for url in (remote.url, remote.url.replace("127.0.0.1", "localhost")):
            with pytest.raises(services.RemoteFailed, match="MCP_BLOCK_PRIVATE_ADDRESSES is on"):
                services.server_create(name="local", url=url, headers={}, user=None)
        assert remote.messages == []
    settings.MCP_BLOCK_PRIVATE_ADDRESSES = False
    with serving(tools_script) as remote:
        assert services.server_create(name="local", url=remote.url, headers={}, user=None).pk
    refused = OperatorAction.objects.filter(action="server_add", ok=False)
    first = refused.first()
    assert refused.count() == 2 and first is not None
    assert "loopback, private or link-local" in first.detail["error"]

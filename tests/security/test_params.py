"""Integers in query strings that are not ids (out of range, not ASCII, signed) never make a 500 or a
stalled download: pages ignore them and say so; exports refuse them at once with a 400."""

import re

import pytest
from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse

from tasksapp.models import OperatorAction
from tests.support.live import signed_in, socket
from tests.support.opsdata import listed, logged_in, person, server, task

pytestmark = pytest.mark.django_db(transaction=True)

TOO_BIG = "9999999999999999999"  # one more than 2**63 - 1 needs 19 digits: this is past it
NOT_IDS = [TOO_BIG, "99999999999999999999999999", "²", "١٢", "-1", "0"]


@pytest.mark.parametrize("value", NOT_IDS)
def test_task_list_ignores_a_filter_that_is_not_an_id_and_says_so(value: str) -> None:
    row = task(server(), "echo")
    client = logged_in(person("vera", "viewer"))
    for key in ("server", "user"):
        response = client.get("/tasks/", {key: value})
        assert response.status_code == 200
        html = response.content.decode()
        assert 'id="ignored-filters"' in html and f"The filter {key}=" in html
        assert listed(html) == [row.pk]  # ignored, not "nothing matches"
        exports = re.findall(r'href="(/tasks/export[^"]*)"', html)
        assert exports and not any(key in link for link in exports)  # the export links leave it out


@pytest.mark.parametrize("value", NOT_IDS)
def test_audit_log_and_inbox_ignore_a_filter_that_is_not_an_id_and_say_so(value: str) -> None:
    client = logged_in(person("vera", "viewer"))
    for url, key in (("/audit/", "user"), ("/audit/", "server"), ("/inbox/", "server")):
        response = client.get(url, {key: value})
        assert response.status_code == 200, (url, key)
        assert 'id="ignored-filters"' in response.content.decode(), (url, key)


@pytest.mark.parametrize("value", [TOO_BIG, "²"])
def test_an_export_with_a_filter_that_is_not_an_id_is_refused_at_once(value: str) -> None:
    task(server(), "echo")
    client = logged_in(person("olga", "operator"))
    for url, key in (
        ("/tasks/export.csv", "server"),
        ("/tasks/export.jsonl", "user"),
        ("/audit/export.csv", "user"),
    ):
        response = client.get(url, {key: value})
        assert not isinstance(response, StreamingHttpResponse), url  # answered whole, not a stalled stream
        assert response.status_code == 400, url
        assert f"{key}=" in response.content.decode() and "is not an id" in response.content.decode()
    assert not OperatorAction.objects.filter(action="export").exists()  # nothing was exported


def test_other_number_parameters_that_are_not_numbers_are_ignored() -> None:
    alpha = server()
    row = task(alpha, "echo")
    alpha.tools = [{"name": "echo", "inputSchema": {"type": "object"}}]
    alpha.save()
    client = logged_in(person("olga", "operator"))
    for value in ("²", TOO_BIG):
        assert client.get(f"/tasks/{row.pk}/", {"show": value}).status_code == 200
        assert client.get(f"/servers/{alpha.pk}/tools/echo/run/", {"again": value}).status_code == 200
        bulk = client.get("/tasks/bulk/", {"action": "cancel", "tasks": [value, str(row.pk)]})
        assert bulk.status_code == 200 and f'id="bulk-task-{row.pk}"' in bulk.content.decode()
        assert client.get("/inbox/bulk/", {"ids": [value]}).status_code == 302  # "select questions first"


@pytest.mark.parametrize("value", [TOO_BIG, "²"])
async def test_a_live_socket_for_a_task_that_is_not_an_id_is_refused_cleanly(value: str) -> None:
    _, client = await sync_to_async(signed_in)()
    connected, _ = await socket(client, f"page=task&task={value}&since=0").connect()
    assert not connected


async def test_a_live_socket_with_an_absurd_show_keeps_the_page() -> None:
    _, client = await sync_to_async(signed_in)()
    row = await sync_to_async(task)(await sync_to_async(server)(), "echo")
    communicator = socket(client, f"page=task&task={row.pk}&show={TOO_BIG}&since=0")
    connected, _ = await communicator.connect()
    assert connected
    await communicator.disconnect()

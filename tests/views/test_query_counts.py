"""How many SQL queries each page runs, pinned where it is constant: the same count with few and with
many servers, tasks, events and open requests. bench/pages.py prints the counts at 100,000 tasks
beside each page's time; the task list's, the inbox's and /metrics' are pinned in search/test_search.py,
views/test_inbox_perf.py and test_metrics.py."""

from collections.abc import Callable

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tasksapp.models import McpServer, RemoteTask, ServerAuthorization, TaskEvent
from tests.support.inbox import open_tasks, shown
from tests.support.opsdata import listed, logged_in, person, server, task

pytestmark = pytest.mark.django_db(transaction=True)


def queries(client: Client, url: str) -> int:
    client.get(url)  # the first request of a session may do one-off work (language, zone)
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured.captured_queries)


def grown(client: Client, url: str, grow: Callable[[], object]) -> tuple[int, int]:
    before = queries(client, url)
    grow()
    return before, queries(client, url)


def servers(count: int, start: int = 0) -> list[McpServer]:
    """`count` servers, each with an authorization row (what the OAuth badge reads) and a task."""
    made = [server(f"s{start + i}") for i in range(count)]
    for each in made:
        ServerAuthorization.objects.create(server=each)
        task(each)
    return made


def events(on: RemoteTask, count: int) -> None:
    TaskEvent.objects.bulk_create(
        [
            TaskEvent(task=on, status="working", status_message=f"step {i}", source="push")
            for i in range(count)
        ]
    )


def test_the_task_page_runs_the_same_queries_with_1000_events() -> None:
    client = logged_in(person("olga", "operator"))
    busy = task(server())
    # Past one timeline page (50 entries) the page also counts the older ones: one query more, once.
    events(busy, 100)
    few, many = grown(client, f"/tasks/{busy.pk}/", lambda: events(busy, 1000))
    assert many == few


def test_the_task_page_runs_the_same_queries_whatever_the_number_of_tasks() -> None:
    client = logged_in(person("olga", "operator"))
    alpha = server()
    shown = task(alpha)
    few, many = grown(client, f"/tasks/{shown.pk}/", lambda: [task(alpha) for _ in range(50)])
    assert many == few


def test_the_overview_runs_the_same_queries_whatever_the_number_of_tasks() -> None:
    client = logged_in(person("vera", "viewer"))
    alpha = server()
    task(alpha)
    statuses = ("working", "completed", "failed", "input_required", "cancelled")
    few, many = grown(client, "/", lambda: [task(alpha, status=s) for s in statuses for _ in range(10)])
    assert many == few


def test_the_task_list_runs_the_same_queries_whatever_the_number_of_servers() -> None:
    client = logged_in(person("vera", "viewer"))
    servers(2)
    few, many = grown(client, "/tasks/", lambda: servers(20, start=2))
    assert len(listed(client.get("/tasks/").content.decode())) == 22
    assert many == few


def test_the_inbox_runs_the_same_queries_whatever_the_number_of_servers() -> None:
    client = logged_in(person("olga", "operator"))
    for each in servers(2):
        open_tasks(each, 1)
    few, many = grown(client, "/inbox/", lambda: [open_tasks(each, 1) for each in servers(8, start=2)])
    assert len(shown(client.get("/inbox/").content.decode())) == 10  # one page, a task of each server
    assert many == few


def test_the_overview_runs_the_same_queries_whatever_the_number_of_servers() -> None:
    client = logged_in(person("vera", "viewer"))
    servers(2)
    few, many = grown(client, "/", lambda: servers(20, start=2))
    assert many == few
    assert client.get("/").content.decode().count("oauth-badge") == 22  # each still reads its row


def test_the_servers_page_runs_the_same_queries_whatever_the_number_of_servers() -> None:
    client = logged_in(person("vera", "viewer"))
    servers(2)
    few, many = grown(client, "/servers/", lambda: servers(20, start=2))
    assert many == few
    assert client.get("/servers/").content.decode().count("oauth-badge") == 22  # each still reads its row


def test_the_servers_page_runs_the_same_queries_whatever_the_number_of_tasks() -> None:
    client = logged_in(person("vera", "viewer"))
    alpha, beta = servers(2)
    few, many = grown(client, "/servers/", lambda: [task(s) for s in (alpha, beta) for _ in range(20)])
    assert many == few

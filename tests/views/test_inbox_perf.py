"""The inbox with many open requests: one page at a time, the most urgent first, no JavaScript needed,
a constant number of queries whatever the number of open requests."""

import random
import secrets
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tasksapp.models import InputRequest, McpServer, RemoteTask
from tasksapp.presenters.inbox import tasks_by_urgency
from tasksapp.views.inbox import PAGE_TASKS
from tests.support.inbox import CONTACT_FORM, open_tasks, shown

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator() -> Client:
    user = User.objects.create_user("op")
    user.groups.add(Group.objects.get(name="operator"))
    client = Client()
    client.force_login(user)
    return client


def test_inbox_pages_hold_the_most_urgent_tasks_first_with_plain_links(operator: Client) -> None:
    server = McpServer.objects.create(name="s", url="http://127.0.0.1:9/mcp")
    # Created least urgent first, so neither id nor insertion order gives the urgency order.
    tasks = list(reversed(open_tasks(server, 2 * PAGE_TASKS + 5)))
    first = operator.get("/inbox/").content.decode()
    assert shown(first) == [task.pk for task in reversed(tasks)][:PAGE_TASKS]
    assert 'href="?page=2"' in first and "page 1 of 3" in first
    second = operator.get("/inbox/?page=2").content.decode()
    assert shown(second) == [task.pk for task in reversed(tasks)][PAGE_TASKS : 2 * PAGE_TASKS]
    assert 'href="?page=1"' in second and 'href="?page=3"' in second
    # An answer sent from page 2 comes back to page 2.
    assert 'name="next" value="/inbox/?page=2"' in second
    last = operator.get("/inbox/?page=3").content.decode()
    assert len(shown(last)) == 5 and 'rel="next"' not in last


def test_inbox_queries_do_not_grow_with_open_requests(operator: Client) -> None:
    server = McpServer.objects.create(name="s", url="http://127.0.0.1:9/mcp")
    open_tasks(server, PAGE_TASKS)
    operator.get("/inbox/")
    with CaptureQueriesContext(connection) as few:
        operator.get("/inbox/")
    open_tasks(server, 5 * PAGE_TASKS, start=PAGE_TASKS)
    with CaptureQueriesContext(connection) as many:
        response = operator.get("/inbox/")
    assert len(shown(response.content.decode())) == PAGE_TASKS
    assert len(many) == len(few)


def test_an_expiring_task_leaves_the_inbox(operator: Client) -> None:
    server = McpServer.objects.create(name="s", url="http://127.0.0.1:9/mcp")
    gone, kept = open_tasks(server, 2)
    RemoteTask.objects.filter(pk=gone.pk).update(expired=True, expired_at=timezone.now() - timedelta(1))
    assert shown(operator.get("/inbox/").content.decode()) == [kept.pk]


def test_the_database_ranks_tasks_as_their_deadlines_and_first_questions_say() -> None:
    """tasks_by_urgency against the ranking it replaced, written out: random creation times, TTLs
    (some none), several requests per task, ties."""
    server = McpServer.objects.create(name="s", url="http://127.0.0.1:9/mcp")
    rng = random.Random(7)
    now = timezone.now().replace(microsecond=0)
    for _ in range(60):
        task = RemoteTask(
            server=server,
            tool_name="ask_form",
            status="input_required",
            remote_created_at=rng.choice([None, now - timedelta(minutes=rng.randint(0, 5))]),
            ttl_ms=rng.choice([None, 60_000, 120_000, rng.randint(1, 600_000)]),
        )
        task.set_remote_id(secrets.token_urlsafe(16))
        task.save()
        for _ in range(rng.randint(1, 3)):
            request = InputRequest(task=task, method="elicitation/create", params=CONTACT_FORM)
            request.set_key(secrets.token_urlsafe(16))
            request.save()
            seen = now - timedelta(seconds=rng.choice([0, 10, rng.randint(0, 300)]))
            InputRequest.objects.filter(pk=request.pk).update(first_seen_at=seen)

    best: dict[int, tuple[float, float]] = {}
    for request in InputRequest.objects.select_related("task"):
        task = request.task
        created, ttl = task.remote_created_at, task.ttl_ms
        deadline = created.timestamp() + ttl / 1000 if ttl is not None and created else float("inf")
        rank = (deadline, request.first_seen_at.timestamp())
        best[task.pk] = min(rank, best.get(task.pk, rank))
    expected = sorted(best, key=lambda pk: (best[pk], pk))
    assert tasks_by_urgency() == expected

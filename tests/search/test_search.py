"""Finding tasks: the full-text index on SQLite (FTS5), its filters and sort orders,
and a constant number of queries whatever the number of tasks. PostgreSQL:
tests/search/test_search_postgres.py."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tasksapp import search, services
from tasksapp.models import Agent, McpServer, RemoteTask
from tests.peers.launch import RunningPeer
from tests.support.engine_helpers import run_worker_until
from tests.support.opsdata import listed, logged_in, person, server, task

pytestmark = pytest.mark.django_db(transaction=True)


def found(client: Client, **params: str) -> list[int]:
    response = client.get(reverse("tasks:list"), params)
    assert response.status_code == 200
    return listed(response.content.decode())


def test_search_finds_tool_arguments_message_result_and_who_started_it() -> None:
    alice = person("alice", "operator")
    viewer = logged_in(person("vera", "viewer"))
    alpha = server()
    by_tool = task(alpha, "slow_count")
    by_argument = task(alpha, "echo", arguments={"text": "Zürich weather", "nested": {"city": "北京"}})
    by_message = task(alpha, "ask_form", status_message="Waiting for the contact form")
    by_result = task(
        alpha, "rich", status="completed", result={"content": [{"type": "text", "text": "backend exploded"}]}
    )
    by_user = task(alpha, "echo", started_by=alice)

    assert found(viewer, q="slow") == [by_tool.pk]  # a word start inside slow_count
    assert found(viewer, q="zurich") == [by_argument.pk]  # accents folded
    assert found(viewer, q="北京") == [by_argument.pk]
    assert found(viewer, q='"contact form"') == [by_message.pk]
    assert found(viewer, q="exploded") == [by_result.pk]
    assert found(viewer, q="alice") == [by_user.pk]
    assert found(viewer, q="echo -alice") == [by_argument.pk]
    assert found(viewer, q="-alice") == [by_user.pk]  # alone, a -word is a word: never "all but"
    assert found(viewer, q="text content type") == []  # JSON keys are not indexed, only values


def test_search_finds_a_gateway_task_by_its_agents_name() -> None:
    from tasksapp.services.agents import agent_create

    viewer = logged_in(person("vera", "viewer"))
    alpha = server()
    robot, _ = agent_create(name="nightly-robot", servers=[alpha], user=None)
    by_agent = task(alpha, "echo", agent=robot)
    later = task(alpha, "echo")
    assert found(viewer, q="robot") == [by_agent.pk]  # a word of its name, as for users
    assert found(viewer, q="echo -nightly") == [later.pk]
    RemoteTask.objects.filter(pk=later.pk).update(agent=robot)  # the update trigger watches agent_id
    assert found(viewer, q="nightly robot") == sorted([by_agent.pk, later.pk], reverse=True)


def test_migration_0020_indexes_the_agents_of_tasks_mirrored_before_it() -> None:
    """A database at 0019 has agents' tasks indexed without their names; migrating indexes them again
    (and migrating back leaves the index as 0008 made it). In this process, on the test database:
    three `manage.py migrate` runs from an empty file took a minute on a loaded machine."""
    call_command("migrate", "tasksapp", "0019", verbosity=0)  # back: 0020's reverse indexes without agents
    try:
        mcp = McpServer.objects.create(name="s", url="http://127.0.0.1:9/mcp")
        agent = Agent.objects.create(name="nightly-robot", token_hash="x" * 64)
        row = RemoteTask(server=mcp, tool_name="echo", status="working", agent=agent)
        row.set_remote_id("tsk-1")
        row.save()
        assert hits() == {"robot": 0, "echo": 1}
    finally:
        call_command("migrate", verbosity=0)
    assert hits() == {"robot": 1, "echo": 1}


def hits() -> dict[str, int]:
    return {word: search.filtered({"q": word}).count() for word in ("robot", "echo")}


def test_a_task_id_is_never_searchable_while_everything_around_it_is() -> None:
    viewer = logged_in(person("vera", "viewer"))
    secret = "tsk-8c1f5d2e9a7b4c3d"
    row = task(server(), "echo", remote_id=secret, arguments={"text": "quarterly report"})
    assert found(viewer, q="quarterly") == [row.pk]
    dashed = task(server("beta"), "echo", remote_id="-Qx9_kd83Lm")  # token_urlsafe ids can start with "-"
    for text in (secret, "8c1f5d2e9a7b4c3d", "tsk", dashed.remote_id):
        assert found(viewer, q=text) == [], text


def test_the_index_follows_what_the_worker_writes(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    viewer = logged_in(person("vera", "viewer"))
    started = services.call_start(
        server=demo_registered, tool="fail_tool", arguments={"delay": 0.2}, user=None
    )
    assert started.task is not None
    pk = started.task.pk
    assert found(viewer, q="upstream refused") == []  # the result is not there yet

    run_worker_until(lambda: RemoteTask.objects.get(pk=pk).status == "completed", listen=False)

    assert found(viewer, q="upstream refused") == [pk]
    assert found(viewer, q="deliberate", tool="FAIL") == [pk]


def test_filters_for_user_date_range_and_tool_substring() -> None:
    alice, bob = person("alice", "operator"), person("bob", "operator")
    viewer = logged_in(person("vera", "viewer"))
    alpha = server()
    day = timezone.now().replace(hour=12) - timedelta(days=10)
    old = task(alpha, "slow_count", started_by=alice, started=day - timedelta(days=2))
    mid = task(alpha, "ask_form", started_by=bob, started=day)
    new = task(alpha, "slow_echo", started_by=alice, started=day + timedelta(days=2))

    assert found(viewer, user=str(alice.pk)) == [new.pk, old.pk]
    assert found(viewer, tool="SLOW") == [new.pk, old.pk]  # substring, any case
    assert found(viewer, **{"from": f"{day:%Y-%m-%d}"}) == [new.pk, mid.pk]
    assert found(viewer, to=f"{day:%Y-%m-%d}") == [mid.pk, old.pk]  # the whole "to" day is included
    assert found(viewer, **{"from": f"{day:%Y-%m-%d}", "to": f"{day:%Y-%m-%d}"}) == [mid.pk]
    assert found(viewer, **{"from": "not a date"}) == [new.pk, mid.pk, old.pk]


def test_sort_by_start_last_change_and_duration_with_the_direction_shown() -> None:
    client = logged_in(person("vera", "viewer"))
    alpha = server()
    now = timezone.now()
    quick = task(alpha, started=now - timedelta(hours=3), took=5)
    slow = task(alpha, started=now - timedelta(hours=2), took=3000)
    middling = task(alpha, started=now - timedelta(hours=1), took=60)
    for row, minutes in ((quick, 1), (slow, 30), (middling, 10)):
        RemoteTask.objects.filter(pk=row.pk).update(last_seen_at=now - timedelta(minutes=minutes))

    assert found(client, sort="created") == [quick.pk, slow.pk, middling.pk]
    assert found(client, sort="-created") == [middling.pk, slow.pk, quick.pk]
    assert found(client, sort="-changed") == [quick.pk, middling.pk, slow.pk]
    assert found(client, sort="changed") == [slow.pk, middling.pk, quick.pk]
    assert found(client, sort="-duration") == [slow.pk, middling.pk, quick.pk]
    assert found(client, sort="duration") == [quick.pk, middling.pk, slow.pk]
    page = client.get(reverse("tasks:list"), {"sort": "-duration"}).content.decode()
    assert "Sorted by duration, longest first ↓" in page
    assert '<option value="-duration" selected>' in page


@pytest.mark.parametrize(
    "params",
    [
        {"q": "counted"},
        {"q": "counted -alice", "sort": "-duration"},
        {"tool": "count", "user": "1", "from": "2020-01-01", "to": "2099-01-01", "sort": "changed"},
    ],
)
def test_the_task_list_runs_the_same_queries_at_any_size(params: dict[str, str]) -> None:
    client = logged_in(person("vera", "viewer"))
    alpha = server()

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("tasks:list"), params).status_code == 200
        return len(captured.captured_queries)

    for i in range(5):
        task(alpha, status_message=f"counted {i}/5")
    few = queries()
    RemoteTask.objects.bulk_create(
        [_row(alpha, i) for i in range(300)], batch_size=300
    )  # bulk inserts are indexed by the trigger too
    assert queries() == few
    assert found(client, q="299 counted") != []  # words in any order


def _row(alpha: McpServer, i: int) -> RemoteTask:
    row = RemoteTask(
        server=alpha, tool_name="slow_count", status="working", status_message=f"counted {i}/300"
    )
    row.set_remote_id(f"id-{i}")
    return row

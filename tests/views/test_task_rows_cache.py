"""The task list keeps the rows of ended tasks it rendered (the task_rows cache, per process and
audience): a kept row is exactly what a fresh render gives, and anything the row shows that
changes (its status or message, its server's or agent's name, the reader's language or time zone,
"select all") gives a new row, never the kept one. A running task's row is rendered every time."""

import re

import pytest
from django.core.cache import caches
from django.test import Client

from tasksapp.models import Agent, McpServer, RemoteTask
from tests.support.opsdata import logged_in, person, server, task

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty_cache() -> None:
    caches["task_rows"].clear()


def row(client: Client, pk: int, query: str = "") -> str:
    html = client.get(f"/tasks/{query}").content.decode()
    found = re.search(rf'<tr id="task-row-{pk}".*?</tr>', html, re.S)
    assert found, f"no row for #{pk}"
    return found.group(0)


def kept() -> int:
    return len(caches["task_rows"]._cache)  # type: ignore[attr-defined]  # LocMemCache's own dict


def test_an_ended_tasks_row_is_kept_and_is_what_a_fresh_render_gives() -> None:
    client = logged_in(person("vera", "viewer"))
    done = task(server(), "nightly", took=3.0, status_message="all done")
    first = row(client, done.pk)
    assert kept() == 1
    assert row(client, done.pk) == first  # from the cache
    caches["task_rows"].clear()
    assert row(client, done.pk) == first  # rendered again: the same bytes


def test_whatever_an_ended_row_shows_that_changes_gives_a_new_row() -> None:
    vera = person("vera", "viewer")
    client = logged_in(vera)
    alpha = server()
    done = task(alpha, "nightly", took=3.0, status_message="all done")
    assert "all done" in row(client, done.pk) and "alpha" in row(client, done.pk)

    RemoteTask.objects.filter(pk=done.pk).update(status_message="all done, 12 rows")
    assert "all done, 12 rows" in row(client, done.pk)
    McpServer.objects.filter(pk=alpha.pk).update(name="alpha-renamed")
    assert "alpha-renamed" in row(client, done.pk)
    robot = Agent.objects.create(name="night-robot", token_hash="x" * 64)
    RemoteTask.objects.filter(pk=done.pk).update(agent=robot)
    assert "by agent night-robot" in row(client, done.pk)
    Agent.objects.filter(pk=robot.pk).update(name="day-robot")
    assert "by agent day-robot" in row(client, done.pk)
    RemoteTask.objects.filter(pk=done.pk).update(status="failed")
    assert 'data-status="failed"' in row(client, done.pk)
    assert " checked" in row(client, done.pk, "?picked=all")  # "select all" without JavaScript
    assert " checked" not in row(client, done.pk)

    in_utc = row(client, done.pk)
    client.post("/preferences/", {"time_zone": "Asia/Shanghai", "theme": "auto", "language": ""})
    assert row(client, done.pk) != in_utc and "Asia/Shanghai" in row(client, done.pk)
    client.post("/preferences/", {"time_zone": "Asia/Shanghai", "theme": "auto", "language": "zh-hans"})
    assert 'data-label="工具"' in row(client, done.pk)  # the reader's language


def test_a_running_tasks_row_is_rendered_every_time() -> None:
    client = logged_in(person("vera", "viewer"))
    running = task(server(), "slow_count", status="working")
    assert "data-since=" in row(client, running.pk)  # its elapsed time counts up
    assert kept() == 0

"""The task list's rows (tasksapp/presenters/task_rows.py): the row a live list is sent is byte for
byte the row the page shows, whatever the task's state, the reader's language and zone; text from
servers, agents and people is escaped; whatever a row shows that changes shows on the next load."""

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone, translation

from tasksapp.live.pages import ListPage, audience
from tasksapp.models import Agent, McpServer, RemoteTask
from tests.support.opsdata import logged_in, person, server, servers_of_every_health, task

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>&'
ESCAPED = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;"


def row(html: str, pk: int) -> str:
    found = re.search(rf'<tr id="task-row-{pk}"[^>]*>.*?</tr>', html, re.S)
    assert found, f"no row for #{pk}"
    return found.group(0)


def page_row(client: Client, pk: int, query: str = "") -> str:
    return row(client.get(f"/tasks/{query}").content.decode(), pk)


def steady(html: str) -> str:
    """A row without its running time's count, which a second's tick between the page and the live
    row may change (CI, once: "0s" and "1s"); the span, its start and its title stay compared."""
    return RUNNING.sub(r"\1(counted)\2", html)


RUNNING = re.compile(r'(<span data-since="[^"]*" title="[^"]*">)[0-9][^<]*(</span>)')


def live_rows(user: User, pks: list[int]) -> dict[int, str]:
    """Each task's row as a fresh live list adds it at the top (the plain row, not out-of-band)."""
    rendered = ListPage(audience(user), timezone.now(), fresh=True)._render_rows(pks)
    return {
        pk: row(insert.split("afterbegin:#task-rows", 1)[1], pk) for pk, (_, _, insert) in rendered.items()
    }


def tasks_of_every_kind() -> list[RemoteTask]:
    alpha, off, failing, robot = servers_of_every_health(HOSTILE)
    return [
        task(alpha, "nightly", took=3.0, status_message="all done"),
        task(alpha, status="input_required", status_message="which file?"),
        task(alpha, status="failed", status_message="x" * 300),
        task(alpha, expired=True, expired_at=timezone.now()),
        task(alpha, cancel_requested_at=timezone.now()),
        task(alpha, HOSTILE, agent=robot, status_message=HOSTILE),
        task(off),
        task(failing),  # nobody holds it: the server's own failure
        task(failing, leased_by="w1"),  # its worker's failure
        task(failing, leased_by="w2"),  # a worker that reaches the server
    ]


@pytest.mark.parametrize(("language", "zone"), [("en", "UTC"), ("zh-hans", "Asia/Shanghai")])
def test_a_live_row_is_the_row_the_page_shows(language: str, zone: str) -> None:
    vera = person("vera", "viewer")
    client = logged_in(vera)
    client.post("/preferences/", {"time_zone": zone, "theme": "auto", "language": language})
    made = tasks_of_every_kind()
    html = client.get("/tasks/").content.decode()
    with translation.override(language), timezone.override(zone):
        live = live_rows(vera, [each.pk for each in made])
    for each in made:
        assert steady(live[each.pk]) == steady(row(html, each.pk)), each
    assert RUNNING.search(live[made[1].pk]), "a running task's row shows its running time"
    assert "stale · server disabled" in live[made[6].pk] or language != "en"
    assert 'class="stale-flag"' in live[made[7].pk] and 'class="stale-flag"' in live[made[8].pk]
    assert 'class="stale-flag"' not in live[made[9].pk]


def test_text_from_servers_agents_and_people_is_escaped_in_a_row() -> None:
    vera = person("vera", "viewer")
    client = logged_in(vera)
    robot = Agent.objects.create(name=HOSTILE, token_hash="x" * 64)
    shown = task(server(), HOSTILE, agent=robot, status="working", status_message=HOSTILE)
    McpServer.objects.filter(pk=shown.server_id).update(name=HOSTILE)
    for html in (page_row(client, shown.pk), live_rows(vera, [shown.pk])[shown.pk]):
        assert "<script>" not in html
        tool, server_cell, message = (
            re.search(rf'data-label="{label}"[^>]*>(.*?)</td>', html, re.S).group(1)  # type: ignore[union-attr]
            for label in ("Tool", "Server", "Latest message")
        )
        assert tool == f'{ESCAPED}<br><span class="small muted starter">by agent {ESCAPED}</span>'
        assert server_cell == ESCAPED and message == ESCAPED


def test_whatever_an_ended_row_shows_that_changes_shows_on_the_next_load() -> None:
    vera = person("vera", "viewer")
    client = logged_in(vera)
    alpha = server()
    done = task(alpha, "nightly", took=3.0, status_message="all done")
    assert "all done" in page_row(client, done.pk) and "alpha" in page_row(client, done.pk)

    RemoteTask.objects.filter(pk=done.pk).update(status_message="all done, 12 rows")
    assert "all done, 12 rows" in page_row(client, done.pk)
    McpServer.objects.filter(pk=alpha.pk).update(name="alpha-renamed")
    assert "alpha-renamed" in page_row(client, done.pk)
    robot = Agent.objects.create(name="night-robot", token_hash="x" * 64)
    RemoteTask.objects.filter(pk=done.pk).update(agent=robot)
    assert "by agent night-robot" in page_row(client, done.pk)
    Agent.objects.filter(pk=robot.pk).update(name="day-robot")
    assert "by agent day-robot" in page_row(client, done.pk)
    RemoteTask.objects.filter(pk=done.pk).update(status="failed")
    assert 'data-status="failed"' in page_row(client, done.pk)
    assert " checked" in page_row(client, done.pk, "?picked=all")  # "select all" without JavaScript
    assert " checked" not in page_row(client, done.pk)

    in_utc = page_row(client, done.pk)
    client.post("/preferences/", {"time_zone": "Asia/Shanghai", "theme": "auto", "language": ""})
    assert page_row(client, done.pk) != in_utc and "Asia/Shanghai" in page_row(client, done.pk)
    client.post("/preferences/", {"time_zone": "Asia/Shanghai", "theme": "auto", "language": "zh-hans"})
    assert 'data-label="工具"' in page_row(client, done.pk)  # the reader's language


def test_a_running_tasks_row_counts_its_elapsed_time() -> None:
    client = logged_in(person("vera", "viewer"))
    running = task(server(), "slow_count", status="working")
    assert "data-since=" in page_row(client, running.pk)

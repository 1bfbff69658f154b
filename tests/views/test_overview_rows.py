"""The overview's longest-running tasks (tasksapp/presenters/overview.py long_running_html): byte for
byte what overview.html's loop and _badge.html wrote (kept as the reference:
overview_rows_before.html), for running and waiting tasks, agents, stale ones (server disabled,
failing since a time, failing), with and without a last change and confirmation, in two languages
and zones; names and messages from servers and agents are escaped."""

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.template import engines
from django.utils import timezone, translation

from tasksapp import counts
from tasksapp.models import RemoteTask
from tasksapp.presenters.overview import long_running_html, tiles_html
from tests.support.opsdata import logged_in, person, servers_of_every_health, task

pytestmark = pytest.mark.django_db

REFERENCE = Path(__file__).with_name("overview_rows_before.html").read_text()
TILES = Path(__file__).with_name("overview_tiles_before.html").read_text()
HOSTILE = '<script>alert("x")</script>&'
ESCAPED = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;"
# What a second's tick between two renders may change: a running time, an "… ago".
COUNTED = re.compile(
    r'(<span data-since="[^"]*" title="[^"]*">|<span class="ago" title="[^"]*">)[^<]*(</span>)'
)


def steady(html: str) -> str:
    return COUNTED.sub(r"\1(counted)\2", html)


def active_tasks() -> list[RemoteTask]:
    alpha, off, failing, robot = servers_of_every_health(HOSTILE)
    now = timezone.now()
    made = [
        task(alpha, status_message="counting"),
        task(alpha, status="input_required", status_message="which file?", last_seen_at=now),
        task(alpha, HOSTILE, agent=robot, status_message=HOSTILE + "x" * 200),
        task(alpha, last_seen_at=now - timedelta(minutes=5), last_confirmed_at=now - timedelta(seconds=3)),
        task(alpha, cancel_requested_at=now),
        task(off, last_seen_at=now),
        task(failing),  # nobody holds it: the server's own failure
        task(failing, leased_by="w1"),  # its worker's failure, since a time
        task(failing, leased_by="w2"),  # a worker that reaches the server
    ]
    return list(RemoteTask.objects.for_list().filter(pk__in=[each.pk for each in made]).order_by("pk"))


@pytest.mark.parametrize(("language", "zone"), [("en", "UTC"), ("zh-hans", "Asia/Shanghai")])
def test_the_rows_are_the_templates_byte_for_byte(language: str, zone: str) -> None:
    reference = engines["django"].from_string(REFERENCE)
    tasks = active_tasks()
    with translation.override(language), timezone.override(zone):
        for shown in (tasks, tasks[:1], []):
            before = reference.render({"long_running": shown})
            assert steady(long_running_html(shown)) == steady(before)
        html = long_running_html(tasks)
    assert html.count('class="stale-flag"') == 3  # disabled, failing since, failing
    assert "<script>" not in html and ESCAPED in html


def test_the_overview_shows_those_of_the_servers_it_watches() -> None:
    client = logged_in(person("vera", "viewer"))
    made = active_tasks()
    html = client.get("/").content.decode()
    for each in made:
        assert (f'href="/tasks/{each.pk}/">#{each.pk} ' in html) is each.server.enabled


@pytest.mark.parametrize(("language", "zone"), [("en", "UTC"), ("zh-hans", "Asia/Shanghai")])
def test_the_tiles_are_the_templates_byte_for_byte(language: str, zone: str) -> None:
    reference = engines["django"].from_string(TILES)
    active_tasks()
    with translation.override(language), timezone.override(zone):
        tiles = counts.status_tiles()
        assert any(tile["count"] for tile in tiles) and not all(tile["count"] for tile in tiles)
        assert tiles_html(tiles) == reference.render({"tiles": tiles})

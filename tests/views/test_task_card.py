"""A task's card (tasksapp/presenters/task_card.py): byte for byte what the template partial wrote
before (kept here as the reference), for every kind of task, in two languages and zones; text from
servers, agents and people is escaped; the page and a live update show the same card."""

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.template import engines
from django.utils import timezone, translation

from tasksapp.live.pages import ACTIONS_SLOT
from tasksapp.models import Agent, McpServer, RemoteTask, ServerHealth, TaskEvent
from tasksapp.presenters.task import task_context
from tasksapp.presenters.task_card import card_html
from tests.support.opsdata import logged_in, person, server, task

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>&\'"'
BEFORE = Path(__file__).with_name("task_card_before.html").read_text().rstrip("\n")
REFERENCE = "{% load i18n dashboard %}\n" + BEFORE + "\n"
# A running time and a TTL count in the browser; a second's tick between two renders changes them.
COUNTING = re.compile(r'(<span data-(?:since|deadline)="[^"]*" title="[^"]*">)[^<]*(</span>)')


def steady(html: str) -> str:
    return COUNTING.sub(r"\1(counted)\2", html)


def reference(task: RemoteTask, context: dict[str, object], *, oob: bool) -> str:
    return (
        engines["django"].from_string(REFERENCE).render({**context, "oob": oob, "actions_html": ACTIONS_SLOT})
    )


def tasks_of_every_kind() -> list[RemoteTask]:
    now = timezone.now()
    alpha, off, failing = server(), server("off"), server(HOSTILE)
    McpServer.objects.filter(pk=off.pk).update(enabled=False)
    McpServer.objects.filter(pk=failing.pk).update(
        consecutive_failures=2, failing_since=now - timedelta(minutes=3)
    )
    ServerHealth.objects.create(
        server=failing, worker="w1", consecutive_failures=1, failing_since=now - timedelta(minutes=2),
        last_error=HOSTILE + "x" * 300,
    )  # fmt: skip
    robot = Agent.objects.create(name=HOSTILE, token_hash="x" * 64)
    vera = person("vera", "viewer")
    seen: dict[str, Any] = {"last_seen_at": now - timedelta(seconds=4), "last_seen_via": "poll"}
    made = [
        task(alpha, "nightly", took=3.0, status_message="all done", **seen),
        task(
            alpha,
            HOSTILE,
            status="input_required",
            status_message=HOSTILE,
            poll_interval_ms=1500,
            ttl_ms=600_000,
            last_confirmed_at=now - timedelta(seconds=2),
            **seen,
        ),
        task(alpha, status="failed", status_message="", last_error=HOSTILE),
        task(alpha, expired=True, expired_at=now, last_error="gone"),
        task(alpha, expired=True, expired_at=now, ttl_ms=1000, last_error="gone after its TTL"),
        task(alpha, cancel_requested_at=now, started_by=vera),
        task(alpha, agent=robot, status_message=HOSTILE),
        task(off),
        task(failing),  # nobody holds it: the server's own failure
        task(failing, leased_by="w1"),  # its worker's failure, with an error
        task(failing, leased_by="w2"),  # a worker that reaches the server
    ]
    RemoteTask.objects.filter(pk=made[4].pk).update(created_at=now - timedelta(seconds=30))
    for status, seconds in (("working", 40), ("input_required", 30), ("working", 10)):
        TaskEvent.objects.create(
            task=made[1], status=status, source="poll", observed_at=now - timedelta(seconds=seconds)
        )
    return [RemoteTask.objects.for_detail().get(pk=each.pk) for each in made]


@pytest.mark.parametrize(("language", "zone"), [("en", "UTC"), ("zh-hans", "Asia/Shanghai")])
def test_each_card_is_what_the_template_wrote(language: str, zone: str) -> None:
    made = tasks_of_every_kind()
    with translation.override(language), timezone.override(zone):
        for each in made:
            context = task_context(each, AnonymousUser())
            for oob in (False, True):
                built = card_html(each, context["life"], oob=oob, actions=ACTIONS_SLOT)
                assert steady(built) == steady(reference(each, context, oob=oob)), (each.pk, each.status)
    assert 'class="lifecycle"' in card_html(
        made[1], task_context(made[1], AnonymousUser())["life"], oob=False, actions=""
    )


def test_text_from_servers_agents_and_people_is_escaped_in_a_card() -> None:
    made = tasks_of_every_kind()
    for each in made:
        html = card_html(each, task_context(each, AnonymousUser())["life"], oob=False, actions="")
        assert "<script>" not in html, each.pk
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#x27;&quot;" in card_html(
        made[6], task_context(made[6], AnonymousUser())["life"], oob=False, actions=""
    )


def test_the_page_shows_the_card_a_live_page_is_sent() -> None:
    operator = person("otto", "operator")
    client = logged_in(operator)
    made = tasks_of_every_kind()
    running = made[6]  # no timeline: a bar of its own would end at each render's now
    page = client.get(f"/tasks/{running.pk}/").content.decode()
    assert 'id="cancel-button"' in page  # the operator's actions, in the card's slot
    with translation.override("en"), timezone.override("UTC"):
        life = task_context(running, AnonymousUser())["life"]
        card = card_html(running, life, oob=False, actions=ACTIONS_SLOT)
    before, after = steady(card).split(ACTIONS_SLOT)
    assert before in steady(page) and after in steady(page)

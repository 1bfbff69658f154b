"""An inbox task's rows (tasksapp/presenters/inbox_rows.py) are byte for byte what the template's
partial wrote (kept as the reference: inbox_task_before.html), for every kind of question, the
reader's rights and language, the page's flags and hostile names; and the page, an answer in place
and the live inbox all write them so."""

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.template import engines
from django.template.loader import render_to_string
from django.test import RequestFactory
from django.utils import timezone, translation

from tasksapp.models import Agent, InputRequest, McpServer, RemoteTask
from tasksapp.presenters.inbox import inbox_items
from tasksapp.presenters.task import input_view
from tasksapp.templatetags import rendered_once
from tests.support.inbox import CONTACT_FORM, asking

pytestmark = pytest.mark.django_db
REFERENCE = "tests/views/inbox_task_before.html"
HOSTILE = '<script>alert("x")</script>&'
URL = {"mode": "url", "url": "https://example.com/x", "message": HOSTILE, "elicitationId": "e1"}
SAMPLING = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}
TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]*)"')
COUNTDOWN = re.compile(r'(<span data-deadline="[^"]*" title="[^"]*">)[^<]*(</span>)')


def steady(html: str) -> str:
    """Without what differs between two renders a moment apart: the masked CSRF token (one per
    render) and the TTL countdown's text (a second may tick); the countdown's deadline stays."""
    for token in set(TOKEN.findall(html)):
        html = html.replace(token, "")
    return COUNTDOWN.sub(r"\1(left)\2", html)


def questions() -> list[dict[str, Any]]:
    """Tasks asking every kind of question, with hostile names and messages, one TTL-less, one a
    gateway task only its agent answers, one asking two questions."""
    plain = McpServer.objects.create(name=HOSTILE, url="http://127.0.0.1:9/a", roots=[{"uri": "file:///x"}])
    agents = McpServer.objects.create(name="agents", url="http://127.0.0.1:9/b", gateway_policy="agent")
    robot = Agent.objects.create(name=HOSTILE, token_hash="y" * 64)
    hostile_form = {**CONTACT_FORM, "message": HOSTILE + "x" * 200}
    tasks = [
        asking(plain, HOSTILE, "elicitation/create", hostile_form),
        asking(plain, "link", "elicitation/create", URL),
        asking(plain, "sample", "sampling/createMessage", SAMPLING),
        asking(plain, "roots", "roots/list", {}),
        asking(plain, "odd", "something/else", {"message": "?"}),
        asking(agents, "by-agent", "elicitation/create", CONTACT_FORM),
    ]
    tasks[0].ttl_ms = 600_000
    tasks[0].remote_created_at = timezone.now() - timedelta(minutes=1)
    tasks[0].save()
    tasks[5].agent = robot
    tasks[5].save()
    second = InputRequest(task=tasks[0], method="elicitation/create", params=CONTACT_FORM)
    second.set_key("second")
    second.save()
    return inbox_items([task.pk for task in tasks])


def contexts(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    bound = dict(items[0])
    request = bound["inputs"][0].request
    bound["inputs"] = [input_view(request, data={f"ir{request.pk}-name": ""}), *bound["inputs"][1:]]
    bound["inputs"][0].form.is_valid()  # with its errors, as an answer in place shows it
    gone = {"task": {"pk": 987_654}, "inputs": []}
    flags: list[dict[str, Any]] = [
        {"can_answer": True, "inbox_next": "/inbox/?page=2"},
        {"can_answer": False},
        {"can_answer": True, "picked_all": True, "open_first": True, "oob": True},
        {"can_answer": True, "fresh_prefix": f"ir{request.pk}", "inbox_next": "/inbox/?tool=x&kind=form"},
    ]
    made = [{"item": item, **flag} for flag in flags for item in items]
    failed: dict[str, Any] = {"can_answer": True, "fresh_prefix": f"ir{request.pk}", "open_first": True}
    # The answer with its errors, then the same question unanswered with the same flags: clean.
    return [*made, {"item": bound, **failed}, {"item": items[0], **failed}, {"item": gone, "oob": True}]


def test_the_rows_are_the_templates_byte_for_byte() -> None:
    reference = engines["django"].from_string(Path(REFERENCE).read_text())
    factory = RequestFactory()
    compared = 0
    for language, zone in (("en", "UTC"), ("zh-hans", "Asia/Shanghai")):
        with translation.override(language), timezone.override(zone):
            rendered_once.kept.clear()
            for context in contexts(questions()):
                request = factory.get("/inbox/")
                request.user = AnonymousUser()
                for turn in range(2):  # the cards rendered, then kept
                    before = reference.render(context, request)
                    after = render_to_string("tasksapp/inbox.html#inbox-task", context, request)
                    assert steady(after) == steady(before), (language, turn, context)
                    compared += 1
            RemoteTask.objects.all().delete()
            McpServer.objects.all().delete()
            Agent.objects.all().delete()
    assert compared == 2 * 2 * (4 * 6 + 3)


def test_what_servers_and_agents_chose_is_escaped() -> None:
    html = render_to_string(
        "tasksapp/inbox.html#inbox-task",
        {"item": questions()[0], "can_answer": True},
        RequestFactory().get("/"),
    )
    assert HOSTILE not in html and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in html

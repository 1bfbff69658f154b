from typing import Any

from django import template
from django.template.defaulttags import CsrfTokenNode
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tasksapp.lib import markdown as markdown_module
from tasksapp.presenters.inbox_rows import Page as InboxPage
from tasksapp.presenters.inbox_rows import task_html
from tasksapp.presenters.overview import chart_html, long_running_html, tiles_html
from tasksapp.presenters.task import InputView
from tasksapp.presenters.task_card import card_html
from tasksapp.presenters.timeline_rows import entries_html
from tasksapp.presenters.times import (
    ago,
    elapsed,
    expiry_note,
    running_for,
    seconds_text,
    stamp,
    stamped,
    ttl_left,
)
from tasksapp.templatetags.rendered_once import once

register = template.Library()
register.filter("elapsed", elapsed)
register.filter("ago", ago)
register.filter("stamp", stamp)
register.simple_tag(stamped, name="stamped")
register.simple_tag(running_for, name="running_for")
register.simple_tag(ttl_left, name="ttl_left")
register.simple_tag(expiry_note, name="expiry_note")
register.simple_tag(entries_html, name="timeline_entries")
register.simple_tag(chart_html, name="hourly_chart")
register.simple_tag(long_running_html, name="long_running_rows")
register.simple_tag(tiles_html, name="status_tiles")


@register.simple_tag(takes_context=True)
def task_card(context: Any) -> SafeString:
    """The task's card (tasksapp/presenters/task_card.py) with the reader's actions in it."""
    actions = context.get("actions_html") or render_to_string(
        "tasksapp/task_detail.html#task-actions", context.flatten()
    )
    return card_html(context["task"], context["life"], oob=bool(context.get("oob")), actions=actions)


class _InboxRender:
    """What an inbox's tasks share in one render: the card's template, the words, where answers
    return, the reader's rights and CSRF token."""

    def __init__(self, context: Any) -> None:
        self.card_template = context.template.engine.get_template("tasksapp/_input_request.html")
        self.page = InboxPage()
        self.next_url = context.get("inbox_next") or getattr(context.get("request"), "path", "")
        self.can_answer = bool(context.get("can_answer"))
        self.fresh_prefix = context.get("fresh_prefix") or ""
        self.token = CsrfTokenNode().render(context)


@register.simple_tag(takes_context=True)
def inbox_task(context: Any) -> SafeString:
    """`item`'s rows in the inbox (tasksapp/presenters/inbox_rows.py), each question's card the
    template's, rendered once per what it shows unless it holds an answer (rendered_once)."""
    shared = context.render_context.get(_InboxRender)
    if shared is None:
        shared = context.render_context[_InboxRender] = _InboxRender(context)

    def card(view: InputView, task: Any) -> str:
        agent_only = task.answered_by_agent_only

        def render() -> str:
            values = {
                "view": view,
                "action_url": reverse("tasks:answer", args=[view.request.pk]),
                "server_name": task.server.name,
                "roots": task.server.roots,
                "next_url": shared.next_url,
                "in_inbox": True,
                "agent_only": agent_only,
            }
            with context.push(**values):
                return "\n        " + str(shared.card_template.render(context))

        if view.bound:  # an answer with its errors: this reader's alone
            return render()
        question = (view.request.pk, view.fingerprint, task.server.name, task.server.roots)
        reader = (shared.next_url, shared.can_answer, agent_only, shared.fresh_prefix)
        return once(context, "inbox-card", (*question, *reader), render, token=shared.token)

    return task_html(
        context["item"],
        shared.page,
        can_answer=shared.can_answer,
        picked_all=bool(context.get("picked_all")),
        fresh_prefix=shared.fresh_prefix,
        open_first=bool(context.get("open_first")),
        oob=bool(context.get("oob")),
        card=card,
    )


@register.filter
def markdown(text: Any) -> SafeString:
    """A server's markdown (tool descriptions) as sanitised HTML: tasksapp/lib/markdown.py."""
    return markdown_module.render(text)


EXPORTED = {"tasks": gettext_lazy("the task list"), "audit": gettext_lazy("the audit log")}
EXPORT_FORMATS = {"csv": "CSV", "jsonl": "JSON Lines"}


@register.filter
def audit_summary(entry: Any) -> str:
    """An audit entry's one-line detail, in the reader's language where the dashboard wrote it
    (an export: what, as which format, filtered how); otherwise the summary recorded with it."""
    detail = entry.detail if isinstance(entry.detail, dict) else {}
    if entry.action != "export":
        return str(detail.get("summary") or "")
    what, fmt = str(detail.get("what", "")), str(detail.get("format", ""))
    text = _("%(what)s as %(format)s") % {
        "what": EXPORTED.get(what, what),
        "format": EXPORT_FORMATS.get(fmt, fmt),
    }
    filters = detail.get("filters")
    shown = ", ".join(f"{key}={value}" for key, value in filters.items()) if isinstance(filters, dict) else ""
    return f"{text} ({shown})" if shown else text


@register.simple_tag
def now_stamp() -> SafeString | str:
    """The current time in the reader's zone, labelled like every other time."""
    return stamp(timezone.now())


@register.filter
def seconds(value: int | float | None) -> str:
    """A number of seconds as '4s', '3m 12s', '2h 5m'."""
    return seconds_text(max(0, int(value or 0)))

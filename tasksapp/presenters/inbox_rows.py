"""An inbox task's rows as HTML, for the inbox page, an answer sent in place and the live inbox (the
partial inbox.html#inbox-task, which all three render, calls this through {% inbox_task %}): one
builder, so a task sent live is byte for byte what a reload shows.

Written here rather than in the template because a page has 10 tasks and the template engine spent
about 0.3 ms on each task's rows around its card, in nodes and lookups
(tests/views/test_inbox_rows.py keeps the template's partial as the reference). Each question's
card is the template's (_input_request.html), handed in by the caller. What a server, an agent or a
person chose (server and tool names, the question's message) is escaped; the dashboard's own words
and HTML (translations, the TTL countdown, the card) are not, as the template engine treats them.
"""

from collections.abc import Callable
from html import escape
from typing import Any

from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator
from django.utils.translation import gettext as _

from tasksapp.presenters.task import InputView
from tasksapp.presenters.times import ttl_left

MESSAGE_CHARS = 90  # the question's message in the row, cut to this many characters
_SLOT = 9_876_543_210  # an id no URL prefix holds: where the id goes in a URL

_ROW = (
    '\n    <div class="inbox-row" id="inbox-row-{pk}">\n'
    "      {pick}\n"
    "      \n"
    '      <details class="inbox-item" id="inbox-item-{pk}" {preserve} {open}>\n'
    '        <summary><span class="inbox-kind {kind}">{kind_word}</span>\n'
    "          <b>{server}</b> · {tool}\n"
    '          <span class="inbox-message muted">{message}</span>\n'
    "          {ttl}</summary>\n"
    "        \n"
    "        {card}\n"
    "      </details>\n"
    "      \n"
    '      <a class="inbox-open" href="{task_url}" title="{open_task}">#{task}</a>\n'
    "    </div>\n"
    "    "
)


class Page:
    """What every task of one render shares: the words in the active language, the shape of a
    task's URL. Read once per render, not once per task."""

    def __init__(self) -> None:
        self.kinds = {"form": _("form"), "url": _("link"), "sampling": _("sampling"), "roots": _("roots")}
        self.other = _("other")
        self.select = escape(_("Select for a bulk answer"))
        self.open_task = _("Open task #%(pk)s")
        self.task_url = reverse("tasks:detail", args=[_SLOT])


def task_html(
    item: dict[str, Any],
    page: Page,
    *,
    can_answer: bool,
    picked_all: bool,
    fresh_prefix: str,
    open_first: bool,
    oob: bool,
    card: Callable[[InputView, Any], str],
) -> SafeString:
    """One task's rows. `item` is {"task": a RemoteTask (or {"pk": …} when it asks nothing any
    more), "inputs": its InputViews}; `card(view, task)` writes a question's card."""
    task = item["task"]
    pk = task["pk"] if isinstance(task, dict) else task.pk
    head = f'\n  <div id="inbox-task-{pk}" class="inbox-task" {'hx-swap-oob="true"' if oob else ""}>\n    '
    inputs = item["inputs"]
    if not inputs:
        return mark_safe(f"{head}\n  </div>\n  ")  # noqa: S308 (ids and the dashboard's own HTML)
    agent_only = task.answered_by_agent_only
    server, tool = escape(task.server.name), escape(task.tool_name)
    deadline = task.ttl_deadline
    ttl = f'<span class="inbox-when">{ttl_left(deadline)}</span>' if deadline else ""
    task_url = page.task_url.replace(str(_SLOT), str(pk))
    open_task = escape(page.open_task % {"pk": pk})
    rows = []
    for view in inputs:
        request_pk = view.request.pk
        if can_answer and view.kind == "form" and not agent_only:
            checked = " checked" if picked_all else ""
            pick = (
                f'<input type="checkbox" class="inbox-pick" form="inbox-bulk" name="ids" value="{request_pk}"'
                f' aria-label="{page.select}"{checked}>'
            )
        else:
            pick = '<span class="pick-gap"></span>' if can_answer else ""
        rows.append(
            _ROW.format(
                pk=request_pk,
                pick=pick,
                preserve='hx-preserve="true"' if view.prefix != fresh_prefix else "",
                open="open" if open_first else "",
                kind=escape(view.kind),
                kind_word=page.kinds.get(view.kind, page.other),
                server=server,
                tool=tool,
                message=escape(Truncator(view.message).chars(MESSAGE_CHARS)),
                ttl=ttl,
                card=card(view, task),
                task_url=task_url,
                open_task=open_task,
                task=pk,
            )
        )
    return mark_safe(head + "".join(rows) + "\n  </div>\n  ")  # noqa: S308 (escaped above)

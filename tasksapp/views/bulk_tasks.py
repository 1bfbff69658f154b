"""Bulk actions on the task list: cancel or run again several tasks.

The list's checkboxes submit ids and an action here (GET); the page lists the tasks and what will
happen to each, and one confirming POST does it. Each task is checked against the user's role on
its own (cancel needs the cancel permission and an unfinished task; run again needs the start
permission and a server that is not archived), and each action is audited by its service. A
confirmation is used once: a second submit of the same page (a double click, a reload) does nothing.
"""

import secrets
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from tasksapp import services
from tasksapp.models import RemoteTask
from tasksapp.permissions import CANCEL, START, VIEW, can, refusal, require
from tasksapp.queryparams import parse_id
from tasksapp.views.common import page

BULK_LIMIT = 100
ACTIONS = {"cancel": CANCEL, "rerun": START}
_USED = "bulk_tasks_used"


def _tasks(ids: list[str]) -> list[RemoteTask]:
    numbers = sorted({number for value in ids if (number := parse_id(value)) is not None})[:BULK_LIMIT]
    found = RemoteTask.objects.filter(pk__in=numbers).select_related("server").with_holder_health()
    return list(found.order_by("-created_at"))


def _refused(user: Any, action: str, task: RemoteTask) -> str:
    """Why this user may not do `action` to this task, or "" when they may."""
    if not can(user, ACTIONS[action]):
        return refusal(user, ACTIONS[action])
    if task.server.archived:
        return _("its server is archived")
    if action == "cancel" and (task.is_terminal or task.expired):
        return _("it has already finished (%(status)s)") % {"status": task.display_status}
    return ""


@require(VIEW)
def task_bulk(request: HttpRequest) -> HttpResponse:
    source = request.POST if request.method == "POST" else request.GET
    action = source.get("action", "")
    tasks = _tasks(source.getlist("tasks"))
    if action not in ACTIONS or not tasks:
        messages.error(request, _("Select tasks in the list, then choose what to do with them."))
        return redirect("tasks:list")
    rows = [{"task": task, "refused": _refused(request.user, action, task)} for task in tasks]
    if request.method != "POST":
        context = {"rows": rows, "action": action, "token": secrets.token_urlsafe(16)}
        return page(request, "tasksapp/bulk_tasks.html", context, nav="tasks")
    used: list[str] = request.session.get(_USED, [])
    token = source.get("token", "")[:64]
    if not token or token in used:
        messages.info(request, _("This confirmation was already used; nothing was done again."))
        return redirect("tasks:list")
    request.session[_USED] = [*used[-49:], token]
    done, failed = _apply(request.user, action, rows)
    _report(request, action, done, failed)
    return redirect("tasks:list")


def _apply(user: Any, action: str, rows: list[dict[str, Any]]) -> tuple[int, list[str]]:
    done, failed = 0, []
    for row in rows:
        task: RemoteTask = row["task"]
        if row["refused"]:
            failed.append(f"#{task.pk}: {row['refused']}")
            continue
        try:
            if action == "cancel":
                services.task_cancel(task=task, user=user)
            else:
                services.call_start(
                    server=task.server, tool=task.tool_name, arguments=task.arguments, user=user
                )
            done += 1
        except services.ServiceError as exc:
            failed.append(f"#{task.pk}: {exc}")
    return done, failed


def _report(request: HttpRequest, action: str, done: int, failed: list[str]) -> None:
    if done:
        if action == "cancel":
            text = ngettext("Cancel requested for %(n)d task.", "Cancel requested for %(n)d tasks.", done)
        else:
            text = ngettext("Started %(n)d task again.", "Started %(n)d tasks again.", done)
        messages.success(request, text % {"n": done})
    if failed:
        text = ngettext("%(n)d was not done: %(why)s", "%(n)d were not done: %(why)s", len(failed))
        messages.error(request, text % {"n": len(failed), "why": "; ".join(failed[:10])})

"""What the inbox shows, read for its page (tasksapp/views/inbox.py) and its live updates
(tasksapp/live/pages.py): open input requests and calls waiting for input, filtered and ranked
by urgency, and the navigation badge's count."""

from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import DateTimeField, DurationField, ExpressionWrapper, F, Min, Q, Value
from django.templatetags.static import static
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy, ngettext

from tasksapp.lib.prepared import Prepared
from tasksapp.models import (
    LARGE_SERVER_COLUMNS,
    LARGE_TASK_COLUMNS,
    InputRequest,
    McpServer,
    PendingCall,
    watched_servers,
)
from tasksapp.models.calls import waiting_since
from tasksapp.presenters.task import InputView, input_view
from tasksapp.queryparams import parse_id

INBOX_LIMIT = 500
# What answering needs of a request's task and server: not their large columns (a 40 MB tool list).
_LARGE = [
    *(f"task__{column}" for column in LARGE_TASK_COLUMNS),
    *(f"task__server__{column}" for column in LARGE_SERVER_COLUMNS),
]
# What the list shows: not the secrets either.
_DEFERRED = [*_LARGE, "task__remote_id_encrypted", "task__server__headers_encrypted"]


KINDS = [
    ("form", gettext_lazy("form (elicitation)")),
    ("url", gettext_lazy("link (URL elicitation)")),
    ("sampling", gettext_lazy("sampling")),
    ("roots", gettext_lazy("roots")),
    ("mrtr", gettext_lazy("before the task starts")),
]
_ELICIT = "elicitation/create"
# A missing "mode" is form mode; NOT (mode = 'url') alone would be NULL, so say it.
FORM_MODE = Q(method=_ELICIT) & (~Q(params__has_key="mode") | ~Q(params__mode="url"))
_KIND_FILTERS = {
    "form": FORM_MODE,
    "url": Q(method=_ELICIT, params__mode="url"),
    "sampling": Q(method="sampling/createMessage"),
    "roots": Q(method="roots/list"),
}
MRTR_LIMIT = 50


def inbox_filters(get: Any) -> dict[str, str]:
    """The list's filters from the query string, bounded: server (id), tool (exact name), kind."""
    server = str(get.get("server", ""))
    kind = str(get.get("kind", ""))
    return {
        "server": server if parse_id(server) is not None else "",
        "tool": str(get.get("tool", ""))[:200],
        "kind": kind if kind in dict(KINDS) else "",
    }


def filtered_open(filters: dict[str, str]) -> Any:
    """Open requests matching the filters (no request matches the kind "mrtr": those are calls)."""
    rows = _open()
    if filters.get("server"):
        rows = rows.filter(task__server_id=int(filters["server"]))
    if filters.get("tool"):
        rows = rows.filter(task__tool_name=filters["tool"])
    kind = filters.get("kind")
    if kind == "mrtr":
        return rows.none()
    return rows.filter(_KIND_FILTERS[kind]) if kind else rows


def open_calls(filters: dict[str, str]) -> list[PendingCall]:
    """Calls waiting for input before a task exists (MRTR), oldest first, matching the filters
    (unfiltered, the query is compiled once per thread)."""
    if filters.get("kind") not in ("", None, "mrtr"):
        return []
    since = waiting_since(timezone.now())
    if not filters.get("server") and not filters.get("tool"):
        return _every_open_call.all(since)
    return list(_open_calls(filters, since))


def _open_calls(filters: dict[str, str], since: datetime) -> Any:
    calls = PendingCall.objects.waiting_since(since)
    if filters.get("server"):
        calls = calls.filter(server_id=int(filters["server"]))
    if filters.get("tool"):
        calls = calls.filter(tool_name=filters["tool"])
    fields = (
        "id",
        "tool_name",
        "input_requests",
        "created_at",
        "server__id",
        "server__name",
        "server__roots",
    )
    return calls.select_related("server").only(*fields).order_by("created_at", "id")[:MRTR_LIMIT]


_every_open_call: Prepared[PendingCall] = Prepared(lambda since: _open_calls({}, since), 1)


def inbox_servers() -> list[McpServer]:
    """The servers the inbox's filter offers (compiled once per thread)."""
    return _inbox_servers.all()


_inbox_servers: Prepared[McpServer] = Prepared(
    lambda: McpServer.objects.filter(archived=False).order_by("name").only("id", "name"), 0
)


def badge_html(waiting: int, *, oob: bool) -> SafeString:
    """The navigation's count of open questions, next to "Inbox" (every page shows it, and the live
    socket pushes it out of band): byte for byte what _inbox_badge.html wrote before
    (tests/views/test_inbox_badge.py keeps it as the reference)."""
    label = ngettext(
        "%(waiting)s question waits for an answer", "%(waiting)s questions wait for an answer", waiting
    ) % {"waiting": waiting}
    swap = 'hx-swap-oob="true"' if oob else ""
    hidden = "" if waiting else "hidden"
    script = "" if oob else f'<script src="{static("tasksapp/notify.js")}" defer></script>'
    return mark_safe(  # noqa: S308 (a number and the dashboard's own words)
        f'\n<a id="inbox-badge" href="{reverse("tasks:inbox")}" class="badge needs-input" {swap}'
        f' data-count="{waiting}" {hidden} aria-label="{label}">{waiting}</a>{script}\n'
    )


def open_count() -> int:
    """What the navigation badge shows: open questions in tasks, and calls waiting to start, counted
    in one query (every page shows it), compiled once per thread (the ORM's compilation of the union
    cost more than the count itself)."""
    return _open_count.count(waiting_since(timezone.now()))


def _open_ids(since: datetime) -> Any:
    questions = _open().order_by().values("pk")
    calls = PendingCall.objects.waiting_since(since).order_by().values("pk")
    # Unordered: the model's own order is not a column of the union.
    return questions.union(calls, all=True).order_by()


_open_count = Prepared(_open_ids, 1)


def _open() -> Any:
    return InputRequest.objects.filter(
        Q(state="open", task__expired=False) & watched_servers("task__server__")
    ).exclude(task__status__in=("completed", "failed", "cancelled"))


def open_requests() -> list[InputRequest]:
    """Every open request, most urgent first: least TTL left, then oldest."""
    rows = list(_open().select_related("task__server", "task__agent").defer(*_DEFERRED)[:INBOX_LIMIT])

    def urgency(row: InputRequest) -> tuple[float, float]:
        deadline = row.task.ttl_deadline
        return (deadline.timestamp() if deadline else float("inf"), row.first_seen_at.timestamp())

    return sorted(rows, key=urgency)


def tasks_by_urgency(filters: dict[str, str] | None = None) -> list[int]:
    """Ids of the tasks with open requests, the most urgent first (least TTL left, then the oldest
    request, then the id): ranked by the database, so 1,000 open requests cost one query of ids (in
    Python, making 4,000 values of the rows was most of the inbox's reads). A task without a TTL, or
    not yet told when it was created, comes after every task with a deadline. Unfiltered (the
    inbox most people open), the query is compiled once per thread."""
    if not any((filters or {}).values()):
        return _every_task_by_urgency.all()
    return list(_by_urgency(filters or {}))


def _by_urgency(filters: dict[str, str]) -> Any:
    per_task = filtered_open(filters).order_by().values("task_id")
    deadline = ExpressionWrapper(
        F("task__remote_created_at") + _ttl(per_task.db), output_field=DateTimeField()
    )
    ranked = per_task.annotate(deadline=deadline, first_seen=Min("first_seen_at"))
    ordered = ranked.order_by(F("deadline").asc(nulls_last=True), "first_seen", "task_id")
    return ordered.values_list("task_id", flat=True)


_every_task_by_urgency: Prepared[int] = Prepared(lambda: _by_urgency({}), 0)


def _ttl(using: str) -> Any:
    """A task's TTL as a duration: an interval on PostgreSQL; on SQLite, where Django keeps durations
    as microseconds and cannot multiply one by a number, the microseconds."""
    if connections[using].vendor == "postgresql":
        return F("task__ttl_ms") * Value(timedelta(milliseconds=1), output_field=DurationField())
    return ExpressionWrapper(F("task__ttl_ms") * 1000, output_field=DurationField())


def inbox_items(task_ids: list[int], filters: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The page's tasks, in the given order, each with its open requests as views (one query;
    unfiltered, compiled once per thread and number of tasks)."""
    groups: dict[int, list[InputView]] = {task_id: [] for task_id in task_ids}
    tasks = {}
    if any((filters or {}).values()) or not task_ids:
        rows = list(_open_of(filters or {}, task_ids))
    else:
        rows = _open_of_tasks(len(task_ids)).all(*task_ids)
    for row in rows:
        groups[row.task_id].append(input_view(row))
        tasks[row.task_id] = row.task
    return [{"task": tasks[task_id], "inputs": groups[task_id]} for task_id in task_ids if task_id in tasks]


def _open_of(filters: dict[str, str], task_ids: Any) -> Any:
    rows = filtered_open(filters).filter(task_id__in=task_ids)
    return rows.select_related("task__server", "task__agent").defer(*_DEFERRED)


_OPEN_OF_TASKS: dict[int, Prepared[InputRequest]] = {}


def _open_of_tasks(count: int) -> Prepared[InputRequest]:
    found = _OPEN_OF_TASKS.get(count)
    if found is None:
        found = _OPEN_OF_TASKS.setdefault(count, Prepared(lambda *ids: _open_of({}, list(ids)), count))
    return found

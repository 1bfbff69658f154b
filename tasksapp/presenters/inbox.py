"""What the inbox shows, read for its page (tasksapp/views/inbox.py) and its live updates
(tasksapp/live/pages.py): open input requests and calls waiting for input, filtered and ranked
by urgency, and the navigation badge's count."""

from typing import Any

from django.db.models import Q
from django.utils.translation import gettext_lazy

from tasksapp.models import (
    LARGE_SERVER_COLUMNS,
    LARGE_TASK_COLUMNS,
    InputRequest,
    PendingCall,
    watched_servers,
)
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
    """Calls waiting for input before a task exists (MRTR), oldest first, matching the filters."""
    if filters.get("kind") not in ("", None, "mrtr"):
        return []
    calls = PendingCall.objects.waiting()
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
    return list(calls.select_related("server").only(*fields).order_by("created_at", "id")[:MRTR_LIMIT])


def open_count() -> int:
    """What the navigation badge shows: open questions in tasks, and calls waiting to start, counted
    in one query (every page shows it)."""
    questions = _open().order_by().values("pk")
    return int(questions.union(PendingCall.objects.waiting().order_by().values("pk"), all=True).count())


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
    request): ranked from four narrow columns, so 1,000 open requests cost one small query."""
    best: dict[int, tuple[float, float]] = {}
    for task_id, ttl_ms, created, first_seen in filtered_open(filters or {}).values_list(
        "task_id", "task__ttl_ms", "task__remote_created_at", "first_seen_at"
    ):
        deadline = created.timestamp() + ttl_ms / 1000 if ttl_ms is not None and created else float("inf")
        rank = (deadline, first_seen.timestamp())
        best[task_id] = min(rank, best.get(task_id, rank))
    return sorted(best, key=lambda task_id: (best[task_id], task_id))


def inbox_items(task_ids: list[int], filters: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The page's tasks, in the given order, each with its open requests as views (one query)."""
    groups: dict[int, list[InputView]] = {task_id: [] for task_id in task_ids}
    tasks = {}
    rows = filtered_open(filters or {}).filter(task_id__in=task_ids)
    for row in rows.select_related("task__server", "task__agent").defer(*_DEFERRED):
        groups[row.task_id].append(input_view(row))
        tasks[row.task_id] = row.task
    return [{"task": tasks[task_id], "inputs": groups[task_id]} for task_id in task_ids if task_id in tasks]

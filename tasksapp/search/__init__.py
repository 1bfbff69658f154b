"""Finding tasks: the task list's filters, full-text search and sort orders, shared by the list and
its exports. Every filter and sort is one query with the list (constant at any number of tasks)."""

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, FloatField, Func, OrderBy, QuerySet
from django.db.models.sql.compiler import SQLCompiler
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from tasksapp.models import RemoteTask, RemoteTaskQuerySet
from tasksapp.queryparams import bad_ids, parse_id
from tasksapp.search.query import matching

FILTER_KEYS = ("status", "server", "tool", "q", "user", "agent", "from", "to")
ID_FILTERS = ("server", "user", "agent")
# sort key: (label, what ascending means, what descending means)
SORT_CHOICES = {
    "created": (_("started"), _("oldest first"), _("newest first")),
    "changed": (_("last change"), _("least recently changed first"), _("most recently changed first")),
    "duration": (_("duration"), _("shortest first"), _("longest first")),
    "tool": (_("tool"), _("A to Z"), _("Z to A")),
    "server": (_("server"), _("A to Z"), _("Z to A")),
    "status": (_("status"), _("A to Z"), _("Z to A")),
}
DEFAULT_SORT = "-created"


@dataclass(frozen=True)
class Sort:
    key: str
    descending: bool

    @property
    def value(self) -> str:
        return ("-" if self.descending else "") + self.key

    @property
    def label(self) -> str:
        """Says what the order is and which way it runs: 'started, newest first ↓'."""
        name, ascending, descending = SORT_CHOICES[self.key]
        return gettext("%(name)s, %(order)s %(arrow)s") % {
            "name": name,
            "order": descending if self.descending else ascending,
            "arrow": "↓" if self.descending else "↑",
        }


def sort_options() -> list[tuple[str, str]]:
    """(value, label) for the sort menu: every key in both directions."""
    return [
        (sort.value, sort.label)
        for key in SORT_CHOICES
        for sort in (Sort(key, descending=True), Sort(key, descending=False))
    ]


def parse_sort(value: str) -> Sort:
    key = value.lstrip("-")
    if key not in SORT_CHOICES:
        return parse_sort(DEFAULT_SORT)
    return Sort(key, descending=value.startswith("-"))


def filters_from(params: Any) -> dict[str, str]:
    return {key: str(params.get(key, "")).strip()[:200] for key in FILTER_KEYS}


def ignored(filters: dict[str, str]) -> list[str]:
    """The id filters given a value that is not an id: filtered() leaves them out; pages say so."""
    return bad_ids(filters, ID_FILTERS)


def filtered(filters: dict[str, str], tasks: RemoteTaskQuerySet | None = None) -> RemoteTaskQuerySet:
    """The tasks the filters select; unknown or malformed values are ignored rather than refused."""
    tasks = RemoteTask.objects.for_list() if tasks is None else tasks
    if filters.get("status"):
        tasks = tasks.with_display_status(filters["status"])
    if (server := parse_id(filters.get("server"))) is not None:
        tasks = tasks.filter(server_id=server)
    if (user := parse_id(filters.get("user"))) is not None:
        tasks = tasks.filter(started_by_id=user)
    if (agent := parse_id(filters.get("agent"))) is not None:
        tasks = tasks.filter(agent_id=agent)
    if filters.get("tool"):
        tasks = tasks.filter(tool_name__icontains=filters["tool"])
    if start := day_start(filters.get("from", "")):
        tasks = tasks.filter(created_at__gte=start)
    if end := day_end(filters.get("to", "")):
        tasks = tasks.filter(created_at__lt=end)
    if filters.get("q") and (found := matching(filters["q"])) is not None:
        tasks = tasks.filter(found)
    return tasks


def ordered(tasks: QuerySet[RemoteTask], sort: Sort) -> QuerySet[RemoteTask]:
    """The sort, then newest first (so pages never shuffle rows that tie)."""
    expression: Any = {
        "created": F("created_at"),
        "changed": F("last_seen_at"),
        "duration": Elapsed(),
        "tool": F("tool_name"),
        "server": F("server__name"),
        "status": F("status"),
    }[sort.key]
    # No NULLS modifier: it would keep SQLite from walking the index (last_seen_at is set at creation).
    return tasks.order_by(OrderBy(expression, descending=sort.descending), "-id")


class Elapsed(Func):
    """Seconds from a task's start to its end (RemoteTask.ended_at: finish or expiry), or to now.

    On SQLite in plain julianday() arithmetic: Django's own datetime subtraction there calls a
    Python function per row, which made sorting 100k tasks by duration take 500 ms instead of 40."""

    output_field = FloatField()

    def __init__(self) -> None:
        super().__init__(F("finished_at"), F("expired_at"), F("created_at"))

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, tuple[str | int, ...]]:
        finished, expired, created = (compiler.compile(part)[0] for part in self.get_source_expressions())
        if connection.vendor == "sqlite":
            sql = f"(julianday(COALESCE({finished}, {expired}, 'now')) - julianday({created})) * 86400"
        else:
            sql = f"EXTRACT(EPOCH FROM COALESCE({finished}, {expired}, now()) - {created})"
        return sql, ()


def day_start(text: str) -> datetime | None:
    """The start of a YYYY-MM-DD day in the current time zone, or None."""
    try:
        day = date.fromisoformat(text)
    except ValueError:
        return None
    return timezone.make_aware(datetime.combine(day, time.min))


def day_end(text: str) -> datetime | None:
    """The end (the next day's start) of a YYYY-MM-DD day, so a range "to" it includes the whole day."""
    start = day_start(text)
    return start + timedelta(days=1) if start else None

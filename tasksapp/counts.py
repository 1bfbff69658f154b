"""Task counts kept as tasks change, so the overview never aggregates the whole task table.

Two small tables: `TaskCount` (tasks per server and per state bucket: status, expired, tool error,
cancel requested) and `TaskHour` (tasks started and finished per hour). Database triggers on
tasksapp_remotetask keep both in step, inside the transaction that changes a task: every writer is
covered (the services, the worker, bulk inserts, the admin, deletes and cascades, another helper's
new service) without code of its own, and a rolled-back change takes its count with it. The
alternative, counting in each service that changes a status, misses any write that goes around
the services (a queryset .update(), a bulk insert, a delete); a per-second cached aggregate still
costs one full scan a second and one slow request per second for somebody.

On PostgreSQL a status change locks its two bucket rows in id order, so two transactions moving
tasks in opposite directions (working <-> input_required) cannot deadlock on them.

SQLite drops a table's triggers when a migration rebuilds the table: `on_post_migrate` puts them
back and recounts (idempotent; cheap beside a migration).
"""

# ruff: noqa: S608 -- the SQL here is built from this module's constants only, never from input

import functools
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.utils.translation import gettext_lazy as _

from tasksapp.lib.prepared import Prepared

COUNTS = "tasksapp_taskcount"
HOURS = "tasksapp_taskhour"
TRIGGER = "tasksapp_counts"
BUCKET = ("server_id", "status", "expired", "is_tool_error", "cancel_requested")
BUCKET_COLUMNS = ", ".join(BUCKET)
WATCHED = (
    *("server_id", "status", "expired", "is_tool_error", "cancel_requested_at"),
    *("created_at", "finished_at"),
)


def install(connection: Any) -> None:
    """Create the triggers if missing (idempotent)."""
    if connection.vendor == "sqlite":
        statements = _sqlite()
    elif connection.vendor == "postgresql":
        statements = _postgresql()
    else:
        raise NotImplementedError(f"task counts need SQLite or PostgreSQL, not {connection.vendor}")
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def uninstall(connection: Any) -> None:
    if connection.vendor == "postgresql":
        drops = [
            f"DROP TRIGGER IF EXISTS {TRIGGER}_{kind} ON tasksapp_remotetask" for kind in ("write", "update")
        ]
        drops.append(f"DROP FUNCTION IF EXISTS {TRIGGER}_sync()")
    else:
        drops = [f"DROP TRIGGER IF EXISTS {TRIGGER}_{kind}" for kind in ("insert", "update", "delete")]
    with connection.cursor() as cursor:
        for statement in drops:
            cursor.execute(statement)


def rebuild(connection: Any) -> None:
    """Recount both tables from the task table (one aggregate each)."""
    hour_of = _hour_sql(connection.vendor)
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {COUNTS}")
        cursor.execute(f"DELETE FROM {HOURS}")
        cursor.execute(
            f"INSERT INTO {COUNTS} ({BUCKET_COLUMNS}, n) "
            "SELECT server_id, status, expired, is_tool_error, cancel_requested_at IS NOT NULL, COUNT(*) "
            "FROM tasksapp_remotetask GROUP BY 1, 2, 3, 4, 5"
        )
        cursor.execute(
            f"INSERT INTO {HOURS} (hour, started, finished) SELECT hour, SUM(s), SUM(f) FROM ("
            f"SELECT {hour_of.format('created_at')} AS hour, 1 AS s, 0 AS f FROM tasksapp_remotetask "
            f"UNION ALL SELECT {hour_of.format('finished_at')}, 0, 1 FROM tasksapp_remotetask "
            "WHERE finished_at IS NOT NULL) AS marks GROUP BY hour"
        )


def on_post_migrate(using: str, **kwargs: Any) -> None:
    connection = connections[using]
    if "tasksapp_taskcount" in connection.introspection.table_names():
        install(connection)
        rebuild(connection)


# --- reading ------------------------------------------------------------------------------------

TILES = [
    ("working", _("working")),
    ("needs_input", _("needs input")),
    ("cancel_requested", _("cancel requested")),
    ("completed", _("completed")),
    ("tool_error", _("completed with tool error")),
    ("failed", _("failed")),
    ("cancelled", _("cancelled")),
    ("expired", _("expired")),
    ("stale", _("stale (server failing or off)")),
]
TERMINAL = ("completed", "failed", "cancelled")


def tiles_of(status: str, expired: bool, tool_error: bool, cancel_requested: bool) -> list[str]:
    """The overview tiles a task in this bucket counts in (the same rules as display status filters)."""
    keys = []
    if expired:
        keys.append("expired")
    elif status == "working" and not cancel_requested:
        keys.append("working")
    elif status == "input_required":
        keys.append("needs_input")
    if cancel_requested and not expired and status not in TERMINAL:
        keys.append("cancel_requested")
    if status == "completed":
        keys.append("tool_error" if tool_error else "completed")
    elif status in ("failed", "cancelled"):
        keys.append(status)
    return keys


def status_tiles() -> list[dict[str, Any]]:
    """The overview's tiles, from the counts table: one query over a few rows per server."""
    totals: dict[str, int] = defaultdict(int)
    for status, expired, tool_error, cancel, stale, n in _buckets().all():
        for key in tiles_of(status, expired, tool_error, cancel):
            totals[key] += n
        if stale and not expired and status not in TERMINAL:  # as RemoteTaskQuerySet.stale()
            totals["stale"] += n
    totals["stale"] += stale_held()
    return [{"key": key, "label": label, "count": totals[key]} for key, label in TILES]


def stale_held() -> int:
    """Active tasks of enabled servers that are stale for their worker (RemoteTaskQuerySet's
    stale()): one small query while no server fails for anyone, then the tasks of those that do."""
    from tasksapp.models import RemoteTask, stale

    failing = _failing_servers().all()
    if not failing:
        return 0
    active = RemoteTask.objects.exclude(status__in=TERMINAL).filter(expired=False, server_id__in=failing)
    return active.filter(stale()).count()


def per_hour(start: datetime) -> tuple[dict[datetime, int], dict[datetime, int]]:
    """Tasks started and finished per hour from `start` (at most one row per hour)."""

    started, finished = {}, {}
    for hour, s, f in _hours().all(start, start + timedelta(days=1)):
        started[hour], finished[hour] = s, f
    return started, finished


# The overview reads these on every load and its live part every second: compiled once per thread
# (tasksapp/lib/prepared.py; the ORM's compilation cost more than these small queries' SQL).


@functools.cache
def _buckets() -> Prepared[tuple[str, bool, bool, bool, bool, int]]:
    from tasksapp.models import STALE_SERVERS, TaskCount

    columns = ("status", "expired", "is_tool_error", "cancel_requested", "stale", "n")
    return Prepared(
        lambda: TaskCount.objects.filter(n__gt=0).annotate(stale=STALE_SERVERS).values_list(*columns), 0
    )


@functools.cache
def _failing_servers() -> Prepared[int]:
    from tasksapp.models import McpServer

    failing = McpServer.objects.filter(consecutive_failures__gt=0, enabled=True)
    return Prepared(lambda: failing.values_list("pk", flat=True), 0)


@functools.cache
def _hours() -> Prepared[tuple[datetime, int, int]]:
    from tasksapp.models import TaskHour

    return Prepared(
        lambda lo, hi: TaskHour.objects.filter(hour__gte=lo, hour__lt=hi).values_list(
            "hour", "started", "finished"
        ),
        2,
    )


# --- SQL ----------------------------------------------------------------------------------------


def _hour_sql(vendor: str) -> str:
    if vendor == "sqlite":
        return "strftime('%Y-%m-%d %H:00:00', {})"
    return "(date_trunc('hour', {} AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')"


def _changed(vendor: str, columns: tuple[str, ...]) -> str:
    distinct = "IS NOT" if vendor == "sqlite" else "IS DISTINCT FROM"
    return " OR ".join(f"OLD.{column} {distinct} NEW.{column}" for column in columns)


def _sqlite() -> list[str]:
    hour = _hour_sql("sqlite")

    def bucket(row: str) -> str:
        return (
            f"{row}.server_id, {row}.status, {row}.expired, {row}.is_tool_error, "
            f"{row}.cancel_requested_at IS NOT NULL"
        )

    def take(row: str) -> str:
        return (
            f"UPDATE {COUNTS} SET n = n - 1 WHERE server_id = {row}.server_id AND status = {row}.status "
            f"AND expired = {row}.expired AND is_tool_error = {row}.is_tool_error "
            f"AND cancel_requested = ({row}.cancel_requested_at IS NOT NULL);"
        )

    def add(row: str) -> str:
        return (
            f"INSERT INTO {COUNTS} ({BUCKET_COLUMNS}, n) VALUES ({bucket(row)}, 1) "
            f"ON CONFLICT ({BUCKET_COLUMNS}) DO UPDATE SET n = n + 1;"
        )

    def hours(row: str, sign: str, when: str = "1") -> str:
        return (
            f"UPDATE {HOURS} SET started = started {sign} 1 "
            f"WHERE hour = {hour.format(row + '.created_at')} AND ({when});"
            f"UPDATE {HOURS} SET finished = finished {sign} 1 "
            f"WHERE hour = {hour.format(row + '.finished_at')} AND ({when});"
        )

    def hours_add(row: str, when: str = "1") -> str:
        return (
            f"INSERT INTO {HOURS} (hour, started, finished) SELECT {hour.format(row + '.created_at')}, 0, 0 "
            f"WHERE ({when}) ON CONFLICT (hour) DO NOTHING;"
            f"INSERT INTO {HOURS} (hour, started, finished) SELECT {hour.format(row + '.finished_at')}, 0, 0 "
            f"WHERE {row}.finished_at IS NOT NULL AND ({when}) ON CONFLICT (hour) DO NOTHING;"
            + hours(row, "+", when)
        )

    moved = "OLD.created_at IS NOT NEW.created_at OR OLD.finished_at IS NOT NEW.finished_at"
    return [
        f"CREATE TRIGGER IF NOT EXISTS {TRIGGER}_insert AFTER INSERT ON tasksapp_remotetask BEGIN "
        f"{add('NEW')} {hours_add('NEW')} END",
        f"CREATE TRIGGER IF NOT EXISTS {TRIGGER}_update AFTER UPDATE OF {', '.join(WATCHED)} "
        f"ON tasksapp_remotetask WHEN {_changed('sqlite', WATCHED)} BEGIN "
        f"{take('OLD')} {add('NEW')} {hours('OLD', '-', moved)} {hours_add('NEW', moved)} END",
        f"CREATE TRIGGER IF NOT EXISTS {TRIGGER}_delete AFTER DELETE ON tasksapp_remotetask BEGIN "
        f"{take('OLD')} {hours('OLD', '-')} END",
    ]


def _postgresql() -> list[str]:
    hour = _hour_sql("postgresql")

    def match(row: str) -> str:
        return (
            f"({BUCKET_COLUMNS}) = ({row}.server_id, {row}.status, {row}.expired, "
            f"{row}.is_tool_error, {row}.cancel_requested_at IS NOT NULL)"
        )

    def hour_step(row: str, column: str, field: str, sign: str) -> str:
        at = hour.format(f"{row}.{column}")
        if sign == "-":
            return f"UPDATE {HOURS} SET {field} = {field} - 1 WHERE hour = {at};"
        return (
            f"INSERT INTO {HOURS} (hour, started, finished) VALUES ({at}, {int(field == 'started')}, "
            f"{int(field == 'finished')}) ON CONFLICT (hour) DO UPDATE SET {field} = {HOURS}.{field} + 1;"
        )

    body = f"""
BEGIN
  IF TG_OP = 'UPDATE' THEN
    PERFORM 1 FROM {COUNTS} WHERE {match("OLD")} OR {match("NEW")} ORDER BY id FOR UPDATE;
  END IF;
  IF TG_OP <> 'INSERT' THEN
    UPDATE {COUNTS} SET n = n - 1 WHERE {match("OLD")};
    IF TG_OP = 'DELETE' OR OLD.created_at IS DISTINCT FROM NEW.created_at THEN
      {hour_step("OLD", "created_at", "started", "-")}
    END IF;
    IF OLD.finished_at IS NOT NULL
       AND (TG_OP = 'DELETE' OR OLD.finished_at IS DISTINCT FROM NEW.finished_at) THEN
      {hour_step("OLD", "finished_at", "finished", "-")}
    END IF;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    INSERT INTO {COUNTS} ({BUCKET_COLUMNS}, n) VALUES (NEW.server_id, NEW.status, NEW.expired,
      NEW.is_tool_error, NEW.cancel_requested_at IS NOT NULL, 1)
      ON CONFLICT ({BUCKET_COLUMNS}) DO UPDATE SET n = {COUNTS}.n + 1;
    IF TG_OP = 'INSERT' OR OLD.created_at IS DISTINCT FROM NEW.created_at THEN
      {hour_step("NEW", "created_at", "started", "+")}
    END IF;
    IF NEW.finished_at IS NOT NULL
       AND (TG_OP = 'INSERT' OR OLD.finished_at IS DISTINCT FROM NEW.finished_at) THEN
      {hour_step("NEW", "finished_at", "finished", "+")}
    END IF;
  END IF;
  RETURN NULL;
END"""
    return [
        f"CREATE OR REPLACE FUNCTION {TRIGGER}_sync() RETURNS trigger LANGUAGE plpgsql AS $${body}$$",
        f"DROP TRIGGER IF EXISTS {TRIGGER}_write ON tasksapp_remotetask",
        f"CREATE TRIGGER {TRIGGER}_write AFTER INSERT OR DELETE ON tasksapp_remotetask "
        f"FOR EACH ROW EXECUTE FUNCTION {TRIGGER}_sync()",
        f"DROP TRIGGER IF EXISTS {TRIGGER}_update ON tasksapp_remotetask",
        f"CREATE TRIGGER {TRIGGER}_update AFTER UPDATE OF {', '.join(WATCHED)} ON tasksapp_remotetask "
        f"FOR EACH ROW WHEN ({_changed('postgresql', WATCHED)}) EXECUTE FUNCTION {TRIGGER}_sync()",
    ]

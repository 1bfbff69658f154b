"""Streamed downloads of the task list and the audit log, as CSV or JSON Lines.

Rows are read with .iterator() (a server-side cursor on PostgreSQL) and written one at a time, so
memory stays flat at any size. Under ASGI (Daphne) the body is an async iterator handing over
CHUNK rows' text at a time, each read on the request's database thread: Django sends each part as it
comes (a sync iterator it would read whole first, sync_to_async(list), before the first byte). The
taskId is a bearer secret: it is included only for people allowed to act on tasks (tasksapp.permissions
CANCEL), like the per-task raw download. Cells that a spreadsheet would run as a formula are quoted.
"""

import csv
import itertools
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils.translation import gettext as _

from tasksapp.lib import crypto
from tasksapp.models import OperatorAction, RemoteTask, ended_at, status_label

FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson; charset=utf-8"}
CHUNK = 2000
TASK_COLUMNS = [
    "id",
    "server",
    "tool",
    "status",
    "status_message",
    "started_by",
    "agent",
    "started_at",
    "last_change_at",
    "finished_at",
    "duration_seconds",
    "arguments",
]
AUDIT_COLUMNS = ["id", "at", "user", "action", "server", "task", "ok", "summary", "detail"]
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


_TASK_FIELDS = (
    "pk",
    "server__name",
    "tool_name",
    "status",
    "expired",
    "is_tool_error",
    "cancel_requested_at",
    "status_message",
    "agent__name",
    "started_by__username",
    "created_at",
    "last_seen_at",
    "finished_at",
    "expired_at",
    "arguments",
)


def task_rows(tasks: QuerySet[RemoteTask], *, with_task_ids: bool) -> Iterator[dict[str, Any]]:
    """One dict per task, in the queryset's order (the JSON Lines export); one query (a server-side
    cursor on PostgreSQL) whatever the size. Columns, not models: building a RemoteTask and its
    related rows per row cost more than the SELECT itself (bench/export.py)."""
    for values, task_id in _task_values(tasks, with_task_ids=with_task_ids):
        row = _task_row(values)
        if with_task_ids:
            row["task_id"] = task_id
        yield row


def task_cells(tasks: QuerySet[RemoteTask], *, with_task_ids: bool) -> Iterator[list[Any]]:
    """The CSV export's rows: each task's cells in task_columns() order, ready for csv.writer. The
    same values as task_rows(), written without a dict and a _cell() call per cell: only text a
    remote party or a person chose is checked for a formula start (ids, dates, statuses are ours)."""
    for values, task_id in _task_values(tasks, with_task_ids=with_task_ids):
        (pk, server, tool, status, expired, tool_error, cancel_at, message, agent, user, created,
         seen, finished, expired_at, arguments) = values  # fmt: skip
        end = ended_at(status, finished, expired, expired_at)
        duration = _cell(round((end - created).total_seconds(), 3)) if end else ""
        cells = [
            pk,
            _text(server),
            _text(tool),
            status_label(status, expired, tool_error, cancel_at is not None),
            _text(message),
            _text(agent if agent is not None else user),  # as RemoteTask.starter
            _text(agent),
            created.isoformat() if created else "",
            seen.isoformat() if seen else "",
            end.isoformat() if end else "",
            duration,
            _cell(arguments),
        ]
        if with_task_ids:
            cells.append(_text(task_id))
        yield cells


def _task_values(
    tasks: QuerySet[RemoteTask], *, with_task_ids: bool
) -> Iterator[tuple[tuple[Any, ...], str | None]]:
    """Each task's _TASK_FIELDS and its task id (None without with_task_ids, or when no key reads it)."""
    if not with_task_ids:
        for values in tasks.values_list(*_TASK_FIELDS).iterator(chunk_size=CHUNK):
            yield values, None
        return
    # Task ids decrypted CHUNK at a time (crypto.decrypt_many: one AES pass, not Fernet's objects per row).
    rows = tasks.values_list(*_TASK_FIELDS, "remote_id_encrypted").iterator(chunk_size=CHUNK)
    for batch in itertools.batched(rows, CHUNK):
        ids = crypto.decrypt_many([values[-1] for values in batch])
        for values, task_id in zip(batch, ids, strict=True):
            yield values[:-1], task_id


def task_columns(*, with_task_ids: bool) -> list[str]:
    return [*TASK_COLUMNS, "task_id"] if with_task_ids else TASK_COLUMNS


def _task_row(values: tuple[Any, ...]) -> dict[str, Any]:
    (pk, server, tool, status, expired, tool_error, cancel_at, message, agent, user, created, seen,
     finished, expired_at, arguments) = values  # fmt: skip
    end = ended_at(status, finished, expired, expired_at)
    return {
        "id": pk,
        "server": server,
        "tool": tool,
        "status": status_label(status, expired, tool_error, cancel_at is not None),
        "status_message": message,
        "started_by": agent if agent is not None else (user or ""),  # as RemoteTask.starter
        "agent": agent or "",
        "started_at": _iso(created),
        "last_change_at": _iso(seen),
        "finished_at": _iso(end),
        "duration_seconds": round((end - created).total_seconds(), 3) if end else None,
        "arguments": arguments,
    }


def audit_rows(actions: QuerySet[OperatorAction]) -> Iterator[dict[str, Any]]:
    for entry in actions.select_related("user", "server").iterator(chunk_size=CHUNK):
        yield {
            "id": entry.pk,
            "at": _iso(entry.created_at),
            "user": entry.user.username if entry.user else "",
            "action": entry.action,
            "server": entry.server.name if entry.server else "",
            "task": entry.task_id,
            "ok": entry.ok,
            "summary": str(entry.detail.get("summary", "")) if isinstance(entry.detail, dict) else "",
            "detail": entry.detail,
        }


def streamed(
    rows: Iterable[dict[str, Any]],
    columns: list[str],
    fmt: str,
    filename: str,
    *,
    asynchronous: bool = False,
) -> StreamingHttpResponse:
    """A download of `rows` in `fmt` ("csv" or "jsonl"), written as they are read; `asynchronous`
    (the request came through ASGI) makes the body an async iterator, which Django streams.

    The first row is read before the response starts, so a query that fails is an ordinary error
    page at once: once streaming has begun, a failure can only cut the download short."""
    rows = _primed(rows)
    if fmt == "csv":
        return _response(_csv((_cells(row, columns) for row in rows), columns), fmt, filename, asynchronous)
    return _response(_jsonl(rows), fmt, filename, asynchronous)


def tasks_streamed(
    tasks: QuerySet[RemoteTask], fmt: str, filename: str, *, with_task_ids: bool, asynchronous: bool = False
) -> StreamingHttpResponse:
    """streamed() of the task list: CSV from task_cells(), JSON Lines from task_rows()."""
    columns = task_columns(with_task_ids=with_task_ids)
    if fmt == "csv":
        lines = _csv(_primed(task_cells(tasks, with_task_ids=with_task_ids)), columns)
    else:
        lines = _jsonl(_primed(task_rows(tasks, with_task_ids=with_task_ids)))
    return _response(lines, fmt, filename, asynchronous)


def _primed[T](rows: Iterable[T]) -> Iterator[T]:
    """The rows, the first already read (the query run) before the response starts."""
    pending = iter(rows)
    first = list(itertools.islice(pending, 1))
    return itertools.chain(first, pending)


def _response(body: Iterator[str], fmt: str, filename: str, asynchronous: bool) -> StreamingHttpResponse:
    content: Iterator[str] | AsyncIterator[str] = _parts(body) if asynchronous else body
    response = StreamingHttpResponse(content, content_type=FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def under_asgi(request: HttpRequest) -> bool:
    """Whether the request came through ASGI (Daphne), where a download streams only as an async
    iterator; under WSGI and the test client a sync one streams."""
    return isinstance(request, ASGIRequest)


def bad_filters(keys: list[str], filters: dict[str, str]) -> HttpResponse:
    """400 for an export whose id filters are not ids, naming each: nothing is exported or audited."""
    named = ", ".join(f"{key}={filters[key][:40]!r}" for key in keys)
    text = _("Not exported: %(filters)s is not an id. Remove the filter or pick a value from the list.")
    return HttpResponse(
        text % {"filters": named} + "\n", status=400, content_type="text/plain; charset=utf-8"
    )


async def _parts(lines: Iterator[str]) -> AsyncIterator[str]:
    """The lines, CHUNK at a time, each batch read on the request's own database thread (the one
    that opened the cursor), so the event loop sends one part while nothing else waits on it."""
    take = sync_to_async(_take, thread_sensitive=True)
    while part := await take(lines):
        yield part


def _take(lines: Iterator[str]) -> str:
    return "".join(itertools.islice(lines, CHUNK))


def _jsonl(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(row, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"


class _Line:
    """csv.writer writes into this; each row's text is handed straight on."""

    def write(self, text: str) -> str:
        return text


def _csv(rows: Iterable[list[Any]], columns: list[str]) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield "\ufeff" + writer.writerow(columns)  # the byte-order mark makes spreadsheets read UTF-8
    for cells in rows:
        yield writer.writerow(cells)


def _cells(row: dict[str, Any], columns: list[str]) -> list[str]:
    return [_cell(row.get(column)) for column in columns]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def _text(value: str | None) -> str:
    """_cell() of a text column (or None)."""
    if not value:
        return ""
    return "'" + value if value.startswith(_FORMULA_START) else value


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None

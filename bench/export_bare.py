"""The floor for a CSV export of the task list, served by Daphne like the product (bench/export.py):
a bare ASGI app that streams the same rows from a PostgreSQL server-side cursor through csv.writer.

    DATABASE_URL=postgres://… python -m daphne -p PORT bench.export_bare:application

GET /tasks.csv answers with every task, newest first (the product's default order), the export's
columns without the task id (not decrypted here) and without display refinements; chunks of about
64 KiB are sent as the rows arrive. Any other path answers 200 "up" (the readiness probe).
"""

from __future__ import annotations

import csv
import io
import json
import os
from typing import Any

import psycopg

SQL = """
SELECT t.id, s.name, t.tool_name, t.status, t.status_message, u.username, a.name,
       t.created_at, t.last_seen_at, t.finished_at, t.arguments
FROM tasksapp_remotetask t
JOIN tasksapp_mcpserver s ON s.id = t.server_id
LEFT JOIN auth_user u ON u.id = t.started_by_id
LEFT JOIN tasksapp_agent a ON a.id = t.agent_id
WHERE NOT s.archived
ORDER BY t.created_at DESC, t.id DESC
"""
COLUMNS = ["id", "server", "tool", "status", "status_message", "started_by", "agent", "started_at",
           "last_change_at", "finished_at", "arguments"]  # fmt: skip
CHUNK_BYTES = 64 * 1024
ROWS_PER_FETCH = 2000  # the product's .iterator(chunk_size=…)


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


async def _stream(send: Any) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    buffer.write("\ufeff")
    writer.writerow(COLUMNS)
    connection = await psycopg.AsyncConnection.connect(os.environ["DATABASE_URL"])
    async with connection, connection.cursor(name="export") as cursor:
        cursor.itersize = ROWS_PER_FETCH
        await cursor.execute(SQL)
        async for row in cursor:
            writer.writerow([_cell(value) for value in row])
            if buffer.tell() >= CHUNK_BYTES:
                body = buffer.getvalue().encode()
                await send({"type": "http.response.body", "body": body, "more_body": True})
                buffer.seek(0)
                buffer.truncate()
    await send({"type": "http.response.body", "body": buffer.getvalue().encode()})


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] != "/tasks.csv":
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        await send({"type": "http.response.body", "body": b"up\n"})
        return
    headers = [(b"content-type", b"text/csv; charset=utf-8")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await _stream(send)

"""The counts' PostgreSQL triggers (PL/pgSQL) against a freshly migrated database of their own."""

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.stack import postgres_database

pytestmark = pytest.mark.postgres
BUCKETS = "server_id, status, expired, is_tool_error, cancel_requested"


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with postgres_database("test_counts") as url:
        zero_defaults(url, "tasksapp_mcpserver", "tasksapp_remotetask")
        yield url


ZERO = {"boolean": "false", "jsonb": "'{}'", "timestamp with time zone": "now()"}


def zero_defaults(url: str, *tables: str) -> None:
    """The raw INSERTs below name only the columns the counts read: every other NOT NULL column
    without a default gets its type's zero in this private database, so a new column does not break
    the test."""
    for table, column, kind in rows(
        url,
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_name = ANY(%s) "
        "AND is_nullable = 'NO' AND column_default IS NULL AND is_identity = 'NO'",
        [list(tables)],
    ):
        zero = ZERO.get(kind, "0" if kind in ("integer", "bigint", "smallint") else "''")
        run(url, f'ALTER TABLE {table} ALTER COLUMN "{column}" SET DEFAULT {zero}')


def rows(url: str, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


def run(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url) as conn:
        for statement in statements:
            conn.execute(statement)


def kept(url: str) -> set[tuple[Any, ...]]:
    return set(rows(url, f"SELECT {BUCKETS}, n FROM tasksapp_taskcount WHERE n <> 0"))


def fresh(url: str) -> set[tuple[Any, ...]]:
    return set(
        rows(
            url,
            "SELECT server_id, status, expired, is_tool_error, cancel_requested_at IS NOT NULL, COUNT(*) "
            "FROM tasksapp_remotetask GROUP BY 1, 2, 3, 4, 5",
        )
    )


def hours(url: str) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    kept_hours = set(
        rows(url, "SELECT hour, started, finished FROM tasksapp_taskhour WHERE started + finished > 0")
    )
    fresh_hours = set(
        rows(
            url,
            "SELECT hour, SUM(s), SUM(f) FROM (SELECT date_trunc('hour', created_at) AS hour, 1 AS s, 0 AS f "
            "FROM tasksapp_remotetask UNION ALL SELECT date_trunc('hour', finished_at), 0, 1 "
            "FROM tasksapp_remotetask WHERE finished_at IS NOT NULL) AS m GROUP BY hour",
        )
    )
    return kept_hours, fresh_hours


def test_postgres_counts_follow_inserts_changes_and_deletes(database: str) -> None:
    run(
        database,
        "INSERT INTO tasksapp_mcpserver (name, url, headers_encrypted, enabled, era, supported_versions, "
        "capabilities, tasks_supported, server_info, instructions, tools, tools_note, roots, last_error, "
        "consecutive_failures, read_timeout_seconds, call_timeout_seconds, archived, created_at) VALUES "
        + ", ".join(
            f"('{name}', 'http://127.0.0.1:9/mcp', '', true, '', '[]', '{{}}', true, '{{}}', '', '[]', '', "
            "'[]', '', 0, 30, 600, false, now())"
            for name in "ab"
        ),
        "INSERT INTO tasksapp_remotetask (server_id, remote_id_hash, remote_id_encrypted, tool_name, "
        "arguments, status, status_message, created_at_raw, updated_at_raw, is_tool_error, raw, created_at, "
        "expired, last_seen_via, last_error, leased_by) SELECT s.id, md5(s.id || '-' || g), 'x', 't', '{}', "
        "'working', '', '', '', false, '{}', now() - (g || ' minutes')::interval, false, '', '', '' "
        "FROM tasksapp_mcpserver s, generate_series(1, 150) g",
    )
    server_a = rows(database, "SELECT id FROM tasksapp_mcpserver WHERE name = 'a'")[0][0]
    run(
        database,
        "UPDATE tasksapp_remotetask SET status = 'input_required' WHERE id % 5 = 0",
        "UPDATE tasksapp_remotetask SET status = 'completed', finished_at = now() WHERE id % 5 = 1",
        "UPDATE tasksapp_remotetask SET status = 'completed', is_tool_error = true, finished_at = now() "
        "WHERE id % 5 = 2",
        "UPDATE tasksapp_remotetask SET cancel_requested_at = now() WHERE id % 5 = 3",
        "UPDATE tasksapp_remotetask SET expired = true WHERE id % 7 = 0",
        "UPDATE tasksapp_remotetask SET next_poll_at = now(), lease_until = now()",  # no watched column
        f"DELETE FROM tasksapp_remotetask WHERE id % 11 = 0 AND server_id = {server_a}",
    )
    assert kept(database) == fresh(database)

    # Transactions moving tasks both ways between working and input_required at once (bucket rows
    # are locked in id order): none fails, and every change counts exactly once.
    errors: list[BaseException] = []

    def flip(parity: int, there: str, back: str) -> None:
        try:
            for _ in range(15):
                run(
                    database,
                    f"UPDATE tasksapp_remotetask SET status = '{there}' WHERE status = '{back}' "
                    f"AND id % 2 = {parity} AND NOT expired",
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=flip, args=(0, "input_required", "working")),
        threading.Thread(target=flip, args=(1, "working", "input_required")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert kept(database) == fresh(database)
    kept_hours, fresh_hours = hours(database)
    assert kept_hours == fresh_hours

"""The full-text index of tasks: an FTS5 table on SQLite, a tsvector table with a GIN index on PostgreSQL.

Both are kept in step by database triggers on tasksapp_remotetask, so every writer (services, the
worker, bulk inserts, the admin) is covered without code of its own. A document holds the tool name,
the string and number values of the arguments, the status message, the string and number values of
the result and of the error, the username of who started the task, and the name of the agent that
started it through the gateway, cut at DOCUMENT_CHARS.
Punctuation (including `_`) separates words on both vendors, so `slow` finds `slow_count`.

Never indexed: the task id, the input keys and `raw` (bearer secrets, or places a server echoes them).
A renamed user is found under the new name once the task's document is next rewritten.

Migrations install the index as it was at their time: 0008 without the agent (its table came in
0012), 0020 replaces the triggers with the agent's and indexes every task again.
"""

from typing import Any

TABLE = "tasksapp_task_search"
DOCUMENT_CHARS = 100_000
WATCHED = ("tool_name", "arguments", "status_message", "result", "error", "started_by_id")
AGENT_WATCHED = (*WATCHED, "agent_id")
_KINDS = ("insert", "update", "delete")
AGENT_MIGRATION = "0020_search_agent"  # the migration whose index has the agent


def install(connection: Any, *, backfill: bool, agent: bool = True) -> None:
    """Create the index table and its triggers if missing (idempotent); `backfill` indexes every task.
    `agent=False` is the index as migration 0008 made it, before agents existed."""
    if connection.vendor not in ("sqlite", "postgresql"):
        return  # another vendor: search falls back to substring matching (tasksapp.search.query)
    build = _sqlite if connection.vendor == "sqlite" else _postgresql
    statements = build(backfill, agent)
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def reinstall(connection: Any, *, agent: bool) -> None:
    """Replace the triggers (the index table stays) and index every task again, in one transaction."""
    with connection.cursor() as cursor:
        for statement in _trigger_drops(connection.vendor):
            cursor.execute(statement)
    install(connection, backfill=True, agent=agent)


def uninstall(connection: Any) -> None:
    drops = _trigger_drops(connection.vendor)
    if connection.vendor == "postgresql":
        drops += ["DROP FUNCTION IF EXISTS tasksapp_json_text(jsonb)"]
    elif connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        for statement in [*drops, f"DROP TABLE IF EXISTS {TABLE}"]:
            cursor.execute(statement)


def _trigger_drops(vendor: str) -> list[str]:
    if vendor == "postgresql":
        drops = [f"DROP TRIGGER IF EXISTS {TABLE}_{kind} ON tasksapp_remotetask" for kind in _KINDS]
        return drops + [f"DROP FUNCTION IF EXISTS {TABLE}_{kind}()" for kind in ("write", "delete")]
    if vendor == "sqlite":
        return [f"DROP TRIGGER IF EXISTS {TABLE}_{kind}" for kind in _KINDS]
    return []


# --- SQLite: FTS5 -----------------------------------------------------------------------------


def _sqlite_json(column: str) -> str:
    return (
        f"COALESCE((SELECT group_concat(value, ' ') FROM json_tree({column}) "
        "WHERE type IN ('text', 'integer', 'real')), '')"
    )


def _sqlite_document(row: str, agent: bool) -> str:
    parts = [
        f"{row}.tool_name",
        _sqlite_json(f"{row}.arguments"),
        f"{row}.status_message",
        _sqlite_json(f"{row}.result"),
        _sqlite_json(f"{row}.error"),
        f"COALESCE((SELECT username FROM auth_user WHERE id = {row}.started_by_id), '')",
    ]
    if agent:
        parts.append(f"COALESCE((SELECT name FROM tasksapp_agent WHERE id = {row}.agent_id), '')")
    return f"substr({" || ' ' || ".join(parts)}, 1, {DOCUMENT_CHARS})"


def _sqlite(backfill: bool, agent: bool) -> list[str]:
    watched = AGENT_WATCHED if agent else WATCHED
    changed = " OR ".join(f"OLD.{column} IS NOT NEW.{column}" for column in watched)
    statements = [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5(document, tokenize = 'unicode61 "
        "remove_diacritics 2')",
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_insert AFTER INSERT ON tasksapp_remotetask BEGIN "
        f"INSERT INTO {TABLE}(rowid, document) VALUES (NEW.id, {_sqlite_document('NEW', agent)}); END",
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_update AFTER UPDATE OF {', '.join(watched)} "
        f"ON tasksapp_remotetask WHEN {changed} BEGIN "
        f"DELETE FROM {TABLE} WHERE rowid = OLD.id; "
        f"INSERT INTO {TABLE}(rowid, document) VALUES (NEW.id, {_sqlite_document('NEW', agent)}); END",
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_delete AFTER DELETE ON tasksapp_remotetask BEGIN "
        f"DELETE FROM {TABLE} WHERE rowid = OLD.id; END",
    ]
    if backfill:
        statements += [
            f"DELETE FROM {TABLE}",
            f"INSERT INTO {TABLE}(rowid, document) SELECT t.id, {_sqlite_document('t', agent)} "
            "FROM tasksapp_remotetask t",
        ]
    return statements


# --- PostgreSQL: tsvector + GIN ---------------------------------------------------------------


# Punctuation becomes a space before parsing, so PostgreSQL splits words where SQLite's unicode61 does
# (its parser would otherwise keep `a_b`, `5/60` or `example.com` whole).
def _pg_document(agent: bool) -> str:
    parts = [
        "NEW.tool_name",
        "tasksapp_json_text(NEW.arguments)",
        "NEW.status_message",
        "tasksapp_json_text(NEW.result)",
        "tasksapp_json_text(NEW.error)",
        "(SELECT username FROM auth_user WHERE id = NEW.started_by_id)",
    ]
    if agent:
        parts.append("(SELECT name FROM tasksapp_agent WHERE id = NEW.agent_id)")
    return (
        f"to_tsvector('simple', regexp_replace(left(concat_ws(' ', {', '.join(parts)}), {DOCUMENT_CHARS}), "
        "'[[:punct:][:space:]]+', ' ', 'g'))"
    )


def _postgresql(backfill: bool, agent: bool) -> list[str]:
    watched = AGENT_WATCHED if agent else WATCHED
    changed = " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in watched)
    document = _pg_document(agent)
    statements = [
        f"CREATE TABLE IF NOT EXISTS {TABLE} (task_id bigint PRIMARY KEY, document tsvector NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_document ON {TABLE} USING gin (document)",
        "CREATE OR REPLACE FUNCTION tasksapp_json_text(value jsonb) RETURNS text "
        "LANGUAGE sql IMMUTABLE AS $$ "
        "SELECT string_agg(v #>> '{}', ' ') FROM jsonb_path_query(value, "
        '\'strict $.** ? (@.type() == "string" || @.type() == "number")\') AS v $$',
        f"CREATE OR REPLACE FUNCTION {TABLE}_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"INSERT INTO {TABLE}(task_id, document) VALUES (NEW.id, {document}) "
        "ON CONFLICT (task_id) DO UPDATE SET document = EXCLUDED.document; RETURN NULL; END $$",
        f"CREATE OR REPLACE FUNCTION {TABLE}_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"DELETE FROM {TABLE} WHERE task_id = OLD.id; RETURN NULL; END $$",
        f"CREATE OR REPLACE TRIGGER {TABLE}_insert AFTER INSERT ON tasksapp_remotetask "
        f"FOR EACH ROW EXECUTE FUNCTION {TABLE}_write()",
        f"CREATE OR REPLACE TRIGGER {TABLE}_update AFTER UPDATE OF {', '.join(watched)} "
        f"ON tasksapp_remotetask FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION {TABLE}_write()",
        f"CREATE OR REPLACE TRIGGER {TABLE}_delete AFTER DELETE ON tasksapp_remotetask "
        f"FOR EACH ROW EXECUTE FUNCTION {TABLE}_delete()",
    ]
    if backfill:
        statements.append(
            f"INSERT INTO {TABLE}(task_id, document) SELECT NEW.id, {document} "
            "FROM tasksapp_remotetask NEW ON CONFLICT (task_id) DO UPDATE SET document = EXCLUDED.document"
        )
    return statements

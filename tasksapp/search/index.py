"""The full-text index of tasks: an FTS5 table on SQLite, a tsvector table with a GIN index on PostgreSQL.

Both are kept in step by database triggers on tasksapp_remotetask, so every writer (services, the
worker, bulk inserts, the admin) is covered without code of its own. A document holds the tool name,
the string and number values of the arguments, the status message, the string and number values of
the result and of the error, and the username of who started the task, cut at DOCUMENT_CHARS.
Punctuation (including `_`) separates words on both vendors, so `slow` finds `slow_count`.

Never indexed: the task id, the input keys and `raw` (bearer secrets, or places a server echoes them).
A renamed user is found under the new name once the task's document is next rewritten.
"""

from typing import Any

TABLE = "tasksapp_task_search"
DOCUMENT_CHARS = 100_000
WATCHED = ("tool_name", "arguments", "status_message", "result", "error", "started_by_id")


def install(connection: Any, *, backfill: bool) -> None:
    """Create the index table and its triggers if missing (idempotent); `backfill` indexes every task."""
    if connection.vendor not in ("sqlite", "postgresql"):
        return  # another vendor: search falls back to substring matching (tasksapp.search.query)
    statements = _sqlite(backfill) if connection.vendor == "sqlite" else _postgresql(backfill)
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def uninstall(connection: Any) -> None:
    kinds = ("insert", "update", "delete")
    if connection.vendor == "postgresql":
        drops = [f"DROP TRIGGER IF EXISTS {TABLE}_{kind} ON tasksapp_remotetask" for kind in kinds]
        drops += [f"DROP FUNCTION IF EXISTS {TABLE}_{kind}()" for kind in ("write", "delete")]
        drops += ["DROP FUNCTION IF EXISTS tasksapp_json_text(jsonb)"]
    elif connection.vendor == "sqlite":
        drops = [f"DROP TRIGGER IF EXISTS {TABLE}_{kind}" for kind in kinds]
    else:
        return
    with connection.cursor() as cursor:
        for statement in [*drops, f"DROP TABLE IF EXISTS {TABLE}"]:
            cursor.execute(statement)


# --- SQLite: FTS5 -----------------------------------------------------------------------------


def _sqlite_json(column: str) -> str:
    return (
        f"COALESCE((SELECT group_concat(value, ' ') FROM json_tree({column}) "
        "WHERE type IN ('text', 'integer', 'real')), '')"
    )


def _sqlite_document(row: str) -> str:
    parts = [
        f"{row}.tool_name",
        _sqlite_json(f"{row}.arguments"),
        f"{row}.status_message",
        _sqlite_json(f"{row}.result"),
        _sqlite_json(f"{row}.error"),
        f"COALESCE((SELECT username FROM auth_user WHERE id = {row}.started_by_id), '')",
    ]
    return f"substr({" || ' ' || ".join(parts)}, 1, {DOCUMENT_CHARS})"


def _sqlite(backfill: bool) -> list[str]:
    changed = " OR ".join(f"OLD.{column} IS NOT NEW.{column}" for column in WATCHED)
    statements = [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5(document, tokenize = 'unicode61 "
        "remove_diacritics 2')",
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_insert AFTER INSERT ON tasksapp_remotetask BEGIN "
        f"INSERT INTO {TABLE}(rowid, document) VALUES (NEW.id, {_sqlite_document('NEW')}); END",
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_update AFTER UPDATE OF {', '.join(WATCHED)} "
        f"ON tasksapp_remotetask WHEN {changed} BEGIN "
        f"DELETE FROM {TABLE} WHERE rowid = OLD.id; "
        f"INSERT INTO {TABLE}(rowid, document) VALUES (NEW.id, {_sqlite_document('NEW')}); END",
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_delete AFTER DELETE ON tasksapp_remotetask BEGIN "
        f"DELETE FROM {TABLE} WHERE rowid = OLD.id; END",
    ]
    if backfill:
        statements += [
            f"DELETE FROM {TABLE}",
            f"INSERT INTO {TABLE}(rowid, document) SELECT t.id, {_sqlite_document('t')} "
            "FROM tasksapp_remotetask t",
        ]
    return statements


# --- PostgreSQL: tsvector + GIN ---------------------------------------------------------------

# Punctuation becomes a space before parsing, so PostgreSQL splits words where SQLite's unicode61 does
# (its parser would otherwise keep `a_b`, `5/60` or `example.com` whole).
_PG_DOCUMENT = (
    "to_tsvector('simple', regexp_replace(left(concat_ws(' ', NEW.tool_name, "
    "tasksapp_json_text(NEW.arguments), "
    "NEW.status_message, tasksapp_json_text(NEW.result), tasksapp_json_text(NEW.error), "
    f"(SELECT username FROM auth_user WHERE id = NEW.started_by_id)), {DOCUMENT_CHARS}), "
    "'[[:punct:][:space:]]+', ' ', 'g'))"
)


def _postgresql(backfill: bool) -> list[str]:
    changed = " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in WATCHED)
    statements = [
        f"CREATE TABLE IF NOT EXISTS {TABLE} (task_id bigint PRIMARY KEY, document tsvector NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_document ON {TABLE} USING gin (document)",
        "CREATE OR REPLACE FUNCTION tasksapp_json_text(value jsonb) RETURNS text "
        "LANGUAGE sql IMMUTABLE AS $$ "
        "SELECT string_agg(v #>> '{}', ' ') FROM jsonb_path_query(value, "
        '\'strict $.** ? (@.type() == "string" || @.type() == "number")\') AS v $$',
        f"CREATE OR REPLACE FUNCTION {TABLE}_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"INSERT INTO {TABLE}(task_id, document) VALUES (NEW.id, {_PG_DOCUMENT}) "
        "ON CONFLICT (task_id) DO UPDATE SET document = EXCLUDED.document; RETURN NULL; END $$",
        f"CREATE OR REPLACE FUNCTION {TABLE}_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"DELETE FROM {TABLE} WHERE task_id = OLD.id; RETURN NULL; END $$",
        f"CREATE OR REPLACE TRIGGER {TABLE}_insert AFTER INSERT ON tasksapp_remotetask "
        f"FOR EACH ROW EXECUTE FUNCTION {TABLE}_write()",
        f"CREATE OR REPLACE TRIGGER {TABLE}_update AFTER UPDATE OF {', '.join(WATCHED)} "
        f"ON tasksapp_remotetask FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION {TABLE}_write()",
        f"CREATE OR REPLACE TRIGGER {TABLE}_delete AFTER DELETE ON tasksapp_remotetask "
        f"FOR EACH ROW EXECUTE FUNCTION {TABLE}_delete()",
    ]
    if backfill:
        statements.append(
            f"INSERT INTO {TABLE}(task_id, document) SELECT NEW.id, {_PG_DOCUMENT} "
            "FROM tasksapp_remotetask NEW ON CONFLICT (task_id) DO UPDATE SET document = EXCLUDED.document"
        )
    return statements

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class TasksappConfig(AppConfig):
    name = "tasksapp"
    verbose_name = "MCP tasks"

    def ready(self) -> None:
        # Imported for their side effects: the deploy checks; the logout and deactivation signals
        # that close live sockets.
        from tasksapp import checks, counts, events  # noqa: F401

        post_migrate.connect(_search_triggers, sender=self)
        # A migration that rebuilds the task table on SQLite drops its triggers: put them back.
        post_migrate.connect(counts.on_post_migrate, sender=self)


def _search_triggers(using: str, **kwargs: Any) -> None:
    """Put the search index's triggers back if a migration rebuilt tasksapp_remotetask (SQLite does that
    for many column changes, and dropping a table drops its triggers). Idempotent."""
    from django.db import connections
    from django.db.migrations.recorder import MigrationRecorder

    from tasksapp.search import index

    connection = connections[using]
    if "tasksapp_remotetask" in connection.introspection.table_names():
        # The index as the applied migrations define it (0020 added the agent).
        agent = ("tasksapp", index.AGENT_MIGRATION) in MigrationRecorder(connection).applied_migrations()
        index.install(connection, backfill=False, agent=agent)

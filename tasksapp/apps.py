from django.apps import AppConfig
from django.db.models.signals import post_migrate


class TasksappConfig(AppConfig):
    name = "tasksapp"
    verbose_name = "MCP tasks"

    def ready(self) -> None:
        from tasksapp import (
            checks,  # noqa: F401 -- registers the deploy checks
            counts,
        )

        # A migration that rebuilds the task table on SQLite drops its triggers: put them back.
        post_migrate.connect(counts.on_post_migrate, sender=self)

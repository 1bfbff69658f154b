from django.apps import AppConfig


class TasksappConfig(AppConfig):
    name = "tasksapp"
    verbose_name = "MCP tasks"

    def ready(self) -> None:
        # Imported for their side effects: the deploy checks; the logout and deactivation signals
        # that close live sockets.
        from tasksapp import checks, events  # noqa: F401

from django.apps import AppConfig


class TasksappConfig(AppConfig):
    name = "tasksapp"
    verbose_name = "MCP tasks"

    def ready(self) -> None:
        from tasksapp import checks  # noqa: F401 -- registers the deploy checks

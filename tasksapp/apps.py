from django.apps import AppConfig


class TasksappConfig(AppConfig):
    name = "tasksapp"
    verbose_name = "MCP tasks"

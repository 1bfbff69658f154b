from typing import Any

from django.core.management.base import CommandError, CommandParser

from tasksapp import services
from tasksapp.management.commands._base import JsonCommand, json_argument
from tasksapp.models import McpServer
from tasksapp.serializers import pending_json, task_json


class Command(JsonCommand):
    help = "Call a tool: prints the immediate result, the input it needs first, or the task it created."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("server", help="the server's name")
        parser.add_argument("tool")
        parser.add_argument("arguments", nargs="?", help="ARGUMENTS_JSON, a JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        server = McpServer.objects.filter(name=options["server"]).first()
        if server is None:
            raise CommandError(f"no server named {options['server']!r}; see `manage.py servers list`")
        arguments = json_argument(options["arguments"], "ARGUMENTS_JSON")
        try:
            started = services.call_start(server=server, tool=options["tool"], arguments=arguments, user=None)
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        data: dict[str, Any]
        if started.task is not None:
            data = {"outcome": "task", "task": task_json(started.task)}
            text = f"task #{started.task.pk} {started.task.status}"
        elif started.pending is not None:
            data = {"outcome": "input_required", "pendingCall": pending_json(started.pending)}
            text = f"input required before the call can start (pending call #{started.pending.pk})"
        else:
            data = {"outcome": "result", "result": started.result}
            text = "result: " + str(started.result)
        self.emit(options, data, text)

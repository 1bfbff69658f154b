from typing import Any

from django.core.management.base import CommandError, CommandParser

from tasksapp import services
from tasksapp.management.commands._base import JsonCommand, header_arguments
from tasksapp.models import McpServer
from tasksapp.serializers import server_json


class Command(JsonCommand):
    help = "Register MCP servers (discovering them first) and list them."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        verbs = parser.add_subparsers(dest="verb", required=True)
        add = verbs.add_parser("add", help="discover a server, then save it")
        add.add_argument("name")
        add.add_argument("url")
        add.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
        add.add_argument("--json", action="store_true")
        listing = verbs.add_parser("list", help="every registered server with its health")
        listing.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["verb"] == "add":
            try:
                server = services.server_create(
                    name=options["name"],
                    url=options["url"],
                    headers=header_arguments(options["header"]),
                    user=None,
                )
            except services.ServiceError as exc:
                raise CommandError(str(exc)) from None
            data = server_json(server)
            tasks = "tasks" if server.tasks_supported else "no tasks"
            self.emit(options, data, f"added {server.name}: {server.era}, {tasks}, {len(server.tools)} tools")
            return
        servers = list(McpServer.objects.all())
        lines = [f"{s.name:20} {s.health:12} {s.era or '?':7} {s.url}" for s in servers]
        self.emit(options, [server_json(s) for s in servers], "\n".join(lines) or "no servers")

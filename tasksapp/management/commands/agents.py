from typing import Any

from django.core.management.base import CommandError, CommandParser

from tasksapp import services
from tasksapp.management.commands._base import JsonCommand
from tasksapp.models import Agent, McpServer
from tasksapp.serializers import agent_json
from tasksapp.services.agents import agent_create, agent_revoke


class Command(JsonCommand):
    help = "Agents that call tools through the gateway: add one (its token is printed once), list, revoke."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        verbs = parser.add_subparsers(dest="verb", required=True)
        add = verbs.add_parser("add", help="a new agent; its bearer token is the last line printed")
        add.add_argument("name")
        add.add_argument("--server", action="append", default=[], help="a server it may use, repeatable")
        add.add_argument("--description", default="")
        add.add_argument("--rate-limit", type=int, default=None, help="requests a minute (default 600)")
        add.add_argument("--json", action="store_true", help='print {"token": …, "agent": …}')
        listing = verbs.add_parser("list", help="every agent, its servers and whether it is revoked")
        listing.add_argument("--json", action="store_true")
        revoke = verbs.add_parser("revoke", help="the agent's token stops working at once")
        revoke.add_argument("name")
        revoke.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["verb"] == "add":
            self._add(options)
        elif options["verb"] == "revoke":
            agent = self._agent(options["name"])
            try:
                agent = agent_revoke(agent=agent, user=None)
            except services.ServiceError as exc:
                raise CommandError(str(exc)) from None
            self.emit(options, agent_json(agent), f"revoked {agent.name}")
        else:
            agents = list(Agent.objects.prefetch_related("servers"))
            lines = [_line(agent) for agent in agents]
            self.emit(options, [agent_json(agent) for agent in agents], "\n".join(lines) or "no agents")

    def _agent(self, name: str) -> Agent:
        agent = Agent.objects.filter(name=name).first()
        if agent is None:
            raise CommandError(f"no agent named {name} (see: manage.py agents list)")
        return agent

    def _add(self, options: dict[str, Any]) -> None:
        names = options["server"]
        servers = list(McpServer.objects.filter(name__in=names))
        missing = sorted(set(names) - {server.name for server in servers})
        if missing:
            raise CommandError(f"no server named {', '.join(missing)} (see: manage.py servers list)")
        try:
            agent, token = agent_create(
                name=options["name"],
                servers=servers,
                user=None,
                description=options["description"],
                rate_limit=options["rate_limit"],
            )
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        scope = ", ".join(server.name for server in servers) or "no server yet"
        text = f"added agent {agent.name} for {scope}; its token (shown only now):\n{token}"
        self.emit(options, {"token": token, "agent": agent_json(agent)}, text)


def _line(agent: Agent) -> str:
    state = "revoked" if agent.revoked_at else "active"
    servers = ",".join(server.name for server in agent.servers.all()) or "-"
    return f"{agent.name:20} {state:8} {agent.token_hint}…  {servers}"

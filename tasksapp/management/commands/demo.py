"""`python manage.py demo`: the whole dashboard in one process, on the embedded default.

The reference MCP server (in a thread), the worker and Daphne share one event loop: Daphne's
Twisted reactor runs on asyncio, so the worker is simply another task on that loop. Ctrl-C
stops the worker (leases released), the reference server's streams, and Daphne, in that order.
"""

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasksapp import services
from tasksapp.models import McpServer


class Command(BaseCommand):
    help = (
        "Run the reference MCP server, the worker and the dashboard in one process (SQLite, in-memory layer)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000, help="the dashboard's port")
        parser.add_argument("--mcp-port", type=int, default=8765, help="the reference MCP server's port")
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", help="default: a new random one, printed")

    def handle(self, *args: Any, **options: Any) -> None:
        # Imported here: daphne.server installs Twisted's asyncio reactor on import.
        from daphne.server import Server, twisted_loop

        from tasksapp.demoserver.server import run_in_thread
        from tasksapp.engine.worker import Worker

        call_command("migrate", verbosity=0, interactive=False)
        try:
            mcp = run_in_thread(host=options["host"], port=options["mcp_port"], poll_interval_ms=500)
        except RuntimeError as exc:
            raise CommandError(f"{exc}: is port {options['mcp_port']} taken? Use --mcp-port.") from None
        password = self._demo_user(options["username"], options["password"])
        self._register(mcp.url)

        from dashboard.asgi import application

        worker = Worker(name="demo-worker")
        running = twisted_loop.create_task(worker.run())
        url = f"http://{options['host']}:{options['port']}/"
        self.stdout.write(
            f"\nMCP Tasks Dashboard: {url}\n  log in as {options['username']} / {password}\n"
            f"  reference MCP server: {mcp.url}\n  database: {settings.DATABASES['default']['NAME']}\n"
            "  Ctrl-C stops everything.\n"
        )
        self.stdout.flush()
        server = Server(
            application=application,
            endpoints=[f"tcp:port={options['port']}:interface={options['host']}"],
            signal_handlers=True,
            verbosity=0,
        )
        self._stop_before_reactor(worker, running, mcp)
        server.run()
        self.stdout.write("stopped cleanly")

    def _demo_user(self, username: str, password: str | None) -> str:
        password = password or secrets.token_urlsafe(9)
        user, _ = User.objects.get_or_create(username=username, defaults={"is_staff": True})
        user.is_staff = True
        user.set_password(password)
        user.save()
        user.groups.add(Group.objects.get(name="admin"))
        return password

    def _register(self, url: str) -> None:
        server = McpServer.objects.filter(name="reference").first()
        if server is None:
            services.server_create(name="reference", url=url, headers={}, user=None)
        elif server.url != url:
            services.server_update(server=server, url=url, headers=None, enabled=True, user=None)

    def _stop_before_reactor(self, worker: Any, running: Any, mcp: Any) -> None:
        from twisted.internet import defer, reactor

        async def stop() -> None:
            worker.stop()
            await running
            mcp.stop()

        reactor.addSystemEventTrigger(  # type: ignore[attr-defined]
            "before", "shutdown", lambda: defer.Deferred.fromFuture(running.get_loop().create_task(stop()))
        )

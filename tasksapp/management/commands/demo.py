"""`python manage.py demo`: the whole dashboard in one process, on the embedded default.

The reference MCP server (in a thread), the worker and Daphne share one event loop: Daphne's
Twisted reactor runs on asyncio, so the worker is simply another task on that loop. Ctrl-C
stops the worker (leases released), the reference server's streams, and Daphne, in that order.
"""

import asyncio
import contextlib
import errno
import faulthandler
import logging
import os
import secrets
import signal
import socket
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.env import private_dir
from tasksapp import services
from tasksapp.models import McpServer

PASSWORD_FILE = "demo_password"  # noqa: S105 (a file name)


class Command(BaseCommand):
    help = (
        "Run the reference MCP server, the worker and the dashboard in one process (SQLite, in-memory layer)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000, help="the dashboard's port")
        parser.add_argument("--mcp-port", type=int, default=8765, help="the reference MCP server's port")
        parser.add_argument(
            "--mail-port",
            type=int,
            default=8025,
            help="the outbox sink's SMTP port (the demo's email goes there)",
        )
        parser.add_argument(
            "--sink-port",
            type=int,
            default=8026,
            help="the outbox sink's page, which shows what was sent, and its webhook receiver",
        )
        parser.add_argument("--username", default="demo")
        parser.add_argument(
            "--password",
            help="set the demo user's password (default: keep the one in var/demo_password, or make one up)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # Imported here: daphne.server installs Twisted's asyncio reactor on import.
        from daphne.server import Server, twisted_loop

        from tasksapp.demoserver.server import run_in_thread
        from tasksapp.engine.worker import Worker

        ports = ("port", "mcp_port", "mail_port", "sink_port")
        for name in ports:
            _ensure_free(options["host"], options[name], "--" + name.replace("_", "-"))
        if "OUTBOUND_ALLOWED_HOSTS" not in os.environ:
            # Everything the demo talks to is on this machine (docs/security.md).
            from tasksapp.services.outbound import LOOPBACK

            settings.OUTBOUND_ALLOWED_HOSTS = list(LOOPBACK)
        call_command("migrate", verbosity=0, interactive=False)
        try:
            mcp = run_in_thread(
                host=options["host"], port=options["mcp_port"], poll_interval_ms=500, state_file=_task_file()
            )
        except RuntimeError as exc:
            raise CommandError(f"{exc}: is port {options['mcp_port']} taken? Use --mcp-port.") from None
        password = self._demo_user(options["username"], options["password"])
        self._register(mcp.url)

        from dashboard.asgi import application

        worker = Worker(name="demo-worker")
        running = twisted_loop.create_task(worker.run())
        sink = _outbox_sink(options)
        # Notifications are scanned and sent by a task on this loop (no thread of its own: one made
        # Ctrl-C hang under load); email goes to the sink unless EMAIL_HOST names a real server.
        from tasksapp.notify.drainer import demo_notifier

        notifier = twisted_loop.create_task(_after(sink.start_task, demo_notifier()))
        url = f"http://{options['host']}:{options['port']}/"
        os.environ.setdefault("NOTIFY_BASE_URL", url)  # the links in its messages lead back here
        self.stdout.write(
            f"\nMCP Tasks Dashboard: {url}\n  log in as {options['username']} / {password}\n"
            f"  reference MCP server: {mcp.url} (its tasks kept in {_task_file()})\n"
            f"  email and webhooks: {_outbox_line(sink)}\n"
            f"  database: {settings.DATABASES['default']['NAME']}\n"
            "  Ctrl-C stops everything.\n"
        )
        self.stdout.flush()
        # Ctrl-C, or SIGINT from a script, stops everything below. A process started in the background
        # of a non-interactive shell (`manage.py demo &`, a CI job) inherits SIGINT ignored, and Twisted
        # then leaves it ignored: the demo could be stopped only by SIGKILL. Take SIGINT back.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        server = Server(
            application=application,
            endpoints=[f"tcp:port={options['port']}:interface={options['host']}"],
            signal_handlers=True,
            verbosity=0,
        )
        self._stop_before_reactor(worker, running, mcp, notifier, sink.sink)
        server.run()
        if not server.listening_addresses:  # taken between the check above and now
            raise CommandError(f"Could not listen on {url}: {_BUSY_HINT.format(flag='--port')}")
        faulthandler.cancel_dump_traceback_later()
        self.stdout.write("stopped cleanly")
        self.stdout.flush()

    def _demo_user(self, username: str, password: str | None) -> str:
        """Keep the demo user's password across restarts (open browsers stay logged in).

        --password sets it (the same one again changes nothing); otherwise the one kept in
        var/demo_password is reused, and a new one is made up only for a new user. A password
        changed elsewhere (the admin site) is left alone.
        Superuser: the README sends the demo user to the admin site to assign roles.
        """
        stored_at = Path(settings.VAR_DIR) / PASSWORD_FILE
        user, created = User.objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        kept = stored_at.read_text().strip() if stored_at.exists() else ""
        shown = password
        if password is None and not created and user.has_usable_password():
            if kept and user.check_password(kept):
                shown = kept
            else:
                shown = f"(unchanged, not the one in {stored_at}: use --password to set one)"
        elif password is None:
            password = shown = secrets.token_urlsafe(9)
        if password is not None:
            # The same password again (a script, a shell's history) is not set again: a new hash
            # would sign out every browser that is signed in.
            if created or not user.check_password(password):
                user.set_password(password)
            _write_private(stored_at, password)
        user.save()
        user.groups.add(Group.objects.get(name="admin"))
        return str(shown)

    def _register(self, url: str) -> None:
        server = McpServer.objects.filter(name="reference").first()
        if server is None:
            services.server_create(name="reference", url=url, headers={}, user=None)
        elif server.url != url:
            services.server_update(server=server, url=url, headers=None, enabled=True, user=None)

    def _stop_before_reactor(self, worker: Any, running: Any, mcp: Any, notifier: Any, sink: Any) -> None:
        from twisted.internet import defer, reactor

        async def stop() -> None:
            # Ctrl-C that has not ended the process well after every bounded step below: say where each
            # thread is (stderr), so a hang is found rather than guessed at.
            faulthandler.dump_traceback_later(3 * STOP_SECONDS, exit=False)
            notifier.cancel()
            worker.stop()
            # Ctrl-C must always stop the demo: the worker gets a bounded time to finish (release its
            # leases, close its streams); past that it is cancelled, and where it was stuck is logged.
            try:
                await asyncio.wait_for(asyncio.shield(running), STOP_SECONDS)
            except TimeoutError:
                stack = (
                    "".join(traceback.format_stack(running.get_stack()[-1])) if running.get_stack() else ""
                )
                log.warning(
                    "demo: the worker did not stop within %s s; cancelling it. It was at:\n%s",
                    STOP_SECONDS,
                    stack,
                )
                running.cancel()
                with contextlib.suppress(BaseException):
                    await running
            with contextlib.suppress(BaseException):
                await notifier
            await sink.stop()
            mcp.stop()

        # Twisted types the reactor by its zope Interface, whose methods have no `self`: without the
        # mypy-zope plugin mypy shifts every argument by one. The call itself is right.
        reactor.addSystemEventTrigger(
            "before",
            "shutdown",  # type: ignore[arg-type]
            lambda: defer.Deferred.fromFuture(running.get_loop().create_task(stop())),
        )


STOP_SECONDS = 10.0
TASK_FILE = "reference-server-tasks.json"
SINK_FOLDER = "demo-outbox"
EMAIL_TIMEOUT_SECONDS = 10
log = logging.getLogger(__name__)


@dataclass
class _StartedSink:
    sink: Any
    start_task: Any


def _outbox_sink(options: dict[str, Any]) -> _StartedSink:
    """The outbox sink (tasksapp/notify/sink.py) on loopback, started on the demo's loop; email is
    pointed at it unless EMAIL_HOST is set, and its page is shown on the notifications page."""
    from daphne.server import twisted_loop

    from tasksapp.notify.sink import Sink

    sink = Sink(folder=Path(settings.VAR_DIR) / SINK_FOLDER)
    host = options["host"]
    start = twisted_loop.create_task(sink.start(host, options["mail_port"], options["sink_port"]))
    shown = f"[{host}]" if ":" in host else host
    settings.DEMO_SINK_URL = f"http://{shown}:{options['sink_port']}/"
    if "EMAIL_HOST" not in os.environ:
        settings.EMAIL_HOST, settings.EMAIL_PORT = host, options["mail_port"]
        settings.EMAIL_USE_TLS, settings.EMAIL_USE_SSL = False, False
        settings.EMAIL_TIMEOUT = EMAIL_TIMEOUT_SECONDS
    return _StartedSink(sink, start)


def _outbox_line(started: _StartedSink) -> str:
    page = settings.DEMO_SINK_URL
    if "EMAIL_HOST" in os.environ:
        return (
            f"email through {settings.EMAIL_HOST}:{settings.EMAIL_PORT}; webhooks can point at {page}webhook"
        )
    return f"sent to the outbox sink, shown at {page} (webhooks can point at {page}webhook)"


async def _after(first: "asyncio.Task[None]", then: Any) -> None:
    """Run `then` once `first` is done (the sink listens before anything is sent to it)."""
    try:
        await first
    except OSError as exc:
        log.error("demo: the outbox sink could not start (%s); email and webhooks to it will fail", exc)
    await then


def _task_file() -> Path:
    """Where the reference server keeps its tasks across restarts: next to the SQLite database (its
    tasks belong with that mirror), else in the var directory."""
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3") and str(database["NAME"]) != ":memory:":
        return Path(database["NAME"]).parent / TASK_FILE
    return Path(settings.VAR_DIR) / TASK_FILE


_BUSY_HINT = (
    "the port is in use (another `manage.py demo` still running?). Stop it, or choose a free port "
    "with {flag}."
)


def _ensure_free(host: str, port: int, flag: str) -> None:
    """Fail before anything starts (and before the password is printed) when a port is taken."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Twisted does
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise CommandError(f"Cannot listen on {host}:{port}: {exc.strerror}.") from None
            raise CommandError(f"{host}:{port}: {_BUSY_HINT.format(flag=flag)}") from None


def _write_private(path: Path, text: str) -> None:
    private_dir(path.parent)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text + "\n")

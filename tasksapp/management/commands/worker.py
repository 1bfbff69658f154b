import asyncio
import gc
import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tasksapp.engine.worker import Worker


class Command(BaseCommand):
    help = "Keep the task mirror fresh: poll every active task, listen for pushes, hold leases."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="poll every held task once, then exit")
        parser.add_argument("--duration", type=float, help="run this many seconds, then stop cleanly")
        parser.add_argument("--name", help="worker name in heartbeats and leases (default host:pid)")
        parser.add_argument("--no-listen", action="store_true", help="poll only; open no listen streams")

    def handle(self, *args: Any, **options: Any) -> None:
        # Django, the client and the settings are long-lived: keep them out of every collection.
        gc.collect()
        gc.freeze()
        asyncio.run(self._run(options))

    async def _run(self, options: dict[str, Any]) -> None:
        worker = Worker(name=options["name"], listen=not options["no_listen"])
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, worker.stop)
        self.stdout.write(f"worker {worker.name} started", ending="\n")
        self.stdout.flush()
        from tasksapp.notify import drainer  # notifications on their own thread

        _, stop_notify = drainer.start()
        try:
            await worker.run(duration=options["duration"], once=options["once"])
        finally:
            stop_notify.set()
        self.stdout.write(
            f"worker {worker.name} stopped: {worker.stats.polls} polls, {worker.stats.pushes} pushes, "
            f"{worker.stats.changes} changes"
        )

from typing import Any

from django.conf import settings
from django.core.management.base import CommandParser

from tasksapp.management.commands._base import JsonCommand
from tasksapp.retention import purge

LABELS = {
    "tasks": "finished tasks",
    "events": "task events",
    "input_requests": "input requests",
    "audit": "audit rows",
    "outbox": "outbox rows",
    "sessions": "sessions",
}
SETTINGS = {
    "tasks": "RETAIN_TASKS_DAYS",
    "events": "RETAIN_TASKS_DAYS",
    "input_requests": "RETAIN_TASKS_DAYS",
    "audit": "RETAIN_AUDIT_DAYS",
    "outbox": "RETAIN_OUTBOX_DAYS",
    "sessions": "RETAIN_SESSIONS_DAYS",
}


class Command(JsonCommand):
    help = "Delete what is older than the retention settings (RETAIN_*_DAYS), in short batches."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--dry-run", action="store_true", help="print what would be deleted, delete nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        dry = options["dry_run"]
        done = purge.count() if dry else purge.purge()
        lines = []
        for kind, label in LABELS.items():
            days = getattr(settings, SETTINGS[kind])
            kept = f"kept {days} days" if days else "kept forever"
            lines.append(f"{done.counts[kind]:>10} {label} ({SETTINGS[kind]}: {kept})")
        head = "would delete (dry run):" if dry else f"deleted in {done.batches} batches:"
        data = {"dry_run": dry, **done.as_dict()}
        self.emit(options, data, "\n".join([head, *lines]))

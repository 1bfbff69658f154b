"""Keeping the reference server's tasks across a restart: one JSON file, rewritten after changes.

A real server that keeps its tasks (a database, a queue) behaves so; `manage.py demo` keeps the
file next to its database, so a restarted demo still knows every task its dashboard mirrors.
Writes are atomic (a new file renamed over the old) and private (mode 0600: task ids are bearer
secrets). A file that cannot be read is set aside, never trusted half-way.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from .protocol import JsonObject

logger = logging.getLogger(__name__)

FORMAT = 1
_FIELDS = (
    "task_id",
    "status",
    "status_message",
    "ttl_ms",
    "poll_interval_ms",
    "input_requests",
    "result",
    "error",
    "tool",
    "arguments",
    "capabilities",
)


def dump(record: Any) -> JsonObject:
    """A TaskRecord as JSON: its fields, times as ISO 8601, used input keys as a sorted list."""
    saved: JsonObject = {name: getattr(record, name) for name in _FIELDS}
    saved["created_at"] = record.created_at.isoformat()
    saved["last_updated_at"] = record.last_updated_at.isoformat()
    saved["used_keys"] = sorted(record.used_keys)
    return saved


def times(saved: JsonObject) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(saved["created_at"]), datetime.fromisoformat(saved["last_updated_at"])


class TaskFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> list[JsonObject]:
        """The saved tasks; none when there is no file. An unreadable file is renamed *.unreadable."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT or not isinstance(data.get("tasks"), list):
                raise ValueError(f"not a format-{FORMAT} task file")
            tasks = [task for task in data["tasks"] if isinstance(task, dict)]
            for task in tasks:
                times(task)
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            aside = self.path.with_name(self.path.name + ".unreadable")
            logger.warning("cannot read the saved tasks in %s (%s); set aside as %s", self.path, exc, aside)
            self.path.replace(aside)
            return []
        return tasks

    def save(self, records: Iterable[Any]) -> None:
        """Write every record (atomic: the file is whole, old or new, whenever the process stops)."""
        body = json.dumps({"format": FORMAT, "tasks": [dump(record) for record in records]})
        partial = self.path.with_name(self.path.name + ".partial")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(body)
        partial.replace(self.path)

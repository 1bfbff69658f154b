"""The only code that knows channel-layer group names. Publishes ids of what changed, after commit."""

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)

TASKS = "tasks"  # every task change: lists, overview tiles
INBOX = "inbox"  # input requests opened or closed
SERVERS = "servers"  # server health and discovery
WORKERS = "workers"  # nudges for workers: poll a task soon, re-listen


def task_group(task_id: int) -> str:
    return f"task-{task_id}"


def publish_task_changed(task_id: int, *, inbox: bool = False) -> None:
    """After the current transaction commits, tell every page showing this task to re-read it."""
    message = {"type": "task.changed", "id": task_id}
    # The task's own page first: the aggregate pages are slower to render and can wait.
    groups = [task_group(task_id), *([INBOX] if inbox else []), TASKS]
    transaction.on_commit(lambda: _send(groups, message))


def publish_server_changed(server_id: int) -> None:
    transaction.on_commit(lambda: _send([SERVERS], {"type": "server.changed", "id": server_id}))


def nudge_workers(task_id: int) -> None:
    """Ask whichever worker holds this task to poll it now (after an answer or a cancel)."""
    transaction.on_commit(lambda: _send([WORKERS], {"type": "task.nudge", "id": task_id}))


def _send(groups: list[str], message: dict[str, object]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    for group in groups:
        try:
            async_to_sync(layer.group_send)(group, message)
        except Exception:  # a broken channel layer must never undo or break a committed change
            log.exception("could not publish %s to %s", message.get("type"), group)

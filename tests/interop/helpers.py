"""Driving the dashboard the way an operator does: manage.py commands (in-process) and the worker."""

import json
from io import StringIO
from typing import Any

from django.core.management import call_command

from tasksapp.models import RemoteTask


def manage(*args: str) -> Any:
    """`manage.py ARGS --json`, parsed."""
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


def status_is(task_id: int, *statuses: str) -> bool:
    return RemoteTask.objects.get(pk=task_id).status in statuses

"""The task list's row and stale flag for templates (task_list.html#task-row, #stale-flag), which the
live list renders: built by tasksapp/presenters/task_rows.py, as the page's own rows are."""

from datetime import datetime
from typing import Any

from django import template
from django.utils.safestring import SafeString

from tasksapp.presenters import task_rows

register = template.Library()


@register.simple_tag
def task_row(task: Any, oob: bool = False, picked_all: bool = False) -> SafeString:
    return task_rows.row_html(task, oob=bool(oob), picked_all=bool(picked_all))


@register.simple_tag
def stale_flag(server: Any, failing_since: datetime | None) -> SafeString:
    return task_rows.stale_flag(server, failing_since)

"""Rows and people for the operator-feature tests (search, exports, audit, archive, metrics)."""

import secrets
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tasksapp.models import Agent, McpServer, RemoteTask, ServerHealth


def person(name: str, role: str) -> User:
    user = User.objects.create_user(name)  # no password: force_login needs none, and hashing one is slow
    user.groups.add(Group.objects.get(name=role))
    return user


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def server(name: str = "alpha") -> McpServer:
    return McpServer.objects.create(name=name, url=f"http://127.0.0.1:9/{name}", era="modern")


def task(
    on: McpServer,
    tool: str = "slow_count",
    *,
    remote_id: str | None = None,
    started: datetime | None = None,
    took: float | None = None,
    **fields: Any,
) -> RemoteTask:
    """A mirrored task as the services would leave it; `took` seconds finishes it (completed)."""
    row = RemoteTask(server=on, tool_name=tool, status=fields.pop("status", "working"), **fields)
    row.set_remote_id(remote_id or secrets.token_urlsafe(24))
    row.save()
    if started is not None or took is not None:
        start = started or timezone.now()
        finish = start + timedelta(seconds=took) if took is not None else None
        status = "completed" if took is not None else row.status
        RemoteTask.objects.filter(pk=row.pk).update(created_at=start, finished_at=finish, status=status)
        row.refresh_from_db()
    return row


def listed(html: str) -> list[int]:
    """Task ids in the order the task list shows them."""
    import re

    return [int(pk) for pk in re.findall(r'<tr id="task-row-(\d+)"', html)]


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a /metrics page, by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def servers_of_every_health(agent_name: str) -> tuple[McpServer, McpServer, McpServer, Agent]:
    """A healthy server, a disabled one, one failing for three minutes (for worker w1 too, which w2
    reaches), and an agent named `agent_name`: what a task's stale flag and starter show."""
    alpha, off, failing = server(), server("off"), server("failing")
    McpServer.objects.filter(pk=off.pk).update(enabled=False)
    since = timezone.now() - timedelta(minutes=3)
    McpServer.objects.filter(pk=failing.pk).update(consecutive_failures=2, failing_since=since)
    ServerHealth.objects.create(server=failing, worker="w1", consecutive_failures=1, failing_since=since)
    return alpha, off, failing, Agent.objects.create(name=agent_name, token_hash="x" * 64)

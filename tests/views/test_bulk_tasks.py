"""Bulk actions on tasks: one confirmation page, role-checked per task, audited,
each action done once even when the confirmation is submitted twice."""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from tasksapp import services
from tasksapp.models import McpServer, OperatorAction, RemoteTask
from tests.peers.launch import RunningPeer

pytestmark = pytest.mark.django_db(transaction=True)


def client_for(role: str) -> Client:
    user = User.objects.create_user(role)
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def start(server: McpServer, tool: str, **arguments: object) -> RemoteTask:
    task = services.call_start(server=server, tool=tool, arguments=arguments, user=None).task
    assert task is not None
    return task


def test_bulk_cancel_confirms_checks_each_task_and_cancels_each_once(
    demo_registered: McpServer, demo_server: RunningPeer
) -> None:
    running = [start(demo_registered, "run_forever", delay=30) for _ in range(2)]
    finished = start(demo_registered, "run_forever", delay=30)
    demo_server.clear()  # the server is shared with earlier tests: count this test's cancels only
    RemoteTask.objects.filter(pk=finished.pk).update(status="completed")
    ids = [str(task.pk) for task in [*running, finished]]
    operator = client_for("operator")
    listing = operator.get(reverse("tasks:list")).content.decode()
    assert f'name="tasks" value="{running[0].pk}" form="bulk-tasks"' in listing

    viewer = client_for("viewer")
    refused = viewer.get(reverse("tasks:bulk"), {"action": "cancel", "tasks": ids}).content.decode()
    assert refused.count("left alone: Your role does not allow this") == 3
    token = re.search(r'name="token" value="([^"]+)"', refused)
    assert token
    viewer.post(reverse("tasks:bulk"), {"action": "cancel", "tasks": ids, "token": token.group(1)})
    assert demo_server.method_counts().get("tasks/cancel", 0) == 0

    confirm = operator.get(reverse("tasks:bulk"), {"action": "cancel", "tasks": ids}).content.decode()
    for task in [*running, finished]:
        assert f'id="bulk-task-{task.pk}"' in confirm
    assert confirm.count("left alone: it has already finished") == 1
    token = re.search(r'name="token" value="([^"]+)"', confirm)
    assert token
    fields = {"action": "cancel", "tasks": ids, "token": token.group(1)}
    done = operator.post(reverse("tasks:bulk"), fields, follow=True).content.decode()
    assert "Cancel requested for 2 tasks." in done and "1 was not done" in done
    again = operator.post(reverse("tasks:bulk"), fields, follow=True).content.decode()  # a double submit
    assert "already used; nothing was done again" in again
    assert demo_server.method_counts().get("tasks/cancel", 0) == 2
    cancels = OperatorAction.objects.filter(action="cancel", ok=True)
    assert sorted(cancels.values_list("task_id", flat=True)) == sorted(task.pk for task in running)
    assert all(action.user and action.user.username == "operator" for action in cancels)


def test_bulk_run_again_starts_each_tool_again_with_its_arguments(demo_registered: McpServer) -> None:
    first = start(demo_registered, "slow_count", n=1, delay=0)
    second = start(demo_registered, "run_forever", delay=30)
    operator = client_for("operator")
    ids = [str(first.pk), str(second.pk)]
    confirm = operator.get(reverse("tasks:bulk"), {"action": "rerun", "tasks": ids}).content.decode()
    token = re.search(r'name="token" value="([^"]+)"', confirm)
    assert token and "run again" in confirm
    fields = {"action": "rerun", "tasks": ids, "token": token.group(1)}
    assert (
        "Started 2 tasks again." in operator.post(reverse("tasks:bulk"), fields, follow=True).content.decode()
    )
    operator.post(reverse("tasks:bulk"), fields)  # the same confirmation again: nothing more
    again = RemoteTask.objects.exclude(pk__in=[first.pk, second.pk]).order_by("tool_name")
    assert [(task.tool_name, task.arguments) for task in again] == [
        ("run_forever", second.arguments),
        ("slow_count", first.arguments),
    ]
    assert OperatorAction.objects.filter(action="start", user__username="operator").count() == 2
    for task in RemoteTask.objects.filter(tool_name="run_forever"):
        services.task_cancel(task=task, user=None)

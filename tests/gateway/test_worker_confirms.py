"""The worker stamps when the server last confirmed each gateway task, so the gateway answers from
the mirror instead of asking the server a second time (one poller for any number of agents)."""

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from tasksapp.models import McpServer, RemoteTask
from tests.gateway.support import post, result
from tests.support.engine_helpers import run_worker_until

pytestmark = pytest.mark.django_db(transaction=True)


def polled_at() -> datetime:
    stamp = RemoteTask.objects.get().last_polled_at
    assert stamp is not None
    return stamp


def test_a_worker_poll_of_a_gateway_task_stamps_its_confirmation(
    demo_url: str, token: str, demo_registered: McpServer
) -> None:
    created = result(post(demo_url, token, "tools/call", {"name": "run_forever", "arguments": {"delay": 30}}))
    long_ago = timezone.now() - timedelta(hours=1)
    RemoteTask.objects.update(last_polled_at=long_ago)
    run_worker_until(lambda: polled_at() > long_ago, listen=False)
    assert timezone.now() - polled_at() < timedelta(minutes=1)
    post(demo_url, token, "tasks/cancel", {"taskId": created["taskId"]})


def test_a_worker_poll_of_a_dashboard_task_writes_nothing_of_the_kind(task: RemoteTask) -> None:
    RemoteTask.objects.update(last_confirmed_at=None)
    run_worker_until(lambda: RemoteTask.objects.get().last_confirmed_at is not None, listen=False)
    assert RemoteTask.objects.get().last_polled_at is None

"""What operators see of gateway tasks: the agent as the starter in the list (and its filter), the
overview, the exports and `manage.py tasks show --json`."""

import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from tasksapp import services
from tasksapp.models import Agent, RemoteTask
from tests.gateway.support import post, result

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_gateway_task_names_its_agent_in_the_list_the_filter_exports_and_the_json(
    demo_url: str, bot: tuple[Agent, str], task: RemoteTask
) -> None:
    agent, token = bot
    created = result(post(demo_url, token, "tools/call", {"name": "run_forever", "arguments": {"delay": 30}}))
    mine = RemoteTask.objects.get(agent=agent)
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    listed = client.get("/tasks/").content.decode()
    assert "by agent bot" in listed and f'<option value="{agent.pk}"' in listed
    only = client.get(f"/tasks/?agent={agent.pk}").content.decode()
    assert f"task-row-{mine.pk}" in only and f"task-row-{task.pk}" not in only
    download = client.get("/tasks/export.jsonl", headers={"Sec-Fetch-Site": "same-origin"})
    text = b"".join(download.streaming_content).decode()  # type: ignore[attr-defined]
    rows = [json.loads(line) for line in text.splitlines()]
    exported = {row["id"]: row for row in rows}
    assert (exported[mine.pk]["started_by"], exported[mine.pk]["agent"]) == ("bot", "bot")
    assert exported[task.pk]["agent"] == ""
    out = io.StringIO()
    call_command("tasks", "show", str(mine.pk), "--json", stdout=out)
    shown = json.loads(out.getvalue())
    assert (shown["startedBy"], shown["agent"]) == ("bot", "bot")
    post(demo_url, token, "tasks/cancel", {"taskId": created["taskId"]})
    services.task_cancel(task=task, user=None)


def test_the_overview_counts_a_gateway_task_and_names_its_agent_among_the_longest_running(
    demo_url: str, bot: tuple[Agent, str], task: RemoteTask
) -> None:
    agent, token = bot
    created = result(post(demo_url, token, "tools/call", {"name": "run_forever", "arguments": {"delay": 30}}))
    mine = RemoteTask.objects.get(agent=agent)
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    page = client.get("/").content.decode()
    assert "<b>2</b>" in page.split('data-tile="working"')[1].split("</a>")[0]  # the person's and the agent's
    long_running = page.split('id="long-running"')[1]
    row = long_running.split(f"#{mine.pk} run_forever")[1].split("</tr>")[0]
    assert "by agent bot" in row
    assert "by agent" not in long_running.split(f"#{task.pk} run_forever")[1].split("</tr>")[0]
    post(demo_url, token, "tasks/cancel", {"taskId": created["taskId"]})

"""What the pages say where a new user tripped: one way of writing durations (the page and its live
counters agree), the TTL said once, a fresh server's health, a stopped worker's panel, the answer
buttons named apart from the task's Cancel. (The browser side: tests/e2e/test_design.py.)"""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from tasksapp.models import InputRequest, McpServer, WorkerHeartbeat
from tasksapp.presenters.times import seconds_text
from tests.support.opsdata import logged_in, person, server, task

pytestmark = pytest.mark.django_db

# How app.js writes a duration; the server must write the same (never "0 minutes", "1 hour, 2 minutes").
DURATION = re.compile(r"^(\d+s|\d+m \d+s|\d+h \d+m|\d+d \d+h)$")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59, "59s"), (60, "1m 0s"), (3599, "59m 59s"), (3600, "1h 0m"), (90061, "1d 1h")],
)
def test_durations_have_one_format(seconds: int, text: str) -> None:
    assert seconds_text(seconds) == text


def since_spans(html: str) -> list[str]:
    return re.findall(r'<span data-since="[^"]+" title="[^"]*">([^<]*)</span>', html)


def test_running_times_on_every_page_are_written_as_the_live_counters_write_them() -> None:
    running = task(server(), started=timezone.now() - timedelta(seconds=75))
    client = logged_in(person("vera", "viewer"))
    for path in ("/tasks/", "/", f"/tasks/{running.pk}/"):
        shown = since_spans(client.get(path).content.decode())
        assert shown, path
        assert all(DURATION.match(text) for text in shown), (path, shown)
        minutes, seconds = (int(part) for part in re.findall(r"\d+", shown[0])[:2])
        assert minutes * 60 + seconds >= 75, (path, shown)  # counted from its start, not from now


def test_the_ttl_is_named_once_and_says_when_it_passed() -> None:
    alpha = server()
    now = timezone.now()
    fresh = task(alpha, ttl_ms=600_000, remote_created_at=now)
    gone = task(alpha, ttl_ms=1000, remote_created_at=now - timedelta(minutes=5))
    client = logged_in(person("vera", "viewer"))
    page = client.get(f"/tasks/{fresh.pk}/").content.decode()
    meta = re.search(r'<ul class="meta" id="task-meta">(.*?)</ul>', page, re.S)
    assert meta, page[:3000]
    text = re.sub(r"<[^>]+>", "", meta.group(1))
    assert text.count("TTL") == 1 and re.search(r"TTL (9m 5\ds|10m 0s) left", text), text
    passed = re.sub(r"<[^>]+>", "", client.get(f"/tasks/{gone.pk}/").content.decode())
    assert "TTL TTL" not in passed and "TTL passed" in passed


def test_a_server_that_answered_discovery_is_healthy_at_once(demo_registered: McpServer) -> None:
    assert demo_registered.health == "healthy"
    html = logged_in(person("vera", "viewer")).get("/servers/").content.decode()
    row = re.search(rf'<tr id="server-row-{demo_registered.pk}".*?</tr>', html, re.S)
    assert row and 'class="badge healthy"' in row.group(0), row


def worker(name: str, *, beat: timedelta, stopped: timedelta | None = None) -> WorkerHeartbeat:
    now = timezone.now()
    return WorkerHeartbeat.objects.create(
        worker=name,
        hostname="here",
        pid=1,
        started_at=now - timedelta(hours=1),
        last_beat_at=now - beat,
        stopped_at=None if stopped is None else now - stopped,
        tasks_held=17,
        streams_open=3,
    )


def workers_panel() -> str:
    html = logged_in(person("vera", "viewer")).get("/").content.decode()
    panel = re.search(r'<div class="card" id="workers-panel">(.*?)</table>', html, re.S)
    assert panel, html[:3000]
    return panel.group(1)


def test_a_stopped_worker_shows_no_figures_and_leaves_the_overview() -> None:
    worker("alive", beat=timedelta(seconds=2))
    worker("just-stopped", beat=timedelta(minutes=1), stopped=timedelta(minutes=1))
    worker("stopped-long-ago", beat=timedelta(hours=2), stopped=timedelta(hours=2))
    worker("crashed", beat=timedelta(hours=2))
    panel = workers_panel()
    rows = dict(re.findall(r'<tr data-worker="([^"]+)">(.*?)</tr>', panel, re.S))
    assert set(rows) == {"alive", "just-stopped", "crashed"}
    assert "17 tasks" in rows["alive"] and "3 streams" in rows["alive"]
    assert "stopped" in rows["just-stopped"] and "17 tasks" not in rows["just-stopped"]
    assert "silent" in rows["crashed"] and "17 tasks" not in rows["crashed"]


def test_the_answer_buttons_are_not_named_like_the_task_cancel() -> None:
    owner = task(server(), status="input_required")
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    params = {"message": "Name?", "requestedSchema": schema}
    row = InputRequest(task=owner, method="elicitation/create", params=params)
    row.set_key("k1")
    row.save()
    html = logged_in(person("otto", "operator")).get(f"/tasks/{owner.pk}/").content.decode()
    controls = re.findall(r"<(?:button|a)\b[^>]*>(.*?)</(?:button|a)>", html, re.S)
    buttons = [re.sub(r"<[^>]+>", "", control).strip() for control in controls]
    cancels = [text for text in buttons if "Cancel" in text]
    assert cancels == ["Cancel task…"], buttons
    assert "Dismiss" in buttons and "Decline" in buttons

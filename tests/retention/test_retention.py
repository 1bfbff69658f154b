"""Retention: `manage.py purge` deletes what is older than the RETAIN_* settings in
short batches, only tasks that ended and wait for nobody, and leaves the overview's counts and the
search index right; the worker runs it once a day, one worker of several."""

import io
import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from tasksapp import counts, search, services
from tasksapp.models import (
    Chore,
    InputRequest,
    McpServer,
    NotificationOutbox,
    OperatorAction,
    RemoteTask,
    TaskCount,
    TaskEvent,
    TaskHour,
)
from tasksapp.retention import chores, purge
from tasksapp.sessions import HashedSession
from tests.support.deploy import manage
from tests.support.engine_helpers import run_worker_until
from tests.support.opsdata import logged_in, person, server, task

pytestmark = pytest.mark.django_db(transaction=True)
OLD = timedelta(days=100)


def aged(row: RemoteTask, **fields: object) -> RemoteTask:
    RemoteTask.objects.filter(pk=row.pk).update(**fields)
    row.refresh_from_db()
    return row


def with_history(row: RemoteTask, events: int, *, input_state: str = "answered") -> RemoteTask:
    TaskEvent.objects.bulk_create(
        TaskEvent(task=row, status=row.status, source="poll") for _ in range(events)
    )
    request = InputRequest(task=row, method="elicitation/create", state=input_state)
    request.set_key(f"key-{row.pk}")
    request.save()
    return row


def counts_table() -> set[tuple[object, ...]]:
    buckets = TaskCount.objects.filter(n__gt=0).values_list(
        "server_id", "status", "expired", "is_tool_error", "cancel_requested", "n"
    )
    hours = TaskHour.objects.exclude(started=0, finished=0).values_list("hour", "started", "finished")
    return set(buckets) | set(hours)


def index_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {search.index.TABLE}")
        return int(cursor.fetchone()[0])


@pytest.fixture
def history() -> dict[str, RemoteTask]:
    alpha = server("alpha")
    now = timezone.now()
    long_ago = now - OLD
    rows = {
        "old_done": task(alpha, "purged_done", started=long_ago, took=5),
        "old_failed": aged(task(alpha, "purged_failed"), status="failed", finished_at=long_ago),
        "old_expired": aged(task(alpha, "purged_expired"), expired=True, expired_at=long_ago),
        "old_waiting": aged(task(alpha, "kept_waiting"), status="failed", finished_at=long_ago),
        "old_running": aged(task(alpha, "kept_running"), created_at=long_ago),
        "recent_done": task(alpha, "kept_recent", started=now - timedelta(days=3), took=5),
    }
    for name, row in rows.items():
        with_history(row, 3, input_state="open" if name == "old_waiting" else "answered")
    user = User.objects.create_user("olga")
    for age, state in ((OLD, "sent"), (OLD, "failed"), (OLD, "pending"), (timedelta(days=1), "sent")):
        outbox = NotificationOutbox.objects.create(
            user=user, channel="email", key=f"k-{age.days}-{state}", event="failed", subject="s", text="t",
            state=state,
        )  # fmt: skip
        NotificationOutbox.objects.filter(pk=outbox.pk).update(created_at=now - age)
    for days in (400, 10):
        action = OperatorAction.objects.create(action="start", task=rows["old_done"])
        OperatorAction.objects.filter(pk=action.pk).update(created_at=now - timedelta(days=days))
    HashedSession.objects.create(session_key="a" * 64, session_data="", expire_date=now - timedelta(days=30))
    HashedSession.objects.create(session_key="b" * 64, session_data="", expire_date=now + timedelta(days=3))
    return rows


def test_purge_deletes_what_retention_lets_go_in_batches_and_keeps_counts_and_search_right(
    history: dict[str, RemoteTask],
) -> None:
    dry = io.StringIO()
    call_command("purge", "--dry-run", stdout=dry)
    assert "would delete (dry run):" in dry.getvalue()
    assert "3 finished tasks (RETAIN_TASKS_DAYS: kept 90 days)" in dry.getvalue(), dry.getvalue()
    assert RemoteTask.objects.count() == 6  # a dry run deletes nothing

    done = purge.purge(batch=2)

    kept = set(RemoteTask.objects.values_list("tool_name", flat=True))
    assert kept == {"kept_waiting", "kept_running", "kept_recent"}  # ended, waiting or recent: kept
    assert done.counts == {
        "tasks": 3, "events": 9, "input_requests": 3, "audit": 1, "outbox": 2, "sessions": 1,
    }  # fmt: skip
    assert done.batches >= 6  # two tasks per batch, their events and input requests apart
    assert TaskEvent.objects.count() == 9 and InputRequest.objects.count() == 3
    assert set(NotificationOutbox.objects.values_list("state", flat=True)) == {"pending", "sent"}
    assert OperatorAction.objects.count() == 1 and HashedSession.objects.count() == 1
    # The triggers kept the overview's counts and the search index in step with the deletes.
    kept_counts = counts_table()
    counts.rebuild(connection)
    assert counts_table() == kept_counts
    assert index_rows() == 3
    assert not search.filtered({"q": "purged_done"}).exists()
    assert search.filtered({"q": "kept_recent"}).count() == 1


@override_settings(RETAIN_TASKS_DAYS=0, RETAIN_AUDIT_DAYS=0, RETAIN_OUTBOX_DAYS=0, RETAIN_SESSIONS_DAYS=0)
def test_zero_keeps_every_kind_forever(history: dict[str, RemoteTask]) -> None:
    assert purge.purge().counts == dict.fromkeys(purge.KINDS, 0)
    assert RemoteTask.objects.count() == 6


def test_bad_retention_settings_fail_at_start_naming_the_variable() -> None:
    for env, word in (
        ({"RETAIN_TASKS_DAYS": "-1"}, "RETAIN_TASKS_DAYS=-1 is below its minimum of 0"),
        ({"RETAIN_AUDIT_DAYS": "a year"}, "RETAIN_AUDIT_DAYS='a year' is not a whole number"),
        ({"RETAIN_BATCH": "50000"}, "RETAIN_BATCH=50000 is above 10000"),
    ):
        run = manage("check", **env)
        assert run.returncode == 2 and word in run.stderr, run.stderr[-500:]


def test_one_worker_of_several_claims_the_daily_purge() -> None:
    assert chores.claim("purge", "w1", every=chores.PURGE_EVERY, lease=chores.PURGE_LEASE)
    assert not chores.claim("purge", "w2", every=chores.PURGE_EVERY, lease=chores.PURGE_LEASE)  # held
    chores.finish("purge", "w1", {"tasks": 0})
    assert not chores.claim("purge", "w2", every=chores.PURGE_EVERY, lease=chores.PURGE_LEASE)  # done today
    tomorrow = timezone.now() + timedelta(days=1, seconds=1)
    assert chores.claim("purge", "w2", every=chores.PURGE_EVERY, lease=chores.PURGE_LEASE, now=tomorrow)


def test_the_worker_purges_in_batches_while_it_polls(
    demo_registered: McpServer, history: dict[str, RemoteTask]
) -> None:
    """The worker runs the daily purge itself (its Chore row records the run), and a purge in small
    batches beside it leaves the tasks it polls alone while they run to the end."""
    started = [
        services.call_start(
            server=demo_registered, tool="slow_count", arguments={"n": 6, "delay": 0.2}, user=None
        )
        for _ in range(3)
    ]
    live = [s.task.pk for s in started if s.task is not None]
    assert len(live) == 3
    beside = purge.Purged()
    batches = threading.Event()

    def alongside() -> None:  # another process's `manage.py purge`, a batch at a time
        nonlocal beside
        beside = purge.purge(batch=1, on_batch=batches.set)

    thread = threading.Thread(target=alongside)

    def progress() -> bool:
        if not thread.is_alive() and not batches.is_set():
            thread.start()
        finished = RemoteTask.objects.filter(pk__in=live, status="completed").count() == len(live)
        purged = Chore.objects.filter(name="purge", last_run_at__isnull=False).exists()
        return finished and purged and batches.is_set() and not thread.is_alive()

    run_worker_until(progress, timeout=30, listen=False)
    thread.join()
    assert RemoteTask.objects.filter(pk__in=live, status="completed").count() == 3  # polled to the end
    assert set(RemoteTask.objects.values_list("tool_name", flat=True)) == {
        "kept_waiting", "kept_running", "kept_recent", "slow_count",
    }  # fmt: skip
    run = Chore.objects.get(name="purge").last_result
    assert run["tasks"] + beside.counts["tasks"] == 3  # between them, each old task deleted once


def test_the_overview_says_what_is_kept(history: dict[str, RemoteTask]) -> None:
    page = logged_in(person("vera", "viewer")).get(reverse("tasks:overview")).content.decode()
    assert "Keeping finished tasks 90 days: 6 tasks," in page
    assert "KB in the database" in page or "MB in the database" in page

"""Where a task's time went (tasksapp/lifecycle.py): working, waiting for input, waiting on cancel."""

import csv
import io
import random
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from tasksapp import lifecycle, services
from tasksapp.lifecycle import CANCEL, INPUT, WORKING, compute
from tasksapp.models import TERMINAL, McpServer, RemoteTask, TaskEvent
from tasksapp.presenters.task import task_context
from tasksapp.presenters.times import elapsed
from tests.support.engine_helpers import run_worker_until
from tests.support.opsdata import listed, logged_in, person, task

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_each_status_holds_until_the_next_event_and_a_terminal_one_ends_the_bar() -> None:
    events = [(at(0), "working"), (at(10), "input_required"), (at(40), "working"), (at(50), "completed")]
    life = compute(events, cancel_requested_at=None, now=at(500))
    assert life.totals == {WORKING: 20.0, INPUT: 30.0, CANCEL: 0.0}
    assert [(s.kind, s.x, s.width) for s in life.segments] == [
        (WORKING, 0, 200),
        (INPUT, 200, 600),
        (WORKING, 800, 200),
    ]
    assert life.finished


def test_time_after_a_cancel_request_is_waiting_on_cancel_until_now() -> None:
    events = [(at(0), "working"), (at(5), "working"), (at(20), "input_required")]
    life = compute(events, cancel_requested_at=at(12), now=at(30))
    assert life.totals == {WORKING: 12.0, INPUT: 0.0, CANCEL: 18.0}
    assert [s.kind for s in life.segments] == [WORKING, CANCEL]  # adjacent parts of one kind merge
    assert not life.finished


def test_no_events_no_bar() -> None:
    life = compute([], cancel_requested_at=None, now=at(1))
    assert life.segments == [] and life.total == 0


def test_an_expired_tasks_bar_ends_when_it_expired() -> None:
    events = [(at(0), "working"), (at(1), "working")]
    life = compute(events, cancel_requested_at=None, now=at(2), ended=True)
    assert life.totals[WORKING] == 2.0 and life.finished
    assert compute([(at(0), "working"), (at(5), "working")], cancel_requested_at=None, now=at(2)).total == 2.0


@pytest.mark.django_db(transaction=True)
def test_an_expired_task_has_one_duration_on_its_page_in_the_list_the_export_and_the_sort(
    demo_registered: McpServer,
) -> None:
    started = services.call_start(
        server=demo_registered, tool="short_ttl", arguments={"ttl_ms": 600}, user=None
    )
    assert started.task is not None
    pk = started.task.pk
    run_worker_until(lambda: RemoteTask.objects.get(pk=pk).expired, listen=False)
    # Looked at an hour later: nothing about an expired task may keep counting.
    hour = timedelta(hours=1)
    RemoteTask.objects.filter(pk=pk).update(
        created_at=F("created_at") - hour,
        expired_at=F("expired_at") - hour,
        last_seen_at=F("last_seen_at") - hour,
    )
    TaskEvent.objects.filter(task_id=pk).update(observed_at=F("observed_at") - hour)
    expired = RemoteTask.objects.get(pk=pk)
    took = (expired.expired_at - expired.created_at).total_seconds()  # type: ignore[operator]
    quicker = task(demo_registered, "echo", started=timezone.now() - 2 * hour, took=took / 2)
    longer = task(demo_registered, "echo", started=timezone.now() - 2 * hour, took=took + 5)
    viewer = logged_in(person("vera", "viewer"))

    life = lifecycle.of_task(expired)
    assert life.finished and abs(life.total - took) < 0.5, (life.total, took)
    page = viewer.get(reverse("tasks:detail", args=[pk])).content.decode()
    assert f"ran for {elapsed(expired.created_at, expired.expired_at)}" in page
    listing = viewer.get(reverse("tasks:list"), {"sort": "duration"}).content.decode()
    row = re.search(rf'<tr id="task-row-{pk}".*?data-label="Elapsed"[^>]*>(.*?)</td>', listing, re.S)
    assert row and row.group(1).strip() == elapsed(expired.created_at, expired.expired_at), row
    assert listed(listing)[:3] == [quicker.pk, pk, longer.pk]
    exported = viewer.get(reverse("tasks:export", args=["csv"]), {"sort": "duration"})
    rows = {int(r["id"]): r for r in csv.DictReader(io.StringIO(exported.getvalue().decode("utf-8-sig")))}
    assert float(rows[pk]["duration_seconds"]) == round(took, 3)
    assert rows[pk]["finished_at"] == expired.expired_at.isoformat()  # type: ignore[union-attr]


@pytest.mark.django_db
@pytest.mark.parametrize("events", [3, 60])  # all on the page's timeline (50), or some left out
def test_a_task_pages_bar_is_the_tasks_whether_or_not_its_timeline_shows_every_event(events: int) -> None:
    """The page's bar is computed from the timeline's events when the page shows them all (one
    query less per render); with older events left out it reads every event, as before."""
    server = McpServer.objects.create(name="srv", url="http://127.0.0.1:9/mcp")
    found = RemoteTask(server=server, tool_name="slow_count", status="working")
    found.set_remote_id("remote-life")
    found.save()
    statuses = ["working", "input_required", "working"]
    for n in range(events):
        found.events.create(status=statuses[n % 3], source="poll", observed_at=at(n * 7))
    found.events.create(status="completed", source="poll", observed_at=at(events * 7))  # the bar ends
    shown = task_context(found, AnonymousUser())
    assert bool(shown["events_hidden"]) == (events > 50)
    whole = lifecycle.of_task(found)
    assert shown["life"].totals == whole.totals and shown["life"].segments == whole.segments
    assert whole.totals[INPUT] > 0


def reference_compute(
    events: list[tuple[datetime, str]], *, cancel_requested_at: Any, now: datetime, ended: bool
) -> Any:
    """compute() as it was before it joined a kind's events first: one segment per event, each
    joined to the one before it when of the same kind (the reference for the test below)."""
    life = lifecycle.Lifecycle(finished=ended)
    for index, (start, status) in enumerate(events):
        if status in TERMINAL:
            life.finished = True
            break
        if start >= now:
            break
        end = min(events[index + 1][0], now) if index + 1 < len(events) else now
        for part in lifecycle._split(start, end, status, cancel_requested_at):
            lifecycle._add(life, part)
    lifecycle._lay_out(life)
    return life


def test_joining_a_kinds_events_first_changes_nothing_in_the_bar() -> None:
    """Thousands of random timelines (working, input, terminal events; a cancel; events after the
    end): the same segments, totals and end as one segment per event."""
    rng = random.Random(24)
    statuses = ["working", "working", "input_required", "completed", "failed", "cancelled"]
    for _ in range(3000):
        times = sorted(rng.uniform(0, 100) for _ in range(rng.randint(0, 12)))
        events = [(at(t), rng.choice(statuses)) for t in times]
        cancel = at(rng.uniform(0, 100)) if rng.random() < 0.4 else None
        now, ended = at(rng.uniform(0, 110)), rng.random() < 0.3
        got = compute(events, cancel_requested_at=cancel, now=now, ended=ended)
        want = reference_compute(events, cancel_requested_at=cancel, now=now, ended=ended)
        shape = [(s.kind, s.start, s.end, s.x, s.width) for s in got.segments]
        assert shape == [(s.kind, s.start, s.end, s.x, s.width) for s in want.segments], events
        assert got.finished == want.finished
        assert got.totals == pytest.approx(want.totals, abs=1e-6)
        assert (got.working, got.waiting_input, got.waiting_cancel) == (
            want.working,
            want.waiting_input,
            want.waiting_cancel,
        )


@pytest.mark.django_db
def test_the_events_read_from_the_database_make_the_bar_every_event_makes() -> None:
    """of_task reads only the events where the kind of time changes (a window over the events, in
    SQL): random stored timelines (ties in time, terminal events, events after the end) give the
    bar that all their events give."""
    rng = random.Random(7)
    statuses = ["working", "working", "working", "input_required", "completed", "failed"]
    server = McpServer.objects.create(name="s", url="http://127.0.0.1:9/mcp")
    for round_ in range(150):
        times = sorted(rng.choice([rng.uniform(0, 100), 50.0]) for _ in range(rng.randint(0, 15)))
        ended = rng.random() < 0.6
        row = task(server, status="completed" if ended else "working", finished_at=at(rng.uniform(40, 110)))
        TaskEvent.objects.bulk_create(
            [
                TaskEvent(task=row, status=rng.choice(statuses), observed_at=at(t), source="poll")
                for t in times
            ]
        )
        if not ended:  # running: its bar reaches the present; every event is in the past
            TaskEvent.objects.filter(task=row).update(observed_at=F("observed_at") - timedelta(days=1))
        every = list(TaskEvent.objects.filter(task=row).order_by("observed_at", "id"))
        got = lifecycle.of_task(row)
        want = lifecycle.of_task(row, every)
        if ended:
            shape = [(s.kind, s.start, s.end, s.x, s.width) for s in got.segments]
            assert shape == [(s.kind, s.start, s.end, s.x, s.width) for s in want.segments], (round_, every)
            assert got.totals == pytest.approx(want.totals, abs=1e-6), round_
        else:  # up to "now", which moves between the two: the same segments, started at the same times
            starts = [(s.kind, s.start) for s in got.segments]
            assert starts == [(s.kind, s.start) for s in want.segments], (round_, every)
        assert got.finished == want.finished, round_

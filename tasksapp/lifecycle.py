"""Where a task's time went: working, waiting for input, waiting on a cancel, from its timeline.

Read-only over the events tasksapp/services/timeline.py records (at most MCP_TIMELINE_MAX_EVENTS a
task, so this is bounded). Each event's status holds until the next event; the last one holds until
the task ended (a terminal event, or its expiry: RemoteTask.ended_at) or, while it runs, until now.
Time after the operator asked to cancel, while the task is not yet terminal, counts as waiting on
the cancel. Where older events were trimmed, their summary row stands for them, so those stretches
are approximate.
"""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Case, F, Q, Value, When, Window
from django.db.models.functions import Lag
from django.utils import timezone

from tasksapp.lib.prepared import Prepared
from tasksapp.models import TERMINAL, TaskEvent

WORKING, INPUT, CANCEL = "working", "input", "cancel"
BAR_WIDTH = 1000  # the SVG's viewBox units


@dataclass
class Segment:
    kind: str
    start: datetime
    end: datetime
    x: int = 0
    width: int = 0

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass
class Lifecycle:
    segments: list[Segment] = field(default_factory=list)
    totals: dict[str, float] = field(default_factory=lambda: {WORKING: 0.0, INPUT: 0.0, CANCEL: 0.0})
    finished: bool = False

    @property
    def total(self) -> float:
        return sum(self.totals.values())

    @property
    def working(self) -> int:
        return int(self.totals[WORKING])

    @property
    def waiting_input(self) -> int:
        return int(self.totals[INPUT])

    @property
    def waiting_cancel(self) -> int:
        return int(self.totals[CANCEL])


def of_task(task: Any, every_event: list[Any] | None = None) -> Lifecycle:
    """The task's lifecycle up to its end (RemoteTask.ended_at), or up to now while it runs.
    `every_event`: all the task's events in time order, when the caller has read them already."""
    ended = task.ended_at
    until = ended or timezone.now()
    if every_event is None:
        events = _kind_changes.all(task.pk, until)
    else:
        events = [(event.observed_at, event.status) for event in every_event]
    return compute(events, cancel_requested_at=task.cancel_requested_at, now=until, ended=ended is not None)


def _changes_of(task_id: int, until: datetime) -> Any:
    """The task's events at which what its time is spent on may change (_changes, in the database):
    the first, each whose kind (waiting for input, or working) differs from the event before it,
    every terminal one and every one at or after `until`. A busy task's thousand "working"
    messages are read as one row, not a thousand."""
    kind = Case(When(status="input_required", then=Value(INPUT)), default=Value(WORKING))
    order = [F("observed_at").asc(), F("id").asc()]
    rows = TaskEvent.objects.filter(task_id=task_id).annotate(
        kind=kind, kind_before=Window(Lag(kind), order_by=order)
    )
    changes = (
        Q(kind_before__isnull=True)
        | ~Q(kind_before=F("kind"))
        | Q(status__in=TERMINAL)
        | Q(observed_at__gte=until)
    )
    return rows.filter(changes).order_by("observed_at", "id").values_list("observed_at", "status")


# A busy task's live page reads it per change: compiled once per thread (tasksapp/lib/prepared.py).
_kind_changes: Prepared[tuple[datetime, str]] = Prepared(_changes_of, 2)


def compute(
    events: list[tuple[datetime, str]],
    *,
    cancel_requested_at: datetime | None,
    now: datetime,
    ended: bool = False,
) -> Lifecycle:
    """The lifecycle of (observed_at, status) events in time order, up to `now`: the task's end when
    `ended` (an expired task has no terminal event), else the present. Nothing counts after it."""
    life = Lifecycle(finished=ended)
    events = _changes(events, now)
    for index, (start, status) in enumerate(events):
        if status in TERMINAL:
            life.finished = True
            break
        if start >= now:
            break
        end = min(events[index + 1][0], now) if index + 1 < len(events) else now
        for part in _split(start, end, status, cancel_requested_at):
            _add(life, part)
    _lay_out(life)
    return life


def _changes(events: list[tuple[datetime, str]], now: datetime) -> list[tuple[datetime, str]]:
    """The events at which the kind of time changes (working, waiting for input), up to the first
    terminal one or the first at or after `now`: an event of the kind before it only continues
    its stretch, which compute() would join to it anyway. A busy task's thousand "working"
    messages are one stretch, and the page's bar is not a thousand segments joined one by one."""
    kept: list[tuple[datetime, str]] = []
    kind = ""
    for start, status in events:
        if status in TERMINAL or start >= now:
            kept.append((start, status))
            break
        now_kind = INPUT if status == "input_required" else WORKING
        if now_kind != kind:
            kept.append((start, status))
            kind = now_kind
    return kept


def _split(start: datetime, end: datetime, status: str, cancel_at: datetime | None) -> list[Segment]:
    kind = INPUT if status == "input_required" else WORKING
    if end <= start:
        return []
    if cancel_at is None or cancel_at >= end:
        return [Segment(kind, start, end)]
    if cancel_at <= start:
        return [Segment(CANCEL, start, end)]
    return [Segment(kind, start, cancel_at), Segment(CANCEL, cancel_at, end)]


def _add(life: Lifecycle, segment: Segment) -> None:
    life.totals[segment.kind] += segment.seconds
    last = life.segments[-1] if life.segments else None
    if last is not None and last.kind == segment.kind and last.end == segment.start:
        last.end = segment.end
    else:
        life.segments.append(segment)


def _lay_out(life: Lifecycle) -> None:
    """x and width in BAR_WIDTH units; every segment at least 1 unit wide so it stays visible."""
    total = life.total
    if total <= 0:
        return
    origin = life.segments[0].start
    for segment in life.segments:
        segment.x = round(BAR_WIDTH * (segment.start - origin).total_seconds() / total)
        segment.width = max(1, round(BAR_WIDTH * segment.seconds / total))

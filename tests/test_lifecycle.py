"""Where a task's time went (tasksapp/lifecycle.py): working, waiting for input, waiting on cancel."""

from datetime import UTC, datetime, timedelta

from tasksapp.lifecycle import CANCEL, INPUT, WORKING, compute

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

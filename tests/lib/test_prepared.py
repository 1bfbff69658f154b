"""Prepared queries (tasksapp/lib/prepared.py): compiled once, run again with other values, and the
rows the same models the queryset itself gives, related rows and annotations included."""

import threading
from datetime import timedelta
from typing import Any, cast

import pytest
from django.db import connection
from django.db.models import Count, Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tasksapp.lib.prepared import Prepared
from tasksapp.models import McpServer, RemoteTask, ServerHealth, TaskEvent
from tests.support.live import make_task

pytestmark = pytest.mark.django_db

detail = Prepared(lambda pk: RemoteTask.objects.for_detail().filter(pk=pk), 1)


def fields(task: RemoteTask) -> dict[str, Any]:
    """What a task's page reads of a task: its own columns, its server's, the annotations."""
    own = {field.attname: getattr(task, field.attname) for field in RemoteTask._meta.concrete_fields}
    server = {field.attname: getattr(task.server, field.attname) for field in McpServer._meta.concrete_fields
              if field.attname in task.server.__dict__}  # fmt: skip
    return {
        **own,
        "server": server,
        "failing": cast(Any, task).holder_failing_since,
        "error": cast(Any, task).holder_error,
    }


def test_a_prepared_query_gives_each_value_its_own_rows_as_the_orm_does() -> None:
    first = make_task(status_message="first", leased_by="w1")
    second = make_task(status_message="second")
    ServerHealth.objects.create(
        server=first.server, worker="w1", consecutive_failures=2, last_error="refused"
    )
    for task in (first, second, first):  # the second run of a value uses the compiled query
        found = detail.first(task.pk)
        assert found is not None
        assert fields(found) == fields(RemoteTask.objects.for_detail().get(pk=task.pk))
    assert detail.first(second.pk + 1000) is None
    again = detail.first(first.pk)
    assert again is not None and cast(Any, again).holder_error == "refused"  # the subquery's annotation
    with CaptureQueriesContext(connection) as queries:
        again.server.name  # noqa: B018 - selected with the task: no query
    assert len(queries) == 0


def test_a_prepared_query_orders_and_limits_as_its_queryset_does() -> None:
    task = make_task()
    for n in range(5):
        TaskEvent.objects.create(task=task, status="working", status_message=f"step {n}", source="poll")
    other = make_task()
    TaskEvent.objects.create(task=other, status="working", status_message="not this task's", source="poll")
    latest = Prepared(lambda pk: TaskEvent.objects.filter(task_id=pk).order_by("-observed_at", "-id")[:3], 1)
    assert [e.status_message for e in latest.all(task.pk)] == ["step 4", "step 3", "step 2"]
    assert [e.status_message for e in latest.all(other.pk)] == ["not this task's"]


def test_a_value_that_is_not_one_parameter_is_refused_when_the_query_is_compiled() -> None:
    twice = Prepared(lambda pk: RemoteTask.objects.filter(Q(pk=pk) | Q(poll_interval_ms=pk)), 1)
    with pytest.raises(ValueError, match="2 found"):
        twice.all(1)
    in_the_text = Prepared(lambda pk: RemoteTask.objects.extra(where=[f"id = {int(pk)}"]), 1)
    with pytest.raises(ValueError, match="0 found"):  # it would run with the stand-in's value
        in_the_text.all(1)
    with pytest.raises(TypeError):
        detail.all(1, 2)
    with pytest.raises(TypeError):
        detail.all(None)  # type: ignore[arg-type]


@pytest.mark.django_db(transaction=True)
def test_each_thread_runs_its_own_compiled_query_on_its_own_connection() -> None:
    task = make_task(status_message="seen from a thread")
    assert detail.first(task.pk) is not None
    found: list[str] = []

    def read() -> None:
        try:
            row = detail.first(task.pk)
            found.append(row.status_message if row else "none")
        finally:
            connection.close()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    assert found == ["seen from a thread"]
    connection.close()  # a new connection: the query is compiled again for it, same rows
    row = detail.first(task.pk)
    assert row is not None and row.status_message == "seen from a thread"


def test_a_prepared_count_over_a_time_counts_what_the_orm_counts() -> None:
    task = make_task()
    now = timezone.now()
    for seconds in (1, 5, 30, 90):
        TaskEvent.objects.create(
            task=task, status="working", source="poll", observed_at=now - timedelta(seconds=seconds)
        )
    since = Prepared(lambda at: TaskEvent.objects.filter(observed_at__gte=at), 1)
    for back in (0, 2, 10, 60, 3600):
        at = now - timedelta(seconds=back)
        assert since.count(at) == TaskEvent.objects.filter(observed_at__gte=at).count(), back
    with pytest.raises(TypeError):
        since.count(now.replace(tzinfo=None))  # a naive time is refused, not read in some zone
    with pytest.raises(TypeError):
        since.count(1)


def test_values_and_values_list_rows_are_what_the_orm_gives() -> None:
    first, second = make_task(status_message="one"), make_task(status_message="two")
    for task, n in ((first, 3), (second, 1)):
        for step in range(n):
            TaskEvent.objects.create(task=task, status="working", status_message=f"s{step}", source="poll")
    shapes: list[Any] = [
        lambda pk: (
            TaskEvent.objects.filter(task_id=pk).order_by("id").values_list("status_message", "observed_at")
        ),
        lambda pk: TaskEvent.objects.filter(task_id=pk).order_by("id").values_list("id", flat=True),
        lambda pk: (
            TaskEvent.objects.filter(task_id=pk).order_by("id").values("status", "task__status_message")
        ),
        lambda pk: (
            TaskEvent.objects.filter(task_id__gte=pk)
            .values("task_id")
            .annotate(n=Count("id"))
            .order_by("task_id")
        ),
    ]
    for make in shapes:
        prepared = Prepared(make, 1)
        for task in (first, second, first):
            assert prepared.all(task.pk) == list(make(task.pk))
    everything = Prepared(
        lambda: RemoteTask.objects.order_by("id").values_list("status_message", flat=True), 0
    )
    assert everything.all() == ["one", "two"] and everything.count() == 2

"""The overview's counts (kept by triggers, tasksapp.counts) equal a fresh aggregate, and its live
partial is the same for every viewer of a role."""

from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.db.models import Count, Q
from django.db.models.functions import TruncHour
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tasksapp import services
from tasksapp.live.pages import OverviewPage, audience
from tasksapp.models import TERMINAL, McpServer, RemoteTask, stale
from tasksapp.permissions import OPERATOR, VIEWER
from tasksapp.presenters.overview import hourly_chart, overview_context
from tests.support.engine_helpers import run_worker_until

pytestmark = pytest.mark.django_db(transaction=True)

# The tiles as main aggregated them on every request: the oracle the kept counts must equal.
FRESH = {
    "working": Q(status="working", expired=False) & Q(cancel_requested_at__isnull=True),
    "needs_input": Q(status="input_required", expired=False),
    "cancel_requested": Q(cancel_requested_at__isnull=False, expired=False) & ~Q(status__in=TERMINAL),
    "completed": Q(status="completed", is_tool_error=False),
    "tool_error": Q(status="completed", is_tool_error=True),
    "failed": Q(status="failed"),
    "cancelled": Q(status="cancelled"),
    "expired": Q(expired=True),
    "stale": stale() & Q(expired=False) & ~Q(status__in=TERMINAL),
}


def fresh_tiles() -> dict[str, int]:
    totals = RemoteTask.objects.aggregate(**{f"n_{key}": Count("id", filter=q) for key, q in FRESH.items()})
    return {key: totals[f"n_{key}"] for key in FRESH}


def fresh_hours(field: str) -> dict[datetime, int]:
    start = (timezone.now() - timedelta(hours=23)).replace(minute=0, second=0, microsecond=0)
    rows = (
        RemoteTask.objects.filter(**{f"{field}__gte": start})
        .annotate(hour=TruncHour(field))
        .values("hour")
        .annotate(n=Count("id"))
    )
    return {row["hour"]: row["n"] for row in rows}


def assert_counts_fresh() -> dict[str, int]:
    kept = {tile["key"]: tile["count"] for tile in overview_context()["tiles"]}
    assert kept == fresh_tiles()
    chart = hourly_chart(timezone.now())
    started = {bar["label"]: bar["started"] for bar in chart["bars"] if bar["started"]}
    finished = {bar["label"]: bar["finished"] for bar in chart["bars"] if bar["finished"]}
    assert started == {hour.strftime("%H"): n for hour, n in fresh_hours("created_at").items()}
    assert finished == {hour.strftime("%H"): n for hour, n in fresh_hours("finished_at").items()}
    return kept


def start(server: McpServer, tool: str, **arguments: object) -> RemoteTask:
    started = services.call_start(server=server, tool=tool, arguments=arguments, user=None)
    assert started.task is not None, started
    return started.task


def test_counts_equal_a_fresh_aggregate_through_a_mixed_lifecycle(demo_registered: McpServer) -> None:
    server = demo_registered
    done = [start(server, "slow_count", n=2, delay=0.05) for _ in range(3)]
    tool_error = start(server, "fail_tool", delay=0.05)
    failed = start(server, "fail_rpc", delay=0.05)
    asking = start(server, "ask_form", delay=0.05)
    forever = [start(server, "run_forever", delay=0.1) for _ in range(2)]
    short = start(server, "short_ttl", ttl_ms=300)
    assert assert_counts_fresh()["working"] == 9

    services.task_cancel(task=forever[0], user=None)  # cancel requested, then cancelled by the server
    assert assert_counts_fresh()["cancel_requested"] == 1

    def settled() -> bool:
        rows = {task.pk: task for task in RemoteTask.objects.all()}
        return (
            all(rows[task.pk].status == "completed" for task in [*done, tool_error])
            and rows[failed.pk].status == "failed"
            and rows[asking.pk].status == "input_required"
            and rows[forever[0].pk].status == "cancelled"
            and rows[short.pk].expired
        )

    run_worker_until(settled, timeout=30)
    kept = assert_counts_fresh()
    assert kept == {
        "working": 1,
        "needs_input": 1,
        "cancel_requested": 0,
        "completed": 3,
        "tool_error": 1,
        "failed": 1,
        "cancelled": 1,
        "expired": 1,
        "stale": 0,
    }

    RemoteTask.objects.filter(pk=done[0].pk).delete()  # the admin's delete: no service involved
    RemoteTask.objects.filter(pk=forever[1].pk).update(status="completed", finished_at=timezone.now())
    kept = assert_counts_fresh()
    assert (kept["completed"], kept["working"]) == (3, 0)


def test_overview_reads_no_task_rows_for_its_tiles_and_chart(demo_registered: McpServer) -> None:
    start(demo_registered, "slow_count", n=1, delay=0.05)
    with CaptureQueriesContext(__import__("django.db").db.connection) as captured:
        overview_context()
    aggregates = [q["sql"] for q in captured if "COUNT(" in q["sql"].upper()]
    assert aggregates == []


def test_live_overview_is_the_same_partial_for_every_viewer_of_a_role() -> None:
    """What a live overview page renders (tasksapp/live/pages.py; tests/live/test_hub.py holds that
    one render a tick serves every socket of an audience)."""
    McpServer.objects.create(name="quiet", url="http://127.0.0.1:9/mcp")
    viewers = []
    for name, role in [("v1", VIEWER), ("v2", VIEWER), ("o1", OPERATOR), ("o2", OPERATOR)]:
        user = User.objects.create_user(name)
        user.groups.add(Group.objects.get(name=role))
        viewers.append(User.objects.get(pk=user.pk))  # fresh: no cached permissions
    now = timezone.now()
    rendered = [OverviewPage(audience(user), now)._render() for user in viewers]
    assert len(set(rendered)) == 1  # viewer and operator see the same overview today
    assert 'id="overview-live"' in rendered[0] and 'hx-swap-oob="true"' in rendered[0]
    assert "quiet" in rendered[0]


def test_longest_running_are_the_oldest_active_tasks_of_enabled_servers() -> None:
    from tasksapp.presenters.overview import long_running

    on, off = (McpServer.objects.create(name=n, url="http://127.0.0.1:9/mcp") for n in ("on", "off"))
    McpServer.objects.filter(pk=off.pk).update(enabled=False)
    now = timezone.now()
    made = {}
    for i, (server, status, expired) in enumerate(
        [
            (off, "working", False),  # oldest, but its server is disabled
            (on, "completed", False),
            (on, "working", True),  # expired
            (on, "input_required", False),
            (on, "working", False),
        ]
        + [(on, "working", False)] * 12
    ):
        task = RemoteTask(server=server, tool_name=f"t{i}", status=status, expired=expired)
        task.set_remote_id(f"id-{i}")
        task.save()
        RemoteTask.objects.filter(pk=task.pk).update(created_at=now - timedelta(hours=100 - i))
        made[i] = task.pk
    assert [task.pk for task in long_running()] == [made[i] for i in range(3, 13)]

"""A hostile task that flips between working and input_required with 20 new keys each time: what
it may ask is bounded over its life (then flagged in its timeline), the requests it replaced are
pruned, and a subscriber hears of it once per window, then one digest."""

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from django.contrib.auth.models import Group, User
from django.utils import timezone

from tasksapp.models import InputRequest, NotificationOutbox, NotificationPreference, RemoteTask
from tasksapp.notify.scan import scan
from tests.mcpclient import hostile_server as hostile
from tests.support.engine_helpers import run_worker_until
from tests.support.scripted import QUESTION, scripted, started_on

pytestmark = pytest.mark.django_db(transaction=True)
NEW_KEYS = 20
LIMIT = 60


def flipping() -> tuple[Any, dict[str, int]]:
    """tasks/get: working, then input_required with 20 keys never seen before, and so on. While
    polls["hold"] is set, the first 20 stay asked (so that a notification scan finds them open)."""
    polls = {"n": 0, "asked": 0, "hold": 1}

    def answer(message: dict[str, Any]) -> web.StreamResponse:
        polls["n"] += 1
        now = timezone.now().isoformat()
        fields: dict[str, Any] = {"createdAt": now, "lastUpdatedAt": now, "pollIntervalMs": 20}
        if polls["n"] % 2 and not (polls["hold"] and polls["asked"]):
            fields["status"] = "working"
        else:
            polls["asked"] += 0 if polls["hold"] and polls["asked"] else 1
            keys = {f"round{polls['asked']}-q{i}": QUESTION for i in range(NEW_KEYS)}
            fields.update(status="input_required", inputRequests=keys)
        return hostile.json_reply(
            hostile.response(message, {"resultType": "complete", **hostile.task(**fields)})
        )

    return answer, polls


def test_a_flipping_task_is_bounded_flagged_pruned_and_told_once(settings: Any) -> None:
    settings.MCP_POLL_FLOOR_MS = 10
    settings.MCP_MAX_INPUT_REQUESTS_PER_TASK = LIMIT
    settings.NOTIFY_TASK_WINDOW_SECONDS = 60
    ada = User.objects.create_user("ada")
    ada.groups.add(Group.objects.get(name="operator"))
    NotificationPreference.objects.create(user=ada, events=["input"], webhook_url="http://127.0.0.1:9/hook")
    # Windows are aligned to the clock (n * 60 s, (n + 1) * 60 s]: a flood that spans an edge is
    # told once in each window, with the first window's digest at the edge. This drill is about
    # one window, so it starts in one with time to spare.
    left = 60 - time.time() % 60
    if left < 40:
        time.sleep(left + 0.1)
    scan()  # the cursor starts here

    answer, polls = flipping()
    server = scripted({"tasks/get": answer})
    try:
        task = started_on(server)

        # The notification scan runs beside the worker, as it does in `manage.py worker`, until it
        # has told of the first questions (held open till then: each later one is open for one poll
        # only); then the flood. Stop on what the product recorded (the cap), not on what the
        # server saw: a loaded machine answers the polls before the worker has written them.
        def progressed() -> bool:
            scan()  # during the flood too: a product telling of every round would show
            if polls["hold"] and NotificationOutbox.objects.filter(user=ada).exists():
                polls["hold"] = 0
            capped = RemoteTask.objects.filter(pk=task.pk, input_requests_capped_at__isnull=False)
            return not polls["hold"] and polls["asked"] >= 3 * LIMIT // NEW_KEYS + 3 and capped.exists()

        run_worker_until(progressed, heartbeat_seconds=0.2)
        offered = polls["asked"] * NEW_KEYS
    finally:
        server.close()

    task = RemoteTask.objects.get(pk=task.pk)
    assert offered > 3 * LIMIT
    assert InputRequest.objects.filter(task=task).count() == LIMIT  # not one key more
    assert task.input_requests_recorded == LIMIT and task.input_requests_capped_at is not None
    notes = list(task.events.filter(note__contains="misbehaves").values_list("note", flat=True))
    assert len(notes) == 1 and f"more than {LIMIT} inputs" in notes[0]

    # One message per task per window; the window's end brings one digest with the count.
    told = list(NotificationOutbox.objects.filter(user=ada).values_list("key", flat=True))
    assert len(told) == 1 and told[0].startswith(f"input-{task.pk}-"), told
    number = int(told[0].rsplit("-", 1)[1])
    scan(now=datetime.fromtimestamp((number + 1) * 60, UTC) + timedelta(seconds=1))
    digest = NotificationOutbox.objects.get(user=ada, key=f"{told[0]}-more")
    expected = (
        f"Task #{task.pk} (job) on scripted asked {LIMIT} questions in 1 minute; you were told of the first."
    )
    assert expected in digest.text, digest.text
    assert NotificationOutbox.objects.filter(user=ada).count() == 2

    # The requests the server replaced are pruned by the worker once they are old enough.
    assert InputRequest.objects.filter(task=task, state="gone").count() >= LIMIT - NEW_KEYS
    settings.MCP_INPUT_GONE_KEEP_SECONDS = 0
    run_worker_until(lambda: not InputRequest.objects.filter(state="gone").exists(), heartbeat_seconds=0.2)

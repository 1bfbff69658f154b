"""Browser notifications: queued per user like email and webhooks (their events,
servers and tools), and delivered over the channel layer to that user's open pages only, as a
hidden #notify-push element that static/tasksapp/notify.js turns into a Notification."""

import html
import re
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.utils import timezone

from tasksapp.models import McpServer, NotificationOutbox, NotificationPreference
from tasksapp.notify import drainer
from tasksapp.notify.scan import scan
from tasksapp.notify.send import drain_once
from tests.support.inbox import FORM, asking
from tests.support.live import signed_in, socket

pytestmark = pytest.mark.django_db(transaction=True)
PUSH = re.compile(
    r'<div id="notify-push" hidden hx-swap-oob="true" '
    r'data-key="([^"]*)" data-text="([^"]*)" data-url="([^"]*)">'
)


def choose(user: User, **choices: object) -> None:
    NotificationPreference.objects.create(user=user, browser=True, **choices)


async def pushes(communicator: WebsocketCommunicator, quiet: float = 0.5) -> list[tuple[str, str, str]]:
    """The notifications among the frames this socket receives until it has been quiet a while."""
    found: list[tuple[str, str, str]] = []
    while not await communicator.receive_nothing(timeout=quiet):  # (a timed-out receive ends the app)
        frame = await communicator.receive_from()
        found += [tuple(html.unescape(part) for part in match) for match in PUSH.findall(frame)]  # type: ignore[misc]
    return found


def happen() -> tuple[int, int, int]:
    """A question on `watched`, a failed task on `watched`, another failed on `other`, and
    `watched` unhealthy; returns (asking pk, failed pk, other's failed pk)."""
    watched = McpServer.objects.get(name="watched")
    other = McpServer.objects.get(name="other")
    asked = asking(watched, "ask_form", "elicitation/create", FORM)
    failed = asking(watched, "nightly", "elicitation/create", FORM)
    failed.input_requests.all().delete()
    failed.events.create(status="failed", source="poll")
    elsewhere = asking(other, "nightly", "elicitation/create", FORM)
    elsewhere.input_requests.all().delete()
    elsewhere.events.create(status="failed", source="poll")
    McpServer.objects.filter(pk=watched.pk).update(consecutive_failures=3, last_error="connection refused")
    return asked.pk, failed.pk, elsewhere.pk


async def test_each_user_is_told_in_their_open_pages_only_what_they_chose() -> None:
    ada, ada_client = await sync_to_async(signed_in)("operator", "ada")
    bob, bob_client = await sync_to_async(signed_in)("viewer", "bob")
    watched = await McpServer.objects.acreate(name="watched", url="http://127.0.0.1:9/a")
    await McpServer.objects.acreate(name="other", url="http://127.0.0.1:9/b")
    await sync_to_async(scan)()  # the cursor starts here
    await sync_to_async(choose)(ada, events=["input", "failed", "unhealthy"], server_ids=[watched.pk])
    await sync_to_async(choose)(bob, events=["failed"], tools=["weekly"])  # none of these
    pages = [socket(ada_client, "page=overview"), socket(ada_client, "page=tasks")]
    pages.append(socket(bob_client, "page=tasks"))
    for communicator in pages:
        assert (await communicator.connect())[0]

    asked, failed, _elsewhere = await sync_to_async(happen)()
    await sync_to_async(scan)()
    assert await sync_to_async(drain_once)(channels=("browser",)) == 3  # ada: input, failed, unhealthy

    for communicator in pages[:2]:  # both of ada's pages
        told = await pushes(communicator)
        keys = sorted(re.sub(r"^((unhealthy|input)-\d+)-\d+$", r"\1", key) for key, _, _ in told)
        assert keys == [f"failed-{failed}", f"input-{asked}", f"unhealthy-{watched.pk}"]  # input: per task
        texts = " | ".join(text for _, text, _ in told)
        assert f"task #{asked} (ask_form) on watched asks a question" in texts
        assert f"Task #{failed} (nightly) on watched failed." in texts
        assert "Server watched is unhealthy: 3 failed polls in a row. connection refused" in texts
        # paths (the page's own origin): where to act
        where = {"/inbox/", f"/tasks/{failed}/", f"/servers/{watched.pk}/tools/"}
        assert {url for _, _, url in told} == where
    assert await pushes(pages[2]) == []  # bob chose another tool
    assert await sync_to_async(drain_once)(channels=("browser",)) == 0  # each sent once
    for communicator in pages:
        await communicator.disconnect()


def test_a_browser_notification_is_not_shown_late_and_not_when_turned_off() -> None:
    server = McpServer.objects.create(name="watched", url="http://127.0.0.1:9/a")
    scan()
    ada, _ = signed_in("operator", "ada")
    choose(ada, events=["failed"])
    failed = asking(server, "nightly", "elicitation/create", FORM)
    failed.events.create(status="failed", source="poll")
    scan()
    NotificationOutbox.objects.update(created_at=timezone.now() - timedelta(minutes=5))
    assert drain_once(channels=("browser",)) == 0
    stale = NotificationOutbox.objects.get()
    assert stale.state == "failed" and stale.attempts == 1 and "too old" in stale.last_error  # no retries

    again = asking(server, "nightly", "elicitation/create", FORM)
    again.events.create(status="failed", source="poll")
    scan()
    NotificationPreference.objects.filter(user=ada).update(browser=False)  # turned off once queued
    assert drain_once(channels=("browser",)) == 0
    off = NotificationOutbox.objects.get(key=f"failed-{again.pk}")
    assert off.state == "failed" and "off now" in off.last_error

    third = asking(server, "nightly", "elicitation/create", FORM)
    third.events.create(status="failed", source="poll")
    scan()
    assert not NotificationOutbox.objects.filter(key=f"failed-{third.pk}").exists()  # off: not queued


def test_a_worker_on_an_in_memory_layer_leaves_browser_rows_to_the_page_process(settings: object) -> None:
    # The test settings use the in-memory layer: a `manage.py worker` beside `manage.py demo` reaches
    # no page, so it sends email and webhooks and leaves browser rows to the demo's notifier.
    assert drainer.reachable_channels() == ("email", "webhook")
    settings.CHANNEL_LAYERS = {  # type: ignore[attr-defined]
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:6379/9"]},
        }
    }
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    try:
        assert drainer.reachable_channels() == ("email", "webhook", "browser")
    finally:
        channel_layers.backends.clear()


async def test_a_page_whose_socket_joins_after_a_notification_went_out_shows_it_on_connect() -> None:
    """A page rendered before the message went out, whose socket was still connecting (a page
    loading on a busy machine, a reconnect), is sent it on connect; a page rendered well after it
    is not (the tab that showed it must not show it again)."""
    ada, ada_client = await sync_to_async(signed_in)("operator", "ada")
    server = await McpServer.objects.acreate(name="watched", url="http://127.0.0.1:9/a")
    await sync_to_async(scan)()
    await sync_to_async(choose)(ada, events=["failed"])
    rendered = time.time()  # the page is rendered; its scripts are still loading

    def fail() -> int:
        failed = asking(server, "nightly", "elicitation/create", FORM)
        failed.input_requests.all().delete()
        failed.events.create(status="failed", source="poll")
        scan()
        assert drain_once(channels=("browser",)) == 1  # out, while no socket of ada's is open
        return failed.pk

    failed = await sync_to_async(fail)()
    late = socket(ada_client, f"page=tasks&since={rendered}")
    assert (await late.connect())[0]
    assert [key for key, _, _ in await pushes(late)] == [f"failed-{failed}"]
    await late.disconnect()

    await sync_to_async(NotificationOutbox.objects.update)(sent_at=timezone.now() - timedelta(seconds=10))
    after = socket(ada_client, f"page=tasks&since={time.time()}")  # rendered after it went out
    assert (await after.connect())[0]
    assert await pushes(after) == []
    await after.disconnect()

"""Notifications against a real local SMTP server (aiosmtpd) and a real HTTP
webhook receiver on loopback: what is queued for whom, the HMAC signature, retries with back-off,
durability across a restart of the drainer, and the settings page."""

import email
import email.policy
import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tasksapp.models import (
    McpServer,
    NotificationOutbox,
    NotificationPreference,
    OperatorAction,
    RemoteTask,
    UserPreference,
)
from tasksapp.notify import drainer
from tasksapp.notify.scan import scan
from tasksapp.notify.send import drain_once
from tests.support.inbox import FORM, asking, open_tasks

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "s3cret-for-tests"


class _Mailbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], str]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((list(envelope.rcpt_tos), envelope.content.decode("utf8", "replace")))
        return "250 OK"


@pytest.fixture
def smtp(settings: Any) -> Iterator[_Mailbox]:
    box = _Mailbox()
    with socket.socket() as probe:  # a free loopback port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    yield box
    controller.stop()


class _Hook:
    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.fail_next = 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = 503 if hook.fail_next else 200
                hook.fail_next = max(hook.fail_next - 1, 0)
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def hook() -> Iterator[_Hook]:
    receiver = _Hook()
    yield receiver
    receiver.server.shutdown()


def person(name: str, role: str = "operator", **choices: Any) -> User:
    user = User.objects.create_user(name)
    user.groups.add(Group.objects.get(name=role))
    pref = NotificationPreference(user=user, **choices)
    pref.webhook_secret = SECRET
    pref.save()
    return user


def test_each_user_gets_what_they_chose_by_email_and_signed_webhook(smtp: _Mailbox, hook: _Hook) -> None:
    watched = McpServer.objects.create(name="watched", url="http://127.0.0.1:9/a")
    other = McpServer.objects.create(name="other", url="http://127.0.0.1:9/b")
    scan()  # nothing yet: the cursor starts here
    person(
        "ada",
        events=["input", "failed"],
        server_ids=[watched.pk],
        email="ada@example.com",
        webhook_url=hook.url,
    )
    person("bob", events=["failed"], tools=["nightly"], email="bob@example.com")
    asked = asking(watched, "ask_form", "elicitation/create", FORM)
    asking(other, "ask_form", "elicitation/create", FORM)  # not ada's server
    failed = asking(watched, "nightly", "elicitation/create", FORM)
    failed.input_requests.all().delete()  # it only fails
    failed.events.create(status="failed", source="poll")
    scan()
    assert drain_once() == 5  # ada: input + failed, each by email and webhook; bob: failed by email
    scan()  # the windows overlap (a margin for late commits): still one row per user, channel, event
    assert NotificationOutbox.objects.count() == 5 and drain_once() == 0  # nothing is sent twice
    to = sorted((rcpt[0], "Input needed" in text, "failed" in text) for rcpt, text in smtp.messages)
    assert to == [
        ("ada@example.com", False, True),
        ("ada@example.com", True, False),
        ("bob@example.com", False, True),
    ]
    assert any(f"task #{asked.pk}" in text for _, text in smtp.messages)
    for headers, body in hook.received:
        stamp = headers["x-dashboard-timestamp"]
        expected = hmac.new(SECRET.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        assert headers["x-dashboard-signature"] == f"sha256={expected}"
        assert set(json.loads(body)) == {"text"}  # Slack-compatible
    assert len(hook.received) == 2


def test_a_failing_webhook_is_retried_with_back_off_and_an_unhealthy_server_is_told_once(hook: _Hook) -> None:
    server = McpServer.objects.create(name="flaky", url="http://127.0.0.1:9/a")
    person("ada", events=["unhealthy"], webhook_url=hook.url)
    scan()
    McpServer.objects.filter(pk=server.pk).update(consecutive_failures=3, last_error="connection refused")
    hook.fail_next = 1
    scan()
    assert drain_once() == 0
    row = NotificationOutbox.objects.get()
    assert row.state == "pending" and row.attempts == 1 and "503" in row.last_error
    assert row.next_attempt_at > timezone.now() + timedelta(seconds=5)  # backed off, not hammered
    assert drain_once() == 0 and len(hook.received) == 1  # not due yet
    NotificationOutbox.objects.update(next_attempt_at=timezone.now())
    assert drain_once() == 1 and len(hook.received) == 2
    assert "flaky is unhealthy" in json.loads(hook.received[1][1])["text"]
    scan()  # still unhealthy: not told again
    assert NotificationOutbox.objects.count() == 1


def test_the_drainer_thread_sends_what_a_stopped_worker_left_in_the_outbox(smtp: _Mailbox) -> None:
    server = McpServer.objects.create(name="s", url="http://127.0.0.1:9/a")
    person("ada", events=["input"], email="ada@example.com")
    scan()
    open_tasks(server, 3)
    scan()  # queued, then the "worker" stopped before sending
    assert NotificationOutbox.objects.filter(state="pending").count() == 3
    thread, stop = drainer.start(interval=0.05)
    try:
        deadline = timezone.now() + timedelta(seconds=15)
        while NotificationOutbox.objects.filter(state="sent").count() < 3:
            assert timezone.now() < deadline, "the drainer did not send"
            stop.wait(0.05)
    finally:
        stop.set()
        thread.join(5)
    assert len(smtp.messages) == 3


def test_the_settings_page_saves_choices_and_is_audited() -> None:
    server = McpServer.objects.create(name="s", url="http://127.0.0.1:9/a")
    user = User.objects.create_user("v")
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)
    assert client.get("/notifications/").status_code == 200
    fields = {
        "events": ["input", "unhealthy"],
        "servers": [server.pk],
        "tools": "a, b",
        "email": "v@example.com",
        "webhook_url": "https://hooks.example.com/x",
        "webhook_secret": "abc",
        "browser": "on",
    }
    assert client.post("/notifications/", fields).status_code == 302
    pref = NotificationPreference.objects.get(user=user)
    assert (pref.events, pref.server_ids, pref.tools, pref.browser) == (
        ["input", "unhealthy"],
        [server.pk],
        ["a", "b"],
        True,
    )
    assert pref.webhook_secret == "abc" and "abc" not in pref.webhook_secret_encrypted
    client.post("/notifications/", {**fields, "webhook_secret": ""})  # empty keeps the secret
    assert NotificationPreference.objects.get(user=user).webhook_secret == "abc"
    assert "abc" not in client.get("/notifications/").content.decode()
    assert OperatorAction.objects.filter(action="notify_settings", user=user).count() == 2


def test_each_message_is_written_in_its_recipients_language(hook: _Hook) -> None:
    server = McpServer.objects.create(name="watched", url="http://127.0.0.1:9/a")
    scan()
    li = person("li", events=["failed"], webhook_url=hook.url)
    UserPreference.objects.create(user=li, language="zh-hans")
    person("ann", events=["failed"], webhook_url=hook.url)  # no language chosen: LANGUAGE_CODE (English)
    failed = asking(server, "nightly", "elicitation/create", FORM)
    failed.input_requests.all().delete()
    failed.events.create(status="failed", source="poll")
    scan()
    assert drain_once() == 2
    texts = sorted(json.loads(body)["text"].splitlines()[0] for _, body in hook.received)
    assert texts == [
        f"Task #{failed.pk} (nightly) on watched failed.",
        f"watched 上的任务 #{failed.pk}（nightly）失败了。",  # noqa: RUF001 -- Chinese punctuation
    ]


def test_the_admin_lists_choices_and_a_read_only_outbox_whose_retry_now_sends_again(hook: _Hook) -> None:
    McpServer.objects.create(name="watched", url="http://127.0.0.1:9/a")
    root = User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    person("ada", events=["unhealthy"], webhook_url=hook.url)
    McpServer.objects.filter(name="watched").update(consecutive_failures=5, last_error="refused")
    scan()
    hook.fail_next = 99
    for _attempt in range(8):  # gives up after MAX_ATTEMPTS
        NotificationOutbox.objects.update(next_attempt_at=timezone.now())
        drain_once()
    row = NotificationOutbox.objects.get()
    assert row.state == "failed" and len(hook.received) == 8
    admin = Client()
    admin.force_login(root)
    assert admin.get(reverse("admin:tasksapp_notificationpreference_changelist")).status_code == 200
    assert admin.get(reverse("admin:tasksapp_notificationoutbox_changelist")).status_code == 200
    assert admin.get(reverse("admin:tasksapp_notificationoutbox_add")).status_code == 403
    change = admin.post(reverse("admin:tasksapp_notificationoutbox_change", args=[row.pk]), {"state": "sent"})
    assert change.status_code == 403  # read-only
    hook.fail_next = 0
    admin.post(
        reverse("admin:tasksapp_notificationoutbox_changelist"),
        {"action": "retry_now", "_selected_action": [row.pk]},
    )
    assert drain_once() == 1 and len(hook.received) == 9
    audited = OperatorAction.objects.filter(action="notify_retry", user=root, detail={"outbox": [row.pk]})
    assert audited.exists()


# A tool name and error text from a hostile server: a mention, a disguised link, a new line.
PHISH = "<!channel> <https://phish.example/login|Re-authorize now> & co\n<!here>"
PHISH_SHOWN = "&lt;!channel&gt; &lt;https://phish.example/login|Re-authorize now&gt; &amp; co &lt;!here&gt;"


def test_server_text_is_escaped_in_webhook_and_email_bodies(
    smtp: _Mailbox, hook: _Hook, settings: Any
) -> None:
    """A real hostile server names its tool PHISH and fails with it; a second one fails its polls
    with it (HTTP 503). The webhook's Slack text and the email carry it escaped, on one line."""
    from aiohttp import web

    from tasksapp import services
    from tests.mcpclient import hostile_server as hostile
    from tests.support.engine_helpers import run_worker_until
    from tests.support.hostile_thread import serving

    settings.MCP_BACKOFF_BASE_MS = 20  # three failed polls in well under a second
    now = timezone.now().isoformat()
    working = hostile.task(createdAt=now, lastUpdatedAt=now, pollIntervalMs=50)
    failed = {**working, "status": "failed", "statusMessage": PHISH, "error": {"code": -1, "message": PHISH}}

    async def phishing(request: web.Request, message: dict[str, Any]) -> web.StreamResponse:
        method = message.get("method")
        if method == "tools/list":
            return hostile.json_reply(
                hostile.response(message, {"tools": [{"name": PHISH, "inputSchema": {}}]})
            )
        if method == "tools/call":
            return hostile.json_reply(hostile.response(message, {"resultType": "task", **working}))
        if method == "tasks/get" and request.query_string == "broken":
            return hostile.raw_reply(PHISH.encode(), status=503, content_type="text/plain")
        return hostile.json_reply(hostile.response(message, {"resultType": "complete", **failed}))

    person("ada", events=["failed", "unhealthy"], email="ada@example.com", webhook_url=hook.url)
    scan()  # the cursor starts here
    with serving(phishing) as server:
        registered = services.server_create(name="phishy", url=server.url, headers={}, user=None)
        started = services.call_start(server=registered, tool=PHISH, arguments={}, user=None).task
        assert started is not None
        second = services.server_create(name="broken", url=server.url + "?broken", headers={}, user=None)
        assert services.call_start(server=second, tool=PHISH, arguments={}, user=None).task
        run_worker_until(
            lambda: (
                McpServer.objects.get(pk=second.pk).consecutive_failures >= 3
                and RemoteTask.objects.get(pk=started.pk).status == "failed"
            )
        )
    scan()
    assert drain_once() == 4  # failed and unhealthy, each by email and webhook
    texts = [json.loads(body)["text"] for _, body in hook.received]
    for _, raw in smtp.messages:  # quoted-printable on the wire: what a mail client shows
        mail = email.message_from_string(raw, policy=email.policy.default)
        texts.append(f"{mail['subject']}\n{mail.get_content()}")
    for text in texts:
        assert "<!" not in text and "<https://phish" not in text and "\n<" not in text, text
    assert sum(PHISH_SHOWN in text for text in texts) == 4, texts  # the tool name; the error text
    assert [text.count("\n") for text in texts[:2]] == [1, 1]  # the webhooks: the message, then the link

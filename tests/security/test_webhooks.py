"""Notification channels against hostile receivers (docs/security.md, round two).

Webhook URLs against internal services: any viewer chooses a webhook URL, and the worker POSTs to
it. Only http(s), only public addresses unless OUTBOUND_ALLOWED_HOSTS lists them, checked when
saved (an error on the form) and again when connecting (a name may resolve elsewhere by then).
A webhook receiver or a mail server that answers a byte at a time is cut at the deadline."""

import threading
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from tasksapp.models import NotificationOutbox, NotificationPreference
from tasksapp.notify.send import drain_once
from tests.support.rawserver import dripper, honeypot

pytestmark = pytest.mark.django_db
HANG_GUARD = 120.0  # seconds: only a missing deadline gets near it


@pytest.fixture
def viewer() -> tuple[Client, User]:
    user = User.objects.create_user("vic", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)
    return client, user


def save(client: Client, url: str) -> Any:
    return client.post(reverse("tasks:notify"), {"events": ["failed"], "webhook_url": url})


@pytest.mark.parametrize(
    "url",
    [
        "ftp://127.0.0.1/hook",
        "http://127.0.0.1:{port}/hook",
        "http://[::1]:{port}/hook",
        "http://localhost:{port}/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data/",
    ],
    ids=["ftp", "ipv4-loopback", "ipv6-loopback", "name-of-loopback", "private", "metadata-service"],
)
def test_a_webhook_to_an_internal_address_is_refused_on_the_form(
    viewer: tuple[Client, User], settings: Any, url: str
) -> None:
    settings.OUTBOUND_ALLOWED_HOSTS = []
    client, user = viewer
    with honeypot() as pot:
        page = save(client, url.format(port=pot.port))
        assert page.status_code == 200
        text = page.content.decode()
        assert "This webhook URL cannot be used" in text, text[-3000:]
        assert pot.connections == 0
    pref = NotificationPreference.objects.get(user=user)
    assert pref.webhook_url == ""


def test_an_allowed_or_public_webhook_is_saved(viewer: tuple[Client, User], settings: Any) -> None:
    settings.OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    client, user = viewer
    assert save(client, "http://127.0.0.1:8/hook").status_code == 302
    assert save(client, "https://hooks.example.com/services/T0/B0/x").status_code == 302
    assert NotificationPreference.objects.get(user=user).webhook_url.startswith("https://hooks.example.com/")


def queued(user: User, url: str) -> NotificationOutbox:
    """A message queued for a webhook URL stored earlier (before this check existed, or a name that
    resolved elsewhere when it was saved)."""
    NotificationPreference.objects.update_or_create(
        user=user, defaults={"webhook_url": url, "events": ["failed"]}
    )
    return NotificationOutbox.objects.create(
        user=user, channel="webhook", key="failed-1", event="failed", subject="s", text="t"
    )


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"], ids=["address", "name-resolving-to-loopback"])
def test_a_stored_webhook_to_loopback_is_refused_when_connecting(
    viewer: tuple[Client, User], settings: Any, host: str
) -> None:
    settings.OUTBOUND_ALLOWED_HOSTS = []
    _, user = viewer
    with honeypot() as pot:
        row = queued(user, f"http://{host}:{pot.port}/hook")
        assert drain_once() == 0
        assert pot.connections == 0 and pot.bytes_received == b""
    row.refresh_from_db()
    assert row.state == "failed"  # given up: the destination will not become allowed by retrying
    assert "loopback, private or link-local" in row.last_error


@pytest.mark.django_db(transaction=True)  # the delivery runs on a thread of its own
def test_a_dripping_webhook_ends_at_the_deadline(viewer: tuple[Client, User], settings: Any) -> None:
    """The receiver answers a byte every half second, forever: every read gets data before its
    timeout, so only an overall deadline ends the delivery (it used to wait for ever)."""
    settings.NOTIFY_DEADLINE_SECONDS = 2
    _, user = viewer
    with dripper(b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"y" * 10_000, interval=0.5) as slow:
        row = queued(user, slow.url)
        done = threading.Event()
        sent: list[int] = []

        def drain() -> None:
            sent.append(drain_once())
            done.set()

        threading.Thread(target=drain, daemon=True).start()
        assert done.wait(HANG_GUARD), "the webhook delivery never ended"
    assert sent == [0]
    row.refresh_from_db()
    assert row.state == "pending" and row.attempts == 1  # retried later
    assert "no usable answer" in row.last_error


@pytest.mark.django_db(transaction=True)  # the delivery runs on a thread of its own
def test_a_dripping_mail_server_ends_at_the_deadline(viewer: tuple[Client, User], settings: Any) -> None:
    """The mail server's greeting comes a byte every half second: Django's SMTP backend bounds
    each read at most (not at all by default), so only an overall deadline ends the delivery."""
    settings.NOTIFY_DEADLINE_SECONDS = 2
    _, user = viewer
    with dripper(b"220 " + b"x" * 10_000, interval=0.5) as slow:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", slow.port
        NotificationPreference.objects.update_or_create(
            user=user, defaults={"email": "vic@example.com", "events": ["failed"]}
        )
        row = NotificationOutbox.objects.create(
            user=user, channel="email", key="failed-1", event="failed", subject="s", text="t"
        )
        done = threading.Event()

        def drain() -> None:
            drain_once()
            done.set()

        threading.Thread(target=drain, daemon=True).start()
        assert done.wait(HANG_GUARD), "the email delivery never ended"
    row.refresh_from_db()
    assert row.state == "pending" and row.attempts == 1
    assert "no complete SMTP exchange within 2 s" in row.last_error

"""Draining the outbox: email through Django's email backend, HMAC-signed webhooks; retried with
back-off, claimed row by row with a conditional UPDATE so two workers never send one row twice."""

import hashlib
import hmac
import json
import logging
import time
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from tasksapp import events
from tasksapp.mcpclient.outbound import OutboundFailed
from tasksapp.models import NotificationOutbox, NotificationPreference
from tasksapp.notify import config
from tasksapp.notify.mailer import send_email
from tasksapp.services.audit import audit
from tasksapp.services.outbound import webhook_client

log = logging.getLogger(__name__)
SIGNATURE_HEADER = "X-Dashboard-Signature"
TIMESTAMP_HEADER = "X-Dashboard-Timestamp"
# A row is stamped sent after its message was handed to the channel layer, which delivers it a
# moment later: a page rendered in between would miss it live and on connect.
SENT_MARGIN = timedelta(seconds=2)
NOTES_CAUGHT_UP = 20  # at most this many on one connect, the newest being the ones that matter


class GiveUp(Exception):
    """A message that retrying cannot help (its moment has passed, or it is no longer wanted)."""


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """sha256 HMAC over "<timestamp>.<body>", hex: what a receiver recomputes to trust a message."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def deliver(row: NotificationOutbox) -> None:
    """Send one message; raises on any failure (the caller retries later)."""
    pref = NotificationPreference.objects.get(user_id=row.user_id)
    if row.channel == "browser":
        if not pref.browser:
            raise GiveUp("browser notifications are off now")
        if row.created_at < timezone.now() - timedelta(seconds=config.BROWSER_FRESH_SECONDS):
            raise GiveUp("too old to show in a browser")
        # To the user's open pages (their sockets' user group); a page whose socket joins later
        # asks for it on connect (browser_notes_since).
        events.notify_user(row.user_id, **browser_note(row))
        return
    if row.channel == "email":
        if not pref.email:
            raise ValueError("no email address is set any more")
        send_email(subject=row.subject, text=row.text, to=pref.email)
        return
    if not pref.webhook_url:
        raise ValueError("no webhook URL is set any more")
    body = json.dumps({"text": row.text}, ensure_ascii=False).encode()
    stamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: stamp}
    if pref.webhook_secret:
        headers[SIGNATURE_HEADER] = sign(pref.webhook_secret, stamp, body)
    status = async_to_sync(post_webhook)(pref.webhook_url, body, headers)
    if not 200 <= status < 300:
        raise WebhookFailed(f"the webhook answered HTTP {status}")


def browser_note(row: NotificationOutbox) -> dict[str, str]:
    """What a page is sent for a browser notification: its key, its text and the path it opens
    (on the page's own origin, whatever NOTIFY_BASE_URL says)."""
    subject, _, link = row.text.rpartition("\n")
    return {"key": row.key, "text": row.subject, "url": urlsplit(link).path if subject else ""}


def browser_notes_since(user_id: int, since: datetime) -> list[dict[str, str]]:
    """The browser notifications sent to this user from shortly before `since` (a page's render)
    on, the fresh ones only, oldest first: a page whose socket joined after one went out (it was
    loading, or reconnecting) still shows it. notify.js shows each key once per page."""
    floor = max(since - SENT_MARGIN, timezone.now() - timedelta(seconds=config.BROWSER_FRESH_SECONDS))
    rows = NotificationOutbox.objects.filter(
        user_id=user_id, channel="browser", state="sent", sent_at__gt=floor
    )
    return [browser_note(row) for row in reversed(rows.order_by("-sent_at")[:NOTES_CAUGHT_UP])]


class WebhookFailed(Exception):
    """The webhook's receiver did not take the message (retried later)."""


async def post_webhook(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST to a webhook under the webhook address policy and the notification deadline; returns
    the status (the answer's body is not read). A destination the policy refuses is given up."""
    client = webhook_client()
    try:
        return (await client.request("POST", url, headers=headers, content=body, read=False)).status
    except OutboundFailed as exc:
        if exc.refused:
            raise GiveUp(str(exc)) from exc
        raise WebhookFailed(str(exc)) from exc
    finally:
        await client.aclose()


def backoff(attempts: int) -> timedelta:
    return timedelta(
        seconds=min(config.FIRST_RETRY_SECONDS * 2 ** max(attempts - 1, 0), config.MAX_RETRY_SECONDS)
    )


def drain_once(limit: int = 50, channels: tuple[str, ...] = config.CHANNELS) -> int:
    """Send what is due on these channels; returns how many were sent."""
    now = timezone.now()
    stuck = now - timedelta(seconds=config.STUCK_SECONDS)
    mine = NotificationOutbox.objects.filter(channel__in=channels)
    mine.filter(state="sending", next_attempt_at__lt=stuck).update(state="pending")
    sent = 0
    due = mine.filter(state="pending", next_attempt_at__lte=now).order_by("next_attempt_at")
    for pk in list(due.values_list("pk", flat=True)[:limit]):
        claimed = NotificationOutbox.objects.filter(pk=pk, state="pending").update(
            state="sending", next_attempt_at=now
        )
        if not claimed:
            continue
        row = NotificationOutbox.objects.get(pk=pk)
        try:
            deliver(row)
        except Exception as exc:  # any failure of one message: recorded on its row, retried later
            _failed(row, f"{type(exc).__name__}: {exc}"[:1000], give_up=isinstance(exc, GiveUp))
            continue
        NotificationOutbox.objects.filter(pk=pk).update(
            state="sent", sent_at=timezone.now(), attempts=row.attempts + 1
        )
        sent += 1
    return sent


def _failed(row: NotificationOutbox, error: str, *, give_up: bool = False) -> None:
    attempts = row.attempts + 1
    gave_up = give_up or attempts >= config.MAX_ATTEMPTS
    log.warning(
        "notify: %s %s to user %s failed (attempt %d): %s", row.channel, row.key, row.user_id, attempts, error
    )
    NotificationOutbox.objects.filter(pk=row.pk).update(
        state="failed" if gave_up else "pending",
        attempts=attempts,
        last_error=error,
        next_attempt_at=timezone.now() + backoff(attempts),
    )


def outbox_retry(*, rows: "QuerySet[NotificationOutbox]", user: object) -> int:
    """Send these again at the next drain (the admin's "retry now"), with a fresh count of attempts
    for those that gave up; rows already sent or being sent are left alone. Audited."""
    with transaction.atomic():
        waiting = rows.filter(state__in=["pending", "failed"])
        keys = list(waiting.values_list("pk", flat=True))
        retried = NotificationOutbox.objects.filter(pk__in=keys).update(
            state="pending", attempts=0, next_attempt_at=timezone.now()
        )
        audit(user, "notify_retry", detail={"outbox": keys})
    return retried

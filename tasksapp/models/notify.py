"""Notifications: what each person wants to hear about, the durable outbox of messages to send,
and where the scan of changes got to."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from tasksapp.lib import crypto

EVENTS = ("input", "failed", "unhealthy")


class NotificationPreference(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    events = models.JSONField(default=list, blank=True)  # a subset of EVENTS
    server_ids = models.JSONField(default=list, blank=True)  # empty: every server
    tools = models.JSONField(default=list, blank=True)  # empty: every tool
    email = models.EmailField(blank=True, default="")
    webhook_url = models.URLField(blank=True, default="", max_length=500)
    webhook_secret_encrypted = models.TextField(blank=True, default="", editable=False)
    browser = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "tasksapp"

    def __str__(self) -> str:
        return f"notifications for {self.user}"

    @property
    def webhook_secret(self) -> str:
        return crypto.decrypt(self.webhook_secret_encrypted) if self.webhook_secret_encrypted else ""

    @webhook_secret.setter
    def webhook_secret(self, value: str) -> None:
        self.webhook_secret_encrypted = crypto.encrypt(value) if value else ""

    def wants(self, event: str, server_id: int | None, tool: str | None) -> bool:
        if event not in self.events:
            return False
        if self.server_ids and server_id not in self.server_ids:
            return False
        return not (self.tools and tool is not None and tool not in self.tools)


class NotificationOutbox(models.Model):
    class State(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed", "gave up"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=10)  # email | webhook | browser
    key = models.CharField(max_length=100)  # the event, e.g. input-12: one message per user, channel, event
    event = models.CharField(max_length=20)
    subject = models.CharField(max_length=300)
    text = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now, db_index=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "tasksapp"
        constraints = [models.UniqueConstraint(fields=["user", "channel", "key"], name="unique_notification")]

    def __str__(self) -> str:
        return f"{self.channel} {self.key} to {self.user_id} ({self.state})"


class NotifyCursor(models.Model):
    """Where the scan got to (one row): durable, so a restarted worker neither misses nor repeats."""

    scanned_to = models.DateTimeField(default=timezone.now)
    unhealthy = models.JSONField(default=list, blank=True)  # servers already reported unhealthy

    class Meta:
        app_label = "tasksapp"

    def __str__(self) -> str:
        return f"notifications scanned to {self.scanned_to:%Y-%m-%d %H:%M:%S}"

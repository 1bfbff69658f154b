"""Tool calls a server answered with input_required before any task existed (MRTR)."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from tasksapp.lib import crypto
from tasksapp.models.servers import McpServer, watched_servers
from tasksapp.models.tasks import RemoteTask


class PendingCallQuerySet(models.QuerySet["PendingCall"]):
    def waiting(self, now: datetime | None = None) -> "PendingCallQuerySet":
        """Calls whose questions someone may still answer: open, on a server in use, and asked within
        MCP_PENDING_CALL_TTL_SECONDS (older ones have expired, whether or not that was recorded yet)."""
        return self.waiting_since(waiting_since(now or timezone.now()))

    def waiting_since(self, since: datetime) -> "PendingCallQuerySet":
        """waiting() as of when `since` is waiting_since(now)."""
        return self.filter(Q(state="open", updated_at__gte=since) & watched_servers("server__"))


def waiting_since(now: datetime) -> datetime:
    """The oldest a waiting call may be at `now` (MCP_PENDING_CALL_TTL_SECONDS)."""
    return now - timedelta(seconds=settings.MCP_PENDING_CALL_TTL_SECONDS)


class PendingCall(models.Model):
    """A tools/call the server answered with input_required before any task existed (MRTR)."""

    class State(models.TextChoices):
        OPEN = "open", _("waiting for input")
        SENDING = "sending", _("retrying")
        DONE = "done", _("done")
        FAILED = "failed", _("failed")
        EXPIRED = "expired", _("expired")
        DISMISSED = "dismissed", _("dismissed")

    server = models.ForeignKey(McpServer, on_delete=models.PROTECT, related_name="pending_calls")
    tool_name = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict, blank=True)
    input_requests = models.JSONField(default=dict, blank=True)
    request_state_encrypted = models.TextField(blank=True, default="", editable=False)
    rounds = models.PositiveIntegerField(default=1)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN, db_index=True)
    result = models.JSONField(null=True, blank=True)
    task = models.ForeignKey(RemoteTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    last_error = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = PendingCallQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"pending {self.tool_name} on {self.server_id}"

    @property
    def expires_at(self) -> datetime:
        """When its questions expire unanswered (MCP_PENDING_CALL_TTL_SECONDS after the last round)."""
        return self.updated_at + timedelta(seconds=settings.MCP_PENDING_CALL_TTL_SECONDS)

    @property
    def request_state(self) -> str | None:
        return crypto.decrypt(self.request_state_encrypted) if self.request_state_encrypted else None

    @request_state.setter
    def request_state(self, value: str | None) -> None:
        self.request_state_encrypted = crypto.encrypt(value) if value else ""

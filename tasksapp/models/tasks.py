"""The mirror of the servers' tasks: each task as its server last described it, its questions
(input requests) and its history (task events), and the reads every list and page makes of them.

There is no tasks/list in the protocol, so these rows are the only index of the work operators
started. Task ids and input keys are bearer secrets: stored encrypted, found by fingerprint.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from tasksapp.lib import crypto
from tasksapp.models.servers import LARGE_SERVER_COLUMNS, McpServer, ServerHealth, holder_key, watched_servers

TERMINAL = ("completed", "failed", "cancelled")


# What the status badges say: identifiers in code and CSS, translated on the page
# ({% translate task.display_status context "task status" %}); literal, so makemessages finds them.
VIA_WORDS = (  # RemoteTask.last_seen_via, shown as "(by poll)"
    pgettext_lazy("seen via", "create"),
    pgettext_lazy("seen via", "poll"),
    pgettext_lazy("seen via", "push"),
    pgettext_lazy("seen via", "operator"),
    pgettext_lazy("seen via", "local"),
)
STATUS_WORDS = (
    pgettext_lazy("task status", "working"),
    pgettext_lazy("task status", "input_required"),
    pgettext_lazy("task status", "completed"),
    pgettext_lazy("task status", "failed"),
    pgettext_lazy("task status", "cancelled"),
    pgettext_lazy("task status", "expired"),
    pgettext_lazy("task status", "completed with tool error"),
    pgettext_lazy("task status", "cancel requested"),
    pgettext_lazy("task status", "needs input"),
)


# Columns a server fills with as much as it likes (bounded only by the caps in services): pages
# that do not show them must not load them.
LARGE_TASK_COLUMNS = ("result", "error", "raw", "arguments")


# What a list row reads (RemoteTaskQuerySet.for_rows): tasksapp/presenters/task_rows.py, and the
# properties it calls (display_status, ended_at, stale_failing_since, holder_key).
ROW_COLUMNS = (
    "tool_name",
    "status",
    "status_message",
    "is_tool_error",
    "created_at",
    "finished_at",
    "cancel_requested_at",
    "expired",
    "expired_at",
    "last_seen_at",
    "last_confirmed_at",
    "leased_by",
    "agent__name",
    "server__name",
    "server__enabled",
    "server__consecutive_failures",
    "server__failing_since",
)


def _server_large(prefix: str) -> list[str]:
    return [prefix + column for column in LARGE_SERVER_COLUMNS]


def holder_failing() -> "models.QuerySet[ServerHealth]":
    """The failing health row of the worker that holds the task (OuterRef), on the task's server."""
    return ServerHealth.objects.filter(
        server=models.OuterRef("server_id"), worker=models.OuterRef("leased_by"), consecutive_failures__gt=0
    )


def stale() -> Q:
    """An active task shows what its server said last, unconfirmed, when the server is disabled,
    when the worker that holds the task cannot reach it (another worker's success on the server is
    no news of this task), or, held by nobody, when the server's last word is failing."""
    unheld = Q(leased_by="", server__consecutive_failures__gt=0)
    return Q(server__enabled=False) | Q(models.Exists(holder_failing())) | unheld


# Servers whose every active task is stale, as a value of any row with a `server` (the overview's counts).
STALE_SERVERS = models.ExpressionWrapper(Q(server__enabled=False), output_field=models.BooleanField())


class RemoteTaskQuerySet(models.QuerySet["RemoteTask"]):
    def active(self) -> "RemoteTaskQuerySet":
        """Tasks the worker must keep watching: not terminal, not expired, server enabled and not archived."""
        return self.exclude(status__in=TERMINAL).filter(Q(expired=False) & watched_servers("server__"))

    def leasable(self, now: datetime) -> "RemoteTaskQuerySet":
        return self.active().filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))

    def for_list(self) -> "RemoteTaskQuerySet":
        """What a list row shows, in one query (server and agent joined, large JSON columns left out, the
        holder's health as a subquery)."""
        return (
            self.select_related("server", "agent")
            .defer(
                *LARGE_TASK_COLUMNS,
                "remote_id_encrypted",
                "server__headers_encrypted",
                *_server_large("server__"),
            )
            .with_holder_health()
        )

    def for_rows(self) -> "RemoteTaskQuerySet":
        """The task list page's rows (tasksapp/presenters/task_rows.py): for_list() narrowed to the
        columns a row shows, as model instances of a third of the columns."""
        return self.select_related("server", "agent").only(*ROW_COLUMNS).with_holder_health()

    def for_detail(self) -> "RemoteTaskQuerySet":
        """A task's page: the task whole, its server without the columns only server pages show, and
        the server's authorization row (its OAuth badge reads it: a query and its compilation fewer)."""
        return (
            self.select_related("server__authorization", "started_by", "agent")
            .defer(*_server_large("server__"))
            .with_holder_health(error=True)
        )

    def with_holder_health(self, *, error: bool = False) -> "RemoteTaskQuerySet":
        """Since when the worker holding each task has been failing on its server (None while it
        reaches it), and with `error` what went wrong: RemoteTask.stale_since reads them."""
        failing = holder_failing()
        found = self.annotate(holder_failing_since=models.Subquery(failing.values("failing_since")[:1]))
        if error:
            found = found.annotate(holder_error=models.Subquery(failing.values("last_error")[:1]))
        return found

    def with_display_status(self, status: str) -> "RemoteTaskQuerySet":
        """Filter by the label people see, including the dashboard's own refinements."""
        if status == "needs_input":
            return self.filter(status="input_required", expired=False)
        if status == "tool_error":
            return self.filter(status="completed", is_tool_error=True)
        if status == "completed":
            return self.filter(status="completed", is_tool_error=False)
        if status == "expired":
            return self.filter(expired=True)
        if status == "cancel_requested":
            return self.exclude(status__in=TERMINAL).filter(cancel_requested_at__isnull=False, expired=False)
        if status == "active":
            return self.exclude(status__in=TERMINAL).filter(expired=False)
        if status == "stale":
            return self.exclude(status__in=TERMINAL).filter(stale(), expired=False)
        return self.filter(status=status, expired=False)


class RemoteTask(models.Model):
    """One task on one server. `status` and friends are exactly what the server last said."""

    server = models.ForeignKey(McpServer, on_delete=models.PROTECT, related_name="tasks")
    remote_id_hash = models.CharField(max_length=64, editable=False, db_index=True)
    remote_id_encrypted = models.TextField(editable=False)
    tool_name = models.CharField(max_length=200, db_index=True)
    arguments = models.JSONField(default=dict, blank=True)

    status = models.CharField(max_length=20, db_index=True)
    status_message = models.TextField(blank=True, default="")
    remote_created_at = models.DateTimeField(null=True, blank=True)
    remote_updated_at = models.DateTimeField(null=True, blank=True)
    created_at_raw = models.CharField(max_length=64, blank=True, default="")
    updated_at_raw = models.CharField(max_length=64, blank=True, default="")
    ttl_ms = models.BigIntegerField(null=True, blank=True)
    poll_interval_ms = models.BigIntegerField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    is_tool_error = models.BooleanField(default=False, help_text="completed, with result.isError true")
    raw = models.JSONField(default=dict, blank=True, help_text="last snapshot, bearer secrets removed")

    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    agent = models.ForeignKey(
        "Agent",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="tasks",
        help_text="the agent that started it through the gateway (only it may see it there)",
    )
    refresh_wanted_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="an answer or cancel was sent since the server last confirmed the task: the "
        "gateway reads the task from the server again rather than from the mirror",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    expired = models.BooleanField(default=False)
    expired_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True, help_text="last changed")
    last_confirmed_at = models.DateTimeField(
        null=True, blank=True, help_text="last successful poll or push, change or not (within seconds)"
    )
    last_seen_via = models.CharField(max_length=10, blank=True, default="")
    next_poll_at = models.DateTimeField(null=True, blank=True)
    last_polled_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    # Input requests recorded over the task's life, and when that reached MCP_MAX_INPUT_REQUESTS_PER_TASK
    # (the server misbehaves: newer keys are not recorded).
    input_requests_recorded = models.PositiveIntegerField(default=0)
    input_requests_capped_at = models.DateTimeField(null=True, blank=True)

    leased_by = models.CharField(max_length=200, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)

    objects = RemoteTaskQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [
            ("start_remotetask", "Can start tool calls"),
            ("answer_remotetask", "Can answer input requests"),
            ("cancel_remotetask", "Can cancel tasks"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["server", "remote_id_hash"], name="unique_remote_task"),
        ]
        indexes = [
            models.Index(fields=["status", "expired", "lease_until"], name="task_active_lease"),
            models.Index(fields=["server", "status"], name="task_server_status"),
            models.Index(fields=["last_seen_at"], name="task_last_change"),
            # The overview's longest-running tasks: the oldest of each active status, in index order.
            models.Index(fields=["status", "expired", "created_at"], name="task_status_age"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.tool_name} on {self.server_id}"

    @property
    def remote_id(self) -> str:
        return crypto.decrypt(self.remote_id_encrypted)

    def set_remote_id(self, remote_id: str) -> None:
        self.remote_id_hash = crypto.fingerprint(remote_id)
        self.remote_id_encrypted = crypto.encrypt(remote_id)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def ended_at(self) -> datetime | None:
        """When the task ended, the one definition every duration uses: the moment the mirror saw
        it finish, or, for an expired task, the moment the server was found to no longer know it.
        None while it runs. (search.Elapsed is the same in SQL, for sorting.)"""
        return ended_at(self.status, self.finished_at, self.expired, self.expired_at)

    @property
    def ttl_deadline(self) -> datetime | None:
        if self.ttl_ms is None or self.remote_created_at is None:
            return None
        return self.remote_created_at + timedelta(milliseconds=self.ttl_ms)

    @property
    def stale_since(self) -> datetime | None:
        """For an active task whose server is disabled, or whose worker cannot reach its server:
        since when nothing confirmed it."""
        if self.is_terminal or self.expired:
            return None
        if self.server.enabled and self.stale_failing_since is None:
            return None
        return self.last_confirmed_at or self.last_seen_at or self.created_at

    @property
    def answered_by_agent_only(self) -> str:
        """The agent's name when only it may answer this task's questions (a gateway task under the
        `agent` policy: read-only for people); empty otherwise."""
        if self.agent_id is None or self.server.input_policy(self.tool_name) != "agent":
            return ""
        return str(self.agent)

    @property
    def starter(self) -> str:
        """Who started the task, for people: the agent's name, a user's, or empty (the command line)."""
        if self.agent_id is not None:
            return str(self.agent)
        return str(self.started_by) if self.started_by_id is not None else ""

    @property
    def holder_key(self) -> str:
        """The worker holding this task, as list rows carry it (tasksapp.models.holder_key)."""
        return holder_key(self.leased_by)

    @property
    def stale_failing_since(self) -> datetime | None:
        """Since when the worker that holds this task has been failing on its server (None while it
        reaches it); for a task nobody holds, the server's. Read from the holder's health
        (RemoteTaskQuerySet.with_holder_health); a row loaded without it asks the database."""
        if not self.leased_by:
            return self.server.failing_since if self.server.consecutive_failures else None
        if "holder_failing_since" not in self.__dict__:
            row = ServerHealth.objects.filter(
                server_id=self.server_id, worker=self.leased_by, consecutive_failures__gt=0
            ).values_list("failing_since", "last_error")
            self.__dict__["holder_failing_since"], self.__dict__["holder_error"] = row.first() or (None, "")
        found: datetime | None = self.__dict__["holder_failing_since"]
        return found

    @property
    def stale_error(self) -> str:
        """What went wrong for the worker that holds this task (or the server's last error), while
        it is failing."""
        if not self.leased_by:
            return self.server.last_error if self.server.consecutive_failures else ""
        if "holder_error" not in self.__dict__:
            self.__dict__.pop("holder_failing_since", None)
            _ = self.stale_failing_since
        return str(self.__dict__.get("holder_error") or "")

    @property
    def display_status(self) -> str:
        """One label for people: the server's status, refined by what we know locally."""
        return status_label(
            self.status, self.expired, self.is_tool_error, self.cancel_requested_at is not None
        )


def status_label(status: str, expired: bool, is_tool_error: bool, cancel_requested: bool) -> str:
    """RemoteTask.display_status from the columns alone (exports read rows, not models)."""
    if expired:
        return "expired"
    if status == "completed" and is_tool_error:
        return "completed with tool error"
    if cancel_requested and status not in TERMINAL:
        return "cancel requested"
    if status == "input_required":
        return "needs input"
    return status


def ended_at(
    status: str, finished_at: datetime | None, expired: bool, expired_at: datetime | None
) -> datetime | None:
    """RemoteTask.ended_at from the columns alone."""
    if status in TERMINAL:
        return finished_at
    return expired_at if expired else None


class InputRequest(models.Model):
    class State(models.TextChoices):
        OPEN = "open", _("open")
        SENDING = "sending", _("answer being sent")
        ANSWERED = "answered", _("answered")
        GONE = "gone", _("no longer pending")

    task = models.ForeignKey(RemoteTask, on_delete=models.CASCADE, related_name="input_requests")
    key_hash = models.CharField(max_length=64, editable=False)
    key_encrypted = models.TextField(editable=False)
    method = models.CharField(max_length=100)
    params = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN, db_index=True)
    response = models.JSONField(null=True, blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    answered_by_agent = models.ForeignKey(
        "Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    answered_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    first_seen_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["first_seen_at", "id"]
        constraints = [models.UniqueConstraint(fields=["task", "key_hash"], name="unique_input_key")]

    def __str__(self) -> str:
        return f"{self.method} for task #{self.task_id}"

    @property
    def key(self) -> str:
        return crypto.decrypt(self.key_encrypted)

    def set_key(self, key: str) -> None:
        self.key_hash = crypto.fingerprint(key)
        self.key_encrypted = crypto.encrypt(key)


class TaskEvent(models.Model):
    """Append-only history: one row per real change, never per poll."""

    class Source(models.TextChoices):
        CREATE = "create", _("Create")
        POLL = "poll", _("Poll")
        PUSH = "push", _("Push")
        OPERATOR = "operator", _("Operator")
        LOCAL = "local", _("dashboard")
        TRIMMED = "trimmed", _("dashboard (older events removed)")

    task = models.ForeignKey(RemoteTask, on_delete=models.CASCADE, related_name="events")
    status = models.CharField(max_length=20)
    status_message = models.TextField(blank=True, default="")
    source = models.CharField(max_length=10, choices=Source.choices)
    note = models.CharField(max_length=500, blank=True, default="")
    remote_updated_at = models.CharField(max_length=64, blank=True, default="")
    merged = models.PositiveIntegerField(
        default=0, help_text="status messages this row stands for besides its own (coalesced or removed)"
    )
    observed_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["observed_at", "id"]

    def __str__(self) -> str:
        return f"{self.status} ({self.source})"

"""The mirror: everything the dashboard knows about remote MCP servers and their tasks.

There is no tasks/list in the protocol, so these rows are the only index of the work operators
started. Bearer secrets (task ids, input keys, credentials) are stored encrypted, found by
fingerprint; see tasksapp.crypto.
"""

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from tasksapp import crypto

TERMINAL = ("completed", "failed", "cancelled")
GATEWAY_POLICIES = ("either", "people", "agent")
GATEWAY_POLICY_CHOICES = [
    ("either", _("the agent or a person, first answer wins")),
    ("people", _("people only: withheld from the agent")),
    ("agent", _("the agent only: read-only in the inbox")),
]


def watched_servers(prefix: str = "") -> Q:
    """The servers the dashboard watches (polls, lists, asks about): enabled and not archived.
    `prefix` reaches them from a related row: watched_servers("task__server__")."""
    return Q(**{f"{prefix}enabled": True, f"{prefix}archived": False})


class McpServerQuerySet(models.QuerySet["McpServer"]):
    def watched(self) -> "McpServerQuerySet":
        return self.filter(watched_servers())


class McpServer(models.Model):
    class Era(models.TextChoices):
        UNKNOWN = "", _("not yet discovered")
        MODERN = "modern", "2026-07-28"
        LEGACY = "legacy", _("legacy (2025-11-25 or older)")

    name = models.SlugField(max_length=100, unique=True)
    url = models.URLField(max_length=2000)
    headers_encrypted = models.TextField(blank=True, default="", editable=False)
    enabled = models.BooleanField(default=True)
    archived = models.BooleanField(
        default=False,
        help_text="kept read-only: never polled, no calls, answers or cancels (docs/operator.md)",
    )

    era = models.CharField(max_length=10, choices=Era.choices, blank=True, default="")
    supported_versions = models.JSONField(default=list, blank=True)
    capabilities = models.JSONField(default=dict, blank=True)
    tasks_supported = models.BooleanField(default=False)
    listen_supported = models.BooleanField(null=True, blank=True, help_text="unknown until first tried")
    server_info = models.JSONField(default=dict, blank=True)
    instructions = models.TextField(blank=True, default="")
    tools = models.JSONField(default=list, blank=True)
    tools_note = models.CharField(
        max_length=500, blank=True, default="", help_text="why fewer tools are stored than the server lists"
    )
    roots = models.JSONField(default=list, blank=True, help_text='answers roots/list: [{"uri": "file:///…"}]')
    discovered_at = models.DateTimeField(null=True, blank=True)

    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    failing_since = models.DateTimeField(
        null=True, blank=True, help_text="when the current run of failures began (empty while healthy)"
    )
    backoff_until = models.DateTimeField(null=True, blank=True)
    # The health fields above are the worst of the live workers' (ServerHealth): who is behind, and
    # how many workers reported on this server.
    failing_workers = models.JSONField(default=list, blank=True, help_text="live workers it fails for")
    workers_reporting = models.PositiveIntegerField(default=0)

    read_timeout_seconds = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(3600)],
        help_text="the longest silence allowed while reading an answer (tools/call excepted)",
    )
    call_timeout_seconds = models.PositiveIntegerField(
        default=600,
        validators=[MinValueValidator(1), MaxValueValidator(86400)],
        help_text="how long a tools/call may take to answer, silence included",
    )

    gateway_policy = models.CharField(
        max_length=10,
        choices=GATEWAY_POLICY_CHOICES,
        default="either",
        help_text="who answers the input requests of tasks started through the gateway",
    )
    gateway_tool_policies = models.JSONField(
        default=dict, blank=True, help_text='per-tool exceptions to gateway_policy: {"tool": "people"}'
    )

    created_at = models.DateTimeField(auto_now_add=True)

    objects = McpServerQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        verbose_name = _("MCP server")

    def __str__(self) -> str:
        return self.name

    @property
    def headers(self) -> dict[str, str]:
        if not self.headers_encrypted:
            return {}
        value = json.loads(crypto.decrypt(self.headers_encrypted))
        return {str(k): str(v) for k, v in value.items()}

    @headers.setter
    def headers(self, value: dict[str, str]) -> None:
        self.headers_encrypted = crypto.encrypt(json.dumps(value)) if value else ""

    def stored_tool(self, name: str) -> dict[str, Any] | None:
        """The tool of that name from the stored tools/list, as the server described it."""
        for tool in self.tools:
            if isinstance(tool, dict) and tool.get("name") == name:
                return tool
        return None

    def stored_input_schema(self, name: str) -> dict[str, Any] | None:
        """That tool's stored inputSchema (None when the tool or its schema is not stored)."""
        schema = (self.stored_tool(name) or {}).get("inputSchema")
        return schema if isinstance(schema, dict) else None

    @property
    def masked_headers(self) -> dict[str, str]:
        try:
            return {name: crypto.mask(value) for name, value in self.headers.items()}
        except crypto.SecretUnreadable:
            return {"(stored headers)": "unreadable: the encryption key changed (see docs/security.md)"}

    def input_policy(self, tool: str) -> str:
        """Who answers a gateway task's input requests for this tool: either, people or agent."""
        policies = self.gateway_tool_policies if isinstance(self.gateway_tool_policies, dict) else {}
        chosen = policies.get(tool)
        return chosen if chosen in GATEWAY_POLICIES else self.gateway_policy

    @property
    def health(self) -> str:
        if self.archived:
            return "archived"
        if not self.enabled:
            return "disabled"
        if self.backoff_until and self.backoff_until > timezone.now():
            return "backing off"
        if self.consecutive_failures:
            return "failing"
        if self.last_success_at:
            return "healthy"
        return "unknown"


class ServerHealth(models.Model):
    """One worker's view of one server: its failure streak, back-off and last answer.

    Back-off lives in each worker's memory, so health is per (worker, server); the McpServer row
    holds the worst of the live workers' views (tasksapp.services.health), and a task is stale
    when the worker that holds it cannot reach its server.
    """

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="health_rows")
    worker = models.CharField(max_length=200)
    consecutive_failures = models.PositiveIntegerField(default=0)
    failing_since = models.DateTimeField(null=True, blank=True)
    backoff_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True, help_text="its last answer (within 30 s)")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["server", "worker"], name="unique_server_health")]
        indexes = [models.Index(fields=["worker"], name="health_worker")]

    def __str__(self) -> str:
        return f"{self.server_id} for {self.worker}"

    @property
    def holder_key(self) -> str:
        return holder_key(self.worker)


def holder_key(worker: str) -> str:
    """A short, selector-safe name for a worker: list rows carry it (data-held-by) so that a
    worker's stale mark reaches exactly the rows of the tasks it holds."""
    return hashlib.blake2b(worker.encode(), digest_size=4).hexdigest() if worker else ""


# What the health and status badges say: identifiers in code and CSS, translated on the page
# ({% translate server.health context "server health" %}); literal, so makemessages finds them.
HEALTH_WORDS = (
    pgettext_lazy("server health", "archived"),
    pgettext_lazy("server health", "disabled"),
    pgettext_lazy("server health", "backing off"),
    pgettext_lazy("server health", "failing"),
    pgettext_lazy("server health", "healthy"),
    pgettext_lazy("server health", "unknown"),
)
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
# that do not show them must not load them (a 40 MB tool list once slowed every task page 10x).
LARGE_SERVER_COLUMNS = ("tools", "capabilities", "instructions")
LARGE_TASK_COLUMNS = ("result", "error", "raw", "arguments")


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

    def for_detail(self) -> "RemoteTaskQuerySet":
        """A task's page: the task whole, its server without the columns only server pages show."""
        return (
            self.select_related("server", "started_by", "agent")
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


class PendingCallQuerySet(models.QuerySet["PendingCall"]):
    def waiting(self, now: datetime | None = None) -> "PendingCallQuerySet":
        """Calls whose questions someone may still answer: open, on a server in use, and asked within
        MCP_PENDING_CALL_TTL_SECONDS (older ones have expired, whether or not that was recorded yet)."""
        since = (now or timezone.now()) - timedelta(seconds=settings.MCP_PENDING_CALL_TTL_SECONDS)
        return self.filter(Q(state="open", updated_at__gte=since) & watched_servers("server__"))


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


class OperatorAction(models.Model):
    """The audit log: who did what, when, to which server, call or task."""

    class Action(models.TextChoices):
        SERVER_ADD = "server_add", _("added server")
        SERVER_EDIT = "server_edit", _("edited server")
        SERVER_REFRESH = "server_refresh", _("discovered server again")
        START = "start", _("started call")
        ANSWER = "answer", _("answered")
        DECLINE = "decline", _("declined")
        ANSWER_CANCEL = "answer_cancel", _("cancelled a question")
        CANCEL = "cancel", _("cancelled")
        OAUTH_CONNECT = "oauth_connect", _("started authorization")
        OAUTH_GRANT = "oauth_grant", _("authorized server")
        OAUTH_LOST = "oauth_lost", _("authorization lost")
        OAUTH_SETTINGS = "oauth_settings", _("changed OAuth client")
        OAUTH_DISCONNECT = "oauth_disconnect", _("removed authorization")
        OAUTH_ISSUER = "oauth_issuer", _("authorization server changed")
        OAUTH_CONFIRM = "oauth_confirm", _("confirmed authorization server")
        SERVER_ARCHIVE = "server_archive", _("archived server")
        SERVER_UNARCHIVE = "server_unarchive", _("un-archived server")
        EXPORT = "export", _("exported")
        AGENT_ADD = "agent_add", _("added agent")
        AGENT_EDIT = "agent_edit", _("edited agent")
        AGENT_REVOKE = "agent_revoke", _("revoked agent")
        GATEWAY_POLICY = "gateway_policy", _("changed who answers gateway tasks")
        NOTIFY_SETTINGS = "notify_settings", _("changed notification settings")
        NOTIFY_RETRY = "notify_retry", _("retried notifications")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    agent = models.ForeignKey("Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=20, choices=Action.choices, db_index=True)
    server = models.ForeignKey(McpServer, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    task = models.ForeignKey(RemoteTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    pending_call = models.ForeignKey(
        PendingCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    detail = models.JSONField(default=dict, blank=True)
    ok = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.user or self.agent} {self.action} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class WorkerHeartbeat(models.Model):
    worker = models.CharField(max_length=200, unique=True)
    hostname = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    last_beat_at = models.DateTimeField(db_index=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    tasks_held = models.PositiveIntegerField(default=0)
    polls = models.PositiveBigIntegerField(default=0)
    pushes = models.PositiveBigIntegerField(default=0)
    streams_open = models.PositiveIntegerField(default=0)
    # Figures for /metrics, written with each beat so any web process can read every worker's.
    poll_errors = models.PositiveBigIntegerField(default=0)
    lag_p50_ms = models.FloatField(null=True, blank=True, help_text="scheduling lag since the previous beat")
    lag_p99_ms = models.FloatField(null=True, blank=True)
    lag_max_ms = models.FloatField(null=True, blank=True)
    # Server change (its lastUpdatedAt, where its clock is sane) -> mirror commit, since the previous
    # beat that had changes; push received -> commit; the changes written since start by path.
    mirror_p50_ms = models.FloatField(null=True, blank=True)
    mirror_p99_ms = models.FloatField(null=True, blank=True)
    mirror_max_ms = models.FloatField(null=True, blank=True)
    push_p50_ms = models.FloatField(null=True, blank=True)
    push_p99_ms = models.FloatField(null=True, blank=True)
    changes_push = models.PositiveBigIntegerField(default=0)
    changes_poll = models.PositiveBigIntegerField(default=0)
    changes_safety_net = models.PositiveBigIntegerField(default=0)
    # Falling behind the servers' intervals (scheduling lag p99 over its threshold): since when, and
    # the figures in words; empty while the worker keeps up. Shown on the overview's workers panel.
    behind_since = models.DateTimeField(null=True, blank=True)
    behind_note = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        ordering = ["-last_beat_at"]

    def __str__(self) -> str:
        return self.worker

    @property
    def push_percent(self) -> int | None:
        """The share of changes that came by push, in percent (None before any change)."""
        total = self.changes_push + self.changes_poll + self.changes_safety_net
        return round(100 * self.changes_push / total) if total else None

    @property
    def mirror_behind_seconds(self) -> float | None:
        """The mirror's p99 lag behind the servers, when over MCP_MIRROR_LAG_WARN_MS; else None."""
        p99 = self.mirror_p99_ms
        if p99 is None or p99 <= settings.MCP_MIRROR_LAG_WARN_MS:
            return None
        return p99 / 1000

    def is_alive(self, now: datetime | None = None) -> bool:
        now = now or timezone.now()
        return self.stopped_at is None and now - self.last_beat_at < timedelta(
            seconds=settings.MCP_LEASE_SECONDS
        )


class ServerAuthorization(models.Model):
    """OAuth for one MCP server: how the dashboard identifies itself there, and the grant it
    holds. Client secret, private key, registration, tokens and the pending authorization
    request are one encrypted JSON document (`secrets`); never shown in full, never logged.

    Everything here belongs to one authorization server, `issuer`: credentials are bound to it
    when saved (or by the first Connect), and nothing is ever sent to another. When the MCP
    server names another (`pending_issuer`), an admin must confirm it first."""

    class State(models.TextChoices):
        NEEDED = "needed", _("This server needs authorization")
        CONNECTED = "connected", _("Connected")
        LOST = "lost", _("Authorization needed")
        STEP_UP = "step_up", _("Needs wider access")
        ISSUER_CHANGED = "issuer_changed", _("Authorization server changed")

    class GrantType(models.TextChoices):
        AUTHORIZATION_CODE = "authorization_code", _("a person connects (authorization code)")
        CLIENT_CREDENTIALS = "client_credentials", _("machine to machine (client credentials)")

    server = models.OneToOneField(McpServer, on_delete=models.CASCADE, related_name="authorization")
    state = models.CharField(max_length=20, choices=State.choices, default=State.NEEDED)
    grant_type = models.CharField(
        max_length=20, choices=GrantType.choices, default=GrantType.AUTHORIZATION_CODE
    )
    client_id = models.CharField(
        max_length=2000, blank=True, default="", help_text="pre-registered client ID"
    )
    secrets_encrypted = models.TextField(blank=True, default="", editable=False)
    pending_state_hash = models.CharField(max_length=64, blank=True, default="", db_index=True)
    pending_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    pending_at = models.DateTimeField(null=True, blank=True)
    issuer = models.CharField(
        max_length=2000,
        blank=True,
        default="",
        help_text="the authorization server the credentials and tokens are bound to",
    )
    pending_issuer = models.CharField(
        max_length=2000,
        blank=True,
        default="",
        help_text="the authorization server the MCP server names instead, until an admin confirms it",
    )
    # A token refresh in progress (tasksapp/services/oauth_store.py): who, and until when.
    refresh_lease_owner = models.CharField(max_length=32, blank=True, default="")
    refresh_lease_until = models.DateTimeField(null=True, blank=True)
    scope = models.CharField(max_length=2000, blank=True, default="", help_text="granted")
    wanted_scope = models.CharField(max_length=2000, blank=True, default="", help_text="asked for next")
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    granted_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="the current access token's")
    refreshed_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("server authorization")

    def __str__(self) -> str:
        return f"{self.server} ({self.state})"

    @property
    def secrets(self) -> dict[str, str]:
        if not self.secrets_encrypted:
            return {}
        value = json.loads(crypto.decrypt(self.secrets_encrypted))
        return {str(k): str(v) for k, v in value.items() if v}

    @secrets.setter
    def secrets(self, value: dict[str, str]) -> None:
        kept = {k: v for k, v in value.items() if v}
        self.secrets_encrypted = crypto.encrypt(json.dumps(kept)) if kept else ""

    @property
    def needs_person(self) -> bool:
        return self.state != self.State.CONNECTED


class TaskCount(models.Model):
    """Tasks per server and state bucket, kept by database triggers (tasksapp.counts): never written
    by Python code, so no write path can forget it."""

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    status = models.CharField(max_length=20)
    expired = models.BooleanField()
    is_tool_error = models.BooleanField()
    cancel_requested = models.BooleanField()
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["server", "status", "expired", "is_tool_error", "cancel_requested"],
                name="unique_count",
            )
        ]

    def __str__(self) -> str:
        return f"{self.n} {self.status} on {self.server_id}"


class TaskHour(models.Model):
    """Tasks started (created_at) and finished (finished_at) per UTC hour, kept by the same triggers."""

    hour = models.DateTimeField(unique=True)
    started = models.BigIntegerField(default=0)
    finished = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}:00 +{self.started} / {self.finished} done"


class Agent(models.Model):
    """A program that calls tools through the gateway (tasksapp.gateway) with a bearer token.

    The token is shown once, when it is made; only its SHA-256 is kept (a 256-bit random token
    needs no slow hash), so a copy of the database lets nobody call as the agent.
    """

    name = models.SlugField(max_length=100, unique=True)
    description = models.CharField(max_length=500, blank=True, default="")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_hint = models.CharField(
        max_length=20, editable=False, help_text="the token's first characters, to tell tokens apart"
    )
    servers = models.ManyToManyField(McpServer, related_name="agents", blank=True)
    rate_limit_per_minute = models.PositiveIntegerField(
        default=600,
        validators=[MinValueValidator(1), MaxValueValidator(1_000_000)],
        help_text="gateway requests a minute, per dashboard process; more get HTTP 429",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        permissions = [("manage_agents", "Can add and revoke agents")]

    def __str__(self) -> str:
        return self.name

    @property
    def active(self) -> bool:
        return self.revoked_at is None


# Latency buckets of the gateway's traffic figures, in milliseconds (the last one is open-ended).
LATENCY_BOUNDS_MS = (
    0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750,
    1000, 1500, 2000, 3000, 5000, 7500, 10_000, 20_000, 30_000, 60_000, 120_000, 300_000, 600_000,
)  # fmt: skip


class GatewayTraffic(models.Model):
    """Gateway requests per minute, server, agent, method and tool: counts, errors and a latency
    histogram (counts per LATENCY_BOUNDS_MS bucket, one more for beyond the last). Written by each
    Daphne process every few seconds (tasksapp.services.traffic); kept MCP_GATEWAY_TRAFFIC_DAYS."""

    minute = models.DateTimeField()
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    method = models.CharField(max_length=60)
    tool = models.CharField(max_length=200, blank=True, default="")
    calls = models.PositiveBigIntegerField(default=0)
    errors = models.PositiveBigIntegerField(default=0)
    total_ms = models.FloatField(default=0)
    buckets = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["minute", "server", "agent", "method", "tool"], name="unique_traffic"
            )
        ]
        indexes = [models.Index(fields=["server", "minute"], name="traffic_server_minute")]

    def __str__(self) -> str:
        return f"{self.calls} {self.method} {self.tool} at {self.minute:%H:%M}"


# Models kept in their own modules, registered with the app here: user preferences (tasksapp/prefs.py),
# notifications (tasksapp/notify/models.py) and sessions (tasksapp/sessions.py).
from tasksapp.notify.models import (  # noqa: E402, F401
    NotificationOutbox,
    NotificationPreference,
    NotifyCursor,
)
from tasksapp.prefs import UserPreference  # noqa: E402, F401
from tasksapp.retention.models import Chore  # noqa: E402, F401
from tasksapp.sessions import HashedSession  # noqa: E402, F401

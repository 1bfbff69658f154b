"""The MCP servers the dashboard watches: each server's row, every worker's view of its health,
and the OAuth authorization the dashboard holds there.

Bearer secrets (headers, client secrets, tokens) are stored encrypted; see tasksapp.lib.crypto.
"""

import hashlib
import json
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from tasksapp.lib import crypto

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


# What the health badges say: identifiers in code and CSS, translated on the page
# ({% translate server.health context "server health" %}); literal, so makemessages finds them.
HEALTH_WORDS = (
    pgettext_lazy("server health", "archived"),
    pgettext_lazy("server health", "disabled"),
    pgettext_lazy("server health", "backing off"),
    pgettext_lazy("server health", "failing"),
    pgettext_lazy("server health", "healthy"),
    pgettext_lazy("server health", "unknown"),
)


# Columns a server fills with as much as it likes (bounded only by the caps in services): pages
# that do not show them must not load them (a 40 MB tool list once slowed every task page 10x).
LARGE_SERVER_COLUMNS = ("tools", "capabilities", "instructions")


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

"""Who uses the dashboard besides its servers: agents that call tools through the gateway, and
each person's display preferences (time zone, theme, language; read and applied by tasksapp.prefs)."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from tasksapp.models.servers import McpServer


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


class UserPreference(models.Model):
    class Theme(models.TextChoices):
        AUTO = "auto", _("Follow the system (light or dark)")
        LIGHT = "light", _("Light")
        DARK = "dark", _("Dark")

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    time_zone = models.CharField(
        max_length=64, blank=True, default="", help_text="an IANA zone; empty: the browser's zone"
    )
    theme = models.CharField(max_length=5, choices=Theme.choices, default=Theme.AUTO)
    language = models.CharField(
        max_length=16, blank=True, default="", help_text="a LANGUAGES code; empty: from Accept-Language"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "tasksapp"

    def __str__(self) -> str:
        return f"preferences of {self.user_id}"

"""The audit log: who (a person or an agent) did what, when, to which server, call or task."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from tasksapp.models.calls import PendingCall
from tasksapp.models.servers import McpServer
from tasksapp.models.tasks import RemoteTask


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

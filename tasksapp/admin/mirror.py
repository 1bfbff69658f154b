"""The mirror in the admin site: servers and agents (edited through the services), tasks and their
records read-only."""

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from tasksapp import services
from tasksapp.admin.base import ReadOnlyAdmin
from tasksapp.mcpclient.wire import parse_header_lines
from tasksapp.models import (
    Agent,
    InputRequest,
    McpServer,
    OperatorAction,
    PendingCall,
    RemoteTask,
    TaskEvent,
    WorkerHeartbeat,
)
from tasksapp.services.agents import agent_create, agent_revoke, agent_update


class McpServerForm(forms.ModelForm):  # type: ignore[type-arg]
    new_headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text="One 'Name: value' per line, e.g. 'Authorization: Bearer …'. Leave empty to keep the "
        "current headers; write '-' to remove them all. Stored encrypted, never shown in full.",
    )

    class Meta:
        model = McpServer
        fields = ["name", "url", "enabled", "roots"]

    def clean_new_headers(self) -> dict[str, str] | None:
        text = self.cleaned_data["new_headers"].strip()
        if not text:
            return None
        if text == "-":
            return {}
        try:
            return parse_header_lines(text.splitlines())
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic only in django-stubs
    form = McpServerForm
    list_display = [
        "name",
        "url",
        "era",
        "tasks_supported",
        "listen_supported",
        "health",
        "enabled",
        "last_success_at",
        "consecutive_failures",
    ]
    list_filter = ["enabled", "era", "tasks_supported"]
    search_fields = ["name", "url"]
    readonly_fields = [
        "masked",
        "era",
        "supported_versions",
        "tasks_supported",
        "listen_supported",
        "server_info",
        "instructions",
        "discovered_at",
        "last_success_at",
        "last_error",
        "last_error_at",
        "consecutive_failures",
        "backoff_until",
        "failing_workers",
        "workers_reporting",
    ]
    actions = ["refresh_discovery"]

    @admin.display(description=gettext_lazy("headers"))
    def masked(self, server: McpServer) -> str:
        return json.dumps(server.masked_headers, ensure_ascii=False) if server.headers_encrypted else "—"

    def save_model(self, request: HttpRequest, obj: McpServer, form: Any, change: bool) -> None:
        headers = form.cleaned_data.get("new_headers")
        try:
            if change:
                server = services.server_update(
                    server=McpServer.objects.get(pk=obj.pk),
                    name=obj.name,
                    url=obj.url,
                    headers=headers,
                    enabled=obj.enabled,
                    roots=obj.roots,
                    user=request.user,
                )
            else:
                server = services.server_create(
                    name=obj.name,
                    url=obj.url,
                    headers=headers or {},
                    enabled=obj.enabled,
                    roots=obj.roots,
                    user=request.user,
                )
            obj.pk = server.pk
        except services.ServiceError as exc:
            self.message_user(request, _("Not saved: %(error)s") % {"error": exc}, messages.ERROR)
            raise _NotSaved from exc

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().changeform_view(request, *args, **kwargs)
        except _NotSaved:
            from django.http import HttpResponseRedirect

            return HttpResponseRedirect(request.get_full_path())

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # tasks keep a reference to their server; disable it instead

    @admin.action(description=gettext_lazy("Discover again (versions, capabilities, tools)"))
    def refresh_discovery(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        for server in queryset:
            try:
                services.server_refresh(server=server, user=request.user)
            except services.ServiceError as exc:
                self.message_user(request, f"{server}: {exc}", messages.ERROR)


class _NotSaved(Exception):
    pass


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic only in django-stubs
    """Agents through the services: adding one makes its token and shows it once (a message);
    revoking is an action; nothing deletes an agent (its tasks keep its name)."""

    list_display = ["name", "token_hint", "revoked_at", "rate_limit_per_minute", "last_used_at", "created_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "description"]
    filter_horizontal = ["servers"]
    fields = [
        "name",
        "description",
        "servers",
        "rate_limit_per_minute",
        "token_hint",
        "revoked_at",
        "last_used_at",
    ]
    readonly_fields = ["token_hint", "revoked_at", "last_used_at"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [*self.readonly_fields, "name"] if obj is not None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        if change:
            return  # servers and fields are saved in save_related, through the service
        agent, token = agent_create(
            name=obj.name,
            servers=form.cleaned_data["servers"],
            user=request.user,
            description=obj.description,
            rate_limit=obj.rate_limit_per_minute,
        )
        obj.pk, obj.token_hash = agent.pk, agent.token_hash
        self.message_user(
            request,
            _("Agent %(name)s added. Its token, shown only now: %(token)s")
            % {"name": agent.name, "token": token},
            messages.WARNING,
        )

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        agent = form.instance
        agent_update(
            agent=Agent.objects.get(pk=agent.pk),
            servers=form.cleaned_data["servers"],
            user=request.user,
            description=agent.description,
            rate_limit=agent.rate_limit_per_minute,
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description=gettext_lazy("Revoke: their tokens stop working at once"))
    def revoke(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        for agent in queryset.filter(revoked_at__isnull=True):
            agent_revoke(agent=agent, user=request.user)


class InputRequestInline(admin.TabularInline):  # type: ignore[type-arg]
    model = InputRequest
    fields = ("method", "state", "answered_by", "answered_at", "sent_at", "last_error")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TaskEventInline(admin.TabularInline):  # type: ignore[type-arg]
    model = TaskEvent
    fields = ("observed_at", "status", "status_message", "source", "note")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RemoteTask)
class RemoteTaskAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "tool_name",
        "server",
        "display_status",
        "status_message",
        "created_at",
        "last_seen_at",
        "expired",
    ]
    list_filter = ["status", "is_tool_error", "expired", "server", "last_seen_via"]
    search_fields = ["tool_name", "status_message"]
    list_select_related = ["server"]
    date_hierarchy = "created_at"
    exclude = ["remote_id_hash", "remote_id_encrypted", "leased_by", "lease_until"]
    inlines = [InputRequestInline, TaskEventInline]
    actions = ["cancel_tasks"]

    @admin.action(description=gettext_lazy("Cancel the selected tasks (tasks/cancel)"))
    def cancel_tasks(self, request: HttpRequest, queryset: QuerySet[RemoteTask]) -> None:
        for task in queryset.select_related("server"):
            try:
                services.task_cancel(task=task, user=request.user)
            except services.ServiceError as exc:
                self.message_user(
                    request, _("Task #%(pk)s: %(error)s") % {"pk": task.pk, "error": exc}, messages.WARNING
                )

    def get_actions(
        self, request: HttpRequest, action_location: ActionLocation = ActionLocation.CHANGE_LIST
    ) -> dict[str, Any]:
        # Read-only rows, but the cancel action is a service call, allowed to operators.
        actions = super().get_actions(request, action_location)
        if not request.user.has_perm("tasksapp.cancel_remotetask"):
            actions.pop("cancel_tasks", None)
        return actions


@admin.register(InputRequest)
class InputRequestAdmin(ReadOnlyAdmin):
    list_display = ["id", "task", "method", "state", "answered_by", "answered_at", "first_seen_at"]
    list_filter = ["state", "method"]
    exclude = ["key_hash", "key_encrypted"]
    list_select_related = ["task", "answered_by"]


@admin.register(TaskEvent)
class TaskEventAdmin(ReadOnlyAdmin):
    list_display = ["observed_at", "task", "status", "status_message", "source", "note"]
    list_filter = ["source", "status"]
    search_fields = ["status_message", "note"]
    list_select_related = ["task"]


@admin.register(OperatorAction)
class OperatorActionAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "user", "action", "server", "task", "ok"]
    list_filter = ["action", "ok", "user"]
    date_hierarchy = "created_at"
    list_select_related = ["user", "server", "task"]


@admin.register(PendingCall)
class PendingCallAdmin(ReadOnlyAdmin):
    list_display = ["id", "tool_name", "server", "state", "rounds", "created_by", "created_at"]
    list_filter = ["state", "server"]
    exclude = ["request_state_encrypted"]


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(ReadOnlyAdmin):
    list_display = [
        "worker",
        "hostname",
        "pid",
        "started_at",
        "last_beat_at",
        "stopped_at",
        "tasks_held",
        "polls",
        "pushes",
        "streams_open",
    ]

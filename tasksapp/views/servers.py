"""Servers: the list with health, adding with a discovery preview, editing, archiving, and their tools."""

from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from tasksapp import services
from tasksapp.mcpclient.wire import parse_header_lines
from tasksapp.models import LARGE_SERVER_COLUMNS, McpServer
from tasksapp.permissions import MANAGE_SERVERS, VIEW, require
from tasksapp.views.agents import gateway_context
from tasksapp.views.common import page

DROPPED_HEADERS = gettext_lazy(
    "The URL moved to another origin (scheme, host or port), so the stored headers were removed rather "
    "than sent there. Enter them again if the new server needs them."
)


class ServerForm(forms.Form):
    name = forms.SlugField(
        max_length=100,
        label=gettext_lazy("Name"),
        help_text=gettext_lazy("A short name: letters, digits, - and _."),
    )
    url = forms.URLField(max_length=2000, assume_scheme="https", label=gettext_lazy("MCP endpoint URL"))
    headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"}),
        label=gettext_lazy("Headers"),
        help_text=gettext_lazy(
            "One 'Name: value' per line, e.g. 'Authorization: Bearer …'. Stored encrypted, masked."
        ),
    )
    call_timeout_seconds = forms.IntegerField(
        label=gettext_lazy("Call timeout (seconds)"),
        min_value=1,
        max_value=86400,
        initial=600,
        required=False,
        help_text=gettext_lazy(
            "How long Run waits for a tool's answer, silence included (some servers say nothing "
            "until the tool is done). Empty: keep it (600 for a new server)."
        ),
    )
    read_timeout_seconds = forms.IntegerField(
        label=gettext_lazy("Read timeout (seconds)"),
        min_value=1,
        max_value=3600,
        initial=30,
        required=False,
        help_text=gettext_lazy(
            "The longest silence allowed while reading any other answer. Empty: keep it (30)."
        ),
    )

    def __init__(self, *args: Any, own_host: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.own_host = own_host.lower()  # the dashboard's host:port as this browser reaches it

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        if not url.startswith(("http://", "https://")):
            raise forms.ValidationError(_("Use an http:// or https:// URL."))
        parts = urlsplit(url)
        if self.own_host and parts.netloc.lower() == self.own_host and not parts.path.startswith("/gateway/"):
            raise forms.ValidationError(
                _(
                    "This is the dashboard's own address, not an MCP server's. Enter the URL of an MCP "
                    "server's endpoint (it usually ends in /mcp)."
                )
            )
        return url

    def clean_headers(self) -> dict[str, str]:
        try:
            return parse_header_lines(self.cleaned_data["headers"].splitlines())
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None


class ServerEditForm(ServerForm):
    enabled = forms.BooleanField(required=False, label=gettext_lazy("Enabled"))
    headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off"}),
        label=gettext_lazy("Headers"),
        help_text=gettext_lazy(
            "Leave empty to keep the current headers (removed if the URL moves to another scheme, "
            "host or port); write '-' alone to remove them."
        ),
    )

    def clean_headers(self) -> dict[str, str] | None:  # type: ignore[override]
        text = self.cleaned_data["headers"].strip()
        if not text:
            return None
        if text == "-":
            return {}
        return super().clean_headers()


@require(VIEW)
def server_list(request: HttpRequest) -> HttpResponse:
    servers = McpServer.objects.defer(*LARGE_SERVER_COLUMNS).select_related(
        "authorization"
    )  # the OAuth badge
    return page(
        request, "tasksapp/servers.html", {"servers": servers}, nav="servers", live={"page": "servers"}
    )


@require(MANAGE_SERVERS)
def server_add(request: HttpRequest) -> HttpResponse:
    form = ServerForm(request.POST if request.method == "POST" else None, own_host=request.get_host())
    preview = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            if "save" in request.POST:
                server = services.server_create(
                    name=data["name"],
                    url=data["url"],
                    headers=data["headers"],
                    user=request.user,
                    timeouts=_timeouts(data, McpServer()),
                )
                messages.success(request, added_message(server))
                if server.tools_note:
                    messages.warning(request, server.tools_note)
                return redirect("tasks:server-tools", pk=server.pk)
            preview = services.server_preview(url=data["url"], headers=data["headers"])
        except services.ServiceError as exc:
            form.add_error(None, str(exc))
    return page(
        request,
        "tasksapp/server_form.html",
        {"form": form, "preview": preview, "adding": True},
        nav="servers",
    )


def added_message(server: McpServer) -> str:
    """What adding a server says: what it offers, or, for one behind OAuth (nothing discovered yet),
    what to do next."""
    if server.discovered_at is None:
        return _("Server %(name)s added. It needs authorization: use Connect below to sign in.") % {
            "name": server.name
        }
    count = len(server.tools)
    return ngettext(
        "Server %(name)s added (%(era)s, %(count)d tool).",
        "Server %(name)s added (%(era)s, %(count)d tools).",
        count,
    ) % {"name": server.name, "era": server.get_era_display(), "count": count}


def _timeouts(data: dict[str, Any], server: McpServer) -> tuple[int, int]:
    """(read, call) seconds from the form; a field left empty keeps the server's (or the default)."""
    read = data.get("read_timeout_seconds") or server.read_timeout_seconds
    call = data.get("call_timeout_seconds") or server.call_timeout_seconds
    return read, call


@require(MANAGE_SERVERS)
def server_edit(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    initial: dict[str, Any] = {
        "name": server.name,
        "url": server.url,
        "enabled": server.enabled,
        "read_timeout_seconds": server.read_timeout_seconds,
        "call_timeout_seconds": server.call_timeout_seconds,
    }
    form = ServerEditForm(
        request.POST if request.method == "POST" else None, initial=initial, own_host=request.get_host()
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        moved = data["headers"] is None and not services.same_origin(data["url"], server.url)
        dropped = moved and bool(server.headers_encrypted)
        try:
            services.server_update(
                server=server,
                name=data["name"],
                url=data["url"],
                headers=data["headers"],
                enabled=data["enabled"],
                user=request.user,
                timeouts=_timeouts(data, server),
            )
            messages.success(request, _("Server %(name)s saved.") % {"name": server.name})
            if dropped:
                messages.warning(request, DROPPED_HEADERS)
            return redirect("tasks:servers")
        except services.ServiceError as exc:
            form.add_error(None, str(exc))
    return page(
        request, "tasksapp/server_form.html", {"form": form, "server": server, "adding": False}, nav="servers"
    )


@require(MANAGE_SERVERS)
def server_refresh(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    if request.method == "POST":
        try:
            services.server_refresh(server=server, user=request.user)
            count = len(server.tools)
            messages.success(
                request,
                ngettext(
                    "Discovered %(name)s again: %(count)d tool.",
                    "Discovered %(name)s again: %(count)d tools.",
                    count,
                )
                % {"name": server.name, "count": count},
            )
            if server.tools_note:
                messages.warning(request, server.tools_note)
        except services.ServiceError as exc:
            messages.error(request, str(exc))
    return redirect("tasks:server-tools", pk=pk)


@require(VIEW)
def server_tools(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    # Stored tools were parsed on discovery, but a row may predate that: show only named ones.
    tools = [
        tool
        for tool in server.tools
        if isinstance(tool, dict) and isinstance(tool.get("name"), str) and tool["name"]
    ]
    context = {"server": server, "tools": tools, **gateway_context(request, server)}
    return page(request, "tasksapp/server_tools.html", context, nav="servers")


@require(MANAGE_SERVERS)
def server_archive(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: what archiving (or bringing back) means, with one button; POST: do it."""
    server = get_object_or_404(McpServer.objects.only("id", "name", "archived", "enabled"), pk=pk)
    if request.method != "POST":
        open_tasks = server.tasks.exclude(status__in=("completed", "failed", "cancelled")).count()
        context = {"server": server, "open_tasks": open_tasks}
        return page(request, "tasksapp/server_archive.html", context, nav="servers")
    change = services.server_unarchive if server.archived else services.server_archive
    try:
        change(server=server, user=request.user)
        if server.archived:
            done = _("Server %(name)s archived: kept read-only, never polled.")
        else:
            done = _("Server %(name)s back: it is polled again.")
        messages.success(request, done % {"name": server.name})
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    return redirect("tasks:servers")

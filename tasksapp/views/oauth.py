"""OAuth for MCP servers: Connect (to the authorization server), the callback, the client settings
a server's admin enters (bound to an authorization server), Disconnect, confirming a changed
authorization server, and the Client ID Metadata Document the dashboard serves."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from tasksapp import services
from tasksapp.models import McpServer, ServerAuthorization
from tasksapp.permissions import MANAGE_SERVERS, require
from tasksapp.services import oauth, oauth_connect, oauth_issuer
from tasksapp.views.common import page


def callback_url(request: HttpRequest) -> str:
    """The redirect URI to register with authorization servers (docs/oauth.md)."""
    return request.build_absolute_uri(reverse("tasks:oauth-callback"))


def metadata_url(request: HttpRequest) -> str:
    """Our Client ID Metadata Document's URL; only over https is it a client ID (else: DCR)."""
    return request.build_absolute_uri(reverse("tasks:oauth-client-metadata")) if request.is_secure() else ""


@require_POST
@require(MANAGE_SERVERS)
def connect(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    try:
        target = oauth_connect.oauth_connect(
            server=server,
            user=request.user,
            redirect_uri=callback_url(request),
            metadata_url=metadata_url(request),
        )
    except services.ServiceError as exc:
        messages.error(request, str(exc))
        return redirect("tasks:server-tools", pk=pk)
    return redirect(target)


@require_GET
@require(MANAGE_SERVERS)
def callback(request: HttpRequest) -> HttpResponse:
    try:
        server = oauth_connect.oauth_callback(
            user=request.user, callback_url=request.build_absolute_uri(), state=request.GET.get("state", "")
        )
    except services.ServiceError as exc:
        return page(request, "tasksapp/oauth_failed.html", {"error": str(exc)}, nav="servers", status=400)
    messages.success(
        request, _("%(name)s is authorized; its tasks are polled with the new token.") % {"name": server.name}
    )
    try:
        services.server_refresh(server=server, user=request.user)
    except services.ServiceError as exc:
        messages.warning(request, _("Authorized, but discovery failed: %(error)s") % {"error": exc})
    return redirect("tasks:server-tools", pk=server.pk)


@require_POST
@require(MANAGE_SERVERS)
def disconnect(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    oauth.oauth_forget(server=server, user=request.user, reason="removed by a person")
    messages.success(request, _("The authorization for %(name)s was removed.") % {"name": server.name})
    return redirect("tasks:server-tools", pk=pk)


class ClientSettingsForm(forms.Form):
    grant_type = forms.ChoiceField(
        choices=ServerAuthorization.GrantType.choices, label=gettext_lazy("Grant type")
    )
    client_id = forms.CharField(
        max_length=2000,
        required=False,
        label=gettext_lazy("Client ID"),
        help_text=gettext_lazy("Pre-registered client ID; empty: registered for you."),
    )
    client_secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
        label=gettext_lazy("Client secret"),
        help_text=gettext_lazy("Empty keeps the stored one; '-' removes it. Stored encrypted, never shown."),
    )
    private_key = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "autocomplete": "off", "spellcheck": "false"}),
        label=gettext_lazy("Private key"),
        help_text=gettext_lazy(
            "PEM private key for private_key_jwt (client credentials). Empty keeps it; '-' removes it."
        ),
    )

    issuer = forms.CharField(  # not a URLField: an issuer is compared character for character
        required=False,
        max_length=2000,
        label=gettext_lazy("Authorization server (issuer)"),
        help_text=gettext_lazy(
            "The credentials are sent to this authorization server and nowhere else. Empty: the one "
            "the MCP server names now."
        ),
    )

    @staticmethod
    def kept(value: str) -> str | None:
        value = value.strip()
        return None if not value else ("" if value == "-" else value)


@require(MANAGE_SERVERS)
def client_settings(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    auth = ServerAuthorization.objects.filter(server=server).first()
    initial = (
        {"grant_type": auth.grant_type, "client_id": auth.client_id, "issuer": auth.issuer} if auth else {}
    )
    form = ClientSettingsForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            oauth.oauth_configure(
                server=server,
                user=request.user,
                grant_type=data["grant_type"],
                client_id=data["client_id"].strip(),
                client_secret=form.kept(data["client_secret"]),
                private_key=form.kept(data["private_key"]),
                issuer=data["issuer"],
            )
        except services.ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, _("OAuth client settings saved."))
            return redirect("tasks:server-tools", pk=pk)
    context = {"server": server, "auth": auth, "form": form, "callback_url": callback_url(request)}
    return page(request, "tasksapp/oauth_settings.html", context, nav="servers")


@require_POST
@require(MANAGE_SERVERS)
def confirm_issuer(request: HttpRequest, pk: int) -> HttpResponse:
    """An admin accepts the authorization server the MCP server names now (shown on its page)."""
    server = get_object_or_404(McpServer, pk=pk)
    issuer = request.POST.get("issuer", "")
    try:
        oauth_issuer.oauth_confirm_issuer(
            server=server,
            user=request.user,
            issuer=issuer,
            keep_client=request.POST.get("keep_client") == "1",
        )
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            _("%(name)s now uses the authorization server %(issuer)s.")
            % {"name": server.name, "issuer": issuer},
        )
    return redirect("tasks:server-tools", pk=pk)


@login_not_required
@require_GET
def client_metadata(request: HttpRequest) -> HttpResponse:
    document = oauth_connect.client_metadata_document(
        client_id=request.build_absolute_uri(reverse("tasks:oauth-client-metadata")),
        redirect_uri=callback_url(request),
    )
    return HttpResponse(document, content_type="application/json")

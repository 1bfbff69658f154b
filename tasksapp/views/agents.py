"""Agents: the list (everyone who may read), adding one (its token shown once), revoking one, and
each server's gateway policy."""

import json
import shlex
from datetime import timedelta

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from tasksapp import services
from tasksapp.models import GATEWAY_POLICIES, GATEWAY_POLICY_CHOICES, LARGE_SERVER_COLUMNS, Agent, McpServer
from tasksapp.permissions import MANAGE_AGENTS, MANAGE_SERVERS, VIEW, can, refusal, require
from tasksapp.serializers import gateway_url
from tasksapp.services.agents import agent_create, agent_revoke, gateway_policy_set
from tasksapp.traffic import server_traffic
from tasksapp.views.common import page


class AgentForm(forms.Form):
    name = forms.SlugField(max_length=100, label=gettext_lazy("Name"))
    description = forms.CharField(max_length=500, required=False, label=gettext_lazy("Description"))
    servers = forms.ModelMultipleChoiceField(
        queryset=McpServer.objects.filter(archived=False).defer(*LARGE_SERVER_COLUMNS),
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label=gettext_lazy("Servers it may use"),
    )
    rate_limit = forms.IntegerField(
        min_value=1, max_value=1_000_000, initial=600, label=gettext_lazy("Requests a minute")
    )


class PolicyForm(forms.Form):
    policy = forms.ChoiceField(
        choices=GATEWAY_POLICY_CHOICES, label=gettext_lazy("Who answers the questions of gateway tasks")
    )
    tools = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        label=gettext_lazy("Exceptions per tool"),
        help_text=gettext_lazy("One 'tool: either|people|agent' per line."),
    )

    def clean_tools(self) -> dict[str, str]:
        exceptions: dict[str, str] = {}
        for line in self.cleaned_data["tools"].splitlines():
            tool, sep, policy = line.rpartition(":")
            if not line.strip():
                continue
            if not sep or not tool.strip() or policy.strip() not in GATEWAY_POLICIES:
                raise forms.ValidationError(
                    _("Write each exception as 'tool: either', 'tool: people' or 'tool: agent'.")
                )
            exceptions[tool.strip()] = policy.strip()
        return exceptions


@never_cache
@require(VIEW)
def agent_list(request: HttpRequest) -> HttpResponse:
    """The agents; an admin's POST adds one and shows its token, once, on this page."""
    form, token, added = AgentForm(request.POST or None), None, None
    if request.method == "POST":
        if not can(request.user, MANAGE_AGENTS):
            raise PermissionDenied(refusal(request.user, MANAGE_AGENTS))
        form, added, token = _add(request, form)
    agents = Agent.objects.prefetch_related("servers")
    context = {"agents": agents, "form": form, "token": token, "added": added}
    return page(request, "tasksapp/agents.html", context, nav="agents")


def _add(request: HttpRequest, form: AgentForm) -> tuple[AgentForm, Agent | None, str | None]:
    if not form.is_valid():
        return form, None, None
    data = form.cleaned_data
    try:
        agent, token = agent_create(
            name=data["name"],
            servers=data["servers"],
            user=request.user,
            description=data["description"],
            rate_limit=data["rate_limit"],
        )
    except services.ServiceError as exc:
        form.add_error(None, str(exc))
        return form, None, None
    return AgentForm(), agent, token


@require_POST
@require(MANAGE_AGENTS)
def agent_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    agent = get_object_or_404(Agent, pk=pk)
    try:
        agent_revoke(agent=agent, user=request.user)
        messages.success(
            request, _("Agent %(name)s revoked: its token no longer works.") % {"name": agent.name}
        )
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    return redirect("tasks:agents")


@require_POST
@require(MANAGE_SERVERS)
def gateway_policy(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer.objects.defer(*LARGE_SERVER_COLUMNS), pk=pk)
    form = PolicyForm(request.POST)
    if form.is_valid():
        gateway_policy_set(
            server=server,
            policy=form.cleaned_data["policy"],
            tools=form.cleaned_data["tools"],
            user=request.user,
        )
        messages.success(
            request, _("Who answers %(name)s's gateway tasks was saved.") % {"name": server.name}
        )
    else:
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
    return redirect("tasks:server-tools", pk=pk)


def gateway_context(request: HttpRequest, server: McpServer) -> dict[str, object]:
    """What a server's page shows of its gateway: the URL, host configuration, the policy form."""
    url = gateway_url(server, request.build_absolute_uri("/"))
    tools = "\n".join(f"{tool}: {policy}" for tool, policy in (server.gateway_tool_policies or {}).items())
    form = PolicyForm(initial={"policy": server.gateway_policy, "tools": tools})
    now = timezone.now()
    windows = [
        (_("last hour"), server_traffic(server.pk, now - timedelta(hours=1))),
        (_("last day"), server_traffic(server.pk, now - timedelta(days=1))),
    ]
    return {
        "gateway_url": url,
        "hosts": host_configuration(server.name, url),
        "policy_form": form,
        "traffic": windows,
    }


def host_configuration(name: str, url: str) -> list[tuple[str, str]]:
    """(host, what to paste) for the common MCP hosts: quoted for a POSIX shell and as JSON, so a
    server name with spaces or quotes pastes as one argument, one key."""
    header = "Authorization: Bearer TOKEN"
    desktop = {"mcpServers": {name: {"command": "npx", "args": ["mcp-remote", url, "--header", header]}}}
    inspector = ["npx", "@modelcontextprotocol/inspector", "--cli", url, "--transport", "http"]
    return [
        (
            "Claude Code",
            shlex.join(["claude", "mcp", "add", "--transport", "http", name, url, "--header", header]),
        ),
        ("Claude Desktop (claude_desktop_config.json)", json.dumps(desktop, ensure_ascii=False)),
        (
            "MCP Inspector",
            shlex.join(
                [*inspector, "--protocol-era", "modern", "--header", header, "--method", "tools/list"]
            ),
        ),
    ]

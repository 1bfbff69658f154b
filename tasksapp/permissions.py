"""Roles: viewer reads everything, operator also starts/answers/cancels, admin also manages servers.

Roles are Django groups (created by migration 0002); checks are on permissions, so a superuser
passes every one. Views and consumers enforce them; templates only hide what would be refused.
"""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
START = "tasksapp.start_remotetask"
ANSWER = "tasksapp.answer_remotetask"
CANCEL = "tasksapp.cancel_remotetask"
MANAGE_SERVERS = "tasksapp.change_mcpserver"
VIEW = "tasksapp.view_remotetask"
MANAGE_AGENTS = "tasksapp.manage_agents"


def can(user: Any, permission: str) -> bool:
    return bool(user.is_authenticated and user.is_active and user.has_perm(permission))


def require[R: HttpResponseBase](permission: str) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """A view decorator: 403 unless the logged-in user holds `permission`. R: streamed downloads too."""

    def decorate(view: Callable[..., R]) -> Callable[..., R]:
        @wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> R:
            if not can(request.user, permission):
                raise PermissionDenied(refusal(request.user, permission))
            return view(request, *args, **kwargs)

        return guarded

    return decorate


ALLOWS = {
    VIEW: gettext_lazy("see tasks"),
    START: gettext_lazy("start tool calls"),
    ANSWER: gettext_lazy("answer input requests"),
    CANCEL: gettext_lazy("cancel tasks"),
    MANAGE_SERVERS: gettext_lazy("add or edit servers"),
    MANAGE_AGENTS: gettext_lazy("add or revoke agents"),
}
# role_name() returns identifiers (group names); pages show them with {% translate role_name %}.
ROLE_WORDS = (
    gettext_noop("superuser"),
    gettext_noop("admin"),
    gettext_noop("operator"),
    gettext_noop("viewer"),
)
NO_ROLE = gettext_noop("no role")


def role_name(user: Any) -> str:
    if user.is_superuser:
        return "superuser"
    names = set(user.groups.values_list("name", flat=True))
    return next((role for role in (ADMIN, OPERATOR, VIEWER) if role in names), NO_ROLE)


def refusal(user: Any, permission: str) -> str:
    """Why a logged-in user was refused, in words, and whom to ask."""
    role = role_name(user)
    if role == NO_ROLE:
        return _(
            "Your role does not allow this: you have no role yet. Please ask an administrator for a role."
        )
    what = ALLOWS.get(permission, _("do this"))
    return _(
        "Your role does not allow this: a %(role)s may not %(what)s. Ask an administrator if you need to."
    ) % {
        "role": _(role),
        "what": what,
    }


def roles_of(user: Any) -> dict[str, bool]:
    """For templates: which actions to show."""
    return {
        "can_start": can(user, START),
        "can_answer": can(user, ANSWER),
        "can_cancel": can(user, CANCEL),
        "can_manage_servers": can(user, MANAGE_SERVERS),
        "can_manage_agents": can(user, MANAGE_AGENTS),
    }


ROLE_PERMISSIONS = {
    VIEWER: [
        "view_mcpserver",
        "view_remotetask",
        "view_inputrequest",
        "view_taskevent",
        "view_pendingcall",
        "view_operatoraction",
        "view_workerheartbeat",
        "view_agent",
    ],
    OPERATOR: ["start_remotetask", "answer_remotetask", "cancel_remotetask"],
    ADMIN: ["add_mcpserver", "change_mcpserver", "manage_agents", "add_agent", "change_agent"],
}


def ensure_roles(group_model: Any = None, permission_model: Any = None) -> None:
    """Create the three role groups with their permissions (idempotent; migration 0002 runs it)."""
    if group_model is None:
        from django.contrib.auth.models import Group, Permission

        group_model, permission_model = Group, Permission
    codenames: list[str] = []
    for role in (VIEWER, OPERATOR, ADMIN):
        codenames = codenames + ROLE_PERMISSIONS[role]
        group, _ = group_model.objects.get_or_create(name=role)
        group.permissions.set(
            permission_model.objects.filter(content_type__app_label="tasksapp", codename__in=codenames)
        )

"""What every page shares: the role flags, the nav entry, and the live-update socket URL."""

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from tasksapp.permissions import role_name, roles_of

__all__ = ["page", "permission_denied", "role_name", "safe_next"]


def page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    nav: str,
    live: dict[str, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    """Render a page; `live` names the websocket subscription ({"page": ..., "task": ...})."""
    full = {
        **context,
        **roles_of(request.user),
        "nav": nav,
        "role_name": role_name(request.user),
        "live_url": f"/ws/live/?{urlencode(live)}" if live else None,
    }
    return render(request, template, full, status=status)


def safe_next(request: HttpRequest, fallback: str) -> str:
    from django.utils.http import url_has_allowed_host_and_scheme

    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return fallback


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """The 403 page, with the header every page has (the user's role included)."""
    context = {
        "exception": exception,
        "role_name": role_name(request.user) if request.user.is_authenticated else "",
    }
    return render(request, "403.html", context, status=403)

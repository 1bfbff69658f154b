"""What every page shares: the role flags, the nav entry, and the live-update socket URL."""

import time
from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

from tasksapp.permissions import role_name, roles_of

__all__ = ["not_cross_site", "page", "permission_denied", "role_name", "safe_next"]

# Fetch Metadata: what the browser says started the request. Another site (or a sibling
# subdomain, "same-site") may not; the dashboard's own pages, and a typed URL or bookmark ("none"),
# may. Without the header (scripts, browsers from before 2023) the request is not refused.
OTHER_SITES = frozenset({"cross-site", "same-site"})


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
        # Taken before the view read anything (RetryLostConnectionMiddleware), not as it renders.
        "live_since": f"{getattr(request, 'live_since', None) or time.time():.6f}",
    }
    return render(request, template, full, status=status)


def not_cross_site[**P, R](view: Callable[P, R]) -> Callable[P, R]:
    """For GETs that do something (an export writes an audit entry): refuse them, 403, when the
    browser says another site asked (`Sec-Fetch-Site`), so a link elsewhere cannot make a
    logged-in person do it. The first argument of the view is the request."""

    @wraps(view)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        request = args[0]
        assert isinstance(request, HttpRequest)
        if request.headers.get("Sec-Fetch-Site", "").lower() in OTHER_SITES:
            refused = _("Another site asked for this, so it was refused. Open it from the dashboard.")
            raise PermissionDenied(refused)
        return view(*args, **kwargs)

    return checked


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

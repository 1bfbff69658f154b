"""Login throttling (django-axes): who a failed login is counted against, and what a locked-out person sees.

Failures count per account and per client address, on /login/ and /admin/login/ alike (axes hooks
Django's authentication); docs/security.md has the numbers and how to unlock.
"""

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_address(request: HttpRequest) -> str | None:
    """The client's address: the socket peer, or behind a trusted proxy (BEHIND_PROXY) the address
    that proxy appended to X-Forwarded-For. Never an address the client could choose itself."""
    if settings.BEHIND_PROXY:
        forwarded: str = request.META.get("HTTP_X_FORWARDED_FOR", "")
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops:
            return hops[-1]
    address = request.META.get("REMOTE_ADDR")
    return str(address) if address else None


def locked_out(request: HttpRequest, *args: Any) -> HttpResponse:
    """The page for a refused login (axes calls it with varying extra arguments)."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    context = {"minutes": minutes, "limit": settings.AXES_FAILURE_LIMIT}
    return render(request, "registration/locked_out.html", context, status=429)

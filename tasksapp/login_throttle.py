"""Login throttling (django-axes): who a failed login is counted against, and what a locked-out person sees.

Failures count against the (account, address) pair: LOGIN_FAILURE_LIMIT (5) of them pause that
account's logins from that address only, so guessing from one place cannot lock its owner out
everywhere. The account alone (from any address) and the address alone (for any account) have
limits of their own, ten times higher by default, against guessing from many addresses and
against one address trying many accounts. On /login/ and /admin/login/ alike (axes hooks Django's
authentication); docs/security.md has the numbers and how to unlock.
"""

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from django.conf import settings
from django.db.models import QuerySet, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class PairThenWideThrottle(AxesDatabaseHandler):  # type: ignore[misc]  # axes ships no types
    """axes' database handler, with one limit per kind of count instead of one for all. Needs
    AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "username", "ip_address"], in this order.

    axes 8 compares the largest count of its lockout parameters with one AXES_FAILURE_LIMIT; this
    reports the pair's count, raised to that limit when the account's or the address's own count
    reached its higher limit. A successful login clears the pair's failures only: its owner
    logging in does not give someone guessing elsewhere a fresh allowance."""

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        pair, account, address = (_sum(rows) for rows in self.get_user_attempts(request, credentials))
        limits = (settings.LOGIN_ACCOUNT_FAILURE_LIMIT, settings.LOGIN_ADDRESS_FAILURE_LIMIT)
        wide = account >= limits[0] or address >= limits[1]
        return max(pair, settings.AXES_FAILURE_LIMIT) if wide else pair

    def reset_user_attempts(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        pair = self.filter_user_attempts(request, credentials)[0]
        count: int = pair.delete()[0]
        return count


def _sum(rows: QuerySet[Any]) -> int:
    return int(rows.aggregate(total=Sum("failures_since_start"))["total"] or 0)


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
    context = {
        "minutes": minutes,
        "limit": settings.AXES_FAILURE_LIMIT,
        "account_limit": settings.LOGIN_ACCOUNT_FAILURE_LIMIT,
        "address_limit": settings.LOGIN_ADDRESS_FAILURE_LIMIT,
    }
    return render(request, "registration/locked_out.html", context, status=429)

"""All of the dashboard's own middleware, in the order dashboard/settings.py MIDDLEWARE runs them.

- RetryLostConnectionMiddleware (outermost): a page load that met a database connection lost
  mid-request is answered again on a new connection (tasksapp/lib/connections.py notes the loss).
- LanguageMiddleware: the page's language (the user's setting, else the switch's cookie, else
  Accept-Language; tasksapp/prefs.py).
- TimeZoneMiddleware: the reader's time zone (tasksapp/prefs.py).
- NoStoreMiddleware: no browser or proxy keeps a page; an unreadable secret is a clear 503.
"""

import logging
import time
import zoneinfo
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.middleware.locale import LocaleMiddleware
from django.shortcuts import render
from django.utils import timezone, translation
from django.utils.cache import add_never_cache_headers
from django.utils.deprecation import MiddlewareMixin

from tasksapp import prefs
from tasksapp.lib import connections, crypto

log = logging.getLogger(__name__)


class RetryLostConnectionMiddleware:
    """Outermost: inner layers turn exceptions into 500 responses, so the cause is noted on the
    request by connections' got_request_exception receiver. A read (GET, HEAD) outside a
    transaction is answered again on fresh connections, up to connections.PAGE_ATTEMPTS times in
    all; anything that writes is not."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # A live page's time (its `live-sync` stamp): taken before its view reads anything, so what
        # changed after it reaches the page whatever the view read (tasksapp/live/pages.py).
        request.live_since = time.time()  # type: ignore[attr-defined]
        response = self.get_response(request)
        while (
            getattr(request, "_connection_lost", False)
            and request.method in connections.SAFE_METHODS
            and not connections.in_transaction()
        ):
            request._connection_lost = False  # type: ignore[attr-defined]
            connections.drop_connections()
            request.live_since = time.time()  # type: ignore[attr-defined]
            response = self.get_response(request)
        return response


class LanguageMiddleware(LocaleMiddleware):
    """Django's LocaleMiddleware reads the cookie and Accept-Language before the user is known (it
    must run before CommonMiddleware, and authentication runs later). The user's own setting
    (empty: follow the browser) is applied in `process_view`, which runs after every
    `process_request`, so the view, its messages and its template are all in it."""

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        preference = prefs.preference_of(request)
        code = prefs.usable_language(preference.language if preference is not None else "")
        if code and code != translation.get_language():
            translation.activate(code)
            request.LANGUAGE_CODE = code
        return None


class TimeZoneMiddleware:
    """Renders every page in the reader's time zone (after AuthenticationMiddleware): their setting,
    else the browser's zone cookie, else TIME_ZONE."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone, _source = prefs.zone_for(prefs.preference_of(request), request.COOKIES.get(prefs.ZONE_COOKIE))
        with timezone.override(zoneinfo.ZoneInfo(zone)):
            return self.get_response(request)


class NoStoreMiddleware(MiddlewareMixin):
    """Pages, JSON downloads and the admin carry task data and credentials (masked, but still):
    no browser or proxy may keep them (`Cache-Control: no-store`). A secret that cannot be
    decrypted (the encryption key changed) is a clear 503 naming the fix, never a 500."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if "Cache-Control" not in response or "no-store" not in response["Cache-Control"]:
            add_never_cache_headers(response)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, crypto.SecretUnreadable):
            return None
        log.error("%s %s: %s", request.method, request.path, exception)
        return render(request, "key_error.html", {"message": str(exception)}, status=503)

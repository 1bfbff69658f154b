"""Response hardening that applies to every page: no caching, and a clear page for an unreadable secret."""

import logging
import sys
from collections.abc import Callable
from typing import Any

from django.core.signals import got_request_exception
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers
from django.utils.deprecation import MiddlewareMixin

from tasksapp import crypto
from tasksapp.connections import CONNECTION_LOST, drop_connections, in_transaction

log = logging.getLogger(__name__)


class SecurityMiddleware(MiddlewareMixin):
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


SAFE_METHODS = ("GET", "HEAD")


class RetryLostConnectionMiddleware:
    """Outermost middleware: inner layers turn exceptions into 500 responses, so the cause is
    noted on the request by the got_request_exception receiver below."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        lost = getattr(request, "_connection_lost", False)
        if lost and request.method in SAFE_METHODS and not in_transaction():
            request._connection_lost = False  # type: ignore[attr-defined]
            drop_connections()
            response = self.get_response(request)
        return response


@receiver(got_request_exception)
def _note_lost_connection(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    exc = sys.exc_info()[1]
    if request is not None and isinstance(exc, CONNECTION_LOST) and not hasattr(request, "_retried"):
        request._connection_lost = True  # type: ignore[attr-defined]
        request._retried = True  # type: ignore[attr-defined]

"""Response hardening that applies to every page: no caching, and a clear page for an unreadable secret."""

import logging

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers
from django.utils.deprecation import MiddlewareMixin

from tasksapp import crypto

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

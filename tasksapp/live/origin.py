"""Websockets only from the dashboard's own origin: scheme, host and port, or a trusted one.

Channels' AllowedHostsOriginValidator compares host names only, so a page on another port or
scheme of the same host (`http://127.0.0.1:47871`, `https://127.0.0.1:1`) could open a socket
with the victim's cookies and read their live updates. This compares the whole origin, as
Django's CSRF check does for POSTs. The gateway's DNS-rebinding check (tasksapp/gateway/hosts.py)
uses the same origin parsing, host list and TLS test.
"""

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_parts(text: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin or URL, the default port filled in; None if malformed."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in DEFAULT_PORTS or not host:
        return None
    return scheme, host, port if port is not None else DEFAULT_PORTS[scheme]


def _headers(scope: dict[str, Any]) -> dict[bytes, str]:
    return {name.lower(): value.decode("latin1") for name, value in scope.get("headers", [])}


def is_secure(scope: Mapping[str, Any], headers: Mapping[bytes, str]) -> bool:
    """Reached over TLS: by the scope's scheme, or as the TLS-terminating proxy's header says."""
    if scope.get("scheme") in ("wss", "https"):
        return True
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:  # ("HTTP_X_FORWARDED_PROTO", "https"): the TLS-terminating proxy says so
        name = proxy[0].removeprefix("HTTP_").replace("_", "-").lower().encode()
        return bool(headers.get(name, "").split(",")[0].strip() == proxy[1])
    return False


def allowed_hosts() -> list[str]:
    """ALLOWED_HOSTS, or under DEBUG with none set, the loopback names Django allows then."""
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = [".localhost", "127.0.0.1", "[::1]"]
    return hosts


def _trusted(origin: tuple[str, str, int]) -> bool:
    scheme, host, port = origin
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        wildcard = "://*." in entry
        trusted = origin_parts(entry.replace("://*.", "://", 1))
        if trusted is None or trusted[0] != scheme or trusted[2] != port:
            continue
        if host == trusted[1] or (wildcard and host.endswith("." + trusted[1])):
            return True
    return False


def origin_allowed(scope: dict[str, Any]) -> bool:
    """True when the socket's Origin is the dashboard's own (the Host it was asked for, on the
    scheme it was reached by) or listed in CSRF_TRUSTED_ORIGINS. A missing Origin is refused:
    browsers always send one, and only browsers carry the session cookie."""
    headers = _headers(scope)
    origin = origin_parts(headers.get(b"origin", ""))
    host = headers.get(b"host", "")
    if origin is None:
        return False
    if _trusted(origin):
        return True
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, allowed_hosts()):
        return False
    own = origin_parts(f"{'https' if is_secure(scope, headers) else 'http'}://{host}")
    return own is not None and origin == own


class OriginValidator:
    """ASGI middleware for the websocket router: refuse (HTTP 403) any other origin."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)

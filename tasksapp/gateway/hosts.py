"""DNS-rebinding protection for the gateway: the Host must be one of the dashboard's, and an Origin,
when a browser sends one, the dashboard's own or one the admin allowed.

A page on evil.example whose name resolves to the dashboard's address makes a browser send
`Host: evil.example` (refused: not in ALLOWED_HOSTS) or, through a name the dashboard answers to,
`Origin: http://evil.example` (refused). Agents that are not browsers send no Origin.
"""

from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from tasksapp.gateway.errors import GatewayError
from tasksapp.gateway.http import Headers, Scope
from tasksapp.mcpclient.errors import INVALID_REQUEST

DEFAULT_PORTS = {"http": 80, "https": 443}


def check_host_and_origin(scope: Scope, headers: Headers) -> None:
    """Raises GatewayError (421 for the Host, 403 for the Origin) unless both are acceptable."""
    host = headers.get("host") or ""
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, _allowed_hosts()):
        raise GatewayError(421, INVALID_REQUEST, "Invalid Host header: not a name this dashboard serves")
    origin = headers.get("origin")
    if origin is None:
        return
    parsed = _origin(origin)
    own = _origin(f"{_scheme(scope, headers)}://{host}")
    allowed = {_origin(entry) for entry in settings.MCP_GATEWAY_ALLOWED_ORIGINS}
    if parsed is None or (parsed != own and parsed not in allowed):
        raise GatewayError(
            403, INVALID_REQUEST, "Invalid Origin header: this origin may not call the gateway"
        )


def _origin(text: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in DEFAULT_PORTS or not host:
        return None
    return scheme, host, port if port is not None else DEFAULT_PORTS[scheme]


def _scheme(scope: Scope, headers: Headers) -> str:
    if scope.get("scheme") == "https":
        return "https"
    proxy = settings.SECURE_PROXY_SSL_HEADER
    if proxy:  # ("HTTP_X_FORWARDED_PROTO", "https"): the TLS-terminating proxy says so
        name = proxy[0].removeprefix("HTTP_").replace("_", "-").lower()
        if (headers.get(name) or "").split(",")[0].strip() == proxy[1]:
            return "https"
    return "http"


def _allowed_hosts() -> list[str]:
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = [".localhost", "127.0.0.1", "[::1]"]
    return hosts

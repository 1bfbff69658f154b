"""DNS-rebinding protection for the gateway: the Host must be one of the dashboard's, and an Origin,
when a browser sends one, the dashboard's own or one the admin allowed.

A page on evil.example whose name resolves to the dashboard's address makes a browser send
`Host: evil.example` (refused: not in ALLOWED_HOSTS) or, through a name the dashboard answers to,
`Origin: http://evil.example` (refused). Agents that are not browsers send no Origin.
"""

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from tasksapp.gateway.errors import GatewayError
from tasksapp.gateway.http import Headers, Scope
from tasksapp.live.origin import allowed_hosts, is_secure, origin_parts
from tasksapp.mcpclient.errors import INVALID_REQUEST


def check_host_and_origin(scope: Scope, headers: Headers) -> None:
    """Raises GatewayError (421 for the Host, 403 for the Origin) unless both are acceptable."""
    host = headers.get("host") or ""
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, allowed_hosts()):
        raise GatewayError(421, INVALID_REQUEST, "Invalid Host header: not a name this dashboard serves")
    origin = headers.get("origin")
    if origin is None:
        return
    parsed = origin_parts(origin)
    secure = is_secure(scope, {key.encode("latin-1"): value for key, value in reversed(headers.pairs)})
    own = origin_parts(f"{'https' if secure else 'http'}://{host}")
    allowed = {origin_parts(entry) for entry in settings.MCP_GATEWAY_ALLOWED_ORIGINS}
    if parsed is None or (parsed != own and parsed not in allowed):
        raise GatewayError(
            403, INVALID_REQUEST, "Invalid Origin header: this origin may not call the gateway"
        )

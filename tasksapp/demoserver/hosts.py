"""DNS-rebinding protection: the Host and Origin a request may carry (spec: servers MUST check them).

A web page on evil.example whose name resolves to 127.0.0.1 makes the browser send
`Host: evil.example` and `Origin: http://evil.example`; both are refused. Clients that are not
browsers (the dashboard, the SDKs) send no Origin, and the Host they connect to.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
ANY_HOST = "*"


def _bare(name: str) -> str:
    name = name.strip().lower()
    return name[1:-1] if name.startswith("[") and name.endswith("]") else name


class HostGuard:
    """Accepts a Host whose name (port ignored) is allowed, and an Origin that is absent or allowed."""

    def __init__(self, names: Iterable[str]) -> None:
        wanted = {_bare(name) for name in names if name.strip()}
        self.any = ANY_HOST in wanted
        self.names = frozenset(wanted | set(LOOPBACK_NAMES))

    def host_ok(self, host: str | None) -> bool:
        if self.any:
            return True
        if not host:
            return False
        try:
            name = urlsplit(f"//{host.strip()}").hostname
        except ValueError:
            return False
        return name is not None and name in self.names

    def origin_ok(self, origin: str | None) -> bool:
        if origin is None or self.any:
            return True
        try:
            parts = urlsplit(origin.strip())
            name = parts.hostname
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and name is not None and name in self.names

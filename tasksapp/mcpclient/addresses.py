"""Where an outbound request may go: the scheme a URL may use and the addresses it may reach.

A policy is checked twice: on the URL before anything is sent (its scheme, and its host when that
is an address literal), and on every address a name resolves to, when connecting
(AiohttpTransport's resolver), so a name that resolves somewhere else later (DNS rebinding) is
refused then too.

Three kinds of destination, from least to most checked:
- the admin's own choice, `own` (the registered MCP server's origin): held only to
  `own_public_only` (MCP_BLOCK_PRIVATE_ADDRESSES for MCP traffic);
- an entry of `allowed` (an admin's allow-list: host names, `host:port`, addresses, networks):
  any scheme, any address;
- anything else: https only when `https_only`, globally routable addresses only when
  `public_only`.
"""

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

import httpx

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Allowed:
    """One allow-list entry: a host name (any port, or one), or an address network (any port)."""

    host: str = ""
    port: int | None = None
    network: Network | None = None

    @classmethod
    def parse(cls, entry: str) -> "Allowed":
        """`auth.internal`, `auth.internal:8443`, `10.0.0.0/8`, `127.0.0.1`, `::1`, `[::1]:8443`;
        ValueError naming the entry otherwise."""
        text = entry.strip().lower().rstrip(".")
        try:
            return cls(network=ipaddress.ip_network(text.strip("[]"), strict=False))
        except ValueError:
            pass
        host, port = text, None
        if text.startswith("["):
            host, _, rest = text[1:].partition("]")
            port = _port(rest.removeprefix(":"), entry) if rest else None
        elif text.count(":") == 1:
            host, _, raw = text.partition(":")
            port = _port(raw, entry)
        if not host or any(c in host for c in "/@?#[] ") or (":" in host and not _is_address(host)):
            raise ValueError(f"{entry!r} is not a host name, host:port, address or network")
        if _is_address(host):
            return cls(network=ipaddress.ip_network(host), port=port)
        return cls(host=host, port=port)

    def names(self, host: str, port: int) -> bool:
        """This entry names the host (by name, or as an address literal in its network)."""
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            address = _address(host)
            return address is not None and address in self.network
        return _normal(host) == self.host

    def covers(self, address: Address, port: int) -> bool:
        """A resolved address this entry lets through."""
        return (
            self.network is not None
            and (self.port is None or self.port == port)
            and _unmapped(address) in self.network
        )


def allow_list(entries: Iterable[str]) -> tuple[Allowed, ...]:
    return tuple(Allowed.parse(entry) for entry in entries if entry.strip())


@dataclass(frozen=True)
class AddressPolicy:
    """What may be reached. `setting` names where the exceptions are configured, for messages."""

    https_only: bool = True
    public_only: bool = True
    allowed: tuple[Allowed, ...] = ()
    own: tuple[str, str, int] | None = None  # scheme, host, port
    own_public_only: bool = False
    setting: str = field(default="OUTBOUND_ALLOWED_HOSTS", compare=False)

    @classmethod
    def open(cls) -> "AddressPolicy":
        """Anything at all (a policy for tests and tools that talk to this machine)."""
        return cls(https_only=False, public_only=False)

    @classmethod
    def private_blocked(cls, block: bool, setting: str = "MCP_BLOCK_PRIVATE_ADDRESSES") -> "AddressPolicy":
        """The MCP servers' policy: any scheme; private addresses refused when `block`."""
        return cls(https_only=False, public_only=block, setting=setting)

    def with_own(self, url: str, *, public_only: bool) -> "AddressPolicy":
        """This policy, with `url`'s origin treated as the admin's own choice."""
        parsed = httpx.URL(url)
        own = (parsed.scheme, _normal(parsed.host), parsed.port or _default_port(parsed.scheme))
        return AddressPolicy(self.https_only, self.public_only, self.allowed, own, public_only, self.setting)

    def url_refusal(self, url: httpx.URL) -> str | None:
        """Why a request to this URL is refused before anything is sent; None when it may go."""
        if url.scheme not in ("http", "https") or not url.host:
            return "only http:// and https:// URLs are followed"
        host, port = _normal(url.host), url.port or _default_port(url.scheme)
        if self._is_own(host, port, url.scheme):
            return self._address_refusal(host, self.own_public_only)
        if any(entry.names(host, port) for entry in self.allowed):
            return None
        if self.https_only and url.scheme != "https":
            return f"it is not an https:// URL, and {self.setting} does not list {host}"
        return self._address_refusal(host, self.public_only)

    def address_refusal(self, host: str, port: int, address: str) -> str | None:
        """Why connecting to `address` (what `host` resolved to) is refused; None when it may."""
        host = _normal(host)
        if self.own is not None and (host, port) == self.own[1:]:
            return self._address_refusal(address, self.own_public_only, named=host)
        if any(entry.names(host, port) for entry in self.allowed):
            return None
        resolved = _address(address)
        if resolved is not None and any(entry.covers(resolved, port) for entry in self.allowed):
            return None
        return self._address_refusal(address, self.public_only, named=host)

    def _is_own(self, host: str, port: int, scheme: str) -> bool:
        return self.own is not None and self.own == (scheme, host, port)

    def _address_refusal(self, host: str, public_only: bool, *, named: str = "") -> str | None:
        address = _address(host)
        if not public_only or address is None or is_public(address):
            return None
        who = f"{named} resolves to {host}, which" if named and named != _normal(host) else host
        return f"{who} is a loopback, private or link-local address, and {self._exception()}"

    def _exception(self) -> str:
        if self.setting == "MCP_BLOCK_PRIVATE_ADDRESSES":
            return "MCP_BLOCK_PRIVATE_ADDRESSES is on"
        return f"{self.setting} does not list it"


def is_public(address: Address) -> bool:
    """Globally routable unicast (an IPv4-mapped IPv6 address counts as its IPv4 address)."""
    return _unmapped(address).is_global and not address.is_multicast


def _unmapped(address: Address) -> Address:
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return mapped or address


def _address(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _is_address(host: str) -> bool:
    return _address(host) is not None


def _normal(host: str) -> str:
    return host.strip("[]").lower().rstrip(".")


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _port(raw: str, entry: str) -> int:
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{entry!r} has no valid port after the colon")
    return int(raw)

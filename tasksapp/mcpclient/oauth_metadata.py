"""Where a protected MCP server's authorization lives: the 401 challenge, the protected resource
metadata (RFC 9728) and the authorization server's metadata (RFC 8414, OpenID Connect discovery).

Everything here is read from servers, so everything is checked before use: sizes, types, the
`resource` against the server we asked (a server may not speak for another), and the `issuer`
against the one we built the well-known URL from (string equality, no normalisation).

Every document is fetched through an Outbound client (tasksapp/mcpclient/outbound.py): its address
policy, its bounded reader and its deadline. A document that cannot be had, for whatever reason,
is simply not there; messages name the URLs tried and never quote what came back, so they cannot
carry an internal service's answer or tell its ports apart.
"""

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx

from tasksapp.mcpclient.errors import McpError
from tasksapp.mcpclient.outbound import Outbound, OutboundFailed, shown
from tasksapp.mcpclient.types import JsonObject

log = logging.getLogger(__name__)
MAX_METADATA_BYTES = 64 * 1024


class OAuthError(McpError):
    """The authorization exchange failed: a server's metadata or answer cannot be trusted or used.

    `permanent` is False only for failures a later retry may not repeat (the network, a 5xx).
    """

    def __init__(self, message: str, *, permanent: bool = True) -> None:
        super().__init__(message)
        self.permanent = permanent


@dataclass(frozen=True)
class Challenge:
    """One `WWW-Authenticate: Bearer ...` challenge (RFC 6750 §3, RFC 9728 §5.1)."""

    error: str | None = None
    scope: tuple[str, ...] | None = None
    resource_metadata: str | None = None
    description: str | None = None

    @property
    def insufficient_scope(self) -> bool:
        return self.error == "insufficient_scope"


_PARAM = re.compile(r'\s*([A-Za-z0-9_.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*,?')
_SCHEME = re.compile(r"\s*,?\s*([A-Za-z0-9_.-]+)(?:\s+|$|(?=,))")


def parse_challenges(values: Sequence[str]) -> dict[str, dict[str, str]]:
    """Every challenge in the WWW-Authenticate header values: scheme (lower case) -> its params."""
    found: dict[str, dict[str, str]] = {}
    for value in values:
        pos = 0
        scheme: str | None = None
        while pos < len(value):
            param = _PARAM.match(value, pos)
            if param and scheme is not None and param.end() > pos:
                raw = param.group(2) if param.group(2) is not None else param.group(3)
                found[scheme].setdefault(param.group(1).lower(), re.sub(r"\\(.)", r"\1", raw))
                pos = param.end()
                continue
            head = _SCHEME.match(value, pos)
            if not head or head.end() == pos:
                break
            scheme = head.group(1).lower()
            found.setdefault(scheme, {})
            pos = head.end()
    return found


def bearer_challenge(headers: httpx.Headers) -> Challenge | None:
    """The Bearer challenge of a 401 or 403, or None when the server sent none."""
    params = parse_challenges(headers.get_list("www-authenticate")).get("bearer")
    if params is None:
        return None
    scope = params.get("scope")
    return Challenge(
        error=params.get("error"),
        scope=tuple(scope.split()) if scope is not None else None,
        resource_metadata=params.get("resource_metadata"),
        description=params.get("error_description"),
    )


@dataclass(frozen=True)
class ResourceMetadata:
    """RFC 9728 metadata of the MCP server. `resource` is kept exactly as published."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None
    url: str


@dataclass(frozen=True)
class ServerMetadata:
    """RFC 8414 metadata of an authorization server, its issuer checked."""

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    grant_types_supported: tuple[str, ...] = ("authorization_code", "implicit")
    token_endpoint_auth_methods_supported: tuple[str, ...] = ("client_secret_basic",)
    code_challenge_methods_supported: tuple[str, ...] = ()
    iss_parameter_supported: bool = False
    client_id_metadata_document_supported: bool = False
    url: str = field(default="", compare=False)


def resource_matches(resource: str, server_url: str) -> bool:
    """RFC 9728 §3.3 / MCP canonical URI: same origin, and the resource's path a prefix of ours."""
    try:
        ours, theirs = httpx.URL(server_url), httpx.URL(resource)
    except httpx.InvalidURL:
        return False
    if theirs.fragment or (ours.scheme, ours.host, ours.port) != (theirs.scheme, theirs.host, theirs.port):
        return False
    prefix = theirs.path.rstrip("/")
    return ours.path == prefix or ours.path.startswith(prefix + "/") or not prefix


def resource_metadata_urls(server_url: str, challenge: Challenge | None) -> list[str]:
    """Where to look, in the spec's order: the challenge's URL, then path-based, then the root."""
    parsed = httpx.URL(server_url)
    origin = f"{parsed.scheme}://{parsed.netloc.decode('ascii')}"
    urls = [challenge.resource_metadata] if challenge and challenge.resource_metadata else []
    path = parsed.path.rstrip("/")
    if path:
        urls.append(f"{origin}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{origin}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(urls))


def server_metadata_urls(issuer: str) -> list[str]:
    """RFC 8414 then OpenID Connect discovery, in the MCP spec's order (path-aware)."""
    parsed = httpx.URL(issuer)
    origin = f"{parsed.scheme}://{parsed.netloc.decode('ascii')}"
    path = parsed.path.rstrip("/")
    if not path:
        return [
            f"{origin}/.well-known/oauth-authorization-server",
            f"{origin}/.well-known/openid-configuration",
        ]
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


async def fetch_json(http: Outbound, url: str, refusals: list[str]) -> JsonObject | None:
    """GET a metadata document; None when there is none to use at `url`: any failure, any status
    but 200, anything but a JSON object. Why the address policy refused a URL is added to
    `refusals` (those messages depend on the URL and the policy only)."""
    try:
        answer = await http.request(
            "GET", url, headers={"Accept": "application/json"}, max_body=MAX_METADATA_BYTES
        )
    except OutboundFailed as exc:
        if exc.refused:
            refusals.append(str(exc))
        return None
    return answer.json_object() if answer.status == 200 else None


def _strings(raw: JsonObject, key: str) -> tuple[str, ...] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise OAuthError(f"metadata field {key} is not an array of strings")
    return tuple(value)


def _url(raw: JsonObject, key: str, *, required: bool = False) -> str | None:
    value = raw.get(key)
    if value is None and not required:
        return None
    try:
        usable = isinstance(value, str) and httpx.URL(value).scheme in ("http", "https")
    except httpx.InvalidURL:
        usable = False
    if not usable:
        raise OAuthError(f"metadata field {key} is not an http(s) URL")
    return str(value)


async def discover_resource(http: Outbound, server_url: str, challenge: Challenge | None) -> ResourceMetadata:
    """The server's protected resource metadata, from the first place in the spec's order that has
    it. A document on the server's own origin that cannot be used is an error that says why; one
    elsewhere (named by the challenge) that cannot be used is passed over like a missing one."""
    found, refusals = await _first_usable(
        http,
        resource_metadata_urls(server_url, challenge),
        lambda raw, url: _resource_metadata(raw, url, server_url),
        strict=lambda url: _same_origin(url, server_url),
    )
    if found is None:
        raise OAuthError(
            f"{server_url} asks for authorization but publishes no usable protected resource metadata"
            + _because(refusals),
            permanent=False,
        )
    return found


def _resource_metadata(raw: JsonObject, url: str, server_url: str) -> ResourceMetadata:
    resource = raw.get("resource")
    if not isinstance(resource, str) or not resource_matches(resource, server_url):
        raise OAuthError(
            f"the protected resource metadata at {shown(url)} names another resource than "
            f"{server_url}; refusing to authorize (check the server URL)"
        )
    servers = _strings(raw, "authorization_servers") or ()
    if not servers:
        raise OAuthError(f"the protected resource metadata at {shown(url)} names no authorization server")
    return ResourceMetadata(resource, servers, _strings(raw, "scopes_supported"), url)


async def discover_server(http: Outbound, issuer: str) -> ServerMetadata:
    """The authorization server's metadata, whose `issuer` must be exactly the one we looked up.

    The issuer is a URL someone else named: a document that cannot be used (another issuer, a
    field of the wrong type) is passed over like a missing one, and the message is the same."""
    found, refusals = await _first_usable(
        http, server_metadata_urls(issuer), lambda raw, url: _server_metadata(raw, url, issuer)
    )
    if found is None:
        raise OAuthError(
            f"authorization server {shown(issuer)} publishes no usable metadata "
            "(RFC 8414 or OpenID discovery)" + _because(refusals),
            permanent=False,
        )
    return found


async def _first_usable[T](
    http: Outbound,
    urls: list[str],
    read: Callable[[JsonObject, str], T],
    *,
    strict: Callable[[str], bool] = lambda url: False,
) -> tuple[T | None, list[str]]:
    """The first document `read` accepts, and why the policy refused any URL on the way. A document
    `read` refuses is passed over, unless its URL is `strict`: then that refusal is the error."""
    refusals: list[str] = []
    for url in urls:
        raw = await fetch_json(http, url, refusals)
        if raw is None:
            continue
        try:
            return read(raw, url), refusals
        except OAuthError as exc:
            if strict(url):
                raise
            log.info("unusable metadata at %s: %s", shown(url), exc)
    return None, refusals


def _server_metadata(raw: JsonObject, url: str, issuer: str) -> ServerMetadata:
    if raw.get("issuer") != issuer:
        raise OAuthError(f"the metadata names another issuer than {shown(issuer)} (RFC 8414 §3.3)")
    return ServerMetadata(
        issuer=issuer,
        authorization_endpoint=_url(raw, "authorization_endpoint"),
        token_endpoint=str(_url(raw, "token_endpoint", required=True)),
        registration_endpoint=_url(raw, "registration_endpoint"),
        scopes_supported=_strings(raw, "scopes_supported"),
        grant_types_supported=_strings(raw, "grant_types_supported") or ("authorization_code", "implicit"),
        token_endpoint_auth_methods_supported=_strings(raw, "token_endpoint_auth_methods_supported")
        or ("client_secret_basic",),
        code_challenge_methods_supported=_strings(raw, "code_challenge_methods_supported") or (),
        iss_parameter_supported=raw.get("authorization_response_iss_parameter_supported") is True,
        client_id_metadata_document_supported=raw.get("client_id_metadata_document_supported") is True,
        url=url,
    )


def _same_origin(url: str, other: str) -> bool:
    a, b = httpx.URL(url), httpx.URL(other)
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


def _because(refusals: list[str]) -> str:
    return f" ({'; '.join(dict.fromkeys(refusals))})" if refusals else ""

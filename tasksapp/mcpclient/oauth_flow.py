"""The OAuth 2.1 exchanges an MCP client makes: client registration, the authorization code grant
with PKCE (S256), `state`, `resource` (RFC 8707) and `iss` (RFC 9207) checks, refresh, and the
client credentials grant (with a secret or a private-key JWT).

Authlib supplies the protocol pieces (PKCE challenge, request encoding, client authentication,
JWT assertions); this module decides what to send where, and checks what comes back. It speaks
through an Outbound client of its own (tasksapp/mcpclient/outbound.py: an address policy, a
bounded reader, an overall deadline), so OAuth traffic never rides on the MCP connection.

A client is bound to one authorization server (`ClientConfig.issuer`): nothing is sent to
another, whatever a server's metadata says; IssuerChanged says which one was named instead.
"""

import json
import secrets
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import httpx
from authlib.common.urls import url_decode
from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri, prepare_token_request
from authlib.oauth2.rfc7523 import PrivateKeyJWT
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from joserfc.jwk import ECKey, OKPKey, RSAKey

from tasksapp.mcpclient.addresses import AddressPolicy
from tasksapp.mcpclient.oauth_metadata import (
    MAX_METADATA_BYTES,
    Challenge,
    OAuthError,
    ResourceMetadata,
    ServerMetadata,
)
from tasksapp.mcpclient.outbound import Deadlines, Outbound, OutboundFailed, shown
from tasksapp.mcpclient.types import JsonObject

Grant = Literal["authorization_code", "client_credentials"]
Need = Literal["unauthorized", "refresh_failed", "insufficient_scope", "issuer_changed", "unbound"]
SECRET_METHODS = ("client_secret_basic", "client_secret_post")
# RFC 6749 §5.2 and RFC 7591 §3.2.2: the only words of an error answer a message repeats.
OAUTH_ERRORS = frozenset(
    {
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
        "invalid_redirect_uri",
        "invalid_client_metadata",
        "temporarily_unavailable",
        "server_error",
    }
)


class AuthorizationRequired(OAuthError):
    """A person must act: Connect, re-authorize with `scope`, or (an admin) confirm or re-enter
    the authorization server the credentials belong to."""

    def __init__(self, message: str, *, need: Need, scope: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.need = need
        self.scope = scope


class IssuerChanged(AuthorizationRequired):
    """The server's metadata names an authorization server other than the one this client is
    bound to. Nothing was sent to it; an admin must confirm the new one."""

    def __init__(self, bound: str, named: str) -> None:
        super().__init__(
            f"The authorization server changed from {shown(bound)} to {shown(named)}: "
            "an admin must confirm it.",
            need="issuer_changed",
        )
        self.bound = bound
        self.named = named


class RefreshRejected(OAuthError):
    """The authorization server refused the refresh token (invalid_grant): a person must reconnect."""


@dataclass(frozen=True)
class ClientConfig:
    """How this client presents itself; set by the admin (or the conformance harness)."""

    redirect_uri: str
    client_name: str = "MCP Tasks Dashboard"
    metadata_url: str | None = None  # a Client ID Metadata Document we serve (https)
    client_id: str | None = None  # pre-registered credentials, used when no document is accepted
    client_secret: str | None = field(default=None, repr=False)
    private_key: str | None = field(default=None, repr=False)  # PEM, for private_key_jwt
    signing_alg: str | None = None  # default: RS256, ES256 or EdDSA by the key's type
    grant: Grant = "authorization_code"
    application_type: Literal["web", "native"] = "web"
    offline_access: bool = True
    # The one authorization server this client may talk to (bound when the credentials were
    # saved, or by the first Connect); None: not chosen yet, and then no credentials may be set.
    issuer: str | None = None

    @property
    def has_credentials(self) -> bool:
        return bool(self.client_id or self.client_secret or self.private_key)


@dataclass(frozen=True)
class Registration:
    """Client credentials at one authorization server (never valid at another: SEP-2352)."""

    issuer: str
    client_id: str
    auth_method: str
    how: Literal["metadata_document", "preregistered", "dynamic"]
    client_secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Tokens:
    access_token: str = field(repr=False)
    issuer: str
    resource: str
    token_endpoint: str
    obtained_at: float
    expires_at: float | None = None
    refresh_token: str | None = field(default=None, repr=False)
    scope: tuple[str, ...] = ()

    def expiring(self, now: float | None = None) -> bool:
        """True when the token should be refreshed before use: within a minute (or half its life)."""
        if self.expires_at is None:
            return False
        leeway = min(60.0, (self.expires_at - self.obtained_at) / 2)
        return (now or time.time()) >= self.expires_at - leeway


@dataclass(frozen=True)
class GrantState:
    """What is kept per MCP server between requests (encrypted at rest by the caller)."""

    registration: Registration | None = None
    tokens: Tokens | None = None
    requested_scope: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | None) -> "GrantState":
        if not text:
            return cls()
        raw = json.loads(text)
        reg, tok = raw.get("registration"), raw.get("tokens")
        return cls(
            registration=Registration(**reg) if reg else None,
            tokens=Tokens(**{**tok, "scope": tuple(tok.get("scope") or ())}) if tok else None,
            requested_scope=tuple(raw.get("requested_scope") or ()),
        )


@dataclass(frozen=True)
class PendingAuthorization:
    """An authorization request sent to a browser, kept until its callback arrives."""

    url: str
    state: str
    code_verifier: str = field(repr=False)
    redirect_uri: str
    issuer: str
    iss_required: bool
    token_endpoint: str
    resource: str
    scope: tuple[str, ...]
    registration: Registration

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "PendingAuthorization":
        raw = json.loads(text)
        return cls(
            **{**raw, "scope": tuple(raw["scope"]), "registration": Registration(**raw["registration"])}
        )


def choose_scope(
    challenge: Challenge | None,
    resource: ResourceMetadata,
    server: ServerMetadata,
    previous: tuple[str, ...],
    *,
    offline_access: bool,
) -> tuple[str, ...]:
    """The MCP scope selection strategy: the challenge's scope, else the resource's scopes_supported,
    else none; added to what was asked before (SEP-2350), plus offline_access where it is offered."""
    base = challenge.scope if challenge is not None and challenge.scope else resource.scopes_supported or ()
    scopes = list(dict.fromkeys([*previous, *base]))
    offered = server.scopes_supported or ()
    if offline_access and "offline_access" in offered and "offline_access" not in scopes:
        scopes.append("offline_access")
    return tuple(scopes)


class OAuthClient:
    """One client identity's conversations with one authorization server.

    `policy` says where requests may go (default: https and public addresses only; give the MCP
    server's origin with AddressPolicy.with_own); `deadlines` bound each exchange as a whole."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        policy: AddressPolicy | None = None,
        deadlines: Deadlines | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.http = Outbound(
            policy or AddressPolicy(),
            deadlines=deadlines or Deadlines(),
            max_body=MAX_METADATA_BYTES,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    def check_bound(self, issuer: str) -> None:
        """IssuerChanged unless `issuer` is the one this client is bound to; AuthorizationRequired
        when credentials were saved without being bound to any (they are sent nowhere then)."""
        bound = self.config.issuer
        if bound is not None and issuer != bound:
            raise IssuerChanged(bound, issuer)
        if bound is None and self.config.has_credentials:
            raise AuthorizationRequired(
                "the OAuth client credentials are bound to no authorization server: an admin must "
                "save the OAuth client settings again",
                need="unbound",
            )

    def _allowed(self, url: str, what: str) -> str:
        try:
            refusal = self.http.policy.url_refusal(httpx.URL(url))
        except httpx.InvalidURL:
            refusal = "it is not a URL"
        if refusal:
            raise OAuthError(f"refusing the {what} {shown(url)}: {refusal}")
        return url

    # --- registration ----------------------------------------------------------------------

    async def register(self, server: ServerMetadata, known: Registration | None) -> Registration:
        """Credentials for this authorization server, in the spec's order of preference: a Client
        ID Metadata Document, pre-registered credentials, then Dynamic Client Registration."""
        self.check_bound(server.issuer)
        if known is not None and known.issuer == server.issuer:
            return known
        config = self.config
        if config.metadata_url and server.client_id_metadata_document_supported:
            return Registration(server.issuer, config.metadata_url, "none", "metadata_document")
        if config.client_id:
            method = self._method_for(server, has_secret=bool(config.client_secret))
            return Registration(
                server.issuer, config.client_id, method, "preregistered", config.client_secret
            )
        if server.registration_endpoint is None:
            raise OAuthError(
                f"{server.issuer} offers no dynamic client registration and accepts no client metadata "
                "document: enter a client ID registered with it"
            )
        return await self._register_dynamically(server)

    def _method_for(self, server: ServerMetadata, *, has_secret: bool) -> str:
        offered = server.token_endpoint_auth_methods_supported
        if self.config.private_key and "private_key_jwt" in offered:
            return "private_key_jwt"
        for method in (*SECRET_METHODS, "none") if has_secret else ("none",):
            if method in offered:
                return method
        raise OAuthError(f"{shown(server.issuer)} supports none of the token endpoint auth methods we use")

    async def _register_dynamically(self, server: ServerMetadata) -> Registration:
        url = str(server.registration_endpoint)
        offered = server.token_endpoint_auth_methods_supported
        wanted = next((m for m in (*SECRET_METHODS, "none") if m in offered), "none")
        body = {
            "client_name": self.config.client_name,
            "redirect_uris": [self.config.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted,
            "application_type": self.config.application_type,
        }
        raw = await self._post_json(url, "registration endpoint", json_body=body, accept=(200, 201))
        client_id = raw.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise OAuthError(f"dynamic client registration at {shown(url)} returned no client_id")
        secret = raw.get("client_secret") if isinstance(raw.get("client_secret"), str) else None
        method = raw.get("token_endpoint_auth_method")
        method = method if isinstance(method, str) else wanted
        if method in SECRET_METHODS and not secret:
            method = "none"
        return Registration(server.issuer, client_id, method, "dynamic", secret)

    # --- authorization code ------------------------------------------------------------------

    def begin(
        self,
        resource: ResourceMetadata,
        server: ServerMetadata,
        registration: Registration,
        scope: tuple[str, ...],
    ) -> PendingAuthorization:
        """The authorization request to send a browser to (PKCE S256, state, resource)."""
        self.check_bound(server.issuer)
        if registration.issuer != server.issuer:
            raise IssuerChanged(registration.issuer, server.issuer)
        if server.authorization_endpoint is None:
            raise OAuthError(f"{shown(server.issuer)} has no authorization_endpoint")
        if "S256" not in server.code_challenge_methods_supported:
            raise OAuthError(f"{shown(server.issuer)} does not offer PKCE with S256; refusing to authorize")
        endpoint = self._allowed(server.authorization_endpoint, "authorization endpoint")
        state, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(64)
        url = prepare_grant_uri(
            endpoint,
            client_id=registration.client_id,
            response_type="code",
            redirect_uri=self.config.redirect_uri,
            scope=" ".join(scope) or None,
            state=state,
            code_challenge=create_s256_code_challenge(verifier),
            code_challenge_method="S256",
            resource=resource.resource,
        )
        return PendingAuthorization(
            url=url,
            state=state,
            code_verifier=verifier,
            redirect_uri=self.config.redirect_uri,
            issuer=server.issuer,
            iss_required=server.iss_parameter_supported,
            token_endpoint=server.token_endpoint,
            resource=resource.resource,
            scope=scope,
            registration=registration,
        )

    async def finish(self, pending: PendingAuthorization, callback_url: str) -> Tokens:
        """Check the authorization response (state, error, iss) and exchange its code for tokens."""
        params = check_callback(pending, callback_url)
        body = prepare_token_request(
            "authorization_code",
            redirect_uri=pending.redirect_uri,
            code=params["code"],
            code_verifier=pending.code_verifier,
            resource=pending.resource,
        )
        return await self._token_request(
            pending.token_endpoint, body, pending.registration, pending.resource, pending.scope
        )

    async def refresh(self, tokens: Tokens, registration: Registration) -> Tokens:
        if not tokens.refresh_token:
            raise RefreshRejected("there is no refresh token")
        self.check_bound(tokens.issuer)
        if registration.issuer != tokens.issuer:
            raise IssuerChanged(registration.issuer, tokens.issuer)
        body = prepare_token_request(
            "refresh_token", refresh_token=tokens.refresh_token, resource=tokens.resource
        )
        fresh = await self._token_request(
            tokens.token_endpoint, body, registration, tokens.resource, tokens.scope, refreshing=True
        )
        # RFC 6749 §6: a server that does not rotate keeps the old refresh token valid.
        return fresh if fresh.refresh_token else replace(fresh, refresh_token=tokens.refresh_token)

    async def client_credentials(
        self, resource: ResourceMetadata, server: ServerMetadata, scope: tuple[str, ...]
    ) -> tuple[Registration, Tokens]:
        """The client credentials grant for machine-to-machine servers (a secret or a private key)."""
        config = self.config
        if not config.client_id or not (config.client_secret or config.private_key):
            raise OAuthError("client credentials need a client ID and a secret or a private key")
        self.check_bound(server.issuer)
        method = self._method_for(server, has_secret=bool(config.client_secret))
        registration = Registration(
            server.issuer, config.client_id, method, "preregistered", config.client_secret
        )
        body = prepare_token_request(
            "client_credentials", scope=" ".join(scope) or None, resource=resource.resource
        )
        tokens = await self._token_request(
            server.token_endpoint, body, registration, resource.resource, scope
        )
        return registration, tokens

    # --- the wire ------------------------------------------------------------------------

    def _client_auth(self, registration: Registration, token_endpoint: str) -> ClientAuth:
        if registration.auth_method == "private_key_jwt":
            if not self.config.private_key:
                raise OAuthError("private_key_jwt needs a private key")
            # SEP-1046: the assertion's audience is the authorization server's issuer.
            key, alg = _signing_key(self.config.private_key)
            signer = PrivateKeyJWT(token_endpoint=registration.issuer, alg=self.config.signing_alg or alg)
            return ClientAuth(registration.client_id, key, signer)
        return ClientAuth(registration.client_id, registration.client_secret, registration.auth_method)

    async def _token_request(
        self,
        endpoint: str,
        body: str,
        registration: Registration,
        resource: str,
        asked: tuple[str, ...],
        *,
        refreshing: bool = False,
    ) -> Tokens:
        self.check_bound(registration.issuer)
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        _, headers, body = self._client_auth(registration, endpoint).prepare("POST", endpoint, headers, body)
        raw = await self._post_json(
            endpoint, "token endpoint", form=body, headers=headers, refreshing=refreshing
        )
        access, kind = raw.get("access_token"), raw.get("token_type")
        if not isinstance(access, str) or not access or not isinstance(kind, str):
            raise OAuthError(
                f"the token endpoint {shown(endpoint)} answered without an access_token or token_type"
            )
        if kind.lower() != "bearer":
            raise OAuthError("the token endpoint issued a token that is not a Bearer token; only those work")
        now = time.time()
        expires_in = raw.get("expires_in")
        scope = raw.get("scope")
        refresh = raw.get("refresh_token")
        return Tokens(
            access_token=access,
            issuer=registration.issuer,
            resource=resource,
            token_endpoint=endpoint,
            obtained_at=now,
            expires_at=now + float(expires_in) if isinstance(expires_in, int | float) else None,
            refresh_token=refresh if isinstance(refresh, str) and refresh else None,
            scope=tuple(scope.split()) if isinstance(scope, str) else asked,
        )

    async def _post_json(
        self,
        url: str,
        what: str,
        *,
        json_body: JsonObject | None = None,
        form: str | None = None,
        headers: dict[str, str] | None = None,
        accept: tuple[int, ...] = (200,),
        refreshing: bool = False,
    ) -> dict[str, Any]:
        """The JSON object an endpoint answered with. Failures name the endpoint and at most one of
        the registered OAuth error codes: nothing else of what came back is repeated."""
        try:
            if json_body is not None:
                answer = await self.http.request(
                    "POST", url, json_body=json_body, headers={"Accept": "application/json"}
                )
            else:
                answer = await self.http.request("POST", url, content=form, headers=headers)
        except OutboundFailed as exc:
            raise OAuthError(f"the {what}: {exc}", permanent=exc.refused) from exc
        raw = answer.json_object()
        if answer.status in accept and raw is not None:
            return raw
        error = raw.get("error") if raw is not None else None
        error = error if error in OAUTH_ERRORS else None
        if refreshing and error in ("invalid_grant", "invalid_client", "unauthorized_client"):
            raise RefreshRejected(f"the authorization server refused the refresh token ({error})")
        if error:
            raise OAuthError(f"the {what} {shown(url)} refused the request ({error})")
        raise OAuthError(f"the {what} {shown(url)} gave no usable answer", permanent=answer.status < 500)


def check_callback(pending: PendingAuthorization, callback_url: str) -> dict[str, str]:
    """The authorization response's parameters, once state, error and iss (RFC 9207) are checked."""
    url = httpx.URL(callback_url)
    params = dict(url_decode(url.query.decode("ascii", "replace")))
    if params.get("state") != pending.state:
        raise OAuthError("the authorization response does not carry the state we sent; ignoring it")
    iss = params.get("iss")
    if iss is not None and iss != pending.issuer:
        raise OAuthError(f"the authorization response comes from issuer {iss!r}, not {pending.issuer!r}")
    if iss is None and pending.iss_required:
        raise OAuthError(f"{pending.issuer} promised an iss parameter in its response and sent none")
    if "error" in params:
        text = params.get("error_description") or params["error"]
        raise OAuthError(f"the authorization server refused: {text[:200]}")
    if not params.get("code"):
        raise OAuthError("the authorization response carries no code")
    return params


def _signing_key(pem: str) -> tuple[RSAKey | ECKey | OKPKey, str]:
    """The key and its usual algorithm."""
    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise OAuthError("the private key is not an unencrypted PEM private key") from exc
    if isinstance(key, rsa.RSAPrivateKey):
        return RSAKey.import_key(key), "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return ECKey.import_key(key), {256: "ES256", 384: "ES384", 521: "ES512"}.get(
            key.curve.key_size, "ES256"
        )
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return OKPKey.import_key(key), "EdDSA"
    raise OAuthError("the private key is not RSA, EC or Ed25519")


def check_private_key(pem: str) -> str:
    """The algorithm a PEM private key signs with; OAuthError when it cannot be used."""
    return _signing_key(pem)[1]

"""A small OAuth 2.1 authorization server for tests, built on Authlib's server components: the
authorization code grant with PKCE (S256 required), refresh tokens that rotate, client
credentials, dynamic client registration, RFC 8414 metadata and the RFC 9207 `iss` parameter.

Everything lives in memory. Used by tests/oauth/peer.py, which puts it in front of the reference
MCP server; the `resource` a token was issued for is kept on the token (RFC 8707).
"""

import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from authlib.oauth2.rfc6749 import AuthorizationServer, ClientMixin, grants
from authlib.oauth2.rfc6749.models import AuthorizationCodeMixin, TokenMixin
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload, OAuth2Request
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7636 import CodeChallenge

# Authlib refuses http:// outside this switch; the peer serves loopback only.
os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")

SCOPES = ["mcp:read", "mcp:write", "offline_access"]


class PeerRequest(OAuth2Request):  # type: ignore[misc]
    """An OAuth2Request over already-parsed parameters (query or form alike)."""

    def __init__(self, method: str, uri: str, data: dict[str, str], headers: dict[str, str]) -> None:
        super().__init__(method, uri, headers=headers)
        self.payload = BasicOAuth2Payload(data)
        self._params = data

    @property
    def form(self) -> dict[str, str]:
        return self._params

    @property
    def args(self) -> dict[str, str]:
        return self._params


@dataclass
class Client(ClientMixin):  # type: ignore[misc]
    client_id: str
    client_secret: str
    redirect_uris: list[str]
    auth_method: str
    grant_types: list[str]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        return " ".join(s for s in (scope or "").split() if s in SCOPES)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return endpoint != "token" or method == self.auth_method

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.grant_types


@dataclass
class Code(AuthorizationCodeMixin):  # type: ignore[misc]
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: str
    resource: str
    code_challenge: str
    code_challenge_method: str
    created: float = field(default_factory=time.time)

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class Token(TokenMixin):  # type: ignore[misc]
    client_id: str
    access_token: str
    refresh_token: str | None
    scope: str
    user: str
    resource: str
    expires_at: float
    revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return int(self.expires_at - time.time())

    def is_expired(self) -> bool:
        return time.time() >= self.expires_at

    def is_revoked(self) -> bool:
        return self.revoked

    def get_user(self) -> str:
        return self.user


class CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def save_authorization_code(self, code: str, request: OAuth2Request) -> None:
        data = request.payload.data
        self.server.codes[code] = Code(
            code=code,
            client_id=request.client.client_id,
            redirect_uri=data.get("redirect_uri", ""),
            scope=request.scope or "",
            user=request.user,
            resource=data.get("resource", ""),
            code_challenge=data.get("code_challenge", ""),
            code_challenge_method=data.get("code_challenge_method", ""),
        )

    def query_authorization_code(self, code: str, client: Client) -> Code | None:
        found: Code | None = self.server.codes.get(code)
        if found and found.client_id == client.client_id and time.time() - found.created < 300:
            return found
        return None

    def delete_authorization_code(self, authorization_code: Code) -> None:
        self.server.codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code: Code) -> str:
        self.request.resource = authorization_code.resource
        return authorization_code.user


class RefreshGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    INCLUDE_NEW_REFRESH_TOKEN = True  # refresh tokens rotate

    def authenticate_refresh_token(self, refresh_token: str) -> Token | None:
        self.server.refresh_attempts += 1
        token: Token | None = self.server.by_refresh.get(refresh_token)
        if token is None or token.revoked or self.server.refuse_refresh:
            return None
        return token

    def authenticate_user(self, refresh_token: Token) -> str:
        self.request.resource = refresh_token.resource
        return refresh_token.user

    def revoke_old_credential(self, refresh_token: Token) -> None:
        refresh_token.revoked = True


class ClientCredentialsGrant(grants.ClientCredentialsGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]


class LocalAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    def __init__(self, issuer: str, *, token_seconds: int = 3600) -> None:
        super().__init__(scopes_supported=SCOPES)
        self.issuer = issuer
        self.token_seconds = token_seconds
        self.clients: dict[str, Client] = {}
        self.codes: dict[str, Code] = {}
        self.tokens: dict[str, Token] = {}
        self.by_refresh: dict[str, Token] = {}
        self.refuse_refresh = False
        self.refresh_attempts = 0
        self.register_grant(CodeGrant, [CodeChallenge(required=True)])
        self.register_grant(RefreshGrant)
        self.register_grant(ClientCredentialsGrant)
        self.register_token_generator(
            "default",
            BearerTokenGenerator(
                access_token_generator=lambda **_: "at-" + secrets.token_urlsafe(24),
                refresh_token_generator=lambda **_: "rt-" + secrets.token_urlsafe(24),
                expires_generator=lambda client, grant_type: self.token_seconds,
            ),
        )

    # --- what Authlib asks of a framework ---------------------------------------------------

    def query_client(self, client_id: str) -> Client | None:
        return self.clients.get(client_id)

    def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
        resource = getattr(request, "resource", None) or request.payload.data.get("resource", "")
        saved = Token(
            client_id=request.client.client_id,
            access_token=token["access_token"],
            refresh_token=token.get("refresh_token"),
            scope=token.get("scope", ""),
            user=request.user or "machine",
            resource=resource,
            expires_at=time.time() + token["expires_in"],
        )
        self.tokens[saved.access_token] = saved
        if saved.refresh_token:
            self.by_refresh[saved.refresh_token] = saved

    def create_oauth2_request(self, request: OAuth2Request) -> OAuth2Request:
        return request

    def handle_response(self, status: int, body: Any, headers: Any) -> tuple[int, Any, dict[str, str]]:
        return status, body, dict(headers)

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass

    # --- what the peer calls ----------------------------------------------------------------

    def request(self, method: str, uri: str, data: dict[str, str], headers: dict[str, str]) -> OAuth2Request:
        return PeerRequest(method, uri, data, headers)

    def metadata(self) -> dict[str, Any]:
        base = self.issuer
        return {
            "issuer": base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register",
            "scopes_supported": SCOPES,
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
        }

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        method = body.get("token_endpoint_auth_method") or "client_secret_basic"
        client = Client(
            client_id="dyn-" + secrets.token_urlsafe(8),
            client_secret="" if method == "none" else secrets.token_urlsafe(24),
            redirect_uris=[str(uri) for uri in body.get("redirect_uris") or []],
            auth_method=method,
            grant_types=list(body.get("grant_types") or ["authorization_code", "refresh_token"]),
        )
        self.clients[client.client_id] = client
        answer = {**body, "client_id": client.client_id, "token_endpoint_auth_method": method}
        if client.client_secret:
            answer["client_secret"] = client.client_secret
        return answer

    def approve(self, query: str, user: str) -> tuple[int, str]:
        """The person approved the request in `query`: (status, Location) back to the client."""
        data = dict(parse_qsl(query))
        request = self.request("GET", f"{self.issuer}/authorize?{query}", data, {})
        grant = self.get_authorization_grant(request)
        status, _, headers = self.create_authorization_response(request, grant_user=user, grant=grant)
        location = headers.get("Location", "")
        if location:  # RFC 9207: say who answers
            parts = urlsplit(location)
            query_out = urlencode([*parse_qsl(parts.query), ("iss", self.issuer)])
            location = parts._replace(query=query_out).geturl()
        return status, location

    def valid(self, access_token: str, resource: str) -> Token | None:
        token = self.tokens.get(access_token)
        if token is None or token.is_expired() or token.resource not in ("", resource):
            return None
        return token

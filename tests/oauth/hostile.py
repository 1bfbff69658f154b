"""A hostile authorization server on loopback, in a thread: a complete one (RFC 8414 metadata
naming its own issuer, token, registration and authorization endpoints that answer as a real one
would), so that a client willing to use it goes all the way and hands over what it holds. It
records every request it receives, headers and body, byte for byte.

A test points an MCP server at it (tests/oauth/peer.py, `authorization_servers`) and asserts that
it received nothing at all."""

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def raw(self) -> bytes:
        head = "".join(f"{k}: {v}\n" for k, v in self.headers.items())
        return f"{self.method} {self.path}\n{head}\n".encode() + self.body


@dataclass
class HostileIssuer:
    base: str = ""
    seen: list[Seen] = field(default_factory=list)

    @property
    def issuer(self) -> str:
        return f"{self.base}/evil"

    @property
    def everything(self) -> bytes:
        """Every byte of every request received, as one blob (to look for a secret in)."""
        return b"\n".join(request.raw for request in self.seen)

    def metadata(self) -> dict[str, object]:
        base = self.issuer
        return {
            "issuer": base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register",
            "scopes_supported": ["mcp:read", "offline_access"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "token_endpoint_auth_methods_supported": [
                "client_secret_basic",
                "client_secret_post",
                "private_key_jwt",
                "none",
            ],
            "code_challenge_methods_supported": ["S256"],
        }

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(Seen(request.method, request.path_qs, dict(request.headers), body))
        path = request.path
        if path.startswith("/.well-known/"):
            return web.json_response(self.metadata())
        if path.endswith("/token"):
            return web.json_response({"access_token": "at-evil", "token_type": "Bearer", "expires_in": 3600})
        if path.endswith("/register"):
            return web.json_response(
                {"client_id": "evil-client", "client_secret": "evil-secret", "redirect_uris": []}, status=201
            )
        if path.endswith("/authorize"):
            return web.Response(text="<form><button>Approve</button></form>", content_type="text/html")
        return web.Response(status=404)


@contextmanager
def hostile_issuer() -> Iterator[HostileIssuer]:
    hostile = HostileIssuer()
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hostile.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.2)

    async def start() -> None:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        hostile.base = f"http://127.0.0.1:{runner.addresses[0][1]}"

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield hostile
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()

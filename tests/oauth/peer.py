"""`python -m tests.oauth.peer`: the reference MCP server (tasksapp.demoserver) protected by OAuth,
with its own authorization server (tests/oauth/authserver.py), on one loopback port.

- /mcp needs a bearer token issued for this resource with scope mcp:read (401 with a challenge
  naming the protected resource metadata otherwise); a tools/call of --step-up-tool also needs
  mcp:write (403 insufficient_scope).
- /.well-known/oauth-protected-resource/mcp, /.well-known/oauth-authorization-server/as and
  /as/{authorize,token,register}: the authorization server. /as/authorize shows a consent page
  whose Approve button a person (or a browser test) clicks.
- /_control (GET: counters; POST JSON) lets a test make the authorization server refuse
  refreshes or issue short-lived tokens, as a real one would (refuse_refresh, token_seconds,
  step_up_tool), and turn the server hostile (`reset` undoes all of it):
  - authorization_servers: what the protected resource metadata names instead (a switched issuer);
  - resource_metadata: the URL the 401 challenge names instead;
  - metadata: fields that replace the authorization server metadata's (endpoints elsewhere);
  - token_drip: seconds per byte: the token endpoint answers one byte at a time for as long as
    this is on (`dripping` and `drips` say whether and how often it has begun);
  - token_bomb: bytes: the token endpoint answers a gzip bomb that inflates to that many;
  - revoke: forget every token issued, so the MCP endpoint answers 401 to all of them.
- --no-listen refuses subscriptions/listen, so a client polls (and so needs fresh tokens).
"""

import argparse
import asyncio
import functools
import html
import json
import logging
import zlib
from typing import Any
from urllib.parse import parse_qsl

import uvicorn

from tasksapp.demoserver.server import DemoUvicornServer, create_app
from tests.oauth.authserver import Client, LocalAuthorizationServer

READY = "oauth peer listening on"
Scope = dict[str, Any]


class ProtectedDemo:
    def __init__(self, *, token_seconds: int, step_up_tool: str, listen: bool = True) -> None:
        self.listen = listen
        self.demo = create_app(poll_interval_ms=500)
        self.base = ""
        self.server: LocalAuthorizationServer | None = None
        self.token_seconds = token_seconds
        self.step_up_tool = step_up_tool
        self.mcp_requests = 0
        self.bearers_seen: set[str] = set()
        self.hostile: dict[str, Any] = {}
        self.dripping = False
        self.drips = 0
        self.token_requests = 0

    def bind(self, base: str) -> None:
        self.base = base
        self.server = LocalAuthorizationServer(f"{base}/as", token_seconds=self.token_seconds)

    @property
    def auth(self) -> LocalAuthorizationServer:
        assert self.server is not None
        return self.server

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.demo(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        body = await _body(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if path == "/mcp":
            await self._mcp(scope, body, headers, receive, send)
        elif path == "/.well-known/oauth-protected-resource/mcp":
            named = self.hostile.get("authorization_servers") or [self.auth.issuer]
            metadata = {"resource": f"{self.base}/mcp", "authorization_servers": named}
            await _json(send, 200, {**metadata, "scopes_supported": ["mcp:read"]})
        elif path == "/.well-known/oauth-authorization-server/as":
            await _json(send, 200, {**self.auth.metadata(), **self.hostile.get("metadata", {})})
        elif path == "/as/token" and (self.hostile.get("token_drip") or self.hostile.get("token_bomb")):
            self.token_requests += 1
            await self._hostile_token(send)
        elif path == "/as/authorize" and method == "GET":
            await _consent(send, scope["query_string"].decode())
        elif path == "/as/authorize":
            form = dict(parse_qsl(body.decode()))
            status, location = self.auth.approve(form.get("query", ""), user=form.get("user", "alice"))
            await _respond(send, status if location else 400, b"", [(b"location", location.encode())])
        elif path == "/as/token":
            self.token_requests += 1
            form = dict(parse_qsl(body.decode()))
            request = self.auth.request("POST", f"{self.auth.issuer}/token", form, _title(headers))
            status, payload, _ = self.auth.create_token_response(request)
            await _json(send, status, payload)
        elif path == "/as/register":
            await _json(send, 201, self.auth.register(json.loads(body or b"{}")))
        elif path == "/_control":
            await self._control(method, body, send)
        else:
            await _respond(send, 404, b"Not Found")

    async def _mcp(self, scope: Scope, body: bytes, headers: dict[str, str], receive: Any, send: Any) -> None:
        self.mcp_requests += 1
        metadata = f"{self.base}/.well-known/oauth-protected-resource/mcp"
        bearer = headers.get("authorization", "")
        token = self.auth.valid(bearer[7:], f"{self.base}/mcp") if bearer.startswith("Bearer ") else None
        if token is None:
            metadata = self.hostile.get("resource_metadata") or metadata
            challenge = f'Bearer error="invalid_token", scope="mcp:read", resource_metadata="{metadata}"'
            await _json(send, 401, {"error": "invalid_token"}, [(b"www-authenticate", challenge.encode())])
            return
        self.bearers_seen.add(token.access_token)
        granted = set(token.scope.split())
        needed = {"mcp:read"}
        message = json.loads(body or b"{}")
        name = message.get("params", {}).get("name") if isinstance(message, dict) else None
        if not self.listen and message.get("method") == "subscriptions/listen":
            refusal = {
                "jsonrpc": "2.0",
                "id": message.get("id"),
                "error": {"code": -32601, "message": "no push here"},
            }
            await _json(send, 200, refusal)
            return
        if self.step_up_tool and message.get("method") == "tools/call" and name == self.step_up_tool:
            needed.add("mcp:write")
        if not needed <= granted:
            challenge = (
                f'Bearer error="insufficient_scope", scope="{" ".join(sorted(needed))}", '
                f'resource_metadata="{metadata}"'
            )
            await _json(
                send, 403, {"error": "insufficient_scope"}, [(b"www-authenticate", challenge.encode())]
            )
            return
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return dict(await receive())  # the client going away, for a stream
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.demo(scope, replay, send)

    async def _hostile_token(self, send: Any) -> None:
        """A token answer dripped a byte at a time (for as long as token_drip is on), or a bomb."""
        if bomb := int(self.hostile.get("token_bomb") or 0):
            headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
            await _respond(send, 200, await asyncio.to_thread(_gzip_bomb, bomb), headers)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        self.dripping, self.drips = True, self.drips + 1
        try:
            while self.hostile.get("token_drip"):
                await send({"type": "http.response.body", "body": b" ", "more_body": True})
                await asyncio.sleep(float(self.hostile["token_drip"]))
        finally:
            self.dripping = False
        await send({"type": "http.response.body", "body": b"{}"})

    async def _control(self, method: str, body: bytes, send: Any) -> None:
        if method == "POST":
            change = json.loads(body or b"{}")
            if change.pop("reset", False):
                self.hostile = {}
            if change.pop("revoke", False):
                self.auth.tokens.clear()
            for knob in (
                "authorization_servers",
                "resource_metadata",
                "metadata",
                "token_drip",
                "token_bomb",
            ):
                if knob in change:
                    self.hostile[knob] = change.pop(knob)
            if self.hostile.get("token_bomb"):  # made off the loop, once: the peer keeps answering
                asyncio.get_running_loop().run_in_executor(None, _gzip_bomb, int(self.hostile["token_bomb"]))
            self.auth.refuse_refresh = bool(change.get("refuse_refresh", self.auth.refuse_refresh))
            self.auth.token_seconds = int(change.get("token_seconds", self.auth.token_seconds))
            self.step_up_tool = str(change.get("step_up_tool", self.step_up_tool))
        await _json(
            send,
            200,
            {
                "refresh_attempts": self.auth.refresh_attempts,
                "tokens_issued": len(self.auth.tokens),
                "clients": len(self.auth.clients),
                "bearers_seen": len(self.bearers_seen),
                "mcp_requests": self.mcp_requests,
                "token_requests": self.token_requests,
                "dripping": self.dripping,
                "drips": self.drips,
            },
        )


@functools.cache
def _gzip_bomb(inflated: int) -> bytes:
    """`inflated` bytes of JSON-looking spaces, gzip-compressed (about 1/1000 of that on the wire)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = b" " * (1 << 20)
    parts = [packer.compress(block) for _ in range(inflated >> 20)]
    return b"".join([*parts, packer.flush()])


def _title(headers: dict[str, str]) -> dict[str, str]:
    return {"Authorization": headers["authorization"]} if "authorization" in headers else {}


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _respond(
    send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers or []})
    await send({"type": "http.response.body", "body": body})


async def _json(
    send: Any, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(payload).encode()
    await _respond(send, status, body, [(b"content-type", b"application/json"), *(headers or [])])


async def _consent(send: Any, query: str) -> None:
    params = dict(parse_qsl(query))
    client = html.escape(params.get("client_id", ""))
    page = f"""<!doctype html><title>Authorize</title><h1>Authorize {client}</h1>
<p>Scopes: <code id="scopes">{html.escape(params.get("scope", ""))}</code></p>
<form method="post" action="/as/authorize"><input type="hidden" name="query" value="{html.escape(query)}">
<input type="hidden" name="user" value="alice"><button type="submit" id="approve">Approve</button></form>"""
    await _respond(send, 200, page.encode(), [(b"content-type", b"text/html; charset=utf-8")])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.oauth.peer")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token-seconds", type=int, default=3600)
    parser.add_argument("--step-up-tool", default="")
    parser.add_argument("--no-listen", action="store_true", help="refuse subscriptions/listen: clients poll")
    parser.add_argument(
        "--client", default="", help="ID:SECRET of a pre-registered client (client credentials)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level="WARNING")
    app = ProtectedDemo(
        token_seconds=args.token_seconds, step_up_tool=args.step_up_tool, listen=not args.no_listen
    )
    app.bind(f"http://{args.host}:{args.port}")
    if args.client:
        client_id, _, secret = args.client.partition(":")
        app.auth.clients[client_id] = Client(
            client_id, secret, [], "client_secret_basic", ["client_credentials"]
        )
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", lifespan="on")
    server = DemoUvicornServer(config, app.demo, lambda url: print(f"{READY} {url}", flush=True))
    server.run()


if __name__ == "__main__":
    main()

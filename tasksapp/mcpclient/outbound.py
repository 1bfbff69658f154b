"""One-shot HTTP exchanges with parties other than an MCP server's JSON-RPC endpoint: OAuth
metadata, token and registration endpoints, webhooks.

Every exchange goes through the same three bounds: an address policy checked before sending and
again at connect time (tasksapp/mcpclient/addresses.py), the bounded reader
(tasksapp/mcpclient/reading.py, read_capped), and an overall deadline over the whole exchange —
connecting, sending, waiting and reading — besides the per-read timeout, so an answer dripped a
byte at a time ends at the deadline. Redirects are never followed.
"""

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx

from tasksapp.mcpclient.addresses import AddressPolicy
from tasksapp.mcpclient.errors import McpError
from tasksapp.mcpclient.reading import read_capped
from tasksapp.mcpclient.transport import AiohttpTransport, RefusedDestination

log = logging.getLogger(__name__)
MAX_ANSWER_BYTES = 64 * 1024


@dataclass(frozen=True)
class Deadlines:
    """Seconds: to connect, of silence while reading, and for the whole exchange."""

    connect: float = 5.0
    read: float = 10.0
    total: float = 20.0


@dataclass(frozen=True)
class Answer:
    status: int
    headers: httpx.Headers
    body: bytes

    def json_object(self) -> dict[str, Any] | None:
        """The body as a JSON object, or None when it is anything else."""
        try:
            loaded = json.loads(self.body)
        except (ValueError, RecursionError):
            return None
        return loaded if isinstance(loaded, dict) else None


class OutboundFailed(McpError):
    """No answer to use. `refused`: the address policy refused the destination and nothing was
    sent; the message says why (it depends on the URL and the policy only). Otherwise the message
    is the same whatever went wrong — refused connection, silence, a non-HTTP answer, a body past
    the cap — so it cannot tell open, closed and non-HTTP ports apart; `detail` has the cause,
    for logs."""

    def __init__(self, message: str, *, refused: bool, detail: str = "") -> None:
        super().__init__(message)
        self.refused = refused
        self.detail = detail or message


class Outbound:
    """An HTTP client for one-shot exchanges under one policy (open it inside the loop that uses it)."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        deadlines: Deadlines = Deadlines(),  # frozen: one shared value is safe
        max_body: int = MAX_ANSWER_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.policy = policy
        self.deadlines = deadlines
        self.max_body = max_body
        self._transport = transport
        self._timeout = httpx.Timeout(deadlines.read, connect=deadlines.connect).as_dict()

    @property
    def transport(self) -> httpx.AsyncBaseTransport:
        if self._transport is None:
            self._transport = AiohttpTransport(max_connections=20, policy=self.policy)
        return self._transport

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()
            self._transport = None

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        content: bytes | str | None = None,
        json_body: Any = None,
        max_body: int | None = None,
        read: bool = True,
    ) -> Answer:
        """One request and its whole answer (any status), or OutboundFailed. `read=False`: the
        status and headers only; the body is left unread (and the connection closed)."""
        if json_body is not None:
            content = json.dumps(json_body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        try:
            request = httpx.Request(
                method, url, headers=headers, content=content, extensions={"timeout": self._timeout}
            )
        except (httpx.InvalidURL, ValueError) as exc:
            raise OutboundFailed(f"{shown(url)} is not a usable URL", refused=True) from exc
        if refusal := self.policy.url_refusal(request.url):
            raise OutboundFailed(f"refusing to contact {shown(url)}: {refusal}", refused=True)
        try:
            async with asyncio.timeout(self.deadlines.total):
                return await self._exchange(request, max_body or self.max_body, read)
        except RefusedDestination as exc:
            raise OutboundFailed(f"refusing to contact {shown(url)}: {exc}", refused=True) from exc
        except TimeoutError as exc:
            raise self._failed(url, f"no complete answer within {self.deadlines.total:g} s") from exc
        except (httpx.HTTPError, aiohttp.ClientError, OSError, McpError) as exc:
            raise self._failed(url, f"{type(exc).__name__}: {exc}") from exc

    async def _exchange(self, request: httpx.Request, limit: int, read: bool) -> Answer:
        response = await self.transport.handle_async_request(request)
        try:
            body = await read_capped(response, limit) if read else b""
        finally:
            await response.aclose()
        return Answer(response.status_code, response.headers, body)

    def _failed(self, url: str, detail: str) -> OutboundFailed:
        log.info("outbound request to %s failed: %s", shown(url), detail)
        return OutboundFailed(f"no usable answer from {shown(url)}", refused=False, detail=detail)


def shown(url: str, limit: int = 200) -> str:
    """A URL (often one someone else named) as messages show it: printable, cut at `limit` characters."""
    text = "".join(c if c.isprintable() else "?" for c in url)
    return text if len(text) <= limit else text[:limit] + "…"

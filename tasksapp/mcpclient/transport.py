"""An httpx transport on one aiohttp connection pool, with nothing else in between.

httpx-aiohttp's transport does the same job with more per-request work (a new ClientTimeout,
a context manager for error mapping, decompression handed back to httpx); this one keeps
httpx's request and response types (McpClient is built on them) and adds as little as it can.
bench/transport.py measures both.

Compressed bodies are inflated here, never more than CHUNK bytes of output at a time: httpx's
decoders inflate each network chunk whole, so 64 KiB of a gzip bomb became 64 MiB in memory
before the client's size cap could look at it. The caller caps the inflated bytes as it reads.

Keep-alive: uvicorn and Node close a connection idle for 5 s (aiohttp would keep it 15 s), so a
poller on a 5 s interval sent requests on connections the server was closing at that instant.
Idle connections are dropped here after IDLE_SECONDS, and a connection that closes (or is reset)
after the request was written and before any of the answer came raises ClosedBeforeAnswer, which
the caller may answer by sending a read again with the FRESH_CONNECTION extension: on a new
connection, never one from the pool (whose other idle connections may be closing too).
"""

import errno
import socket
import ssl
from collections.abc import AsyncIterator

import aiohttp
import aiohttp.abc
import httpx
import yarl

from tasksapp.mcpclient.addresses import AddressPolicy
from tasksapp.mcpclient.failures import connect_failure
from tasksapp.mcpclient.inflate import ACCEPT_ENCODING, CHUNK, Inflater
from tasksapp.mcpclient.reading import ReadBody

_INFLATED_HEADERS = {b"content-encoding", b"content-length"}
IDLE_SECONDS = 4.0  # below the 5 s idle cut of uvicorn and Node's http server
FRESH_CONNECTION = "mcp.fresh_connection"  # a request extension: send it on a connection of its own


class ClosedBeforeAnswer(httpx.ReadError):
    """The connection closed, or was reset, after the request went out and before any byte of the
    answer came. Sending the request again is safe only when it is idempotent (RFC 9112 §9.3.1.1)."""


class AiohttpTransport(httpx.AsyncBaseTransport):
    """`policy` (tasksapp/mcpclient/addresses.py) is checked on each request's URL before it is
    sent and on every address a name resolves to when connecting, so a name that later resolves
    somewhere else is refused too. `block_private_addresses` is the MCP servers' policy in short:
    any scheme, globally routable addresses only. Neither: anything may be reached."""

    def __init__(
        self,
        *,
        max_connections: int = 200,
        verify: ssl.SSLContext | bool = True,
        block_private_addresses: bool = False,
        policy: AddressPolicy | None = None,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        self._max_connections = max_connections
        self._idle_seconds = idle_seconds
        if policy is None and block_private_addresses:
            policy = AddressPolicy.private_blocked(True)
        self._policy = policy if policy != AddressPolicy.open() else None
        self._ssl: ssl.SSLContext | bool = (
            verify
            if isinstance(verify, ssl.SSLContext)
            else (httpx.create_ssl_context() if verify else False)
        )
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None  # no pool: each request on a new connection
        self._last_url: httpx.URL | None = None
        self._last_yarl = yarl.URL()
        self._timeouts: dict[tuple[float | None, float | None, float | None], aiohttp.ClientTimeout] = {}

    def _client(self, request: httpx.Request) -> aiohttp.ClientSession:
        if request.extensions.get(FRESH_CONNECTION):
            if self._fresh is None:
                self._fresh = self._new_session(force_close=True)
            return self._fresh
        if self._session is None:
            self._session = self._new_session(force_close=False)
        return self._session

    def _new_session(self, *, force_close: bool) -> aiohttp.ClientSession:
        resolver = _PolicyResolver(self._policy) if self._policy is not None else None
        connector = aiohttp.TCPConnector(
            limit=self._max_connections,
            ssl=self._ssl,
            resolver=resolver,
            force_close=force_close,
            keepalive_timeout=None if force_close else self._idle_seconds,
        )
        return aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            trust_env=False,
            headers={"Accept-Encoding": ACCEPT_ENCODING},
        )

    def _timeout(self, request: httpx.Request) -> aiohttp.ClientTimeout:
        given = request.extensions.get("timeout") or {}
        key = (given.get("connect"), given.get("read"), given.get("pool"))
        timeout = self._timeouts.get(key)
        if timeout is None:
            timeout = self._timeouts[key] = aiohttp.ClientTimeout(
                sock_connect=key[0], sock_read=key[1], connect=key[2]
            )
        return timeout

    def _yarl(self, url: httpx.URL) -> yarl.URL:
        """aiohttp's URL for httpx's, parsed once: a client sends every request to the same URL."""
        if url is not self._last_url:
            if self._policy is not None and (refusal := self._policy.url_refusal(url)):
                raise RefusedDestination(refusal)  # an address literal never reaches the resolver
            self._last_url, self._last_yarl = url, yarl.URL(str(url), encoded=True)
        return self._last_yarl

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self._client(request).request(
                request.method,
                self._yarl(request.url),
                # Decoded from the raw pairs: handed httpx.Headers, aiohttp reads them through its
                # items(), which decodes every header twice and rechecks the encoding per header.
                headers=[(key.decode("latin-1"), val.decode("latin-1")) for key, val in request.headers.raw],
                data=request.content or None,
                allow_redirects=False,
                timeout=self._timeout(request),
            )
        except (
            aiohttp.ServerDisconnectedError,
            aiohttp.ClientOSError,
            aiohttp.ClientConnectionResetError,
        ) as exc:
            if isinstance(exc, aiohttp.ClientConnectorError):  # never connected: nothing was sent
                raise _mapped(exc, connecting=True) from exc
            raise ClosedBeforeAnswer(str(exc) or type(exc).__name__) from exc
        except aiohttp.ClientError as exc:
            raise _mapped(exc, connecting=True) from exc
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "timed out connecting") from exc
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding in ("", "identity"):
            length = response.content_length
            if length is not None and length <= CHUNK:
                # A small answer of known length (every tasks/get): read here, in one step, and
                # handed over whole: the caller skips httpx's chain of stream wrappers per poll.
                return httpx.Response(
                    status_code=response.status,
                    headers=response.raw_headers,
                    stream=ReadBody(await _read_small(response)),
                    request=request,
                )
            return httpx.Response(
                status_code=response.status,
                headers=response.raw_headers,
                stream=_Body(response),
                request=request,
            )
        kept = [(k, v) for k, v in response.raw_headers if k.lower() not in _INFLATED_HEADERS]
        stream = _Body(response, Inflater(encoding))
        return httpx.Response(status_code=response.status, headers=kept, stream=stream, request=request)

    async def aclose(self) -> None:
        for session in (self._session, self._fresh):
            if session is not None:
                await session.close()
        self._session = self._fresh = None


class RefusedDestination(httpx.ConnectError):
    """The address policy refused the URL or an address its host resolves to; nothing was sent."""


class _RefusedAddress(OSError):
    """Raised by the resolver: aiohttp wraps it (ClientConnectorDNSError.os_error)."""


class _PolicyResolver(aiohttp.abc.AbstractResolver):
    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._inner = aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        for entry in found:
            if refusal := self._policy.address_refusal(host, port, entry["host"]):
                raise _RefusedAddress(errno.EACCES, refusal)
        return found

    async def close(self) -> None:
        await self._inner.close()


async def _read_small(response: aiohttp.ClientResponse) -> bytes:
    try:
        return await response.read()
    except aiohttp.ClientError as exc:
        raise _mapped(exc, connecting=False) from exc
    except TimeoutError as exc:
        raise httpx.ReadTimeout(str(exc) or "timed out reading") from exc
    finally:
        response.release()


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, inflater: Inflater | None = None) -> None:
        self._response = response
        self._inflater = inflater

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_chunked(CHUNK):
                if self._inflater is None:
                    yield chunk
                else:
                    for part in self._inflater.feed(chunk):
                        yield part
        except aiohttp.ClientError as exc:
            raise _mapped(exc, connecting=False) from exc
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "timed out reading") from exc

    async def aclose(self) -> None:
        self._response.release()


def _mapped(exc: aiohttp.ClientError, *, connecting: bool) -> httpx.TransportError:
    """aiohttp errors as httpx ones, by what went wrong (httpx-aiohttp calls a refusal a timeout)."""
    message = connect_failure(exc) or str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, _RefusedAddress):
        return RefusedDestination(str(exc.os_error.strerror))
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message)
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return httpx.ReadTimeout(message)
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ClientOSError) and connecting:
        return httpx.ConnectError(message)
    if isinstance(exc, aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol(message)
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return httpx.ReadError(message)
    return httpx.RemoteProtocolError(message) if not connecting else httpx.ConnectError(message)

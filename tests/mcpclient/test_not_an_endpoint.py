"""URLs that are not MCP endpoints get errors that say what was found there: a web page, a TLS
failure, nothing listening, a name that does not resolve (never raw HTML, never aiohttp's wording)."""

import datetime
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tasksapp.mcpclient import InvalidResponse, McpClient, TransportError
from tests.mcpclient.hostile_server import HostileServer, Message, Script, raw_reply
from tests.peers.launch import RunningPeer, free_port

PAGE = (
    b"<!DOCTYPE html><html><head><title>403 Forbidden</title></head><body><h1>CSRF failed</h1></body></html>"
)


def web_page(status: int) -> Script:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        return raw_reply(PAGE, status=status, headers={"Content-Type": "text/html; charset=utf-8"})

    return script


@pytest.mark.parametrize("status", [403, 404, 200])
async def test_a_web_page_is_named_as_one_not_as_refused_credentials(status: int) -> None:
    async with (
        HostileServer(web_page(status), answer_discover=False) as server,
        McpClient(server.url) as client,
    ):
        with pytest.raises(TransportError) as failed:
            await client.discover()
    message = str(failed.value)
    assert "an HTML page (“403 Forbidden”), not an MCP endpoint's answer" in message, message
    assert "credentials" not in message and "<" not in message
    assert failed.value.permanent or isinstance(failed.value, InvalidResponse)


async def test_https_to_a_plain_http_server_says_it_does_not_speak_tls(demo_server: RunningPeer) -> None:
    async with McpClient(demo_server.url.replace("http://", "https://")) as client:
        with pytest.raises(TransportError) as failed:
            await client.discover()
    assert "TLS failed: the server does not speak TLS on this port (use http://" in str(failed.value)
    assert "ssl:default" not in str(failed.value)


@pytest.fixture
async def self_signed(tmp_path: Path) -> AsyncIterator[str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    runner = web.AppRunner(web.Application())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    try:
        yield f"https://127.0.0.1:{port}/mcp"
    finally:
        await runner.cleanup()


async def test_an_untrusted_certificate_says_so(self_signed: str) -> None:
    async with McpClient(self_signed) as client:
        with pytest.raises(TransportError) as failed:
            await client.discover()
    assert "TLS failed: the server's certificate is not trusted (self-signed certificate)" in str(
        failed.value
    )


async def test_nothing_listening_and_a_name_that_does_not_resolve() -> None:
    port = free_port()
    async with McpClient(f"http://127.0.0.1:{port}/mcp") as client:
        with pytest.raises(TransportError) as refused:
            await client.discover()
    assert f"connection refused: nothing listens on 127.0.0.1:{port}" in str(refused.value)
    async with McpClient("http://no-such-host.invalid/mcp") as client:
        with pytest.raises(TransportError) as unknown:
            await client.discover()
    assert "the name no-such-host.invalid does not resolve" in str(unknown.value)

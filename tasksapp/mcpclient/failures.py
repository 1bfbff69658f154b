"""What a failed exchange found, in words a person can act on: an HTML page where an MCP endpoint
should be, a TLS failure, a refused connection, a name that does not resolve."""

import re
import ssl

import aiohttp

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.I | re.S)
_HTML_START = (b"<!doctype html", b"<html")
_MAX_TITLE = 80


def html_page(content_type: str, body: bytes) -> str | None:
    """'an HTML page (“Page not found”)' when the body is a web page, else None."""
    start = body[:512].lstrip().lower()
    if "text/html" not in content_type.lower() and not start.startswith(_HTML_START):
        return None
    found = _TITLE.search(body[:65536])
    title = " ".join(found.group(1).decode("utf-8", "replace").split())[:_MAX_TITLE] if found else ""
    title = "".join(c for c in title if c.isprintable())
    return f"an HTML page (“{title}”)" if title else "an HTML page"


def not_an_endpoint(method: str, status: int, page: str) -> str:
    return (
        f"{method}: HTTP {status} with {page}, not an MCP endpoint's answer: this URL serves a web page. "
        "Check it: an MCP endpoint's URL usually ends in /mcp"
    )


def connect_failure(exc: aiohttp.ClientError) -> str | None:
    """Why a connection could not be made, or None when aiohttp's own words are the best there is."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        reason = getattr(exc.certificate_error, "verify_message", "") or str(exc.certificate_error)
        return f"TLS failed: the server's certificate is not trusted ({reason})"
    if isinstance(exc, aiohttp.ClientConnectorSSLError | aiohttp.ClientSSLError):
        cause = getattr(exc, "os_error", None)
        reason = cause.reason if isinstance(cause, ssl.SSLError) and cause.reason else str(cause or exc)
        hint = (
            ": the server does not speak TLS on this port (use http:// if it serves plain HTTP)"
            if "WRONG_VERSION_NUMBER" in str(cause or exc)
            else f" ({reason})"
        )
        return f"TLS failed{hint}"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"the name {exc.host} does not resolve (check the host name)"
    if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, ConnectionRefusedError):
        return f"connection refused: nothing listens on {exc.host}:{exc.port}"
    return None

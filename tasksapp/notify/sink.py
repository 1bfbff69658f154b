"""The demo's outbox sink: an SMTP server and a webhook receiver on loopback that keep what they
are sent and show it on one page, so `manage.py demo` really sends its email and webhooks.

Plain asyncio and aiohttp on the demo's own loop; nothing leaves the machine. Each message is also
saved as a file (mail as .eml, webhooks as .json) in the sink's folder. Bounded: a message over
MAX_MESSAGE_BYTES is refused, and the page shows the newest KEEP.
"""

import asyncio
import contextlib
import email
import email.policy
import html
import json
import logging
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from aiohttp import web

log = logging.getLogger(__name__)
MAX_MESSAGE_BYTES = 1024 * 1024
MAX_LINE_BYTES = 8192
KEEP = 100
IDLE_SECONDS = 60.0


@dataclass(frozen=True)
class Caught:
    kind: str  # "email" or "webhook"
    at: datetime
    to: str
    subject: str
    text: str


@dataclass
class Sink:
    """Start with `await sink.start(host, smtp_port, http_port)`; `caught` is newest last."""

    folder: Path
    caught: deque[Caught] = field(default_factory=lambda: deque(maxlen=KEEP))
    smtp_address: str = ""
    page_url: str = ""
    _smtp: asyncio.Server | None = None
    _http: web.AppRunner | None = None
    _count: int = 0

    @property
    def webhook_url(self) -> str:
        return f"{self.page_url}webhook"

    async def start(self, host: str, smtp_port: int, http_port: int) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._smtp = await asyncio.start_server(self._smtp_session, host, smtp_port)
        app = web.Application(client_max_size=MAX_MESSAGE_BYTES)
        app.router.add_get("/", self._page)
        app.router.add_post("/{path:.*}", self._webhook)
        self._http = web.AppRunner(app, access_log=None)
        await self._http.setup()
        await web.TCPSite(self._http, host, http_port).start()
        shown = f"[{host}]" if ":" in host else host
        self.smtp_address = f"{shown}:{smtp_port}"
        self.page_url = f"http://{shown}:{http_port}/"

    async def stop(self) -> None:
        if self._smtp is not None:
            self._smtp.close()
        if self._http is not None:
            await self._http.cleanup()

    def keep(self, item: Caught, raw: bytes, suffix: str) -> None:
        self._count += 1
        self.caught.append(item)
        name = f"{item.at:%Y%m%dT%H%M%S}-{self._count:04d}-{item.kind}{suffix}"
        with contextlib.suppress(OSError):
            (self.folder / name).write_bytes(raw)
        log.info("demo sink: %s to %s: %s", item.kind, item.to, item.subject)

    # --- SMTP (RFC 5321, the part a mail client uses) -----------------------------------------

    async def _smtp_session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await SmtpSession(self, reader, writer).run()
        except (TimeoutError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()

    # --- HTTP: the webhook receiver and the page -----------------------------------------------

    async def _webhook(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:
            text = str(json.loads(body).get("text", ""))
        except (ValueError, AttributeError):
            text = body[:2000].decode("utf-8", "replace")
        subject, _, _ = text.partition("\n")
        self.keep(Caught("webhook", datetime.now(UTC), str(request.url), subject, text), body, ".json")
        return web.json_response({"ok": True})

    async def _page(self, request: web.Request) -> web.Response:
        rows = "".join(
            f"<tr><td>{item.at:%H:%M:%S}</td><td>{item.kind}</td><td>{html.escape(item.to)}</td>"
            f"<td><b>{html.escape(item.subject)}</b><pre>{html.escape(item.text)}</pre></td></tr>"
            for item in reversed(self.caught)
        )
        page = PAGE.format(
            smtp=html.escape(self.smtp_address),
            webhook=html.escape(self.webhook_url),
            folder=html.escape(str(self.folder)),
            rows=rows or '<tr><td colspan="4">Nothing yet.</td></tr>',
        )
        return web.Response(text=page, content_type="text/html")


class SmtpSession:
    def __init__(self, sink: Sink, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.sink, self.reader, self.writer = sink, reader, writer
        self.recipients: list[str] = []

    async def say(self, line: str) -> None:
        self.writer.write(line.encode() + b"\r\n")
        await self.writer.drain()

    async def line(self) -> bytes:
        data = await asyncio.wait_for(self.reader.readline(), IDLE_SECONDS)
        if not data:
            raise ConnectionError("closed")
        if len(data) > MAX_LINE_BYTES:
            raise ValueError("line too long")
        return data

    async def run(self) -> None:
        await self.say("220 demo-sink ESMTP (messages are kept, never delivered)")
        while True:
            verb = (await self.line()).decode("ascii", "replace").strip()
            word = verb[:4].upper()
            if word in ("EHLO", "HELO"):
                await self.say("250 demo-sink")
            elif word == "MAIL":
                self.recipients = []
                await self.say("250 OK")
            elif word == "RCPT":
                self.recipients.append(verb.partition(":")[2].strip().strip("<>"))
                await self.say("250 OK")
            elif word == "DATA":
                await self.data()
            elif word in ("RSET", "NOOP"):
                await self.say("250 OK")
            elif word == "QUIT":
                await self.say("221 Bye")
                return
            else:
                await self.say("502 Command not implemented")

    async def data(self) -> None:
        await self.say("354 End data with <CR><LF>.<CR><LF>")
        lines: list[bytes] = []
        size = 0
        while (data := await self.line()) not in (b".\r\n", b".\n"):
            size += len(data)
            if size > MAX_MESSAGE_BYTES:
                await self.say("552 Message too large")
                return
            lines.append(data[1:] if data.startswith(b"..") else data)
        raw = b"".join(lines)
        message = email.message_from_bytes(raw, policy=email.policy.default)
        body = message.get_body(preferencelist=("plain",)) if message.is_multipart() else message
        text = body.get_content() if body is not None else ""
        to = ", ".join(self.recipients)
        self.sink.keep(
            Caught("email", datetime.now(UTC), to, str(message["subject"] or ""), str(text)), raw, ".eml"
        )
        await self.say("250 OK: kept")


PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>Demo outbox sink</title><style>body{{font:14px system-ui,sans-serif;margin:2rem;max-width:70rem}}
td{{vertical-align:top;padding:.4rem;border-top:1px solid #ccc}}
pre{{white-space:pre-wrap;margin:.2rem 0}}</style>
</head><body><h1>What the demo sent</h1>
<p>Email goes to the SMTP server at <code>{smtp}</code>; webhooks can point at <code>{webhook}</code>.
Both are kept here (newest first, refreshed every 5 s) and saved in <code>{folder}</code>; nothing
leaves this machine.</p>
<table><thead><tr><th>When (UTC)</th><th>What</th><th>To</th><th>Message</th></tr></thead>
<tbody>{rows}</tbody></table></body></html>
"""

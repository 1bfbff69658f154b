"""Sample content blocks: one of every ContentBlock type, built so the bytes are valid."""

from __future__ import annotations

import base64
import io
import struct
import wave
import zlib

from ..protocol import JsonObject


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))


def tiny_png() -> bytes:
    """A 1x1 RGBA PNG (one teal pixel) with correct CRCs, so image decoders accept it."""
    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    pixels = zlib.compress(b"\x00" + bytes([0x2B, 0x6C, 0xB0, 0xFF]))
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", pixels)
        + _png_chunk(b"IEND", b"")
    )


def tiny_wav() -> bytes:
    """Ten milliseconds of 8 kHz mono silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 80)
    return buffer.getvalue()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def every_content_block() -> list[JsonObject]:
    return [
        {"type": "text", "text": "Here is one content block of every type."},
        {"type": "image", "data": b64(tiny_png()), "mimeType": "image/png"},
        {"type": "audio", "data": b64(tiny_wav()), "mimeType": "audio/wav"},
        {
            "type": "resource_link",
            "uri": "https://example.com/reports/42",
            "name": "report-42",
            "title": "Quarterly report",
            "description": "A link the client may open in a new tab.",
            "mimeType": "text/html",
        },
        {
            "type": "resource",
            "resource": {
                "uri": "file:///srv/demo/notes.txt",
                "mimeType": "text/plain",
                "text": "Embedded notes:\nline one\nline two",
            },
        },
    ]

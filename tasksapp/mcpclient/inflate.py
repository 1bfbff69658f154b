"""Compressed bodies inflated at most CHUNK bytes of output at a time.

httpx's decoders inflate each network chunk whole, so 64 KiB of a gzip bomb became 64 MiB in
memory before a size cap could look at it. Inflating in bounded steps lets the reader
(tasksapp/mcpclient/reading.py, read_capped) count the inflated bytes as they come and stop.
"""

import zlib
from collections.abc import Iterator

from tasksapp.mcpclient.errors import InvalidResponse

CHUNK = 64 * 1024
ACCEPT_ENCODING = "gzip, deflate"  # what Inflater reads; aiohttp would add br if brotli were installed
ENCODINGS = ("gzip", "x-gzip", "deflate")


class Inflater:
    """gzip or deflate (zlib-wrapped or raw), inflated at most CHUNK bytes at a time."""

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._deflate = encoding == "deflate"
        self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 16 if not self._deflate else zlib.MAX_WBITS)
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._encoding not in ENCODINGS:
            raise InvalidResponse(
                f"the response is in {self._encoding[:40]!r} encoding, which was not asked for"
            )
        if self._deflate and not self._started and data:
            self._started = True
            if len(data) < 2 or data[0] & 0x0F != 8 or ((data[0] << 8) | data[1]) % 31:
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
        try:
            while True:
                out = self._inflate.decompress(data, CHUNK)
                if out:
                    yield out
                data = self._inflate.unconsumed_tail
                if not data and len(out) < CHUNK:
                    return
        except zlib.error as exc:
            raise InvalidResponse(f"the compressed response body is corrupt ({exc})") from None

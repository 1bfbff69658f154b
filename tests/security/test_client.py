"""The protocol client under hostile input: SSE framing at any chunking, bounded gzip, tool list caps."""

import json
import random
import time
import tracemalloc
import zlib

import pytest
from aiohttp import web

from tasksapp.mcpclient import McpClient
from tasksapp.mcpclient.errors import InvalidResponse
from tasksapp.mcpclient.wire import SseParser
from tests.mcpclient.hostile_server import HostileServer, Message, Script, raw_reply, response

STREAM = (
    b": keep-alive\r\n"
    b"data: one\r\n\r\n"
    b"event: other\ndata: skipped\n\n"
    b"data: two\rdata: lines\r\r"
    b"id: 7\nretry: 10\ndata:no-space\n\n"
    b": ping\n\n"
    b"data: \xc3\xa9t\xc3\xa9\r\n\r\n"
    b"data: last\r\r"
)
EXPECTED = ["one", "two\nlines", "no-space", "été", "last"]


def parse(chunks: list[bytes]) -> list[str]:
    parser = SseParser(max_event_bytes=1 << 20)
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    return events + list(parser.finish())


def split(data: bytes, sizes: list[int]) -> list[bytes]:
    chunks, offset = [], 0
    for size in sizes:
        chunks.append(data[offset : offset + size])
        offset += size
    return [*chunks, data[offset:]]


def test_every_chunking_gives_the_same_events() -> None:
    assert parse([STREAM]) == EXPECTED
    assert parse([bytes([b]) for b in STREAM]) == EXPECTED
    for cut in range(len(STREAM) + 1):  # every two-chunk split, CR/LF halves included
        assert parse([STREAM[:cut], STREAM[cut:]]) == EXPECTED, cut
    rng = random.Random(9)
    for _ in range(200):
        assert parse(split(STREAM, [rng.randint(0, 9) for _ in range(40)])) == EXPECTED


def test_a_long_line_trickled_in_small_chunks_is_one_event_and_still_capped() -> None:
    line = b"data: " + b"x" * 300_000 + b"\n\n"
    assert parse([line[i : i + 1024] for i in range(0, len(line), 1024)]) == ["x" * 300_000]

    parser = SseParser(max_event_bytes=100_000)
    with pytest.raises(InvalidResponse, match="exceeds 100000 bytes"):
        for i in range(0, len(line), 1024):
            list(parser.feed(line[i : i + 1024]))


def test_a_cut_stream_is_mid_event_and_invalid_utf8_is_named() -> None:
    parser = SseParser(max_event_bytes=1000)
    assert list(parser.feed(b"data: half")) == [] and parser.mid_event
    with pytest.raises(InvalidResponse, match="not valid UTF-8"):
        list(SseParser(max_event_bytes=1000).feed(b"data: \xff\n\n"))


# --- compressed bodies: inflated with a bounded output ---------------------------------------

BOMB_INFLATED = 256 * 1024 * 1024


def gzip_of_zeros(size: int, *, wbits: int = zlib.MAX_WBITS | 16) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(1024 * 1024)
    return b"".join(packer.compress(block) for _ in range(size // len(block))) + packer.flush()


def compressed(body: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return packer.compress(body) + packer.flush()


def answering(body: bytes, encoding: str) -> Script:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        return raw_reply(body, headers={"Content-Encoding": encoding})

    return script


async def test_a_gzip_bomb_is_refused_at_the_cap_without_inflating_it_in_memory() -> None:
    bomb = gzip_of_zeros(BOMB_INFLATED)  # about 256 KiB on the wire
    server = HostileServer(answering(bomb, "gzip"))
    async with server, McpClient(server.url, max_body_bytes=8 * 1024 * 1024) as client:
        await client.discover()
        tracemalloc.start()
        try:
            with pytest.raises(InvalidResponse, match="exceeds 8388608 bytes"):
                await client.request("tools/list")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    # The cap's 8 MiB plus one 64 KiB piece, not httpx's whole network chunk inflated (64 MiB+).
    assert peak < 16 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"


@pytest.mark.parametrize(
    ("encoding", "wbits"),
    [
        ("gzip", zlib.MAX_WBITS | 16),
        ("x-gzip", zlib.MAX_WBITS | 16),
        ("deflate", zlib.MAX_WBITS),
        ("deflate", -15),
    ],
)
async def test_compressed_answers_still_parse(encoding: str, wbits: int) -> None:
    tools = {"tools": [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(2000)]}

    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        body = json.dumps(response(message, tools)).encode()
        return raw_reply(compressed(body, wbits), headers={"Content-Encoding": encoding})

    async with HostileServer(script) as server, McpClient(server.url) as client:
        assert len(await client.list_tools()) == 2000
        assert server.headers[-1]["Accept-Encoding"] == "gzip, deflate"


@pytest.mark.parametrize(
    ("body", "encoding", "said"),
    [
        (b"not gzip at all", "gzip", "compressed response body is corrupt"),
        (b"{}", "br", "in 'br' encoding, which was not asked for"),
    ],
)
async def test_a_corrupt_or_unasked_encoding_is_named(body: bytes, encoding: str, said: str) -> None:
    async with HostileServer(answering(body, encoding)) as server, McpClient(server.url) as client:
        with pytest.raises(InvalidResponse, match=said):
            await client.request("tools/list")


def cpu_to_parse_one_line(size: int, chunk: int = 1024) -> float:
    """Process CPU to feed one `data:` line of `size` bytes, `chunk` bytes at a time (best of 5)."""
    stream = b"data: " + b"x" * size + b"\n\n"
    pieces = [stream[i : i + chunk] for i in range(0, len(stream), chunk)]
    best = float("inf")
    for _ in range(5):
        parser = SseParser(max_event_bytes=len(stream))
        started = time.process_time()
        events = [event for piece in pieces for event in parser.feed(piece)]
        best = min(best, time.process_time() - started)
        assert len(events) == 1
    return best


def test_parsing_cost_grows_linearly_with_a_trickled_line() -> None:
    """Not a speed target (bench/sse.py has the figures) but the shape: four times the bytes may
    cost about four times the CPU, never the sixteen times of a parser that rescans per chunk."""
    small, large = cpu_to_parse_one_line(512 * 1024), cpu_to_parse_one_line(2 * 1024 * 1024)
    assert large < 8 * small, f"512 KiB: {small * 1000:.1f} ms, 2 MiB: {large * 1000:.1f} ms"

"""The protocol client under hostile input: SSE framing at any chunking, bounded gzip, tool list caps."""

import random

import pytest

from tasksapp.mcpclient.errors import InvalidResponse
from tasksapp.mcpclient.wire import SseParser

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

"""CPU cost of the SSE parser (tasksapp.mcpclient.wire.SseParser) as a stream arrives in small chunks.

    .venv/bin/python bench/sse.py [--mib 8] [--chunk 1024] [--repeat 3]

Three streams of --mib MiB each, fed to one parser --chunk bytes at a time (what a server that
trickles its answer or a listen stream produces; aiohttp hands over whatever arrived):
  one-line    a single event whose one `data:` line is the whole stream (the worst case for a
              parser that rescans its buffer per chunk)
  small       events of about 200 bytes each, several per chunk
  keepalive   `: ping` comments only
Printed: process CPU seconds (time.process_time) per stream, the median of --repeat runs, and
the events parsed (as a check that the work was done). Run it on two commits to compare.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tasksapp.mcpclient.wire import SseParser  # noqa: E402


def one_line(size: int) -> bytes:
    return b"data: " + b"x" * (size - 9) + b"\n\n\n"


def small(size: int) -> bytes:
    event = (
        b'data: {"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"'
        + b"t" * 100
        + b'"}}\n\n'
    )
    return event * (size // len(event))


def keepalive(size: int) -> bytes:
    return b": ping\n\n" * (size // 8)


STREAMS: dict[str, Callable[[int], bytes]] = {"one-line": one_line, "small": small, "keepalive": keepalive}


def run(stream: bytes, chunk: int) -> tuple[float, int]:
    parser = SseParser(max_event_bytes=len(stream) + 1024)
    events = 0
    view = memoryview(stream)
    started = time.process_time()
    for offset in range(0, len(stream), chunk):
        for _ in parser.feed(bytes(view[offset : offset + chunk])):
            events += 1
    return time.process_time() - started, events


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=float, default=8.0)
    parser.add_argument("--chunk", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=sorted(STREAMS), action="append")
    args = parser.parse_args()
    size = int(args.mib * 1024 * 1024)
    print(f"SseParser, {args.mib:g} MiB per stream in {args.chunk}-byte chunks, median of {args.repeat}")
    for name in args.only or list(STREAMS):
        stream = STREAMS[name](size)
        runs = [run(stream, args.chunk) for _ in range(args.repeat)]
        cpu = statistics.median(seconds for seconds, _ in runs)
        print(
            f"  {name:<10} {cpu:9.3f} s CPU   {runs[0][1]:>8} events   {len(stream) / cpu / 2**20:9.1f} MiB/s"
        )


if __name__ == "__main__":
    main()

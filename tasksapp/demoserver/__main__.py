"""`python -m tasksapp.demoserver`: serve the reference MCP tasks server on /mcp."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from .server import build_server, create_app

_LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tasksapp.demoserver", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--poll-interval-ms",
        type=int,
        default=1000,
        help="pollIntervalMs suggested for new tasks (default 1000)",
    )
    parser.add_argument(
        "--keepalive-seconds",
        type=float,
        default=15.0,
        help="seconds between ': ping' comments on SSE streams (default 15)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host/Origin name to accept besides the loopback ones and --host (repeatable; '*': any)",
    )
    parser.add_argument(
        "--tools-page-size", type=int, default=100, help="tools per tools/list page (default 100)"
    )
    parser.add_argument(
        "--state-file",
        type=Path,
        metavar="PATH",
        help="keep the tasks in this JSON file across restarts (default: in memory only)",
    )
    parser.add_argument("--debug", action="store_true", help="enable the /_debug/* endpoints")
    parser.add_argument(
        "--permissive-inputs",
        action="store_true",
        help="send input requests of kinds the client did not declare (for tests of clients; "
        "by default they are refused with -32021)",
    )
    parser.add_argument("--log-level", default="info", choices=_LOG_LEVELS)
    args = parser.parse_args(argv)
    if args.poll_interval_ms < 1:
        parser.error("--poll-interval-ms must be a positive number of milliseconds")
    if args.tools_page_size < 1:
        parser.error("--tools-page-size must be at least 1")
    if args.keepalive_seconds <= 0:
        parser.error("--keepalive-seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    level = "DEBUG" if args.log_level == "trace" else args.log_level.upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(
        poll_interval_ms=args.poll_interval_ms,
        keepalive_seconds=args.keepalive_seconds,
        debug=args.debug,
        allowed_hosts=[args.host, *args.allowed_host],
        tools_page_size=args.tools_page_size,
        state_file=args.state_file,
        permissive_inputs=args.permissive_inputs,
    )

    def announce(url: str) -> None:
        print(f"demoserver listening on {url}", flush=True)

    build_server(app, args.host, args.port, args.log_level, announce).run()


if __name__ == "__main__":
    main()

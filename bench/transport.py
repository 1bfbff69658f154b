"""Client CPU per tasks/get POST, for each HTTP stack McpClient could sit on.

    .venv/bin/python bench/transport.py [--requests 5000] [--concurrency 1,50] [--repeat 3]
    .venv/bin/python bench/transport.py --profile mcp/default [--profile-out /tmp/mcp.pstats]
        # cProfile one run of one client at the last concurrency; the stats go to stderr

What is measured: process CPU time (time.process_time: user + system, all threads) of the
process that runs the client, around the timed requests only; not wall time. The server is a
raw asyncio HTTP/1.1 server in a separate process, so its CPU is not counted. Each (client,
concurrency, repeat) runs in a fresh child process, so one client's imports, pools and garbage
cannot tax another's, and so the httpx2 alias case can swap `httpx` out before it is imported.
On a machine with two or more cores the server is pinned to the last core and the clients to the
others (--no-pin to turn that off).

Every client does the same work per request: serialise a tasks/get JSON-RPC body, POST it with
the headers McpClient sends, read the ~400-byte DetailedTask answer and parse its JSON. The
McpClient rows also do what get_task() adds on top (envelope, header building, streaming read
with a size cap, asyncio.timeout, result validation, DetailedTask dataclass). Concurrency C means
C coroutines sharing one client, taking requests from one counter until N are done; a warm-up
of --warmup requests at the same concurrency runs first. Figures are the median of --repeat runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TASK_ID = "task-7f3c9a1e-2b4d-4e6f-8a0b-1c2d3e4f5a6b"
PATH = "/mcp"
# The headers and _meta McpClient sends for tasks/get (tasksapp.mcpclient.wire), so that the bare
# loops put the same bytes on the wire and differ from it only by McpClient's own code.
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tasks/get",
    "Mcp-Name": TASK_ID,
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "mcp-tasks-dashboard", "version": "0.1.0"},
}

# name -> label. "mcp/" rows time McpClient.get_task(); the others are bare reference loops.
CASES: dict[str, str] = {
    "aiohttp": "bare aiohttp.ClientSession",
    "httpx": "bare httpx.AsyncClient (default transport)",
    "httpx+aiohttp": "bare httpx.AsyncClient + httpx_aiohttp.AiohttpTransport",
    "httpx2": "bare httpx2.AsyncClient (default transport)",
    "mcp/default": "McpClient, default_transport()",
    "mcp/httpx": "McpClient, httpx.AsyncHTTPTransport()",
    "mcp/httpx-200": "McpClient, httpx.AsyncHTTPTransport(limits 200/200)",
    "mcp/httpx2": "McpClient, httpx2.AsyncHTTPTransport()",
    "mcp/alias-httpx2": "McpClient on httpx2 (alias_httpx()), httpx2.AsyncHTTPTransport()",
    "mcp/alias-httpx2+aiohttp": "McpClient on httpx2 (alias_httpx()), default_transport()",
}
# McpClient rows that are a per-client constructor choice (alias_httpx() is process-wide).
DEFAULT_CANDIDATES = ("mcp/default", "mcp/httpx", "mcp/httpx-200", "mcp/httpx2")


# --- the server: bench/minimal_server.py, in a process of its own ---------------------------------

MINIMAL_SERVER = Path(__file__).resolve().parent / "minimal_server.py"


# --- the clients (child process) --------------------------------------------------------------

Request = Callable[[int], Awaitable[None]]


def _body(request_id: int) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tasks/get",
        "params": {"taskId": TASK_ID, "_meta": META},
    }
    return json.dumps(message, separators=(",", ":")).encode()


def _check(request_id: int, status: int, data: bytes) -> None:
    message = json.loads(data)
    if status != 200 or message.get("id") != request_id:
        raise RuntimeError(f"bad answer: HTTP {status} {data[:200]!r}")


async def _make_client(case: str, url: str) -> tuple[Request, Callable[[], Awaitable[None]]]:
    """(one request, close) for a case. Imports happen here, so the alias case can go first."""
    if case == "aiohttp":
        import aiohttp

        session = aiohttp.ClientSession()

        async def aiohttp_request(i: int) -> None:
            async with session.post(url, data=_body(i), headers=HEADERS) as response:
                data = await response.read()
                _check(i, response.status, data)

        return aiohttp_request, session.close

    if case in ("httpx", "httpx+aiohttp", "httpx2"):
        httpx_mod: Any
        if case == "httpx2":
            import httpx2 as httpx_mod
        else:
            import httpx as httpx_mod
        transport: Any = None
        if case == "httpx+aiohttp":
            from httpx_aiohttp import AiohttpTransport

            transport = AiohttpTransport()
        client = httpx_mod.AsyncClient(transport=transport)

        async def httpx_request(i: int) -> None:
            response = await client.post(url, content=_body(i), headers=HEADERS)
            _check(i, response.status_code, response.content)

        return httpx_request, client.aclose

    if case.startswith("mcp/"):
        if case.startswith("mcp/alias-"):
            import httpx2

            httpx2.alias_httpx()  # before anything imports httpx
        import httpx

        from tasksapp.mcpclient.client import McpClient, default_transport

        if case == "mcp/default" or case == "mcp/alias-httpx2+aiohttp":
            transport = default_transport()
        elif case == "mcp/httpx" or case == "mcp/alias-httpx2":
            transport = httpx.AsyncHTTPTransport()
        elif case == "mcp/httpx-200":
            transport = httpx.AsyncHTTPTransport(
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=200)
            )
        elif case == "mcp/httpx2":
            import httpx2

            transport = httpx2.AsyncHTTPTransport()
        else:
            raise SystemExit(f"unknown case {case!r}")
        mcp = McpClient(url, transport=transport)

        async def mcp_request(i: int) -> None:
            task = await mcp.get_task(TASK_ID)
            if task.status != "working":
                raise RuntimeError(f"bad answer: {task!r}")

        return mcp_request, mcp.aclose

    raise SystemExit(f"unknown case {case!r}")


async def _drive(request: Request, total: int, concurrency: int, start_id: int) -> None:
    """`concurrency` coroutines take ids from one counter until `total` requests are done."""
    ids = iter(range(start_id, start_id + total))

    async def worker() -> None:
        for i in ids:
            await request(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def run_case(
    case: str, port: int, requests: int, concurrency: int, warmup: int, profile: str | None = None
) -> dict[str, Any]:
    """One timed run. `profile` (None: off) turns cProfile on; a non-empty value is where to dump it."""

    async def main() -> dict[str, Any]:
        url = f"http://127.0.0.1:{port}{PATH}"
        request, close = await _make_client(case, url)
        try:
            await _drive(request, warmup, concurrency, 1_000_000)
            profiler = None
            if profile is not None:
                import cProfile

                profiler = cProfile.Profile()
            usage0 = os.times()
            cpu0, wall0 = time.process_time(), time.perf_counter()
            if profiler:
                profiler.enable()
            await _drive(request, requests, concurrency, 1)
            if profiler:
                profiler.disable()
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            usage1 = os.times()
        finally:
            await close()
        if profiler:
            import pstats

            stats = pstats.Stats(profiler, stream=sys.stderr)
            stats.sort_stats("tottime").print_stats(30)
            stats.sort_stats("cumulative").print_stats(40)
            if profile:
                stats.dump_stats(profile)
        return {
            "cpu": cpu,
            "user": usage1.user - usage0.user,
            "sys": usage1.system - usage0.system,
            "wall": wall,
            "requests": requests,
        }

    return asyncio.run(main())


def child(args: argparse.Namespace) -> None:
    if args.uvloop:
        import uvloop

        uvloop.install()
    try:
        result = run_case(args.child, args.port, args.requests, args.conc, args.warmup, args.profile_child)
    except Exception as exc:  # reported as the row's reason, e.g. an incompatible transport
        where = ""
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
        result = {"error": f"{type(exc).__name__}{': ' + str(exc) if str(exc) else ''}{where}"}
    if "error" in result and args.child in INCOMPATIBLE_HINTS:
        result["error"] = f"{INCOMPATIBLE_HINTS[args.child]} ({result['error']})"
    print(json.dumps(result), flush=True)


INCOMPATIBLE_HINTS = {
    "mcp/httpx2": "incompatible: httpx2.AsyncHTTPTransport is not an httpx.AsyncBaseTransport, and it "
    "asserts that the request body is an httpx2.AsyncByteStream, which httpx.AsyncClient's is not",
}


# --- the parent -------------------------------------------------------------------------------


def _pin(cpus: set[int] | None) -> Callable[[], None] | None:
    if cpus is None or not hasattr(os, "sched_setaffinity"):
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def start_server(pin: set[int] | None) -> tuple[subprocess.Popen[str], int]:
    server = subprocess.Popen(
        [sys.executable, str(MINIMAL_SERVER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=_pin(pin),  # no threads in this process
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.strip().isdigit():
        server.kill()
        raise SystemExit(f"the server did not start (said {line!r})")
    return server, int(line)


def run_child(
    case: str, port: int, conc: int, args: argparse.Namespace, pin: set[int] | None, profile: bool = False
) -> dict[str, Any]:
    """Run one case in a fresh interpreter; its last stdout line is the JSON result."""
    cmd = [
        sys.executable,
        __file__,
        "--child",
        case,
        "--port",
        str(port),
        "--conc",
        str(conc),
        "--requests",
        str(args.requests),
        "--warmup",
        str(args.warmup),
    ]
    if args.uvloop:
        cmd.append("--uvloop")
    if profile:
        cmd += ["--profile-child", args.profile_out or ""]
    done = subprocess.run(
        cmd,
        capture_output=not profile,
        stdout=subprocess.PIPE if profile else None,
        text=True,
        timeout=900,
        preexec_fn=_pin(pin),
        check=False,
    )
    lines = [line for line in (done.stdout or "").splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or "").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return {"error": tail[0]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def fmt_ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=5000, help="timed requests per run (default 5000)")
    parser.add_argument("--concurrency", default="1,50", help="comma-separated (default 1,50)")
    parser.add_argument("--warmup", type=int, default=500, help="untimed requests first (default 500)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per cell; the median is shown (default 3)"
    )
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated, from: " + ", ".join(CASES))
    parser.add_argument("--uvloop", action="store_true", help="run the clients on uvloop, not asyncio's loop")
    parser.add_argument(
        "--no-pin", action="store_true", help="do not pin server and clients to separate cores"
    )
    parser.add_argument("--profile", metavar="CASE", help="cProfile one run of CASE at the last concurrency")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--conc", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", metavar="PATH", help="with --profile: also dump the pstats there")
    parser.add_argument("--profile-child", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        return child(args)

    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for case in cases + ([args.profile] if args.profile else []):
        if case not in CASES:
            parser.error(f"unknown case {case!r}; choose from {', '.join(CASES)}")
    if args.requests < 1 or args.repeat < 1 or not levels or min(levels) < 1:
        parser.error("--requests, --repeat and every concurrency must be positive")

    ncpu = os.cpu_count() or 1
    server_cpus = client_cpus = None
    if not args.no_pin and ncpu >= 2 and hasattr(os, "sched_setaffinity"):
        server_cpus, client_cpus = {ncpu - 1}, set(range(ncpu - 1))

    server, port = start_server(server_cpus)
    try:
        if args.profile:
            print(
                f"cProfile of {args.profile} at concurrency {levels[-1]}, {args.requests} requests "
                "(the stats go to stderr):",
                flush=True,
            )
            print(json.dumps(run_child(args.profile, port, levels[-1], args, client_cpus, profile=True)))
            return
        results: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for rep in range(args.repeat):  # round-robin, so slow drift spreads over every case
            for case in cases:
                for conc in levels:
                    if any("error" in r for r in results.get((case, conc), [])):
                        continue
                    r = run_child(case, port, conc, args, client_cpus)
                    results.setdefault((case, conc), []).append(r)
                    cell = (
                        f"{1000 * r['cpu'] / r['requests']:.3f} ms" if "error" not in r else r["error"][:70]
                    )
                    print(
                        f"  run {rep + 1}/{args.repeat} {case:<26} @{conc:<3} {cell}",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()

    print_report(cases, levels, results, args)


def print_report(
    cases: list[str],
    levels: list[int],
    results: dict[tuple[str, int], list[dict[str, Any]]],
    args: argparse.Namespace,
) -> None:
    def cell(case: str, conc: int) -> tuple[float | None, float | None, str | None]:
        runs = results.get((case, conc), [])
        errors = [r["error"] for r in runs if "error" in r]
        if errors or not runs:
            return None, None, errors[0] if errors else "not run"
        cpu = statistics.median(1000 * r["cpu"] / r["requests"] for r in runs)
        rate = statistics.median(r["requests"] / r["wall"] for r in runs)
        return cpu, rate, None

    table = {(case, conc): cell(case, conc) for case in cases for conc in levels}
    base = {conc: table.get(("aiohttp", conc), (None, None, None))[0] for conc in levels}

    print()
    print(
        f"Client CPU per request: {args.requests} timed requests after {args.warmup} warm-up, "
        f"median of {args.repeat} runs; Python {sys.version.split()[0]}, {os.cpu_count()} cores, "
        f"{'uvloop' if args.uvloop else 'asyncio'} event loop."
    )
    print()
    headers = (
        ["client"]
        + [f"CPU ms/req @{c}" for c in levels]
        + [f"req/s @{c}" for c in levels]
        + [f"x aiohttp @{c}" for c in levels]
    )
    rows = []
    notes = []
    for case in cases:
        row = [f"{CASES[case]} [{case}]"]
        cpus, rates, ratios = [], [], []
        for conc in levels:
            cpu, rate, error = table[(case, conc)]
            if error and f"{case}: {error}" not in notes:
                notes.append(f"{case}: {error}")
            cpus.append(fmt_ms(cpu))
            rates.append("n/a" if rate is None else f"{rate:,.0f}")
            base_cpu = base[conc]
            ratios.append("n/a" if cpu is None or not base_cpu else f"{cpu / base_cpu:.2f}")
        rows.append(row + cpus + rates + ratios)
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print(
        "|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    )
    for row in rows:
        print(
            "| "
            + " | ".join(
                v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True))
            )
            + " |"
        )
    for note in notes:
        print(f"\nn/a {note}")

    # The worker polls with many tasks in flight, so the busiest level decides; the lightest breaks ties.
    candidates: list[tuple[float, float, str]] = []
    for case in DEFAULT_CANDIDATES:
        if case in cases and all(table[(case, conc)][0] is not None for conc in levels):
            hi, lo = table[(case, levels[-1])][0], table[(case, levels[0])][0]
            assert hi is not None and lo is not None
            candidates.append((hi, lo, case))
    print()
    if not candidates:
        print("Recommendation: none (no McpClient transport option was measured).")
        return
    best_hi, best_lo, best = min(candidates)
    runner_up = sorted(candidates)[1] if len(candidates) > 1 else None
    versus = ""
    if runner_up:
        versus = (
            f"; next is {runner_up[2]} at {runner_up[0]:.3f} ms @{levels[-1]} ({runner_up[0] / best_hi:.2f}x)"
        )
    print(
        f"Recommendation: default McpClient transport = {CASES[best]} [{best}]: "
        f"{best_lo:.3f} ms @{levels[0]}, {best_hi:.3f} ms @{levels[-1]} of client CPU per get_task(){versus}."
    )


if __name__ == "__main__":
    main()

"""Walk the fastmcp-tasks peer over raw HTTP and print what goes over the wire.

    /work/main/.venv/bin/python tests/peers/probe_fastmcp.py [--out tests/peers/probe_output.txt]

Starts ``fastmcp_server.py`` with the peer venv on a free port, then drives every tool
and the task methods with the exact envelope and headers of PROTOCOL.md §2, printing
each response (status, content type, JSON truncated to --width characters). Exits
non-zero if any expectation fails. Not a pytest module: it is the lead's wire sample.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PEER_PYTHON = ROOT / ".venv-peer" / "bin" / "python"
PV = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"extensions": {TASKS: {}}, "elicitation": {"form": {}, "url": {}}}
NO_TASKS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
TERMINAL = ("completed", "failed", "cancelled")
INPUT_OR_END = ("input_required", *TERMINAL)
NAMED = ("tasks/get", "tasks/update", "tasks/cancel")

_ids = itertools.count(1)
_lines: list[str] = []
_failures: list[str] = []


def say(text: str = "") -> None:
    print(text, flush=True)
    _lines.append(text)


def check(ok: bool, what: str) -> None:
    say(f"  [{'ok' if ok else 'FAIL'}] {what}")
    if not ok:
        _failures.append(what)


def hv(value: str) -> str:
    """PROTOCOL.md §2.3 header value encoding."""
    safe = all(0x20 <= ord(c) <= 0x7E for c in value) and value == value.strip()
    if safe and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


class Probe:
    def __init__(self, url: str, width: int) -> None:
        self.url = url
        self.width = width
        self.http = httpx.Client(timeout=httpx.Timeout(30, read=60))

    def post(
        self,
        method: str,
        params: dict[str, Any],
        *,
        caps: dict[str, Any] = WITH_TASKS,
        headers: dict[str, str | None] | None = None,
        quiet: bool = False,
        label: str = "",
        version: str = PV,
    ) -> tuple[int, dict[str, Any]]:
        """Send one JSON-RPC request; return (HTTP status, JSON-RPC message)."""
        meta = {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "0.1"},
            "io.modelcontextprotocol/clientCapabilities": caps,
        }
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": {**params, "_meta": meta}}
        sent = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": version,
            "Mcp-Method": method,
        }
        if method == "tools/call":
            sent["Mcp-Name"] = hv(params["name"])
        elif method in NAMED:
            sent["Mcp-Name"] = hv(params["taskId"])
        for key, value in (headers or {}).items():
            sent.pop(key, None)
            if value is not None:
                sent[key] = value
        response = self.http.post(self.url, content=json.dumps(body), headers=sent)
        msg = self._parse(response)
        if not quiet:
            named = f" Mcp-Name={sent.get('Mcp-Name')!r}" if "Mcp-Name" in sent else ""
            say(f"--> {method}{named} {label}".rstrip())
            ctype = response.headers.get("content-type", "")
            say(f"<-- HTTP {response.status_code} {ctype}: {self.short(msg)}")
        return response.status_code, msg

    def _parse(self, response: httpx.Response) -> dict[str, Any]:
        ctype = response.headers.get("content-type", "").split(";")[0].strip()
        if ctype == "text/event-stream":
            frames = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
            messages = [json.loads(f) for f in frames if f]
            return messages[-1] if messages else {"_empty_sse": True}
        if not response.content:
            return {"_empty_body": True}
        try:
            parsed: dict[str, Any] = response.json()
            return parsed
        except ValueError:
            return {"_text": response.text}

    def short(self, value: Any) -> str:
        text = json.dumps(value, separators=(",", ":"))
        return text if len(text) <= self.width else text[: self.width] + "…"

    def call(
        self, name: str, arguments: dict[str, Any] | None = None, **kw: Any
    ) -> tuple[int, dict[str, Any]]:
        return self.post("tools/call", {"name": name, "arguments": arguments or {}}, **kw)

    def get(self, task_id: str, **kw: Any) -> tuple[int, dict[str, Any]]:
        return self.post("tasks/get", {"taskId": task_id}, **kw)

    def watch(self, task_id: str, until: tuple[str, ...] = TERMINAL, limit: float = 20.0) -> dict[str, Any]:
        """Poll tasks/get at pollIntervalMs; print each new (status, statusMessage)."""
        seen: tuple[Any, ...] = ()
        deadline = time.monotonic() + limit
        started = time.monotonic()
        polls = 0
        while True:
            _, msg = self.get(task_id, quiet=True)
            polls += 1
            task: dict[str, Any] = msg.get("result", {})
            state = (task.get("status"), task.get("statusMessage"))
            if state != seen:
                seen = state
                say(
                    f"    t+{time.monotonic() - started:5.2f}s poll#{polls} status={state[0]!r}"
                    f" statusMessage={state[1]!r}"
                )
            if "error" in msg or task.get("status") in until or time.monotonic() > deadline:
                say(f"<-- tasks/get (final of watch): {self.short(msg)}")
                return task
            time.sleep((task.get("pollIntervalMs") or 1000) / 1000)

    def start_task(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        status, msg = self.call(name, arguments)
        result: dict[str, Any] = msg.get("result", {})
        check(status == 200 and result.get("resultType") == "task", f"{name} created a task")
        return result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(port: int) -> tuple[subprocess.Popen[str], float]:
    began = time.monotonic()
    proc = subprocess.Popen(
        [str(PEER_PYTHON), str(HERE / "fastmcp_server.py"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    elapsed = time.monotonic() - began
    expected = f"fastmcp peer listening on http://127.0.0.1:{port}/mcp"
    if line != expected:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}\n{proc.stderr.read() if proc.stderr else ''}")
    return proc, elapsed


def section(title: str) -> None:
    say()
    say(f"=== {title} ===")


def walk(p: Probe) -> None:
    section("server/discover")
    status, msg = p.post("server/discover", {})
    check(status == 200 and PV in msg["result"]["supportedVersions"], "discover lists 2026-07-28")
    check(TASKS in msg["result"]["capabilities"].get("extensions", {}), "tasks ext advertised")

    section("tools/list")
    status, msg = p.post("tools/list", {})
    for tool in msg["result"]["tools"]:
        say(
            f"    tool {tool['name']}: inputSchema={p.short(tool['inputSchema'])}"
            f" execution={tool.get('execution')} _meta={tool.get('_meta')}"
        )

    section("tools/call echo (immediate)")
    status, msg = p.call("echo", {"text": "hi"})
    check(msg["result"]["resultType"] == "complete", "echo is complete, not a task")

    section("tools/call slow_count n=3 delay=0.3 (task)")
    task = p.start_task("slow_count", {"n": 3, "delay": 0.3})
    final = p.watch(task["taskId"])
    check(final["status"] == "completed", "slow_count completed")
    check(final["result"]["content"][0]["text"] == "counted to 3", "text is 'counted to 3'")

    section("tools/call ask_name (task, input_required, tasks/update accept)")
    task = p.start_task("ask_name")
    pending = p.watch(task["taskId"], until=INPUT_OR_END)
    keys = list(pending.get("inputRequests", {}))
    check(pending["status"] == "input_required" and len(keys) == 1, "one input request")
    say(f"    input key = {keys[0]!r} (taskId prefix: {keys[0].startswith(task['taskId'] + ':')})")
    p.post(
        "tasks/update",
        {
            "taskId": task["taskId"],
            "inputResponses": {keys[0]: {"action": "accept", "content": {"name": "Luca"}}},
        },
    )
    final = p.watch(task["taskId"])
    check(final["result"]["content"][0]["text"] == "Hello, Luca!", "greets Luca")
    section("tasks/update again with the same (now answered) key")
    p.post(
        "tasks/update",
        {
            "taskId": task["taskId"],
            "inputResponses": {keys[0]: {"action": "accept", "content": {"name": "X"}}},
        },
    )

    for action in ("decline", "cancel"):
        section(f"tools/call ask_name, answered with {action}")
        task = p.start_task("ask_name")
        pending = p.watch(task["taskId"], until=INPUT_OR_END)
        key = next(iter(pending["inputRequests"]))
        p.post("tasks/update", {"taskId": task["taskId"], "inputResponses": {key: {"action": action}}})
        final = p.watch(task["taskId"])
        check(final["status"] == "completed", f"{action} completes the task")

    section("tools/call ask_form (richer schema)")
    task = p.start_task("ask_form")
    pending = p.watch(task["taskId"], until=INPUT_OR_END)
    key = next(iter(pending["inputRequests"]))
    answers = {"name": "Ada", "email": "ada@example.com", "age": 36, "subscribe": True, "plan": "pro"}
    p.post(
        "tasks/update",
        {"taskId": task["taskId"], "inputResponses": {key: {"action": "accept", "content": answers}}},
    )
    final = p.watch(task["taskId"])
    check(final["result"].get("structuredContent", {}).get("answers") == answers, "echoes answers")

    section("tools/call fail_tool (completed + isError)")
    task = p.start_task("fail_tool")
    final = p.watch(task["taskId"])
    check(
        final["status"] == "completed" and final["result"].get("isError") is True,
        "fail_tool completed with isError",
    )

    section("tools/call fail_rpc (failed + error)")
    task = p.start_task("fail_rpc")
    final = p.watch(task["taskId"])
    check(final["status"] == "failed" and "error" in final, "fail_rpc failed with error")

    section("tools/call run_forever, then tasks/cancel")
    task = p.start_task("run_forever")
    p.watch(task["taskId"], until=TERMINAL, limit=1.2)
    p.post("tasks/cancel", {"taskId": task["taskId"]})
    final = p.watch(task["taskId"])
    check(final["status"] == "cancelled", "run_forever cancelled")
    section("tasks/cancel on an already-terminal task")
    p.post("tasks/cancel", {"taskId": task["taskId"]})
    errors_and_edges(p, task["taskId"])


def errors_and_edges(p: Probe, known_id: str) -> None:
    section("tasks/get unknown id")
    status, msg = p.get("no-such-task-0000")
    check(status == 400 and msg.get("error", {}).get("code") == -32602, "-32602, HTTP 400")

    section("subscriptions/listen")
    status, msg = p.post("subscriptions/listen", {"notifications": {"taskIds": [known_id]}})
    check(status == 404 and msg.get("error", {}).get("code") == -32601, "-32601, HTTP 404")

    section("tasks/get without the tasks capability")
    status, msg = p.get(known_id, caps=NO_TASKS)
    check(status == 400 and msg.get("error", {}).get("code") == -32021, "-32021, HTTP 400")

    section("tasks/get with a mismatched Mcp-Name")
    status, msg = p.get(known_id, headers={"Mcp-Name": "some-other-task"})
    check(status == 400 and msg.get("error", {}).get("code") == -32020, "-32020, HTTP 400")

    section("tasks/get without Mcp-Name (FT accepts it, PROTOCOL §10 #4)")
    status, msg = p.get(known_id, headers={"Mcp-Name": None})
    check(status == 200 and "result" in msg, "accepted without Mcp-Name")

    section("tools/call with a mismatched Mcp-Name")
    status, msg = p.call("echo", {"text": "x"}, headers={"Mcp-Name": "slow_count"})
    check(status == 400 and msg.get("error", {}).get("code") == -32020, "-32020, HTTP 400")

    section("tools/call run_forever without the tasks capability (mode required)")
    status, msg = p.call("run_forever", caps=NO_TASKS)
    check(status == 400 and msg.get("error", {}).get("code") == -32021, "-32021, HTTP 400")

    section("tools/call slow_count without the tasks capability (mode optional: foreground)")
    status, msg = p.call("slow_count", {"n": 2, "delay": 0.05}, caps=NO_TASKS)
    check(msg.get("result", {}).get("resultType") == "complete", "runs inline, complete")

    section("tools/call ask_name without the tasks capability (foreground MRTR)")
    status, msg = p.call("ask_name", caps=NO_TASKS)
    result = msg.get("result", {})
    check(result.get("resultType") == "input_required", "input_required inline")
    if result.get("resultType") == "input_required":
        key = next(iter(result["inputRequests"]))
        retry = {
            "name": "ask_name",
            "arguments": {},
            "requestState": result.get("requestState"),
            "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}},
        }
        if retry["requestState"] is None:
            del retry["requestState"]
        status, msg = p.post("tools/call", retry, caps=NO_TASKS, label="(MRTR retry)")
        check(
            msg.get("result", {}).get("content", [{}])[0].get("text") == "Hello, Ada!",
            "MRTR retry greets Ada",
        )

    section("tools/call fail_rpc without the tasks capability (foreground)")
    p.call("fail_rpc", caps=NO_TASKS)

    section("request for protocol version 2026-06-30 (header and _meta)")
    status, msg = p.post("tools/list", {}, version="2026-06-30")
    check(status == 400 and msg.get("error", {}).get("code") == -32022, "-32022, HTTP 400")
    section("MCP-Protocol-Version header 2026-06-30 but _meta 2026-07-28")
    p.post("tools/list", {}, headers={"MCP-Protocol-Version": "2026-06-30"})
    section("tools/call of an unknown tool, and slow_count with invalid arguments (as a task)")
    p.call("no_such_tool")
    p.call("slow_count", {"n": "many"})

    section("tasks/list and tasks/result (removed)")
    p.post("tasks/list", {})
    p.post("tasks/result", {"taskId": known_id})


def debug_endpoints(p: Probe) -> None:
    section("debug endpoints")
    base = p.url.rsplit("/mcp", 1)[0]
    stats = p.http.get(f"{base}/_debug/stats").json()
    say(f"    /_debug/stats = {p.short(stats)}")
    recorded = p.http.get(f"{base}/_debug/requests").json()
    last = recorded[-1]
    say(f"    /_debug/requests: {len(recorded)} entries; last = {p.short(last)}")
    check(
        last["method"] == "tasks/result" and last["headers"]["mcp-method"] == "tasks/result",
        "recorder saw the last POST with lowercased headers",
    )
    cleared = p.http.post(f"{base}/_debug/requests/clear").json()
    after = p.http.get(f"{base}/_debug/requests").json()
    check(cleared == {"cleared": True} and after == [], "clear empties the record")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=HERE / "probe_output.txt")
    parser.add_argument("--width", type=int, default=900)
    args = parser.parse_args()
    port = free_port()
    proc, startup = start_server(port)
    say(f"# fastmcp peer on port {port}; ready line after {startup:.2f}s")
    try:
        probe = Probe(f"http://127.0.0.1:{port}/mcp", args.width)
        walk(probe)
        debug_endpoints(probe)
    finally:
        began = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        try:
            _, stderr = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
        say()
        say(f"# SIGTERM -> exit code {proc.returncode} after {time.monotonic() - began:.2f}s")
        cancelled = [line for line in stderr.splitlines() if "run_forever cancelled" in line]
        say(f"# server stderr: {len(stderr.splitlines())} lines; run_forever cancel lines: {cancelled}")
    say(f"# {len(_failures)} failed expectation(s): {_failures}")
    args.out.write_text("\n".join(_lines) + "\n")
    return 1 if _failures else 0


if __name__ == "__main__":
    sys.exit(main())

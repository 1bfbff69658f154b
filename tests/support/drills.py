"""What the fault drills inject and observe, beyond tests/support/stack.py: tasks started and answered
through the services, page loads and websocket frames recorded with their times, the database
made unreachable or read-only, and a proxy that cuts the database while a tools/call is answered."""

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from aiohttp import web

from tests.peers.launch import RunningPeer
from tests.support.faults import ScriptedServer
from tests.support.stack import POSTGRES, manage, sql, websocket_headers, websocket_url

START = """
import json, os
from tasksapp import services
from tasksapp.models import McpServer
server = McpServer.objects.get(name="demo")
started = {}
for tool, count, arguments in json.loads(os.environ["START_PLAN"]):
    for _ in range(count):
        task = services.call_start(server=server, tool=tool, arguments=arguments, user=None).task
        started[task.pk] = task.remote_id
print("STARTED " + json.dumps(started))
"""
RESET = """
DELETE FROM tasksapp_inputrequest;
DELETE FROM tasksapp_taskevent;
UPDATE tasksapp_operatoraction SET task_id = NULL, pending_call_id = NULL;
DELETE FROM tasksapp_pendingcall;
DELETE FROM tasksapp_remotetask;
DELETE FROM tasksapp_workerheartbeat;
"""


def start_tasks(env: dict[str, str], *plan: tuple[str, int, dict[str, Any]]) -> dict[int, str]:
    """Start tasks in one subprocess (a `manage.py call` each costs seconds); {pk: remote id}."""
    output = manage({**env, "START_PLAN": json.dumps(plan)}, "shell", "-c", START)
    [line] = [line for line in output.splitlines() if line.startswith("STARTED ")]
    return {int(pk): remote for pk, remote in json.loads(line.removeprefix("STARTED ")).items()}


def reset(database: str, peer: RunningPeer) -> None:
    """A clean slate between drills that share one stack: no tasks, no workers, a healthy server."""
    for statement in RESET.strip().splitlines():
        sql(database, statement)
    sql(
        database,
        "UPDATE tasksapp_mcpserver SET url = %s, consecutive_failures = 0, backoff_until = NULL",
        peer.url,
    )
    peer.clear()


def statuses(database: str) -> Counter[str]:
    return Counter(status for (status,) in sql(database, "SELECT status FROM tasksapp_remotetask"))


def updates_per_key(peer: RunningPeer) -> Counter[str]:
    return Counter(
        key
        for request in peer.received()
        if request["method"] == "tasks/update"
        for key in request["body"]["params"]["inputResponses"]
    )


def polled(database: str) -> bool:
    via: str = sql(database, "SELECT last_seen_via FROM tasksapp_remotetask")[0][0]
    return via == "poll"


def message_of(database: str) -> str:
    return str(sql(database, "SELECT status_message FROM tasksapp_remotetask")[0][0])


ANSWER_ALL = """
from tasksapp import services
from tasksapp.models import InputRequest
answered = 0
for request in InputRequest.objects.filter(state="open").select_related("task"):
    services.task_answer(task=request.task, key=request.key, response={"action": "decline"}, user=None)
    answered += 1
print(f"ANSWERED {answered}")
"""


def answer_open_requests(env: dict[str, str]) -> int:
    """Decline every open question through the services, as the answer form does."""
    output = manage(env, "shell", "-c", ANSWER_ALL)
    return int(output.rsplit("ANSWERED ", 1)[1].split()[0])


class PageLoads:
    """Logged-in page loads in a loop, recording (started, status) for every one."""

    def __init__(self, base: str, cookies: httpx.Cookies) -> None:
        self.client = httpx.Client(base_url=base, cookies=cookies, timeout=60)
        self.results: list[tuple[float, int]] = []
        self.spans: list[tuple[float, float, str, int]] = []  # started, ended, path, status
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for path in ("/", "/tasks/", "/servers/"):
                started = time.monotonic()
                try:
                    status = self.client.get(path).status_code
                except httpx.HTTPError:
                    status = 0
                self.results.append((started, status))
                self.spans.append((started, time.monotonic(), path, status))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def failures(self, between: tuple[float, float] = (0.0, float("inf"))) -> list[tuple[float, int]]:
        return [(t, s) for t, s in self.results if between[0] <= t < between[1] and s != 200]


class Frames:
    """A websocket of a page, recording the monotonic time of every frame it receives."""

    def __init__(self, base: str, client: httpx.Client, page: str) -> None:
        from websockets.exceptions import InvalidHandshake
        from websockets.sync.client import connect

        self.times: list[float] = []
        self.closed: str | None = None
        url, headers = websocket_url(base, page), websocket_headers(base, client)
        for attempt in range(3):  # as the page's script does: Daphne gives a handshake 5 s, and a
            try:  # busy two-core machine may take longer to run the consumer's first queries
                self.socket = connect(url, additional_headers=headers, open_timeout=20)
                break
            except (OSError, InvalidHandshake):
                if attempt == 2:
                    raise
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            while True:
                self.socket.recv()
                self.times.append(time.monotonic())
        except ConnectionClosed as exc:
            self.closed = str(exc) or "closed"

    def since(self, moment: float) -> int:
        return sum(1 for t in self.times if t >= moment)

    def close(self) -> None:
        self.socket.close()


def sql_admin(statement: str) -> None:
    sql(f"{POSTGRES}/postgres", statement)


def name_of(database_url: str) -> str:
    return '"' + database_url.rsplit("/", 1)[1] + '"'


def holders(database: str) -> dict[str, int]:
    rows = sql(database, "SELECT leased_by, count(*) FROM tasksapp_remotetask GROUP BY leased_by")
    return {holder: count for holder, count in rows}


def pollers(peer: RunningPeer) -> dict[str, Any]:
    return dict(httpx.get(f"{peer.base}/_debug/pollers", timeout=10).json())


class CuttingProxy:
    """A forwarding proxy at the network edge that runs `cut` (the fault) once, when the answer to
    a tools/call has arrived from the real server and before it is passed on; it keeps the task id
    the server gave, to compare with what the operator is told."""

    def __init__(self, peer: RunningPeer, cut: Callable[[], object]) -> None:
        self.target = peer.url
        self.cut = cut
        self.cuts = 0
        self.task_ids: list[str] = []
        self.server = ScriptedServer(self._forward, answer_discover=False)

    def url(self) -> str:
        return self.server.url

    async def _forward(self, request: web.Request, message: dict[str, Any]) -> web.Response:
        import asyncio

        import aiohttp

        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.target, json=message, headers=headers) as answer,
        ):
            body = await answer.read()
            status, ctype = answer.status, answer.headers.get("Content-Type", "application/json")
        if message.get("method") == "tools/call":
            self.task_ids += re.findall(r'"taskId":\s*"([^"]+)"', body.decode())
            if not self.cuts:
                self.cuts += 1
                await asyncio.get_running_loop().run_in_executor(None, self.cut)
        return web.Response(body=body, status=status, headers={"Content-Type": ctype})

    def close(self) -> None:
        self.server.close()


@contextmanager
def cutting_proxy(peer: RunningPeer, cut: Callable[[], object]) -> Iterator[CuttingProxy]:
    proxy = CuttingProxy(peer, cut)
    try:
        yield proxy
    finally:
        proxy.close()

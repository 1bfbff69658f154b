"""A hostile MCP server against the whole web process.

The dashboard runs as `manage.py demo` does (Daphne and the worker on one event loop); the
hostile server is a fake at the network edge (tests/mcpclient/hostile_server.py). Each attack
is made while an unrelated page is requested: the page must be answered during the attack,
and the operator must be told what happened. Where the server can, it holds the attack open
until that page was answered, so "during" is certain rather than likely.
"""

import asyncio
import html
import json
import re
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from aiohttp import web

from tests.mcpclient.hostile_server import LISTEN_META, Message, json_reply, response, sse_event, task
from tests.support.hostile_thread import serving
from tests.support.web_process import Dashboard, Operator, running_dashboard

ANSWER_WITHIN = 15.0  # seconds for the unrelated page: a frozen process never answers it
OPERATOR_TOLD_WITHIN = 60.0
EVIL = "^(a+)+$"


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with running_dashboard(tmp_path_factory.mktemp("hostile-web")) as running:
        yield running


@pytest.fixture
def operator(dashboard: Dashboard) -> Iterator[Operator]:
    person = Operator(dashboard, timeout=OPERATOR_TOLD_WITHIN)
    yield person
    person.close()


def answered_meanwhile(dashboard: Dashboard) -> None:
    """An unrelated page, from another session, while the attack runs."""
    bystander = Operator(dashboard, timeout=ANSWER_WITHIN)
    try:
        page = bystander.get("/servers/")
        assert page.status_code == 200 and "Servers" in page.text
    except httpx.TimeoutException:
        raise AssertionError(
            f"the dashboard froze: no page within {ANSWER_WITHIN} s\n{dashboard.log()}"
        ) from None
    finally:
        bystander.close()


def tools_script(
    tools: list[dict[str, Any]], on_call: Callable[..., Awaitable[web.StreamResponse]] | None = None
) -> Any:
    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        if message.get("method") == "tools/call" and on_call is not None:
            return await on_call(request, message)
        if message.get("method") == "tools/call":
            return json_reply(response(message, {"content": [{"type": "text", "text": "ran"}]}))
        return json_reply(response(message, {"tools": tools}))

    return script


def add_server(operator: Operator, name: str, url: str) -> httpx.Response:
    return operator.post("/servers/add/", {"name": name, "url": url, "headers": "", "save": "1"})


def server_pk(added: httpx.Response) -> int:
    assert added.status_code == 302, added.text[-2000:]
    match = re.search(r"/servers/(\d+)/tools/", added.headers["location"])
    assert match, added.headers["location"]
    return int(match.group(1))


def test_a_redos_schema_does_not_freeze_the_process(dashboard: Dashboard, operator: Operator) -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "patternProperties": {EVIL: {"type": "integer"}},
        "additionalProperties": False,
    }
    with serving(tools_script([{"name": "evil", "inputSchema": schema}])) as hostile:
        pk = server_pk(add_server(operator, "redos", hostile.url))
        arguments = json.dumps({"a" * 40 + "!": 1})
        with ThreadPoolExecutor(1) as pool:
            run = pool.submit(operator.post, f"/servers/{pk}/tools/evil/run/", {"arguments_json": arguments})
            answered_meanwhile(dashboard)
            page = run.result(OPERATOR_TOLD_WITHIN)
        assert page.status_code == 200
        assert f"does not match any of the regexes: &#x27;{EVIL}&#x27;" in page.text
        assert not [m for m in hostile.messages if m.get("method") == "tools/call"]  # nothing was sent


def test_a_huge_tool_list_is_cut_and_the_operator_told(dashboard: Dashboard, operator: Operator) -> None:
    held = threading.Event()

    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        page = int(message["params"].get("cursor") or 0)
        if page == 2:
            await asyncio.to_thread(held.wait, 30)  # page 3 waits until the bystander was served
        tools = [{"name": f"t{page}-{n}", "description": "d" * 1000, "inputSchema": {}} for n in range(400)]
        more = {"nextCursor": str(page + 1)} if page < 9 else {}
        return json_reply(response(message, {"tools": tools, **more}))

    with serving(script) as hostile, ThreadPoolExecutor(1) as pool:
        adding = pool.submit(add_server, operator, "huge", hostile.url)
        answered_meanwhile(dashboard)
        held.set()
        pk = server_pk(adding.result(OPERATOR_TOLD_WITHIN))
    tools = operator.get(f"/servers/{pk}/tools/").text
    assert "only the first 1000 are shown and can be run" in tools
    assert tools.count("/run/") == 1000


def gzip_bomb(inflated: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(1 << 20)
    return b"".join(packer.compress(block) for _ in range(inflated >> 20)) + packer.flush()


def test_a_gzip_bomb_is_refused_without_the_memory(dashboard: Dashboard, operator: Operator) -> None:
    bomb = gzip_bomb(1 << 30)  # 1 GiB of zeros, about 1 MiB on the wire
    held = threading.Event()

    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        stream = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
        await stream.prepare(request)
        await stream.write(bomb[:4096])
        await asyncio.to_thread(held.wait, 30)
        for offset in range(4096, len(bomb), 64 * 1024):
            await stream.write(bomb[offset : offset + 64 * 1024])
        return stream

    dashboard.peak_rss_reset()
    before = dashboard.peak_rss_mib()
    with serving(script) as hostile, ThreadPoolExecutor(1) as pool:
        adding = pool.submit(add_server, operator, "bomb", hostile.url)
        answered_meanwhile(dashboard)
        held.set()
        page = adding.result(OPERATOR_TOLD_WITHIN)
    assert page.status_code == 200 and "Discovery failed" in page.text
    assert "response body exceeds 8388608 bytes" in page.text
    grown = dashboard.peak_rss_mib() - before
    print(f"peak RSS grew by {grown:.1f} MiB")
    assert grown < 64, f"peak RSS grew by {grown:.0f} MiB for an 8 MiB cap"


def test_a_trickling_sse_answer_is_linear_and_capped(dashboard: Dashboard, operator: Operator) -> None:
    held = threading.Event()

    async def trickle(request: web.Request, message: Message) -> web.StreamResponse:
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        stream.enable_chunked_encoding()
        await stream.prepare(request)
        await stream.write(b"data: ")
        for sent in range(9 * 1024):  # 9 MiB of one line, 1 KiB at a time: over the 8 MiB cap
            if sent == 1024:
                await asyncio.to_thread(held.wait, 30)
            try:
                await stream.write(b"x" * 1024)
            except ConnectionError:
                break  # the client gave up at its cap
            await asyncio.sleep(0.0002)  # a trickle: each kilobyte its own read, as on a slow link
        return stream

    with serving(tools_script([{"name": "trickle", "inputSchema": {}}], trickle)) as hostile:
        pk = server_pk(add_server(operator, "trickle", hostile.url))
        cpu = dashboard.cpu_seconds()
        with ThreadPoolExecutor(1) as pool:
            run = pool.submit(operator.post, f"/servers/{pk}/tools/trickle/run/", {"arguments_json": "{}"})
            answered_meanwhile(dashboard)
            held.set()
            page = run.result(OPERATOR_TOLD_WITHIN)
    assert page.status_code == 200
    assert "trickle could not be started" in page.text and "an SSE event exceeds 8388608 bytes" in page.text
    # Shown, not asserted: reads coalesce on loopback, so the figure says little about the parser
    # (tests/security/test_client.py checks its linearity, bench/sse.py measures it).
    print(f"the dashboard used {dashboard.cpu_seconds() - cpu:.1f} s of CPU for a 9 MiB trickle")


def test_a_status_flood_keeps_the_process_responsive(dashboard: Dashboard, operator: Operator) -> None:
    held = threading.Event()
    final = task(taskId="flood-1", status="completed", statusMessage="flood over", result={"content": []})
    state: dict[str, Any] = {"task": task(taskId="flood-1", statusMessage="starting", pollIntervalMs=500)}

    async def script(request: web.Request, message: Message) -> web.StreamResponse:
        method = message.get("method")
        if method == "tools/list":
            return json_reply(response(message, {"tools": [{"name": "flood", "inputSchema": {}}]}))
        if method == "tools/call":
            return json_reply(response(message, {"resultType": "task", **state["task"]}))
        if method == "tasks/get":
            return json_reply(response(message, {"resultType": "complete", **state["task"]}))
        if method != "subscriptions/listen":
            return json_reply(response(message, {}))
        sub = message["id"]
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        meta = {"_meta": {LISTEN_META: sub}}
        ack = {"notifications": {"taskIds": ["flood-1"]}, **meta}
        await stream.write(
            sse_event({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": ack})
        )
        for n in range(1000):
            if n == 500:
                await asyncio.to_thread(held.wait, 30)
            state["task"] = task(taskId="flood-1", statusMessage=f"flood {n}")
            frame = {"jsonrpc": "2.0", "method": "notifications/tasks", "params": {**state["task"], **meta}}
            await stream.write(sse_event(frame))
        state["task"] = final
        frame = {"jsonrpc": "2.0", "method": "notifications/tasks", "params": {**final, **meta}}
        await stream.write(sse_event(frame))
        end = {"jsonrpc": "2.0", "id": sub, "result": {"resultType": "complete", **meta}}
        await stream.write(sse_event(end))
        return stream

    with serving(script) as hostile:
        pk = server_pk(add_server(operator, "flood", hostile.url))
        started = operator.post(f"/servers/{pk}/tools/flood/run/", {"arguments_json": "{}"})
        assert started.status_code == 302, started.text[-2000:]
        task_page = started.headers["location"]
        deadline = time.monotonic() + OPERATOR_TOLD_WITHIN
        while not any(m.get("method") == "subscriptions/listen" for m in hostile.messages):
            assert time.monotonic() < deadline, f"the worker never listened\n{dashboard.log()}"
            assert operator.get(task_page).status_code == 200
        answered_meanwhile(dashboard)
        held.set()
        while "flood over" not in (page := operator.get(task_page).text):
            assert time.monotonic() < deadline, f"the flood's end never reached the page\n{dashboard.log()}"
        assert "completed" in page


def test_a_reused_task_id_is_a_clear_failure(dashboard: Dashboard, operator: Operator) -> None:
    async def same_id(request: web.Request, message: Message) -> web.StreamResponse:
        return json_reply(response(message, {"resultType": "task", **task(taskId="reused-1")}))

    with serving(tools_script([{"name": "dup", "inputSchema": {}}], same_id)) as hostile:
        pk = server_pk(add_server(operator, "dup", hostile.url))
        first = operator.post(f"/servers/{pk}/tools/dup/run/", {"arguments_json": "{}"})
        assert first.status_code == 302
        with ThreadPoolExecutor(1) as pool:
            second = pool.submit(operator.post, f"/servers/{pk}/tools/dup/run/", {"arguments_json": "{}"})
            answered_meanwhile(dashboard)
            page = second.result(OPERATOR_TOLD_WITHIN)
    assert page.status_code == 200 and "with a task id it had already given to" in page.text


# Names a server may send: a newline (Django's path converter does not match it: the page was a
# 500), dot segments that a browser resolves into another server's pages, a query and a fragment,
# percent escapes, something that looks like our own encoding, an emoji, and a long one.
HOSTILE_NAMES = [
    "\n=1+1",
    "../../1/tools/echo",
    "..",
    "ns/tool?x#y",
    "%2e%2e%2f1",
    "~ZWNobw",
    "😀 run",
    "n" * 300,
    "echo",
]


def test_any_tool_name_works_and_stays_on_its_own_servers_pages(
    dashboard: Dashboard, operator: Operator
) -> None:
    """The tools page, each Run link as a browser resolves it, the form it opens, the POST that form
    makes (back to its own URL), the task page it leads to and that page's Run again link."""

    async def start_task(request: web.Request, message: Message) -> web.StreamResponse:
        number = sum(m.get("method") == "tools/call" for m in hostile.messages)
        return json_reply(response(message, {"resultType": "task", **task(taskId=f"named-{number}")}))

    tools = [{"name": name, "inputSchema": {}} for name in HOSTILE_NAMES]
    with serving(tools_script(tools, start_task)) as hostile:
        pk = server_pk(add_server(operator, "names", hostile.url))
        listing = operator.get(f"/servers/{pk}/tools/")
        assert listing.status_code == 200, dashboard.log()
        links = [
            html.unescape(link)
            for link in re.findall(r'<a [^>]*href="([^"]*/run/)"[^>]*>Run</a>', listing.text)
        ]
        assert len(links) == len(HOSTILE_NAMES), links
        for name, link in zip(HOSTILE_NAMES, links, strict=True):
            form_url = urljoin(str(listing.url), link)  # dot segments resolved, as a browser does
            assert urlsplit(form_url).path.startswith(f"/servers/{pk}/tools/"), (name, form_url)
            form = operator.get(form_url)
            assert form.status_code == 200, (name, form_url, form.text[-500:])
            assert f"<title>Run {html.escape(name)} ·" in form.text.replace("&#x27;", "'"), name
            started = operator.post(urlsplit(form_url).path, {"arguments_json": "{}"})  # no action: itself
            assert started.status_code == 302, (name, started.text[-1000:])
            task_page = operator.get(started.headers["location"])
            assert task_page.status_code == 200, (name, task_page.text[-500:])
            again = re.search(r'href="([^"]*)\?again=\d+"', task_page.text)
            assert again and urljoin(str(task_page.url), html.unescape(again.group(1))) == form_url, name
    called = [m["params"]["name"] for m in hostile.messages if m.get("method") == "tools/call"]
    assert called == HOSTILE_NAMES  # each form ran its own tool, on its own server

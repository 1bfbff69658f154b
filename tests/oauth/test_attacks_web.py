"""A hostile authorization server against the whole dashboard process (`manage.py demo`: Daphne
and the worker on one event loop, one SQLite database), as an operator meets it.

- A token endpoint that drips its answer a byte a second, while the worker refreshes a token:
  the refresh used to run inside a transaction, so every write in the dashboard (logins included)
  failed with "database is locked" and every server's polling stopped for as long as it dripped.
  Here a login, a tool call on another server and that server's polling go on during the drip.
- A token endpoint that answers a gzip bomb: the answer used to be read whole before its size
  cap (400 MiB inflated: the peak memory grew by ~800 MiB). Here it is cut at 64 KiB.
"""

import json
import re
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.oauth.conftest import approve, control
from tests.oauth.peer import READY
from tests.peers.launch import RunningPeer, running
from tests.support.web_process import Dashboard, Operator, running_dashboard

ANSWER_WITHIN = 15.0  # seconds for a page during the attack: a frozen process never answers
BOMB_BYTES = 400 << 20


@pytest.fixture(scope="module")
def peer() -> Iterator[RunningPeer]:
    """The OAuth-protected reference server, without listen streams: the worker polls it."""
    argv = [sys.executable, "-m", "tests.oauth.peer", "--no-listen"]
    with running("oauth-peer-web", argv, READY) as started:
        yield started


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    # A deadline longer than the drip is watched: the attack is still on when the checks end.
    extra = {"OAUTH_DEADLINE_SECONDS": "90"}
    with running_dashboard(tmp_path_factory.mktemp("oauth-web"), extra) as running_one:
        yield running_one


@pytest.fixture
def operator(dashboard: Dashboard, peer: RunningPeer) -> Iterator[Operator]:
    person = Operator(dashboard, timeout=60)
    yield person
    person.close()
    control(peer, reset=True, token_seconds=3600)


def server_pk(answer: httpx.Response) -> int:
    assert answer.status_code == 302, answer.text[-2000:]
    match = re.search(r"/servers/(\d+)/tools/", answer.headers["location"])
    assert match, answer.headers["location"]
    return int(match.group(1))


def connected(operator: Operator, peer: RunningPeer, name: str) -> int:
    """Add the protected server and Connect it, consenting as a person would."""
    pk = server_pk(
        operator.post("/servers/add/", {"name": name, "url": peer.url, "headers": "", "save": "1"})
    )
    started = operator.post(f"/servers/{pk}/connect/", {})
    assert started.status_code == 302 and "/as/authorize?" in started.headers["location"], started.text[-500:]
    back = httpx.URL(approve(started.headers["location"]))
    assert operator.get(f"{back.path}?{back.query.decode()}").status_code == 302
    return pk


def run(operator: Operator, pk: int, arguments: dict[str, object]) -> str:
    answer = operator.post(f"/servers/{pk}/tools/slow_count/run/", {"arguments_json": json.dumps(arguments)})
    assert answer.status_code == 302, answer.text[-2000:]
    return str(answer.headers["location"])


def reference_pk(operator: Operator) -> int:
    found = re.search(r'href="/servers/(\d+)/tools/">reference<', operator.get("/servers/").text)
    assert found
    return int(found.group(1))


def wait_for(check: object, what: str, within: float = 60.0) -> None:
    """A hang guard, not a timed assertion: `check()` is expected to hold long before."""
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_dripping_token_endpoint_holds_up_nothing_else(
    dashboard: Dashboard, operator: Operator, peer: RunningPeer
) -> None:
    control(peer, token_seconds=4)  # the worker refreshes within seconds
    pk = connected(operator, peer, "dripping")
    run(operator, pk, {"n": 400, "delay": 0.5})
    control(peer, token_drip=1.0)
    wait_for(lambda: control(peer)["dripping"], "the worker never began refreshing the token")

    bystander = Operator(dashboard, timeout=ANSWER_WITHIN)  # a login: session and throttle writes
    try:
        task_page = run(bystander, reference_pk(bystander), {"n": 3, "delay": 0.2})  # a write
        wait_for(
            lambda: (
                'data-status="completed"' in bystander.get(task_page).text
                or "completed" in bystander.get(task_page).text
            ),
            "the other server's task was not polled to its end during the drip",
        )
    except httpx.TimeoutException:
        raise AssertionError(f"the dashboard froze during the drip\n{dashboard.log()}") from None
    finally:
        bystander.close()
    assert control(peer)["dripping"], "the drip ended before the checks did: not proven during it"
    control(peer, token_drip=0)


def test_a_gzip_bomb_at_the_token_endpoint_is_cut_without_the_memory(
    dashboard: Dashboard, operator: Operator, peer: RunningPeer
) -> None:
    pk = server_pk(
        operator.post("/servers/add/", {"name": "bomb", "url": peer.url, "headers": "", "save": "1"})
    )
    started = operator.post(f"/servers/{pk}/connect/", {})
    back = httpx.URL(approve(started.headers["location"]))
    control(peer, token_bomb=BOMB_BYTES)  # the code exchange gets 400 MiB in ~400 KB
    dashboard.peak_rss_reset()
    before = dashboard.peak_rss_mib()
    page = operator.get(f"{back.path}?{back.query.decode()}")
    grown = dashboard.peak_rss_mib() - before
    print(f"peak RSS grew by {grown:.1f} MiB for a {BOMB_BYTES >> 20} MiB bomb")
    assert control(peer)["token_requests"] >= 1
    assert grown < 64, f"peak RSS grew by {grown:.0f} MiB"
    assert page.status_code == 400 and "Authorization failed" in page.text, page.text[-1500:]
    assert "no usable answer" in page.text and "exceeds" not in page.text

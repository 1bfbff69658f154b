"""Server processes for the benchmarks that measure them from outside (bench/export.py,
bench/flower.py, bench/fanout_cost.py): start one on a free port and wait until it answers, read
its CPU and memory from /proc, log in through the dashboard's login form, drop it afterwards."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
POSTGRES = "postgres://postgres@127.0.0.1:5432"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def load() -> str:
    """The machine's load average (1, 5, 15 minutes), to print beside the figures."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """The process's resident memory now (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def bench_env(**extra: str) -> dict[str, str]:
    """This environment without what would point a child at another stack, plus `extra`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("REDIS_URL", "DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE", "DEBUG")
    }
    env.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", LOG_LEVEL="WARNING", **extra)
    return env


@contextmanager
def server(
    argv: list[str], env: dict[str, str], up_url: str, log: Path, timeout: float = 120
) -> Iterator[int]:
    """Run `argv` until the block ends; yields its pid once `up_url` answers (any status under 500)."""
    with open(log, "ab") as out:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{argv[:4]} exited {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(up_url, timeout=5).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{up_url} did not answer within {timeout:g} s:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.2)
        yield process.pid
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def daphne(application: str, port: int) -> list[str]:
    return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), application]


def signed_in_sessions(count: int, prefix: str = "fan") -> list[str]:
    """`count` users (every other one an operator, the others viewers: two audiences), each with a
    session as a login makes it, in the configured session engine; their session keys. Needs Django
    set up on the bench's database."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import Group, User

    from tasksapp.permissions import ensure_roles
    from tasksapp.sessions import SessionStore  # the engine settings.SESSION_ENGINE names

    ensure_roles()
    keys = []
    for i in range(count):
        user = User.objects.create_user(f"{prefix}{i}", password=None)
        user.groups.add(Group.objects.get(name="operator" if i % 2 else "viewer"))
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        keys.append(str(session.session_key))
    return keys


def paced(period: float, seconds: float, *, catch_up: bool = True) -> Iterator[float]:
    """A tick every `period` seconds for `seconds`; each yields how late it is (0.0 on time). Late,
    the ticks catch up on the schedule, or with `catch_up=False` go on from now (no burst)."""
    due = time.monotonic()
    ends = due + seconds
    while due < ends:
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield max(0.0, -delay)
        due = due + period if catch_up else max(due + period, time.monotonic())


class SocketEnded(Exception):
    """A tab's websocket received a frame that is not text (its close): str() says which."""


async def text_frames(ws: Any, stop: asyncio.Event) -> AsyncIterator[str]:
    """The text of each frame an aiohttp websocket receives, until `stop` is set; SocketEnded at the
    first frame that is not text."""
    import aiohttp  # the client processes only

    while not stop.is_set():
        try:
            message = await ws.receive(timeout=0.5)
        except TimeoutError:
            continue
        if message.type != aiohttp.WSMsgType.TEXT:
            raise SocketEnded(f"closed {message.type.name} {ws.close_code}")
        yield message.data


def login(base: str, username: str, password: str) -> httpx.Client:
    """A client holding a session of `username`, logged in through the login form as a person is."""
    client = httpx.Client(base_url=base, timeout=60)
    form = client.get("/login/").text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
    assert token, "no CSRF token on the login page"
    answer = client.post(
        "/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": f"{base}/login/"},
    )
    assert answer.status_code == 302, f"login as {username} failed: {answer.status_code}"
    return client


@contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database for the block; dropped afterwards."""
    import psycopg

    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{POSTGRES}/{name}"
    finally:
        with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

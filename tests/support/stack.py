"""The production layout in processes, for fault drills: a fresh PostgreSQL database, a private
redis-server, Daphne and worker processes, and a logged-in HTTP and websocket client.

Faults are injected only where they happen in production: `pg_terminate_backend` on this test's
own database (never a restart of the shared PostgreSQL), a private redis-server that is killed and
started again (never the shared one), processes killed with signals, servers behind a proxy.
"""

import hashlib
import importlib.metadata
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.peers.launch import ROOT, free_port

POSTGRES = "postgres://postgres@127.0.0.1:5432"
PASSWORD = secrets.token_urlsafe(16)
CREATE_OPERATOR = """
import os
from django.contrib.auth.models import Group, User
from tasksapp.permissions import ensure_roles
ensure_roles()
user = User.objects.create_user("otto", password=os.environ["STACK_PASSWORD"])
user.groups.add(Group.objects.get(name="operator"))
"""


# --- PostgreSQL -----------------------------------------------------------------------------------


def _admin() -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(f"{POSTGRES}/postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {POSTGRES} ({exc}): start PostgreSQL on 127.0.0.1:5432 "
            "with trust auth for user postgres.",
            pytrace=False,
        )


def _migrations_key() -> str:
    """What a migrated database depends on: this checkout's migrations and the installed packages
    (whose own migrations Django runs too)."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "tasksapp" / "migrations").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    installed = sorted(
        f"{dist.metadata['Name']}=={dist.version}" for dist in importlib.metadata.distributions()
    )
    digest.update("\n".join(installed).encode())
    return digest.hexdigest()[:16]


TEMPLATE_PREFIX = "tests_migrated_"


def migrated_template(admin: psycopg.Connection[Any]) -> str:
    """A database migrated once for these migrations, that tests clone (CREATE DATABASE ... TEMPLATE
    takes a fraction of a second; a `migrate` takes ~10 s). Built under an advisory lock, so that
    pytest-xdist workers build it once between them; older templates (other migrations) are dropped.
    The caller holds the lock until its clone is made: a template cannot be cloned twice at once."""
    name = TEMPLATE_PREFIX + _migrations_key()
    admin.execute("SELECT pg_advisory_lock(hashtext('tests_migrated_template'))")
    existing = {row[0] for row in admin.execute("SELECT datname FROM pg_database").fetchall()}
    for stale in existing:
        if stale.startswith(TEMPLATE_PREFIX) and stale != name:
            admin.execute(f'DROP DATABASE IF EXISTS "{stale}" WITH (FORCE)')
    if name not in existing:
        building = f"{name}_building"
        admin.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{building}"')
        manage(env_for(f"{POSTGRES}/{building}"), "migrate", "--noinput")
        admin.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
    return name


@contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """A fresh, migrated database of this test's own; yields its URL, drops it afterwards."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    url = f"{POSTGRES}/{name}"
    with _admin() as admin:
        try:
            template = migrated_template(admin)
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        finally:
            admin.execute("SELECT pg_advisory_unlock(hashtext('tests_migrated_template'))")
    try:
        yield url
    finally:
        with _admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def sql(database_url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        cursor = connection.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def terminate_backends(database_url: str, sparing: int = 0) -> int:
    """What a PostgreSQL restart does to every client of this database: cut its connections (all
    but the backend `sparing`, a test's own)."""
    name = database_url.rsplit("/", 1)[1]
    rows = sql(
        f"{POSTGRES}/postgres",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid() AND pid <> %s",
        name,
        sparing,
    )
    return len(rows)


def lock_waiters(database_url: str) -> int:
    """Connections of this database waiting for a lock."""
    name = database_url.rsplit("/", 1)[1]
    query = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'"
    [(count,)] = sql(f"{POSTGRES}/postgres", query, name)
    return int(count)


def connections_to(database_url: str) -> int:
    name = database_url.rsplit("/", 1)[1]
    [(count,)] = sql(f"{POSTGRES}/postgres", "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", name)
    return int(count)


# --- Redis ----------------------------------------------------------------------------------------


class PrivateRedis:
    """A redis-server of this test's own on a free port, to be killed and started again."""

    def __init__(self, logs: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed (apt-get install redis-server).", pytrace=False)
        self.binary = binary
        self.port = free_port()
        self.logs = logs
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [self.binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", ""]
        argv += ["--appendonly", "no", "--maxclients", "2000"]
        with open(self.logs / "redis.log", "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        wait_until(self.answers, 10, lambda: "redis-server did not start")

    def answers(self) -> bool:
        try:
            return bool(self.call("PING"))
        except Exception:  # redis.ConnectionError and friends: not up yet
            return False

    def call(self, *command: str) -> Any:
        import redis

        client = redis.Redis(port=self.port, socket_timeout=5, decode_responses=True)
        try:
            return client.execute_command(*command)  # type: ignore[no-untyped-call]  # unannotated in redis-py
        finally:
            client.close()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def close(self) -> None:
        self.kill()


@contextmanager
def private_redis(logs: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(logs)
    server.start()
    try:
        yield server
    finally:
        server.close()


# --- processes ------------------------------------------------------------------------------------


def env_for(database_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    return {**env, "DATABASE_URL": database_url, "PYTHONUNBUFFERED": "1", "STACK_PASSWORD": PASSWORD, **extra}


def manage(env: dict[str, str], *args: str, timeout: float = 120, check: bool = True) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        output = f"{done.stdout}{done.stderr}"
        assert done.returncode == 0, f"manage.py {args[0]} exited {done.returncode}:\n{output}"
    return done.stdout if check else done.stdout + done.stderr


class Processes:
    """Long-running processes with their output in files; shown on failure, all stopped at teardown."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.running: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with open(self.logs / f"{name}.log", "ab") as log:
            process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.running[name] = process
        return process

    def worker(self, name: str, env: dict[str, str], *extra: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "manage.py", "worker", "--name", name, *extra]
        return self.start(f"worker-{name}", argv, env)

    def daphne(self, name: str, env: dict[str, str]) -> str:
        """A Daphne process serving the dashboard; returns its base URL once it answers."""
        port = free_port()
        argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
        argv.append("dashboard.asgi:application")
        self.start(name, argv, env)
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(f"{base}/login/", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, 30, self.output)
        return base

    def stop(self, name: str, signum: int = signal.SIGTERM) -> int:
        process = self.running[name]
        if process.poll() is None:
            process.send_signal(signum)
        try:
            return process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"{name} ignored signal {signum} for 20 s\n{self.output()}") from None

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def output(self) -> str:
        return "".join(
            f"\n--- {name} (exit {process.poll()}) ---\n" + self.log(name)[-5000:]
            for name, process in self.running.items()
        )

    def close(self) -> None:
        for name, process in self.running.items():
            if process.poll() is None:
                with suppress(AssertionError):
                    self.stop(name)
        print(self.output())  # pytest shows it when the test failed


@contextmanager
def process_group(logs: Path) -> Iterator[Processes]:
    running = Processes(logs)
    try:
        yield running
    finally:
        running.close()


def wait_until(condition: Callable[[], bool], timeout: float, describe: Callable[[], str]) -> float:
    """Poll `condition` until it holds; returns the seconds it took, or fails saying why."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"timed out after {timeout} s: {describe()}"
        time.sleep(0.1)
    return time.monotonic() - started


# --- people ---------------------------------------------------------------------------------------


def create_operator(env: dict[str, str]) -> None:
    manage(env, "shell", "-c", CREATE_OPERATOR)


def login(base: str, client: httpx.Client | None = None) -> httpx.Client:
    """An HTTP client logged in as the operator 'otto' (created by create_operator)."""
    client = client or httpx.Client(base_url=base, timeout=30)
    page = client.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text[:500]
    answer = client.post(
        "/login/",
        data={"username": "otto", "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": f"{base}/login/"},
    )
    assert answer.status_code == 302, answer.text[:500]
    return client


def websocket_headers(base: str, client: httpx.Client) -> dict[str, str]:
    cookies = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
    return {"Cookie": cookies, "Origin": base}


def websocket_url(base: str, page: str) -> str:
    return base.replace("http://", "ws://") + f"/ws/live/?page={page}"

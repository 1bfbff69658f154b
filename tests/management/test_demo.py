"""`manage.py demo` as a person starts it: twice in a row, with a port taken, then in the admin site."""

import json
import os
import re
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.peers.launch import ROOT, free_port

BANNER_END = "Ctrl-C stops everything."


def demo_env(var: Path) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{var}/demo.sqlite3", "DASHBOARD_VAR_DIR": str(var)}
    for name in ("DJANGO_ALLOW_ASYNC_UNSAFE", "REDIS_URL", "DEBUG", "SECRET_KEY"):
        env.pop(name, None)
    return {**env, "PYTHONUNBUFFERED": "1"}


def demo_command(port: int, *extra: str) -> list[str]:
    others = [f"--{name}={free_port()}" for name in ("mcp-port", "mail-port", "sink-port")]
    return [sys.executable, "manage.py", "demo", "--port", str(port), *others, *extra]


@contextmanager
def running_demo(var: Path, *extra: str, sigint_ignored: bool = False) -> Iterator[tuple[str, str]]:
    """Start the demo, read its banner, yield (dashboard URL, password shown); Ctrl-C it after.
    `sigint_ignored`: started as a shell starts a background job (`demo &`), SIGINT ignored."""
    port = free_port()
    process = subprocess.Popen(
        demo_command(port, *extra),
        cwd=ROOT,
        env=demo_env(var),
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
    )
    assert process.stdout is not None
    banner = []
    try:
        for line in process.stdout:  # blocks until the next line: no sleeping
            banner.append(line)
            if BANNER_END in line:
                break
        shown = re.search(r"log in as demo / (\S+)", "".join(banner))
        assert shown, "".join(banner)
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url)  # Ctrl-C before Daphne runs is not what this test is about
        yield url, shown.group(1)
    finally:
        process.send_signal(signal.SIGINT)
        # Each step of the demo's stop is bounded (the worker 10 s, the reference server 10 s, ...);
        # a saturated CI machine can need most of that, and this test is about a clean stop.
        assert process.wait(60) == 0
        assert "stopped cleanly" in process.stdout.read()


def wait_until_serving(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(f"{url}/login/", timeout=5)
            return
        except httpx.TransportError:
            assert time.monotonic() < deadline, f"{url} never answered"
            time.sleep(0.05)


def log_in(client: httpx.Client, password: str) -> httpx.Response:
    form = client.get("/admin/login/?next=/admin/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert token, form.text[:2000]
    data = {"csrfmiddlewaretoken": token.group(1), "username": "demo", "password": password}
    return client.post("/admin/login/?next=/admin/", data=data, follow_redirects=True)


def test_a_restarted_demo_keeps_the_password_and_the_reference_servers_tasks(tmp_path: Path) -> None:
    with running_demo(tmp_path) as (_, first):
        task = manage(tmp_path, "call", "reference", "run_forever", '{"delay": 30}')["task"]
    kept = tmp_path / "demo_password"
    assert kept.read_text().strip() == first
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert (tmp_path / "reference-server-tasks.json").exists()  # next to the demo's database
    with running_demo(tmp_path) as (url, second), sqlite3.connect(tmp_path / "demo.sqlite3") as database:
        assert second == first  # a restart logs nobody out
        row = wait_for_news_of(database, task["id"])
        assert row[:2] == (0, "working"), row  # not expired: the restarted server still knows the task
        with httpx.Client(base_url=url, timeout=30) as admin:
            assert "Site administration" in log_in(admin, second).text
            users = admin.get("/admin/auth/user/")
            assert users.status_code == 200 and ">demo<" in users.text
            demo_id = re.search(r'href="/admin/auth/user/(\d+)/change/"', users.text)
            assert demo_id
            change = admin.get(f"/admin/auth/user/{demo_id.group(1)}/change/")
            assert change.status_code == 200 and 'name="groups"' in change.text  # roles can be assigned
            assert admin.get("/admin/auth/group/").status_code == 200
    with running_demo(tmp_path, "--password", "a-new-one-for-tests") as (url, third):
        assert third == "a-new-one-for-tests"
        signed_in = httpx.Client(base_url=url, timeout=30)
        assert "Site administration" in log_in(signed_in, third).text
    assert kept.read_text().strip() == "a-new-one-for-tests"
    # Started again with the same --password (a script, a shell's history): the password is the
    # same, so it is not set again, and the browser signed in above stays signed in (setting it
    # again changed the session's hash: every open page said "signed out").
    try:
        with running_demo(tmp_path, "--password", "a-new-one-for-tests") as (url, fourth):
            assert fourth == "a-new-one-for-tests"
            again = signed_in.get(f"{url}/admin/", follow_redirects=False)
            assert again.status_code == 200 and "Site administration" in again.text
    finally:
        signed_in.close()


def manage(var: Path, *args: str) -> Any:
    run = subprocess.run(
        [sys.executable, "manage.py", *args, "--json"],
        cwd=ROOT,
        env=demo_env(var),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def wait_for_news_of(database: sqlite3.Connection, task_id: int) -> tuple[Any, ...]:
    """The task's row once the worker has heard about it again (it changed, expired or was confirmed)."""
    query = "SELECT expired, status, last_confirmed_at FROM tasksapp_remotetask WHERE id = ?"
    before = database.execute(query, (task_id,)).fetchone()
    deadline = time.monotonic() + 30
    while (row := database.execute(query, (task_id,)).fetchone()) == before:
        assert time.monotonic() < deadline, row
        time.sleep(0.1)
    return tuple(row)


def test_sigint_stops_a_demo_started_in_the_background_of_a_script(tmp_path: Path) -> None:
    """A non-interactive shell starts `manage.py demo &` with SIGINT ignored (so did .ci/test for the
    browser tests, whose demos then never stopped): SIGINT must still stop it cleanly."""
    with running_demo(tmp_path, sigint_ignored=True) as (url, _):
        assert httpx.get(f"{url}/login/", timeout=10).status_code == 200


def test_demo_on_a_busy_port_exits_non_zero_with_a_hint(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run(
            demo_command(port), cwd=ROOT, env=demo_env(tmp_path), capture_output=True, text=True, timeout=60
        )
    assert run.returncode != 0, run.stdout
    assert f"127.0.0.1:{port}" in run.stderr and "--port" in run.stderr, run.stderr
    assert "log in as" not in run.stdout and "MCP Tasks Dashboard:" not in run.stdout
    assert not (tmp_path / "demo_password").exists()  # nothing was set up for a demo that never ran

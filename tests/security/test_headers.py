"""Headers on real responses from Daphne with production settings (Cache-Control, cookie
flags, HSTS without preload); and the files of the embedded default kept private."""

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User

from tasksapp.models import McpServer, RemoteTask
from tests.peers.launch import ROOT, free_port
from tests.support.deploy import manage

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-for-header-tests"
HTTPS = {"X-Forwarded-Proto": "https"}  # as the TLS-terminating proxy would say


@pytest.fixture
def production(db_env: dict[str, str]) -> Iterator[str]:
    """Daphne on this test's database with the production settings of docs/deploy.md."""
    port = free_port()
    env = {
        **{k: v for k, v in db_env.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "SECRET_KEY": settings.SECRET_KEY,  # the keys this process wrote the test's rows with
        "DASHBOARD_ENCRYPTION_KEY": settings.DASHBOARD_ENCRYPTION_KEY,
        "DEBUG": "false",
        "HTTPS": "true",
        "BEHIND_PROXY": "true",
        "SECURE_HSTS_SECONDS": "31536000",
        "ALLOWED_HOSTS": "127.0.0.1",
    }
    command = [
        sys.executable,
        "-m",
        "daphne",
        "-b",
        "127.0.0.1",
        "-p",
        str(port),
        "dashboard.asgi:application",
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                httpx.get(f"{base}/login/", headers=HTTPS, timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "daphne did not start"
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(10)


def cookie_flags(response: httpx.Response, name: str) -> set[str]:
    for header in response.headers.get_list("set-cookie"):
        if header.startswith(f"{name}="):
            return {part.strip().split("=")[0].lower() for part in header.split(";")[1:]} | {
                part.strip().lower()
                for part in header.split(";")[1:]
                if part.strip().lower().startswith("samesite")
            }
    raise AssertionError(f"no {name} cookie in {response.headers.get_list('set-cookie')}")


def test_production_responses_carry_the_security_headers(production: str) -> None:
    User.objects.create_user("hedda", password=PASSWORD, is_superuser=True, is_staff=True)
    server = McpServer.objects.create(name="srv", url="http://127.0.0.1:9/mcp")
    task = RemoteTask(server=server, tool_name="t", status="working")
    task.set_remote_id("secret-task-id")
    task.save()
    # The cookies are Secure, which httpx keeps from a plain-http URL: carry them by hand, as the
    # browser behind the TLS proxy would.
    jar: dict[str, str] = {}

    def remember(response: httpx.Response) -> httpx.Response:
        for header in response.headers.get_list("set-cookie"):
            name, _, rest = header.partition("=")
            jar[name] = rest.split(";", 1)[0]
        return response

    def cookie() -> dict[str, str]:
        return {**HTTPS, "Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())}

    with httpx.Client(base_url=production, headers=HTTPS, timeout=30) as client:
        insecure = client.get("/login/", headers={"X-Forwarded-Proto": "http"})
        assert insecure.status_code == 301 and insecure.headers["location"].startswith("https://")

        form = remember(client.get("/login/"))
        assert form.status_code == 200
        assert form.headers["strict-transport-security"] == "max-age=31536000; includeSubDomains"
        assert {"secure", "samesite=lax"} <= cookie_flags(form, "csrftoken")
        credentials = {"username": "hedda", "password": PASSWORD, "csrfmiddlewaretoken": jar["csrftoken"]}
        referer = f"https://{production.removeprefix('http://')}/login/"
        login = remember(client.post("/login/", data=credentials, headers={**cookie(), "Referer": referer}))
        assert login.status_code == 302, login.text[:500]
        assert {"httponly", "secure", "samesite=lax"} <= cookie_flags(login, "sessionid")

        for path in (
            "/",
            "/tasks/",
            f"/tasks/{task.pk}/",
            f"/tasks/{task.pk}/raw.json",
            "/servers/",
            "/admin/",
        ):
            response = client.get(path, headers=cookie())
            assert response.status_code == 200, path
            assert "no-store" in response.headers["cache-control"], path
            assert response.headers["x-frame-options"] == "DENY", path
            assert response.headers["x-content-type-options"] == "nosniff", path
        assert client.get(f"/tasks/{task.pk}/raw.json", headers=cookie()).json()["taskId"] == "secret-task-id"


def test_the_embedded_default_keeps_var_and_the_database_private(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    database = var / "db.sqlite3"
    database.touch(mode=0o644)
    os.chmod(database, 0o644)
    run = manage("migrate", "-v0", DASHBOARD_VAR_DIR=str(var), DATABASE_URL=f"sqlite:///{database}")
    assert run.returncode == 0, run.stderr
    assert stat.S_IMODE(var.stat().st_mode) == 0o700
    for path in var.iterdir():  # the database, its -wal and -shm files, the generated secret key
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path

    fresh = tmp_path / "fresh"
    run = manage("check", DASHBOARD_VAR_DIR=str(fresh), DATABASE_URL=f"sqlite:///{fresh}/db.sqlite3")
    assert run.returncode == 0, run.stderr
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
    assert stat.S_IMODE((fresh / "db.sqlite3").stat().st_mode) == 0o600


def test_hsts_preload_only_when_asked_for() -> None:
    script = "from django.conf import settings; print(settings.SECURE_HSTS_PRELOAD)"
    asked = manage("shell", "-c", script, SECURE_HSTS_SECONDS="31536000", SECURE_HSTS_PRELOAD="true")
    default = manage("shell", "-c", script, SECURE_HSTS_SECONDS="31536000")
    assert (asked.stdout.split()[-1], default.stdout.split()[-1]) == ("True", "False")

"""`manage.py` in a subprocess with the environment a deployment sets (PRODUCTION: settings that
pass check --deploy), so settings are read as they are at start-up, not as the test run has them."""

import os
import secrets
import subprocess
import sys

from tests.peers.launch import ROOT

PRODUCTION = {
    "SECRET_KEY": secrets.token_urlsafe(50),
    "DASHBOARD_ENCRYPTION_KEY": secrets.token_urlsafe(48),
    "DEBUG": "false",
    "HTTPS": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "ALLOWED_HOSTS": "dash.example.com",
}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # The browser tests allow async-unsafe calls in this process; a deployment would not.
    base = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=60,
    )

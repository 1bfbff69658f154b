"""Notification settings, from the environment (docs/notifications.md)."""

import os


def base_url() -> str:
    """The dashboard's address as people reach it, for links in messages."""
    return os.environ.get("NOTIFY_BASE_URL", "http://127.0.0.1:8000").rstrip("/")


def sender() -> str:
    return os.environ.get("NOTIFY_FROM", "MCP Tasks Dashboard <dashboard@localhost>")


MAX_ATTEMPTS = int(os.environ.get("NOTIFY_MAX_ATTEMPTS", "8"))
FIRST_RETRY_SECONDS = float(os.environ.get("NOTIFY_FIRST_RETRY_SECONDS", "10"))
MAX_RETRY_SECONDS = 3600.0
STUCK_SECONDS = 300.0  # a row left "sending" this long (its worker died mid-send) is sent again
TIMEOUT_SECONDS = 10.0
BROWSER_FRESH_SECONDS = 120.0  # a browser notification not shown by then is dropped, not shown late
CHANNELS = ("email", "webhook", "browser")

"""Noticing lost messages: tasksapp/events.py numbers every message per publisher and group; a
receiver that sees a number skipped knows messages were lost on the way (a full channel drops
silently) and must catch up. Used by each process's hub for the shared groups, the only ones that
carry task and server changes (tasksapp/live/hub.py)."""

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tasksapp import redislayer
from tasksapp.live.pages import MARGIN


@dataclass(frozen=True)
class Gap:
    publisher: str
    number: int
    after: int
    since: datetime  # catch up on what changed from here

    @property
    def lost(self) -> int:
        return max(self.number - self.after - 1, 1)


class Numbering:
    def __init__(self) -> None:
        self.last: dict[tuple[str, str], int] = {}  # (publisher, group) -> its last number
        self.in_step_at: dict[tuple[str, str], float] = {}  # when its last message in order came
        self.started = time.monotonic()

    def gap(self, message: dict[str, Any], group: str) -> Gap | None:
        """None when `message` follows the last one of its publisher and group (or is the first, or
        unnumbered). Otherwise the gap, counted in /metrics (mcp_live_resyncs_total{reason="gap"}),
        with the moment to catch up from: the last message from that publisher that came in order
        (its change was committed before the lost one was published), or the start; MARGIN before
        that, for transactions under way."""
        number = message.get("seq")
        if not isinstance(number, int):
            return None
        key = (str(message.get("src", "")), group)
        last = self.last.get(key)
        self.last[key] = number
        now = time.monotonic()
        in_step_at = self.in_step_at.get(key, self.started)
        self.in_step_at[key] = now
        if last is None or number == last + 1:
            return None
        redislayer.count("resync_gap")
        since = datetime.now(UTC) - MARGIN - timedelta(seconds=now - in_step_at)
        return Gap(key[0], number, last, since)

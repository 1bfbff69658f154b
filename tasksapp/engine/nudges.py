"""Nudges from the channel layer: an operator answered or cancelled a task, so whichever worker
holds it polls it now rather than at the server's next interval (needs a shared channel layer).

A channel layer that fails (Redis restarting) is joined again with back-off; the nudges are a
shortcut, polling stays the baseline.
"""

import asyncio
import contextlib
import logging
from collections.abc import Callable

from tasksapp.engine.tracking import backoff_delay

log = logging.getLogger(__name__)
NUDGE_RETRY_MAX_SECONDS = 30.0


async def follow_nudges(worker: str, nudged: Callable[[int], None]) -> None:
    """Call `nudged(task id)` for every nudge sent to the workers' group, until cancelled;
    `worker` names this worker in the log."""
    from channels.layers import get_channel_layer

    from tasksapp import events, redislayer

    layer = get_channel_layer()
    if layer is None:
        return
    failures = 0
    channel = ""
    try:
        while True:
            try:
                channel = await layer.new_channel()
                await layer.group_add(events.WORKERS, channel)
                redislayer.reachability.worked()
                if failures:
                    log.info("worker %s: receiving nudges again", worker)
                failures = 0
                while True:
                    message = await layer.receive(channel)
                    nudged(int(message.get("id", 0)))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the loop boundary: Redis down, a timeout, a malformed message
                failures += 1
                delay = min(backoff_delay(failures), NUDGE_RETRY_MAX_SECONDS)
                if isinstance(exc, redislayer.UNREACHABLE):  # a few lines per outage, not one a retry
                    redislayer.reachability.failed("nudge listen(s)", exc)
                    log.debug("worker %s: nudges stopped (%s); retrying in %.1f s", worker, exc, delay)
                else:
                    log.warning("worker %s: nudges stopped (%s); retrying in %.1f s", worker, exc, delay)
                await asyncio.sleep(delay)
    finally:
        if channel:  # leave the group on the way out, so it does not fill with stopped workers
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await layer.group_discard(events.WORKERS, channel)

"""`subscriptions/listen`: the acknowledged filter, then task pushes, then a graceful end (§7)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .asgi import Receive, Send, SseStream, wait_for_disconnect
from .envelope import Request
from .hub import Hub, StreamEnd, Subscription
from .protocol import (
    META_SUBSCRIPTION_ID,
    TASKS_EXTENSION,
    JsonObject,
    invalid_params,
    missing_tasks_capability,
    notification,
    result_message,
)

CORE_FLAGS = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")


def honoured_filter(request: Request, task_exists: Callable[[str], bool]) -> JsonObject:
    """The subset of the requested filter this server will honour; raises RpcError if invalid.

    Core list-changed flags are echoed (this server's lists never change, so they never
    fire); `taskIds` keeps only tasks that exist; resource subscriptions are dropped,
    since there are no resources.
    """
    requested = request.params.get("notifications")
    if not isinstance(requested, dict):
        raise invalid_params("subscriptions/listen needs params.notifications (an object)")
    honoured: JsonObject = {flag: True for flag in CORE_FLAGS if requested.get(flag) is True}
    if "taskIds" in requested:
        if not request.has_tasks_capability:
            raise missing_tasks_capability(
                f"Listening for taskIds requires the tasks extension ({TASKS_EXTENSION}); "
                "the client did not declare it for this request."
            )
        task_ids = requested["taskIds"]
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            raise invalid_params("notifications.taskIds must be a list of strings")
        honoured["taskIds"] = [t for t in dict.fromkeys(task_ids) if task_exists(t)]
    return honoured


async def serve_listen(
    request: Request,
    honoured: JsonObject,
    hub: Hub,
    keepalive_seconds: float,
    send: Send,
    receive: Receive,
) -> None:
    # Subscribe before the ack so no change is lost; queued frames go out after it.
    subscription = hub.subscribe(frozenset(honoured.get("taskIds", ())))
    watcher = asyncio.create_task(_report_disconnect(receive, subscription))
    meta = {META_SUBSCRIPTION_ID: request.id}
    stream = SseStream(send)
    try:
        await stream.open()
        ack = {"_meta": meta, "notifications": honoured}
        await stream.message(notification("notifications/subscriptions/acknowledged", ack))
        if await _pump(stream, subscription, meta, keepalive_seconds):
            final = result_message(request.id, {"resultType": "complete", "_meta": meta})
            await stream.message(final)
            await stream.close()
    finally:
        hub.unsubscribe(subscription)
        watcher.cancel()


async def _pump(
    stream: SseStream, subscription: Subscription, meta: JsonObject, keepalive_seconds: float
) -> bool:
    """Forwards task snapshots until the stream ends; True if the server ended it."""
    while True:
        try:
            item = await asyncio.wait_for(subscription.queue.get(), keepalive_seconds)
        except TimeoutError:
            await stream.ping()
            continue
        if item is StreamEnd.CLOSE:
            return True
        if item is StreamEnd.DISCONNECT:
            return False
        await stream.message(notification("notifications/tasks", {**item, "_meta": meta}))


async def _report_disconnect(receive: Receive, subscription: Subscription) -> None:
    await wait_for_disconnect(receive)
    subscription.push(StreamEnd.DISCONNECT)

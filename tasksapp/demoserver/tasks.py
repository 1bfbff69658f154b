"""The task store: records, the one place state changes, expiry, input rounds.

In memory, and, given a TaskFile, saved after every change so a restart brings the tasks back.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from . import inputkinds
from .hub import Hub
from .persist import TaskFile, times
from .protocol import ErrorCode, JsonObject, RpcError, task_not_found

logger = logging.getLogger(__name__)

TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
DEFAULT_TTL_MS = 15 * 60 * 1000
SAVE_DELAY_SECONDS = 0.2  # changes within this are saved together
RESUMED = "Resumed after the server restarted: the tool started again from the same arguments."
_MUTABLE_FIELDS = frozenset(
    {"status", "status_message", "ttl_ms", "poll_interval_ms", "input_requests", "result", "error"}
)


class ToolFailure(Exception):
    """Raised by a task body to end its task `failed` with this JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None, status_message: str = "") -> None:
        super().__init__(message)
        self.error: JsonObject = {"code": code, "message": message}
        if data is not None:
            self.error["data"] = data
        self.status_message = status_message or f"Tool execution failed: {message}"


@dataclass(frozen=True)
class TaskStart:
    status_message: str | None
    poll_interval_ms: int
    ttl_ms: int | None = DEFAULT_TTL_MS


@dataclass
class InputRound:
    """The input requests a task waits on; it resumes once all of them are answered."""

    outstanding: set[str]
    answers: dict[str, JsonObject] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(eq=False)
class TaskRecord:
    task_id: str
    status: str
    status_message: str | None
    created_at: datetime
    last_updated_at: datetime
    ttl_ms: int | None
    poll_interval_ms: int
    # Replaced, never mutated in place, so published snapshots stay accurate.
    input_requests: dict[str, JsonObject] = field(default_factory=dict)
    result: JsonObject | None = None
    error: JsonObject | None = None
    round: InputRound | None = None
    used_keys: set[str] = field(default_factory=set)
    tool: str = ""
    arguments: JsonObject = field(default_factory=dict)
    # What the creating request declared; None: send any kind (permissive, or saved before this).
    capabilities: JsonObject | None = None
    runner: asyncio.Task[None] | None = None
    expiry: asyncio.TimerHandle | None = None
    deleted: bool = False

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def expired(self, now: datetime) -> bool:
        if self.ttl_ms is None:
            return False
        return now >= self.created_at + timedelta(milliseconds=self.ttl_ms)

    def new_key(self, label: str) -> str:
        """A key never used before in this task's life (PROTOCOL.md §5.4)."""
        key = f"{label}-{secrets.token_hex(8)}"
        while key in self.used_keys:
            key = f"{label}-{secrets.token_hex(8)}"
        self.used_keys.add(key)
        return key

    def snapshot(self) -> JsonObject:
        """The DetailedTask of §5.2, without `resultType`."""
        task: JsonObject = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": _iso(self.created_at),
            "lastUpdatedAt": _iso(self.last_updated_at),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status_message is not None:
            task["statusMessage"] = self.status_message
        if self.status == "input_required":
            task["inputRequests"] = self.input_requests
        elif self.status == "completed":
            task["result"] = self.result
        elif self.status == "failed":
            task["error"] = self.error
        return task


class TaskContext:
    """What a running task body may do to its own task."""

    def __init__(self, store: TaskStore, record: TaskRecord) -> None:
        self._store = store
        self._record = record

    def say(self, message: str) -> None:
        self._store.change(self._record, status_message=message)

    def set_poll_interval(self, interval_ms: int, message: str | None = None) -> None:
        """One change (one notification) for the interval and, optionally, the message."""
        changes: dict[str, Any] = {"poll_interval_ms": interval_ms}
        if message is not None:
            changes["status_message"] = message
        self._store.change(self._record, **changes)

    async def ask(self, requests: Mapping[str, JsonObject], message: str) -> dict[str, JsonObject]:
        """Goes input_required with one fresh key per label; returns the answers by label. A kind
        the creating request did not declare is never sent: the task fails with -32021 instead."""
        if self._record.capabilities is not None:
            missing = inputkinds.missing_capabilities(requests, self._record.capabilities)
            if missing:
                refused = inputkinds.refusal(f"Task of tool '{self._record.tool}'", missing)
                raise ToolFailure(refused.code, refused.message, refused.data)
        keys = {label: self._record.new_key(label) for label in requests}
        current = InputRound(outstanding=set(keys.values()))
        self._record.round = current
        self._store.change(
            self._record,
            status="input_required",
            status_message=message,
            input_requests={keys[label]: request for label, request in requests.items()},
        )
        await current.done.wait()
        return {label: current.answers[key] for label, key in keys.items()}


TaskBody = Callable[[TaskContext], Awaitable[JsonObject]]


Rebuild = Callable[[str, JsonObject], TaskBody | None]  # (tool, arguments) -> its body, if it still exists


class TaskStore:
    def __init__(self, hub: Hub, task_file: TaskFile | None = None) -> None:
        self._hub = hub
        self._tasks: dict[str, TaskRecord] = {}
        self._file = task_file
        self._save_soon: asyncio.TimerHandle | None = None
        self._closing = False

    @property
    def count(self) -> int:
        return len(self._tasks)

    def create(
        self,
        start: TaskStart,
        body: TaskBody,
        *,
        tool: str = "",
        arguments: JsonObject | None = None,
        capabilities: JsonObject | None = None,
    ) -> TaskRecord:
        """A new working task running `body`; `tool` and `arguments` let a restart run it again.
        `capabilities`: what the creating request declared (None: its input requests are not checked)."""
        now = datetime.now(UTC)
        record = TaskRecord(
            task_id=secrets.token_urlsafe(32),
            status="working",
            status_message=start.status_message,
            created_at=now,
            last_updated_at=now,
            ttl_ms=start.ttl_ms,
            poll_interval_ms=start.poll_interval_ms,
            tool=tool,
            arguments=dict(arguments or {}),
            capabilities=capabilities,
        )
        self._tasks[record.task_id] = record
        self._watch(record)
        record.runner = asyncio.get_running_loop().create_task(
            self._run(record, body), name=f"task-{record.task_id}"
        )
        self._changed()
        return record

    def restore(self, rebuild: Rebuild) -> int:
        """Bring back the tasks saved before a restart; call once, in the loop, before serving.

        Finished tasks keep their results. A task that was running (or waiting for input) runs its
        tool again from the same arguments under the same taskId, createdAt and TTL, since its
        progress died with the old process. Tasks whose TTL passed meanwhile stay gone. Returns
        how many came back.
        """
        now = datetime.now(UTC)
        for saved in self._file.load() if self._file is not None else []:
            record = _record_of(saved)
            if record.expired(now) or record.task_id in self._tasks:
                continue
            self._tasks[record.task_id] = record
            self._watch(record)
            if not record.terminal:
                self._resume(record, rebuild(record.tool, record.arguments))
        self._save()
        return len(self._tasks)

    def get(self, task_id: str) -> TaskRecord:
        record = self._tasks.get(task_id)
        if record is not None and record.expired(datetime.now(UTC)):
            self._expire(task_id)
            record = None
        if record is None:
            raise task_not_found(task_id)
        return record

    def exists(self, task_id: str) -> bool:
        try:
            self.get(task_id)
        except RpcError:
            return False
        return True

    def change(self, record: TaskRecord, **changes: Any) -> bool:
        """Applies the changes that differ; bumps lastUpdatedAt and notifies only if any did.

        Keyword arguments (rather than one parameter per field) keep every caller to one
        call per logical change, which becomes exactly one `notifications/tasks` frame.
        """
        unknown = changes.keys() - _MUTABLE_FIELDS
        if unknown:
            raise TypeError(f"not a mutable task field: {sorted(unknown)}")
        if record.deleted or record.terminal or self._closing:
            return False
        real = {name: value for name, value in changes.items() if getattr(record, name) != value}
        if not real:
            return False
        for name, value in real.items():
            setattr(record, name, value)
        # Strictly increasing, so clients can order snapshots even within one clock tick.
        now = datetime.now(UTC)
        record.last_updated_at = max(now, record.last_updated_at + timedelta(microseconds=1))
        self._hub.publish(record.task_id, record.snapshot())
        self._changed()
        return True

    def answer(self, task_id: str, responses: Mapping[str, Any]) -> None:
        """Takes answers to outstanding keys; ignores anything else, as §5.4 requires."""
        record = self.get(task_id)
        current = record.round
        if current is None or record.terminal:
            return
        accepted = {
            key: value
            for key, value in responses.items()
            if key in current.outstanding and isinstance(value, dict)
        }
        if not accepted:
            return
        current.answers.update(accepted)
        current.outstanding.difference_update(accepted)
        if current.outstanding:
            remaining = {k: v for k, v in record.input_requests.items() if k in current.outstanding}
            self.change(record, input_requests=remaining)
            return
        record.round = None
        self.change(record, status="working", status_message="Input received; resuming.", input_requests={})
        current.done.set()

    def cancel(self, task_id: str) -> None:
        record = self.get(task_id)
        if not record.terminal and record.runner is not None:
            record.runner.cancel()

    def close(self) -> None:
        """Stops every running task; used on shutdown. With a TaskFile, saves them first, as they
        are (a task stopped by the shutdown is not recorded as cancelled: it resumes on restart)."""
        self._closing = True
        self._save()
        for record in self._tasks.values():
            if record.expiry is not None:
                record.expiry.cancel()
            if record.runner is not None:
                record.runner.cancel()

    async def _run(self, record: TaskRecord, body: TaskBody) -> None:
        try:
            result = await body(TaskContext(self, record))
        except asyncio.CancelledError:
            # Swallowed on purpose: this is the task's own top-level runner, nobody awaits it.
            self._finish(record, status="cancelled", status_message="Cancelled at the client's request.")
        except ToolFailure as failure:
            self._finish(record, status="failed", status_message=failure.status_message, error=failure.error)
        except Exception:
            logger.exception("task %s crashed", record.task_id)
            error = {"code": ErrorCode.INTERNAL_ERROR.value, "message": "Internal error in the tool"}
            self._finish(record, status="failed", status_message="The tool crashed.", error=error)
        else:
            self._finish(record, status="completed", result={"resultType": "complete", **result})

    def _finish(self, record: TaskRecord, **changes: Any) -> None:
        record.round = None
        self.change(record, input_requests={}, **changes)

    def _expire(self, task_id: str) -> None:
        record = self._tasks.pop(task_id, None)
        if record is None:
            return
        record.deleted = True
        if record.expiry is not None:
            record.expiry.cancel()
        if record.runner is not None and not record.runner.done():
            record.runner.cancel()
        # A task id is a bearer secret (docs/security.md): the log names the task by a short hash.
        logger.info("a task expired and was deleted (ref %s)", task_ref(task_id))
        self._changed()

    def _watch(self, record: TaskRecord) -> None:
        """Delete the record when its TTL (counted from createdAt) passes."""
        if record.ttl_ms is None:
            return
        left = (record.created_at + timedelta(milliseconds=record.ttl_ms) - datetime.now(UTC)).total_seconds()
        record.expiry = asyncio.get_running_loop().call_later(max(0.0, left), self._expire, record.task_id)

    def _resume(self, record: TaskRecord, body: TaskBody | None) -> None:
        record.round = None
        if body is None:
            error = {"code": ErrorCode.INTERNAL_ERROR.value, "message": f"Unknown tool: {record.tool}"}
            self._finish(
                record, status="failed", status_message="The server restarted without this tool.", error=error
            )
            return
        self.change(record, status="working", status_message=RESUMED, input_requests={})
        record.runner = asyncio.get_running_loop().create_task(
            self._run(record, body), name=f"task-{record.task_id}"
        )

    def _changed(self) -> None:
        """Save soon (changes close together are written once)."""
        if self._file is None or self._closing or self._save_soon is not None:
            return
        self._save_soon = asyncio.get_running_loop().call_later(SAVE_DELAY_SECONDS, self._save)

    def _save(self) -> None:
        if self._save_soon is not None:
            self._save_soon.cancel()
            self._save_soon = None
        if self._file is None:
            return
        try:
            self._file.save(self._tasks.values())
        except OSError as exc:
            logger.warning("could not save the tasks to %s: %s", self._file.path, exc)


def _record_of(saved: JsonObject) -> TaskRecord:
    created_at, last_updated_at = times(saved)
    return TaskRecord(
        task_id=saved["task_id"],
        status=saved["status"],
        status_message=saved.get("status_message"),
        created_at=created_at,
        last_updated_at=last_updated_at,
        ttl_ms=saved.get("ttl_ms"),
        poll_interval_ms=saved["poll_interval_ms"],
        input_requests=saved.get("input_requests") or {},
        result=saved.get("result"),
        error=saved.get("error"),
        used_keys=set(saved.get("used_keys") or ()),
        tool=saved.get("tool") or "",
        arguments=saved.get("arguments") or {},
        capabilities=saved.get("capabilities"),
    )


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


def task_ref(task_id: str) -> str:
    """A task's name for logs: 8 hex digits of its id's SHA-256, enough to tell tasks apart in a
    log, nothing to call the task with."""
    return hashlib.sha256(task_id.encode()).hexdigest()[:8]

"""One worker holding 1,000 to 10,000 active tasks: schedule keeping, CPU, memory, writes, push latency.

    .venv/bin/python bench/worker.py [--tasks 1000,5000,10000] [--warmup 10] [--measure 30]
    .venv/bin/python bench/worker.py --database-url postgres://postgres@127.0.0.1:5432/bench_worker
    .venv/bin/python bench/worker.py --tasks 10000 --no-push --py-spy     # where the window's CPU went

For each task count N, in fresh processes:

1. populate: a new database (SQLite in a temp dir, or the PostgreSQL database named in
   --database-url, dropped and created), migrated, with --servers McpServer rows (modern, tasks,
   no listen) pointing at bench/minimal_server.py and N working RemoteTask rows (pollIntervalMs
   5000, the mirror already equal to what the server answers, except a --stale fraction whose
   first poll must write). The rows start leased to a placeholder so the worker holds nothing.
2. run, pinned to the first core (the server gets the last one): tasksapp.engine.worker.Worker
   runs in-process, exactly as `manage.py worker --no-listen` would, with the default settings
   (MCP_POLL_JITTER_PERCENT 10, lease 30 s, 256 polls in flight). After --baseline seconds holding
   nothing, the placeholder leases are released; the worker claims all N and polls them. The
   window opens --warmup seconds after the release, and not before every task was polled once
   and the stale rows were written (the first cycle is one burst of N polls); it lasts --measure
   seconds. Afterwards, in the same process, the CPU ratio: --rounds alternate rounds of
   --round-seconds, the worker polling, then the worker paused (its schedule shifted by the pause,
   so it resumes at its pace) while a bare aiohttp.ClientSession loop makes tasks/get POSTs (the
   body and headers the worker sent, the same task ids) at the rate the worker just had. Worker
   and bare loop so see the same machine; a neighbour's burst lands on both sides.
3. push: the reference server (python -m tasksapp.demoserver) in a subprocess, --push-tasks
   slow_count tasks started through services.call_start, a worker with listen streams, and the
   time from each change on the server (its lastUpdatedAt) to the commit of the mirror row that
   holds it (a post_save receiver on RemoteTask's snapshot writes, timed by transaction.on_commit:
   one per change, whatever the timeline folds) and to the task.changed message the commit
   publishes (the k-th message for a task pairs with its k-th commit).

Figures:
- polls/s achieved in the window, against N / 5 s scheduled;
- scheduling lag: due time -> the request handed to the HTTP transport (a wrapping transport
  reads the task's due time; "engine lag" is the worker's own stats.lags, taken when a poll
  gets its in-flight slot);
- CPU: time.process_time() of the worker's process (all threads) over the window / polls, and
  of the bare loop; the event-loop thread's share is shown too;
- memory: RSS (/proc/self/statm) with N tracked minus RSS with 0, per task; minus the bounded
  stats.lags list and this benchmark's own arrays; and the tracked structures' own size
  (sys.getsizeof over the task dict, heap, remote-id maps and what they hold);
- writes: every INSERT/UPDATE/DELETE the worker's database thread sent during the window
  (a connection.execute_wrapper), by table and purpose, and a row-level check (no TaskEvent
  created, no RemoteTask whose last_seen_at moved);
- what delays polls: statements over 10 ms and garbage collections (gc.callbacks) in the window,
  and how many late polls (over 50 ms) were sent within 0.5 s after one of them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections import Counter
from pathlib import Path
from typing import Any, LiteralString
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HOLDER = "bench-placeholder"
WORKER = "bench-worker"
INTERVAL_S = 5.0
TARGET_LAG_P99_MS, TARGET_CPU_RATIO, TARGET_BYTES, TARGET_PUSH_P50_MS = 250.0, 1.5, 5 * 1024, 20.0


# --- shared helpers ---------------------------------------------------------------------------


def django_setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def proc_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) used so far by other processes, from /proc."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def quantile(values: list[float] | array[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def emit(result: dict[str, Any]) -> None:
    print("RESULT " + json.dumps(result), flush=True)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- stage 1: populate ------------------------------------------------------------------------


def populate(args: argparse.Namespace) -> None:
    django_setup()
    from datetime import timedelta

    from django.core.management import call_command
    from django.utils import timezone

    from bench import minimal_server as ms
    from tasksapp.models import McpServer, RemoteTask

    started = time.monotonic()
    call_command("migrate", verbosity=0)
    servers = McpServer.objects.bulk_create(
        McpServer(name=f"bench-{i}", url=args.url, era="modern", tasks_supported=True, listen_supported=False)
        for i in range(args.servers)
    )
    lease_until = timezone.now() + timedelta(days=1)
    stale_every = round(1 / args.stale) if args.stale > 0 else 0
    batch: list[RemoteTask] = []
    for i in range(args.n):
        task = RemoteTask(
            server=servers[i % len(servers)],
            tool_name="bench",
            status="working",
            status_message="seeded" if stale_every and i % stale_every == 0 else ms.STATUS_MESSAGE,
            poll_interval_ms=ms.POLL_INTERVAL_MS,
            ttl_ms=None,
            leased_by=HOLDER,
            lease_until=lease_until,
        )
        task.set_remote_id(f"{i:06d}-{secrets.token_urlsafe(32)}")  # unique, as long as real ids
        batch.append(task)
        if len(batch) == 1000:
            RemoteTask.objects.bulk_create(batch)
            batch = []
    RemoteTask.objects.bulk_create(batch)
    emit({"populated": args.n, "seconds": time.monotonic() - started})


# --- stage 2: run -----------------------------------------------------------------------------


class SqlCounter:
    """An execute_wrapper on the worker's database thread: every statement, writes by purpose."""

    def __init__(self) -> None:
        self.writes: Counter[str] = Counter()
        self.rows: Counter[str] = Counter()
        self.reads = 0
        self.slow: list[tuple[float, float, str]] = []  # (monotonic end, seconds, kind) over 10 ms
        self.seconds = 0.0  # inside execute(), commits excluded

    def install(self) -> None:
        from django.db import connection

        connection.execute_wrappers.append(self)

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        started = time.monotonic()
        result = execute(sql, params, many, context)
        ended = time.monotonic()
        self.seconds += ended - started
        kind = _write_kind(sql)
        if ended - started > 0.010:
            self.slow.append((ended, ended - started, kind or "SELECT " + _table_of(sql)))
        if kind is None:
            self.reads += 1
        else:
            self.writes[kind] += 1
            self.rows[kind] += max(int(getattr(context["cursor"], "rowcount", 0) or 0), 0)
        return result

    def snapshot(self) -> dict[str, Any]:
        return {"writes": dict(self.writes), "rows": dict(self.rows), "reads": self.reads}


def _table_of(sql: str) -> str:
    after = sql.split(" FROM ", 1)[-1]
    return after.split('"')[1] if '"' in after else "?"


def _write_kind(sql: str) -> str | None:
    text = sql.lstrip()
    verb = text[:6].upper()
    if verb not in ("UPDATE", "INSERT", "DELETE"):
        return None
    table = text.split('"')[1] if '"' in text else "?"
    if verb == "UPDATE" and table == "tasksapp_remotetask":
        # store.claim/release set leased_by first, store.renew only lease_until; a save() sets every column.
        assignments = text.split(" SET ", 1)[-1].split(" WHERE ", 1)[0]
        if assignments.startswith('"leased_by"') and assignments.count(" = ") == 2:
            return "UPDATE tasksapp_remotetask (claim/release lease)"
        if assignments.startswith('"lease_until"') and assignments.count(" = ") == 1:
            return "UPDATE tasksapp_remotetask (renew lease)"
        if assignments.startswith('"last_confirmed_at"') and assignments.count(" = ") == 1:
            # store.confirm: "last confirmed" for the polled tasks, in bulk once a heartbeat (issue 8)
            return "UPDATE tasksapp_remotetask (confirmed, per beat)"
        return "UPDATE tasksapp_remotetask (mirror)"
    return f"{verb} {table}"


MIRROR_KINDS = (
    "UPDATE tasksapp_remotetask (mirror)",
    "INSERT tasksapp_taskevent",
    "INSERT tasksapp_inputrequest",
)


class GcPauses:
    """Every cyclic-garbage collection in this process: (monotonic end, seconds, generation)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float, int]] = []
        self._started = 0.0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append((time.monotonic(), time.perf_counter() - self._started, info["generation"]))


class LagProbe:
    """Wraps the worker's HTTP transport: due time -> request handed to the transport, per poll."""

    def __init__(self) -> None:
        self.lags: array[float] = array("d")
        self.sent: array[float] = array("d")
        self.by_remote_id: dict[str, Any] | None = None
        self.sample: tuple[dict[str, str], bytes] | None = None  # one tasks/get as the worker sent it
        self.first_seen: set[str] | None = set()  # remote ids polled at least once, until the window

    def transport(self) -> Any:
        import httpx

        from tasksapp.mcpclient.client import default_transport

        probe, inner = self, default_transport()

        class ProbeTransport(httpx.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                if probe.by_remote_id is not None:
                    task = probe.by_remote_id.get(request.headers.get("mcp-name", ""))
                    if task is not None:
                        now = time.monotonic()
                        probe.lags.append(now - task.due)
                        probe.sent.append(now)
                elif probe.first_seen is not None:
                    probe.first_seen.add(request.headers.get("mcp-name", ""))
                    if probe.sample is None:
                        probe.sample = (dict(request.headers), request.content)
                return await inner.handle_async_request(request)

            async def aclose(self) -> None:
                await inner.aclose()

        return ProbeTransport()


def tracked_bytes(worker: Any) -> int:
    """sys.getsizeof over what the worker keeps per task (each object counted once)."""
    seen: set[int] = set()

    def size(obj: Any) -> int:
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        return sys.getsizeof(obj)

    total = size(worker.tasks) + size(worker.queue.entries)
    for pk, task in worker.tasks.items():
        total += size(pk) + size(task) + size(task.remote_id) + size(task.due) + size(task.ttl_deadline)
        total += size(task.poll_interval_ms)
        if task.fingerprint is not None:
            total += size(task.fingerprint) + sum(size(part) for part in task.fingerprint)
    for entry in worker.queue.entries:
        total += size(entry) + sum(size(part) for part in entry)
    for server in worker.pool.servers.values():
        total += size(server.remote_to_pk)
    return total


def release_placeholder() -> int:
    from tasksapp.models import RemoteTask

    return RemoteTask.objects.filter(leased_by=HOLDER).update(leased_by="", lease_until=None)


def mirror_state(since: Any = None) -> dict[str, Any]:
    """Run on the worker's database thread, so every write queued before it has happened."""
    from django.utils import timezone

    from tasksapp.models import RemoteTask, TaskEvent

    seen = RemoteTask.objects.filter(last_seen_at__gte=since).count() if since else 0
    return {"now": timezone.now(), "events": TaskEvent.objects.count(), "seen_since": seen}


async def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    from asgiref.sync import sync_to_async

    from tasksapp.engine.worker import Worker

    def db(fn: Any) -> Any:
        return sync_to_async(fn, thread_sensitive=True)

    sql, probe, collections = SqlCounter(), LagProbe(), GcPauses()
    if args.gc_freeze:
        import httpx_aiohttp  # noqa: F401 (imported by the first McpClient otherwise: freeze it too)

        gc.collect()
        gc.freeze()  # what `manage.py worker` could do once Django and the engine are imported
    await db(sql.install)()
    worker = Worker(name=WORKER, listen=False, transport_factory=probe.transport)
    hard_stop = args.baseline + args.warmup_limit + args.warmup + args.measure + 30
    hard_stop += 2 * args.rounds * args.round_seconds + 4 * args.rounds + args.round_seconds
    runner = asyncio.create_task(worker.run(duration=hard_stop))
    await asyncio.sleep(args.baseline)
    rss0 = rss_bytes()
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start(args.tracemalloc)
    released = time.monotonic()
    await db(release_placeholder)()
    stale = len(range(0, args.n, round(1 / args.stale))) if args.stale > 0 else 0
    while (len(probe.first_seen or ()) < args.n or worker.stats.changes < stale) and not runner.done():
        if time.monotonic() - released > args.warmup_limit:
            raise SystemExit(f"the worker did not claim and poll {args.n} tasks in {args.warmup_limit} s")
        await asyncio.sleep(0.02)
    first_cycle = time.monotonic() - released
    probe.first_seen = None
    await asyncio.sleep(max(0.0, released + args.warmup - time.monotonic()))

    before_rows = await db(mirror_state)()
    window_start = before_rows["now"]
    spy = _start_py_spy(args) if args.py_spy else None
    a = _snapshot(worker, sql, args.server_pids)
    probe.by_remote_id = {task.remote_id: task for task in worker.tasks.values()}
    await asyncio.sleep(args.measure)
    b = _snapshot(worker, sql, args.server_pids)
    probe.by_remote_id = None
    after_rows = await db(mirror_state)(window_start)
    structure = tracked_bytes(worker)
    traced = _tracemalloc_report(args) if args.tracemalloc else None
    lags_list_bytes = sys.getsizeof(worker.stats.lags) + 24 * len(worker.stats.lags)
    engine_lags = list(worker.stats.lags)[a["lag_samples"] : b["lag_samples"]]
    stats = worker.stats
    if spy:
        _print_py_spy(*spy, args)

    seconds = b["wall"] - a["wall"]
    polls = b["polls"] - a["polls"]
    writes = Counter(b["sql"]["writes"])
    writes.subtract(a["sql"]["writes"])
    rows = Counter(b["sql"]["rows"])
    rows.subtract(a["sql"]["rows"])
    own_bytes = 2 * probe.lags.buffer_info()[1] * probe.lags.itemsize
    slow = [(round(end - a["wall"], 3), round(1000 * took, 1), kind) for end, took, kind in sql.slow]
    slow = [entry for entry in slow if 0 <= entry[0] <= b["wall"] - a["wall"]]
    pauses = [(end, took, gen) for end, took, gen in collections.pauses if a["wall"] <= end <= b["wall"]]
    gc_by_gen = {
        str(gen): {
            "count": sum(1 for p in pauses if p[2] == gen),
            "max_ms": 1000 * max((p[1] for p in pauses if p[2] == gen), default=0.0),
            "total_ms": 1000 * sum(p[1] for p in pauses if p[2] == gen),
        }
        for gen in (0, 1, 2)
    }
    slow += [
        (round(end - a["wall"], 3), round(1000 * took, 1), f"gc gen {gen}")
        for end, took, gen in pauses
        if took > 0.010
    ]
    dump = None
    if args.dump_lags:
        sent = [round(t - a["wall"], 4) for t in probe.sent]
        dump = {"sent_s": sent, "lag_ms": [round(1000 * x, 2) for x in probe.lags], "slow_sql": slow}
    rss_delta = b["rss"] - rss0
    result = {
        "n": args.n,
        "servers": args.servers,
        "database": args.database,
        "first_cycle_s": first_cycle,
        "window_s": seconds,
        "polls": polls,
        "scheduled_per_s": args.n / INTERVAL_S,
        "achieved_per_s": polls / seconds,
        "errors": b["errors"] - a["errors"],
        "changes_total": stats.changes,
        "lag_ms": _dist([x * 1000 for x in probe.lags]),
        "engine_lag_ms": _dist([x * 1000 for x in engine_lags]),
        "engine_lag_capped": len(stats.lags) >= 100_000,
        "cpu_s": b["cpu"] - a["cpu"],
        "cpu_loop_thread_s": b["thread_cpu"] - a["thread_cpu"],
        "cpu_user_s": b["user"] - a["user"],
        "cpu_sys_s": b["sys"] - a["sys"],
        "cpu_ms_per_poll": 1000 * (b["cpu"] - a["cpu"]) / max(polls, 1),
        "server_cpu_util": (b["server_cpu"] - a["server_cpu"]) / seconds,
        "core_busy_util": (b["core_busy"] - a["core_busy"]) / seconds,
        "others_on_core_util": max(0.0, (b["core_busy"] - a["core_busy"]) - (b["cpu"] - a["cpu"])) / seconds,
        "traced_per_task": traced / args.n if traced is not None else None,
        "rss0_mb": rss0 / 2**20,
        "rss_start_window_mb": a["rss"] / 2**20,
        "rss_end_mb": b["rss"] / 2**20,
        "rss_per_task": rss_delta / args.n,
        "rss_per_task_adjusted": (rss_delta - lags_list_bytes - own_bytes) / args.n,
        "structure_per_task": structure / args.n,
        "writes": {k: v for k, v in writes.items() if v},
        "write_rows": {k: v for k, v in rows.items() if v},
        "reads": b["sql"]["reads"] - a["sql"]["reads"],
        "slow_sql": slow,
        "gc": gc_by_gen,
        "dump": dump,
        "lag_near_slow_sql": _lag_near(probe, slow, a["wall"]),
        "mirror_writes": sum(writes.get(k, 0) for k in MIRROR_KINDS),
        "events_created": after_rows["events"] - before_rows["events"],
        "rows_seen_moved": after_rows["seen_since"],
    }
    del engine_lags
    assert probe.sample is not None
    result.update(await interleaved(args, worker, probe.sample))
    worker.stop()
    await runner
    return result


# --- the worker beside a bare aiohttp loop, in alternate rounds -------------------------------

FAR = 1.0e6  # seconds: a paused worker's schedule is moved this far ahead, then back


class Pause:
    """Stops a running Worker from starting polls, and resumes it with its schedule intact: every due
    time moves on by the length of the pause, so it resumes at its own pace, with no catch-up burst."""

    def __init__(self, worker: Any) -> None:
        self.worker, self.limit, self.since = worker, worker.max_in_flight, 0.0

    async def __aenter__(self) -> None:
        self.worker.max_in_flight = 0
        while self.worker.polls_in_flight:  # noqa: ASYNC110 -- the worker's own set; no event to wait on
            await asyncio.sleep(0.002)
        self.worker.shift_schedule(FAR)
        self.worker.max_in_flight = self.limit
        self.since = time.monotonic()

    async def __aexit__(self, *exc: object) -> None:
        self.worker.shift_schedule(time.monotonic() - self.since - FAR)


def _cpu() -> tuple[float, float]:
    return time.process_time(), time.thread_time()


async def interleaved(
    args: argparse.Namespace, worker: Any, sample: tuple[dict[str, str], bytes]
) -> dict[str, Any]:
    """CPU per poll of the worker and per request of a bare aiohttp loop, measured in alternate short
    rounds (worker, bare, worker, bare, ...) so both see the same machine: a neighbour's burst lands
    on both sides. The bare loop runs while the worker is paused, at the rate the worker just had."""
    bare = BareLoop(args, sample)
    await bare.open()
    rounds: list[dict[str, float]] = []
    try:
        async with Pause(worker):
            pass  # the first pause waits for polls in flight: both sides then start from rest
        for _ in range(args.rounds):
            polls0, (cpu0, loop0), t0 = worker.stats.polls, _cpu(), time.monotonic()
            await asyncio.sleep(args.round_seconds)
            polls, (cpu1, loop1), seconds = worker.stats.polls - polls0, _cpu(), time.monotonic() - t0
            async with Pause(worker):
                done = await bare.round(rate=polls / seconds, seconds=args.round_seconds)
            rounds.append(
                {
                    "polls": polls,
                    "worker_cpu_s": cpu1 - cpu0,
                    "worker_loop_cpu_s": loop1 - loop0,
                    "bare_requests": done["requests"],
                    "bare_cpu_s": done["cpu_s"],
                    "bare_loop_cpu_s": done["loop_cpu_s"],
                    "bare_bad": done["bad"],
                }
            )
        profile = await profile_round(args, worker) if args.cprofile else None
    finally:
        await bare.close()
    total = {key: sum(r[key] for r in rounds) for key in rounds[0]}
    worker_ms = 1000 * total["worker_cpu_s"] / max(total["polls"], 1)
    bare_ms = 1000 * total["bare_cpu_s"] / max(total["bare_requests"], 1)
    bare_loop_ms = 1000 * total["bare_loop_cpu_s"] / max(total["bare_requests"], 1)
    per_round = sorted(
        (r["worker_cpu_s"] / max(r["polls"], 1)) / (r["bare_cpu_s"] / max(r["bare_requests"], 1))
        for r in rounds
        if r["bare_cpu_s"] > 0
    )
    return {
        "rounds": rounds,
        "interleaved_cpu_ms_per_poll": worker_ms,
        "bare": {
            "requests": int(total["bare_requests"]),
            "seconds": args.rounds * args.round_seconds,
            "cpu_s": total["bare_cpu_s"],
            "cpu_ms_per_request": bare_ms,
            "loop_cpu_ms_per_request": bare_loop_ms,
            "bad_answers": int(total["bare_bad"]),
        },
        "cpu_ratio": worker_ms / bare_ms,
        # The bare rounds' process CPU includes the paused worker's housekeeping (heartbeat, claims, in
        # the database thread); this ratio counts only the bare loop's own thread: the stricter figure.
        "cpu_ratio_strict": worker_ms / bare_loop_ms,
        "cpu_ratio_rounds": {
            "min": per_round[0],
            "median": per_round[len(per_round) // 2],
            "max": per_round[-1],
        },
        "profile": profile,
    }


async def profile_round(args: argparse.Namespace, worker: Any) -> list[str]:
    """cProfile of the event-loop thread over one more worker round (not counted in the CPU figures)."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    await asyncio.sleep(args.round_seconds)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(args.profile_lines)
    return [line for line in text.getvalue().splitlines() if line.strip()]


def _lag_near(probe: LagProbe, slow: list[tuple[float, float, str]], origin: float) -> dict[str, Any]:
    """How many polls with over 50 ms of lag were sent within 0.5 s after a slow statement or GC ended."""
    ends = sorted(origin + end for end, _, _ in slow)
    late = [(sent, lag) for sent, lag in zip(probe.sent, probe.lags, strict=True) if lag > 0.050]
    near = sum(1 for sent, _ in late if any(0 <= sent - end <= 0.5 for end in ends))
    return {"late_polls": len(late), "after_slow_sql": near}


def _snapshot(worker: Any, sql: SqlCounter, server_pids: list[int]) -> dict[str, Any]:
    times = os.times()
    return {
        "wall": time.monotonic(),
        "cpu": time.process_time(),
        "thread_cpu": time.thread_time(),
        "user": times.user,
        "sys": times.system,
        "polls": worker.stats.polls,
        "errors": worker.stats.errors,
        "lag_samples": len(worker.stats.lags),
        "rss": rss_bytes(),
        "sql": sql.snapshot(),
        "server_cpu": proc_cpu(server_pids),
        "core_busy": core_busy(),
    }


def core_busy() -> float:
    """CPU seconds the cores this process may run on spent busy (any process), from /proc/stat."""
    cores = {f"cpu{c}" for c in os.sched_getaffinity(0)}
    busy = 0
    with open("/proc/stat") as stat:
        for line in stat:
            fields = line.split()
            if fields[0] in cores:
                values = [int(v) for v in fields[1:9]]
                busy += sum(values) - values[3] - values[4]  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def _tracemalloc_report(args: argparse.Namespace) -> int:
    import tracemalloc

    snapshot = tracemalloc.take_snapshot()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    log(
        f"tracemalloc: {current / 2**20:.1f} MiB allocated since the release still live (peak "
        f"{peak / 2**20:.1f} MiB); largest sources:"
    )
    for stat in snapshot.statistics("traceback" if args.tracemalloc > 1 else "lineno")[: args.profile_lines]:
        where = " <- ".join(f"{'/'.join(Path(f.filename).parts[-2:])}:{f.lineno}" for f in stat.traceback)
        print(f"  {stat.size / 1024:9.0f} KiB {stat.count:8d} blocks  {where}", file=sys.stderr)
    return current


def _dist(values: list[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "p50": quantile(values, 0.50),
        "p99": quantile(values, 0.99),
        "max": max(values) if values else None,
    }


def _start_py_spy(args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], Path]:
    """Sample this process (every thread) from outside for the window; py-spy runs on the server's core."""
    out = Path(tempfile.gettempdir()) / f"bench-worker-{args.n}.pyspy.txt"
    command = [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(os.getpid())]
    command += ["--duration", str(round(args.measure)), "--rate", "250", "--format", "raw", "--threads"]
    command += ["--nonblocking", "--output", str(out)]
    others = set(range(os.cpu_count() or 1)) - os.sched_getaffinity(0)
    spy = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_pin(others or None)
    )
    return spy, out


LAYERS = (  # matched against py-spy's "function (path:line)" frames, first match wins
    ("ProbeTransport", "this benchmark's lag probe"),
    ("(worker.py:", None),  # this benchmark's own frames: the event loop's callers
    ("httpx_aiohttp/", "httpx-aiohttp"),
    ("(httpx/", "httpx"),
    ("(aiohttp/", "aiohttp (+yarl, multidict)"),
    ("(yarl/", "aiohttp (+yarl, multidict)"),
    ("(multidict/", "aiohttp (+yarl, multidict)"),
    ("tasksapp/engine/", "tasksapp.engine"),
    ("tasksapp/mcpclient/", "tasksapp.mcpclient"),
    ("(tasksapp/", "tasksapp (services, models)"),
    ("(django/", "django"),
    ("(asgiref/", "asgiref"),
)


def _owner(frames: list[str]) -> str:
    """The innermost frame's library or project layer; stdlib and asyncio count for their caller."""
    for frame in reversed(frames):
        for marker, name in LAYERS:
            if marker in frame:
                if name is None:
                    return "asyncio event loop itself"
                return name
    return "other"


def _print_py_spy(spy: subprocess.Popen[bytes], out: Path, args: argparse.Namespace) -> None:
    """Self time by owner and by function, inclusive time by function, from py-spy's raw stacks."""
    try:
        spy.wait(timeout=args.measure + 30)
    except subprocess.TimeoutExpired:
        spy.kill()
    if not out.exists():
        log("py-spy wrote nothing (is ptrace allowed here?)")
        return
    by_owner: Counter[str] = Counter()
    by_thread: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in out.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        frames, count = stack.split(";"), int(count_text)
        total += count
        by_thread[frames[0]] += count
        by_owner[_owner(frames[1:])] += count
        self_time[frames[-1]] += count
        for frame in set(frames[1:]):
            inclusive[frame] += count
    log(f"py-spy: {total} samples at 250 Hz over the window (raw stacks in {out})")
    for title, counter, limit in (
        ("threads", by_thread, 5),
        ("self time by owner (stdlib and asyncio calls count for the library that made them)", by_owner, 20),
        ("self time by function", self_time, args.profile_lines),
        ("inclusive time by function", inclusive, args.profile_lines),
    ):
        print(f"  {title}:", file=sys.stderr)
        for name, count in counter.most_common(limit):
            print(f"    {100 * count / max(total, 1):5.1f} %  {name}", file=sys.stderr)


class BareLoop:
    """The fastest Python client making the same calls: aiohttp, the worker's body and headers, the
    same task ids, at the pace the worker had; one session (connections open) for every round."""

    def __init__(self, args: argparse.Namespace, sample: tuple[dict[str, str], bytes]) -> None:
        sent_headers, sent_body = sample
        self.url = args.url
        self.headers = {
            k: v for k, v in sent_headers.items() if k not in ("host", "content-length", "mcp-name")
        }
        self.shape = json.loads(sent_body)
        self.limit = asyncio.Semaphore(256)
        self.bad = 0
        self.sent = 0
        self.task_ids: list[str] = []
        self.session: Any = None

    async def open(self) -> None:
        import aiohttp
        from asgiref.sync import sync_to_async

        from tasksapp.models import RemoteTask

        def remote_ids() -> list[str]:
            return [task.remote_id for task in RemoteTask.objects.only("remote_id_encrypted").order_by("id")]

        self.task_ids = await sync_to_async(remote_ids)()
        connector = aiohttp.TCPConnector(limit=200, limit_per_host=200)
        self.session = aiohttp.ClientSession(connector=connector)
        await asyncio.gather(*(self.one(-1 - i) for i in range(64)))  # open connections, untimed

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def one(self, i: int) -> None:
        async with self.limit:
            task_id = self.task_ids[i % len(self.task_ids)]
            message = {**self.shape, "id": i, "params": {**self.shape["params"], "taskId": task_id}}
            body = json.dumps(message, separators=(",", ":")).encode()
            headers = {**self.headers, "mcp-name": task_id}
            async with self.session.post(self.url, data=body, headers=headers) as response:
                answer = json.loads(await response.read())
            if answer.get("id") != i or answer["result"]["taskId"] != task_id:
                self.bad += 1

    async def round(self, *, rate: float, seconds: float) -> dict[str, Any]:
        in_flight: set[asyncio.Task[None]] = set()
        bad0, (cpu0, loop0), start = self.bad, _cpu(), time.monotonic()
        launched, count = 0, round(rate * seconds)
        while launched < count and time.monotonic() - start < seconds * 3:
            due = min(count, int(rate * (time.monotonic() - start)) + 1)
            for i in range(launched, due):
                job = asyncio.create_task(self.one(self.sent + i))
                in_flight.add(job)
                job.add_done_callback(in_flight.discard)
            launched = due
            await asyncio.sleep(0.005)
        await asyncio.gather(*in_flight)
        cpu1, loop1 = _cpu()
        self.sent += launched
        return {
            "requests": launched,
            "cpu_s": cpu1 - cpu0,
            "loop_cpu_s": loop1 - loop0,
            "bad": self.bad - bad0,
        }


def run_stage(args: argparse.Namespace) -> None:
    django_setup()
    from django.conf import settings

    args.database = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    result = asyncio.run(run_worker(args))
    if dump := result.pop("dump"):
        Path(args.dump_lags.replace("{n}", str(args.n))).write_text(json.dumps(dump))
    emit(result)


# --- stage 3: push ----------------------------------------------------------------------------


def push_stage(args: argparse.Namespace) -> None:
    django_setup()
    from django.conf import settings
    from django.core.management import call_command

    from tasksapp import services

    # The in-memory layer drops messages past 100 per channel; this benchmark reads every one.
    settings.CHANNEL_LAYERS["default"]["CONFIG"] = {"capacity": 100_000, "expiry": 600}
    call_command("migrate", verbosity=0)
    server = services.server_create(name="demo", url=args.url, headers={}, user=None)
    arguments = {"n": args.push_steps, "delay": args.push_delay}
    for _ in range(args.push_tasks):
        services.call_start(server=server, tool="slow_count", arguments=arguments, user=None)
    result = asyncio.run(run_push(args))
    result["database"] = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    emit(result)


async def run_push(args: argparse.Namespace) -> dict[str, Any]:
    from asgiref.sync import sync_to_async
    from channels.layers import get_channel_layer

    from tasksapp import events
    from tasksapp.engine.worker import Worker
    from tasksapp.models import RemoteTask

    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(events.TASKS, channel)
    published: list[tuple[int, float]] = []

    async def follow() -> None:
        while True:
            message = await layer.receive(channel)
            published.append((int(message["id"]), time.time()))

    sql, commits, pings = SqlCounter(), CommitClock(), []

    async def ping_database_thread() -> None:
        """How long a no-op waits for the worker's one database thread: its queue, not the database."""
        while True:
            sent = time.monotonic()
            await sync_to_async(lambda: None, thread_sensitive=True)()
            pings.append(1000 * (time.monotonic() - sent))
            await asyncio.sleep(0.1)

    await sync_to_async(sql.install, thread_sensitive=True)()
    commits.install()
    follower = asyncio.create_task(follow())
    pinger = asyncio.create_task(ping_database_thread())
    worker = Worker(name="bench-push", listen=True)
    limit = args.push_steps * args.push_delay + 30
    runner = asyncio.create_task(worker.run(duration=limit))
    started = time.monotonic()

    def active() -> int:
        return RemoteTask.objects.active().count()

    for _ in range(int(limit * 4)):  # a database condition, checked four times a second
        if runner.done() or not await sync_to_async(active)():
            break
        await asyncio.sleep(0.25)
    await asyncio.sleep(0.5)
    stats = worker.stats
    worker.stop()
    await runner
    follower.cancel()
    pinger.cancel()
    counted = sql.snapshot()
    result = await sync_to_async(push_latencies)(published, commits.rows)
    result.update(
        pushes=stats.pushes,
        polls=stats.polls,
        changes=stats.changes,
        tasks=args.push_tasks,
        seconds=time.monotonic() - started,
        statements=counted["reads"] + sum(counted["writes"].values()),
        sql_seconds=sql.seconds,
        db_thread_wait_ms=_dist(pings),
    )
    return result


class CommitClock:
    """When each snapshot the worker writes commits: (task id, how it came, the server's
    lastUpdatedAt, commit wall time), one per change in commit order.

    Timed here, not from the timeline: a TaskEvent is one per change only when nothing folds, and
    a message-only change within MCP_TIMELINE_COALESCE_MS moves the previous event's
    remote_updated_at to its own while the event keeps its first observed_at.
    """

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, str, float]] = []

    def install(self) -> None:
        from django.db.models.signals import post_save

        from tasksapp.models import RemoteTask

        post_save.connect(self.saved, sender=RemoteTask, weak=False)

    def saved(self, sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
        from django.db import transaction

        if not update_fields or "updated_at_raw" not in update_fields:
            return
        row = (instance.pk, instance.last_seen_via, instance.updated_at_raw)
        transaction.on_commit(lambda: self.rows.append((*row, time.time())))


def push_latencies(
    published: list[tuple[int, float]], commits: list[tuple[int, str, str, float]]
) -> dict[str, Any]:
    """Server change (lastUpdatedAt) -> its commit, and -> the task.changed message that commit
    published: the k-th message for a task matches its k-th snapshot commit."""
    from datetime import UTC, datetime

    from tasksapp.models import TaskEvent

    by_task: dict[int, list[float]] = {}
    for task_id, at in published:
        by_task.setdefault(task_id, []).append(at)
    per_task: dict[int, list[tuple[int, str, str, float]]] = {}
    for commit in commits:
        per_task.setdefault(commit[0], []).append(commit)
    commit_ms: list[float] = []
    published_ms: list[float] = []
    unmatched = 0
    for task_id, task_commits in per_task.items():
        times = by_task.get(task_id, [])
        if len(times) != len(task_commits):
            unmatched += len(task_commits)
            times = []
        for index, (_, via, updated_raw, committed) in enumerate(task_commits):
            if via != "push" or not updated_raw:
                continue
            changed_at = datetime.fromisoformat(updated_raw)
            if changed_at.tzinfo is None:
                changed_at = changed_at.replace(tzinfo=UTC)
            changed = changed_at.timestamp()
            commit_ms.append(1000 * (committed - changed))
            if times:
                published_ms.append(1000 * (times[index] - changed))
    written = [committed for _, via, _, committed in commits if via == "push"]
    gaps = [1000 * (later - earlier) for earlier, later in itertools.pairwise(written)]
    events = TaskEvent.objects.exclude(source="create").values_list("source", flat=True)
    return {
        "changes_by_source": dict(Counter(via for _, via, _, _ in commits)),
        "events_by_source": dict(Counter(events)),
        "gap_ms": _dist(gaps),
        "commit_ms": _dist(commit_ms),
        "published_ms": _dist(published_ms),
        "unmatched_commits": unmatched,
    }


# --- the parent -------------------------------------------------------------------------------


def _pin(cpus: set[int] | None) -> Any:
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def child(
    stage: str, args: argparse.Namespace, env: dict[str, str], cpus: set[int] | None, extra: list[str]
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--stage", stage, "--url", args.url, *extra]
    options = ("servers", "stale", "warmup", "measure", "baseline", "warmup_limit", "profile_lines")
    for option in (*options, "rounds", "round_seconds"):
        cmd += [f"--{option.replace('_', '-')}", str(getattr(args, option))]
    for option in ("push_tasks", "push_steps", "push_delay"):
        cmd += [f"--{option.replace('_', '-')}", str(getattr(args, option))]
    if args.py_spy:
        cmd.append("--py-spy")
    if args.gc_freeze:
        cmd.append("--gc-freeze")
    if args.cprofile:
        cmd.append("--cprofile")
    cmd += ["--tracemalloc", str(args.tracemalloc)]
    if args.dump_lags:
        cmd += ["--dump-lags", args.dump_lags]
    budget = args.baseline + args.warmup_limit + args.warmup + args.measure * 4 + 180
    budget += 3 * args.rounds * args.round_seconds
    done = subprocess.run(
        cmd,
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        timeout=budget,
        preexec_fn=_pin(cpus),
        check=False,
    )
    lines = [line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"stage {stage} failed (exit {done.returncode}); see its output above")
    return dict(json.loads(lines[-1]))


class Database:
    """A fresh database per stage: a SQLite file in a temp dir, or a dropped-and-created PostgreSQL one."""

    def __init__(self, url: str | None, scratch: Path) -> None:
        self.url, self.scratch = url, scratch
        if url:
            parts = urlsplit(url)
            self.name = parts.path.lstrip("/")
            if "bench" not in self.name:
                raise SystemExit(
                    f"--database-url must name a throw-away database ('bench' in its name), not {self.name!r}"
                )
            self.admin = urlunsplit(parts._replace(path="/postgres"))

    def fresh(self, label: str) -> dict[str, str]:
        var_dir = self.scratch / label
        var_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
        env.update(DASHBOARD_VAR_DIR=str(var_dir), LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1")
        if self.url:
            self._sql("DROP DATABASE IF EXISTS {} WITH (FORCE)", "CREATE DATABASE {}")
            env["DATABASE_URL"] = self.url
        else:
            env["DATABASE_URL"] = f"sqlite:///{var_dir / 'db.sqlite3'}"
        return env

    def drop(self) -> None:
        if self.url:
            self._sql("DROP DATABASE IF EXISTS {} WITH (FORCE)")

    def _sql(self, *templates: LiteralString) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.admin, autocommit=True) as conn:
            for template in templates:
                conn.execute(sql.SQL(template).format(sql.Identifier(self.name)))


def start_process(argv: list[str], cpus: set[int] | None, ready: str) -> tuple[subprocess.Popen[str], str]:
    """Start a server and wait (30 s at most) for its ready line: a port, or a line starting with `ready`."""
    process = subprocess.Popen(
        argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=_pin(cpus)
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:  # keeps draining stdout after the ready line, so the pipe never fills
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 30
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            break
        if not line:
            break
        if line.startswith(ready) or (not ready and line.strip().isdigit()):
            return process, line.strip()
    process.kill()
    raise SystemExit(f"{argv[1]} did not start")


def stop_process(process: subprocess.Popen[str]) -> None:
    if process.stdin:
        process.stdin.close()
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


def orchestrate(args: argparse.Namespace) -> None:
    ncpu = os.cpu_count() or 1
    worker_cpus = server_cpus = None
    if not args.no_pin and ncpu >= 2:
        worker_cpus, server_cpus = {0}, {ncpu - 1}
    scratch = Path(tempfile.mkdtemp(prefix="bench-worker-"))
    database = Database(args.database_url, scratch)
    results: list[dict[str, Any]] = []
    push: dict[str, Any] | None = None
    server = None
    try:
        if args.tasks:
            server_argv = [
                sys.executable,
                str(ROOT / "bench" / "minimal_server.py"),
                "--processes",
                str(args.server_processes),
            ]
            server, port = start_process(server_argv, server_cpus, "")
            args.url = f"http://127.0.0.1:{port}/mcp"
            pids = [server.pid, *_children(server.pid)]
            for n in args.tasks:
                env = database.fresh(f"n{n}")
                log(f"N={n}: populating")
                filled = child("populate", args, env, None, ["--n", str(n)])
                log(f"N={n}: populated in {filled['seconds']:.1f} s; running the worker")
                extra = ["--n", str(n), "--server-pids", ",".join(map(str, pids))]
                result = child("run", args, env, worker_cpus, extra)
                results.append(result)
                log(f"N={n}: {result['achieved_per_s']:.0f} polls/s, p99 {_ms(result['lag_ms']['p99'])} ms")
        if args.push_tasks:
            env = database.fresh("push")
            demo, line = start_process(
                [sys.executable, "-m", "tasksapp.demoserver", "--port", "0", "--log-level", "warning"],
                server_cpus,
                "demoserver listening on",
            )
            try:
                args.url = line.rsplit(" ", 1)[-1]
                log(f"push: {args.push_tasks} slow_count tasks on {args.url}")
                push = child("push", args, env, worker_cpus, [])
            finally:
                stop_process(demo)
    finally:
        if server is not None:
            stop_process(server)
        database.drop()
        shutil.rmtree(scratch, ignore_errors=True)
    report(args, results, push)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            return [int(p) for p in children.read().split()]
    except OSError:
        return []


# --- the report -------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def _other_writes(r: dict[str, Any]) -> str:
    kinds = sorted(k for k in r["writes"] if k not in MIRROR_KINDS)
    return "; ".join(
        f"{k.split(' ', 1)[1]}: {r['writes'][k]} ({r['write_rows'].get(k, 0)} rows)" for k in kinds
    )


def _revision() -> str:
    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    dirty = git("status", "--porcelain", "--", "tasksapp", "dashboard")
    return (git("rev-parse", "--short", "HEAD") or "unknown") + (" + uncommitted changes" if dirty else "")


def report(args: argparse.Namespace, results: list[dict[str, Any]], push: dict[str, Any] | None) -> None:
    print()
    database = results[0]["database"] if results else (push or {}).get("database", "n/a")
    print(
        f"Code at {_revision()}; Python {sys.version.split()[0]}, {os.cpu_count()} cores, "
        f"database {database}, "
        f"{args.servers} server row(s); {args.measure:g} s measured after {args.warmup:g} s of warm-up."
    )
    if results:
        print()
        _table(
            [
                "tasks",
                "polls/s sched.",
                "polls/s achieved",
                "lag p50 ms",
                "lag p99 ms",
                "lag max ms",
                "worker CPU ms/poll",
                "interleaved: worker ms/poll",
                "bare aiohttp ms/req",
                "ratio",
                "ratio (strict)",
                "RSS B/task (adj.)",
                "structures B/task",
                "mirror writes",
                "worker core use",
                "others on its core",
                "server CPU",
            ],
            [
                [
                    f"{r['n']:,}",
                    f"{r['scheduled_per_s']:.0f}",
                    f"{r['achieved_per_s']:.0f}",
                    _ms(r["lag_ms"]["p50"]),
                    _ms(r["lag_ms"]["p99"]),
                    _ms(r["lag_ms"]["max"]),
                    f"{r['cpu_ms_per_poll']:.3f}",
                    f"{r['interleaved_cpu_ms_per_poll']:.3f}",
                    f"{r['bare']['cpu_ms_per_request']:.3f}",
                    f"{r['cpu_ratio']:.2f}",
                    f"{r['cpu_ratio_strict']:.2f}",
                    f"{r['rss_per_task']:.0f} ({r['rss_per_task_adjusted']:.0f})",
                    f"{r['structure_per_task']:.0f}",
                    str(r["mirror_writes"]),
                    f"{100 * r['cpu_s'] / r['window_s']:.0f} %",
                    f"{100 * r['others_on_core_util']:.0f} %",
                    f"{100 * r['server_cpu_util']:.0f} %",
                ]
                for r in results
            ],
        )
        print()
        for r in results:
            print(
                f"N={r['n']:,}: first cycle {r['first_cycle_s']:.1f} s; {r['polls']:,} polls in "
                f"{r['window_s']:.1f} s, {r['errors']} errors; engine lag p50/p99 "
                f"{_ms(r['engine_lag_ms']['p50'])}/{_ms(r['engine_lag_ms']['p99'])} ms; "
                f"CPU {r['cpu_s']:.2f} s "
                f"(event-loop thread {r['cpu_loop_thread_s']:.2f}, user {r['cpu_user_s']:.2f}, "
                f"sys {r['cpu_sys_s']:.2f}); one core would do {1000 / r['cpu_ms_per_poll']:,.0f} polls/s "
                f"({INTERVAL_S * 1000 / r['cpu_ms_per_poll']:,.0f} tasks at 5 s); "
                f"RSS {r['rss0_mb']:.1f} -> {r['rss_end_mb']:.1f} MiB"
                + (f"; tracemalloc {r['traced_per_task']:.0f} B/task" if r.get("traced_per_task") else "")
            )
            print(
                f"  database in the window: {r['reads']} SELECTs; writes: {_other_writes(r) or 'none'}; "
                f"TaskEvents created {r['events_created']}, "
                f"rows whose last_seen_at moved {r['rows_seen_moved']}; "
                f"bare loop {r['bare']['requests']:,} requests in {r['bare']['seconds']:.1f} s, "
                f"{r['bare']['bad_answers']} bad answers"
            )
            spread = r["cpu_ratio_rounds"]
            print(
                f"  CPU ratio over {len(r['rounds'])} alternate rounds of {args.round_seconds:g} s a side: "
                f"{r['cpu_ratio']:.2f}x (per round min {spread['min']:.2f}, median {spread['median']:.2f}, "
                f"max {spread['max']:.2f}); strict (bare loop's own thread only) {r['cpu_ratio_strict']:.2f}x"
            )
            if r.get("profile"):
                print("  cProfile of the event-loop thread over one more worker round (by own time):")
                for line in r["profile"][: args.profile_lines + 8]:
                    print("    " + line)
            slowest = Counter(kind for _, _, kind in r["slow_sql"])
            worst = {kind: max(ms for _, ms, k in r["slow_sql"] if k == kind) for kind in slowest}
            near = r["lag_near_slow_sql"]
            collected = ", ".join(
                f"gen {g}: {v['count']} (max {v['max_ms']:.0f} ms, total {v['total_ms']:.0f} ms)"
                for g, v in r["gc"].items()
            )
            print(f"  garbage collections in the window: {collected}")
            print(
                "  statements and collections over 10 ms: "
                + ("; ".join(f"{k}: {c} (max {worst[k]:.0f} ms)" for k, c in slowest.items()) or "none")
                + f"; polls over 50 ms late: {near['late_polls']:,}, of which {near['after_slow_sql']:,} "
                "were sent within 0.5 s after one of those"
            )
        ordered = sorted(results, key=lambda r: r["n"])
        for small, large in itertools.pairwise(ordered):
            grown = (large["rss_end_mb"] - large["rss0_mb"]) - (small["rss_end_mb"] - small["rss0_mb"])
            print(
                f"marginal RSS from {small['n']:,} to {large['n']:,} tasks: "
                f"{grown * 2**20 / (large['n'] - small['n']):.0f} B/task"
            )
    if push:
        print()
        print(
            f"Push: {push['tasks']} slow_count tasks ({args.push_steps} steps of {args.push_delay:g} s) on "
            f"the reference server; {push['pushes']} pushes; changes by source "
            f"{push['changes_by_source']}; timeline events by source {push['events_by_source']}"
        )
        changes = max(push["changes"], 1)
        wait = push["db_thread_wait_ms"]
        print(
            f"  {push['changes']} changes written with {push['statements']} statements "
            f"({push['statements'] / changes:.1f} per change, "
            f"{1000 * push['sql_seconds'] / changes:.2f} ms of SQL per change, commits not included); "
            "a no-op waited for the database thread "
            f"p50 {_ms(wait['p50'])} ms, p99 {_ms(wait['p99'])} ms; consecutive push commits were "
            f"p50 {_ms(push['gap_ms']['p50'])} ms apart"
        )
        for label, key in (
            ("row committed", "commit_ms"),
            ("commit published (task.changed received)", "published_ms"),
        ):
            d = push[key]
            print(
                f"  server change -> {label}: p50 {_ms(d['p50'])} ms, p99 {_ms(d['p99'])} ms, "
                f"max {_ms(d['max'])} ms ({d['count']} pushed changes)"
            )
        if push["unmatched_commits"]:
            print(f"  {push['unmatched_commits']} commits not paired with a message (tasks left out)")
    print()
    checks: list[list[str]] = []
    for r in results:
        p99 = r["lag_ms"]["p99"]
        scope = "" if r["n"] == 10_000 else " (stated for 10,000)"
        quiet = r["mirror_writes"] == 0 and r["events_created"] == 0 and r["rows_seen_moved"] == 0
        checks += [
            [
                f"{r['n']:,}",
                f"p99 lag < {TARGET_LAG_P99_MS:g} ms{scope}",
                f"{_ms(p99)} ms",
                _verdict(p99 is not None and p99 < TARGET_LAG_P99_MS),
            ],
            [
                f"{r['n']:,}",
                f"CPU per poll <= {TARGET_CPU_RATIO:g}x bare aiohttp",
                f"{r['cpu_ratio']:.2f}x",
                _verdict(r["cpu_ratio"] <= TARGET_CPU_RATIO),
            ],
            [
                f"{r['n']:,}",
                "memory < 5 KB per task (RSS, adjusted)",
                f"{r['rss_per_task_adjusted']:.0f} B",
                _verdict(r["rss_per_task_adjusted"] < TARGET_BYTES),
            ],
            [
                f"{r['n']:,}",
                "no database write when a poll changed nothing",
                f"{r['mirror_writes']} mirror writes, {r['events_created']} events",
                _verdict(quiet),
            ],
        ]
    if push:
        p50 = push["commit_ms"]["p50"]
        checks.append(
            [
                "push",
                f"p50 change -> committed row < {TARGET_PUSH_P50_MS:g} ms",
                f"{_ms(p50)} ms",
                _verdict(p50 is not None and p50 < TARGET_PUSH_P50_MS),
            ]
        )
    _table(["tasks", "target", "measured", "verdict"], checks)
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": results, "push": push}, indent=2, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tasks", default="1000,5000,10000", help="task counts, comma-separated ('' for none)"
    )
    parser.add_argument(
        "--servers", type=int, default=1, help="McpServer rows the tasks are spread over (default 1)"
    )
    parser.add_argument(
        "--warmup", type=float, default=10, help="seconds after the release not measured (default 10)"
    )
    parser.add_argument("--measure", type=float, default=30, help="seconds measured (default 30)")
    parser.add_argument("--baseline", type=float, default=2, help="seconds holding no task first (default 2)")
    parser.add_argument(
        "--warmup-limit", type=float, default=60, help="give up if the first cycle takes longer"
    )
    parser.add_argument(
        "--stale", type=float, default=0.01, help="fraction of rows whose first poll writes (default 0.01)"
    )
    parser.add_argument("--database-url", help="a throw-away PostgreSQL database (dropped, created, dropped)")
    parser.add_argument(
        "--server-processes", type=int, default=1, help="minimal server processes (default 1)"
    )
    parser.add_argument(
        "--push-tasks", type=int, default=50, help="slow_count tasks for push latency; 0 skips it"
    )
    parser.add_argument("--push-steps", type=int, default=20, help="slow_count n (default 20)")
    parser.add_argument(
        "--push-delay", type=float, default=0.2, help="slow_count delay, seconds (default 0.2)"
    )
    parser.add_argument("--no-push", action="store_true", help="same as --push-tasks 0")
    parser.add_argument(
        "--py-spy", action="store_true", help="sample the window with py-spy (pip install py-spy)"
    )
    parser.add_argument("--profile-lines", type=int, default=30)
    parser.add_argument(
        "--rounds",
        type=int,
        default=6,
        help="alternate worker / bare-loop rounds for the CPU ratio (default 6)",
    )
    parser.add_argument("--round-seconds", type=float, default=5, help="length of each round (default 5)")
    parser.add_argument(
        "--cprofile",
        action="store_true",
        help="print a cProfile of the event-loop thread over one more round",
    )
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="FRAMES",
        help="trace allocations from the release to the window's end (FRAMES deep; slows the worker)",
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="do not pin worker and server to separate cores"
    )
    parser.add_argument("--json", help="also write every figure to this file")
    parser.add_argument("--gc-freeze", action="store_true", help="experiment: gc.freeze() before the worker")
    parser.add_argument("--dump-lags", help="write (send time, lag) of every poll to FILE ({n} = task count)")
    parser.add_argument("--stage", choices=["populate", "run", "push"], help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--server-pids", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.server_pids = [int(p) for p in args.server_pids.split(",") if p]
    if args.no_push:
        args.push_tasks = 0
    if args.stage == "populate":
        return populate(args)
    if args.stage == "run":
        return run_stage(args)
    if args.stage == "push":
        return push_stage(args)
    args.tasks = [int(n) for n in args.tasks.split(",") if n.strip()]
    if any(n < 1 for n in args.tasks) or args.servers < 1 or args.measure <= 0:
        parser.error("task counts, --servers and --measure must be positive")
    orchestrate(args)


if __name__ == "__main__":
    main()

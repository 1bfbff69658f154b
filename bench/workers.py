"""Several workers sharing many tasks (issue 13 goal 5): do M `manage.py worker` processes keep
N tasks polled at the server's interval, sharing them fairly, as deployed?

    flock /tmp/heavy.lock env PYTHONPATH=$PWD .venv/bin/python bench/workers.py \\
        [--tasks 20000] [--workers 1,2] [--warmup 20] [--measure 30] [--database-url postgres://…/bench_workers]

For each worker count M, in fresh processes: a fresh PostgreSQL database (several workers need one)
populated by bench/worker.py's `populate` stage with N working tasks on bench/minimal_server.py
(pollIntervalMs 5000, so N / 5 polls a second are due), leased to a placeholder; M `manage.py worker
--no-listen --name bench-wK` processes, exactly as docs/deploy.md runs them; then the placeholder's
leases are released and the workers claim the tasks (fair share by lease). After --warmup seconds,
over --measure seconds, from the workers' own heartbeats (the `WorkerHeartbeat` rows the overview
shows) and /proc: polls a second per worker and in all against the N / 5 due, the tasks each holds,
each heartbeat's scheduling-lag p99 (due → sent), poll errors, whether a worker reported itself
behind schedule, and CPU per process (workers, the minimal server).

Everything shares the machine's cores (no pinning): on 2 cores the workers, the minimal server
answering every poll, and PostgreSQL compete, so read the ratio of polls done to polls due.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import minimal_server as ms  # noqa: E402
from bench import worker as single  # noqa: E402

PROBE = """
import json
from tasksapp.models import RemoteTask, WorkerHeartbeat
from django.db.models import Count
beats = list(WorkerHeartbeat.objects.filter(worker__startswith="bench-w", stopped_at__isnull=True).values(
    "worker", "pid", "polls", "poll_errors", "tasks_held", "lag_p99_ms", "behind_since"))
held = dict(RemoteTask.objects.exclude(leased_by="").values_list("leased_by").annotate(n=Count("id")))
print("PROBE " + json.dumps({"beats": beats, "held": held}, default=str))
"""
RELEASE = f"""
from tasksapp.models import RemoteTask
print(RemoteTask.objects.filter(leased_by={single.HOLDER!r}).update(leased_by="", lease_until=None))
"""


def shell(env: dict[str, str], code: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def probe(env: dict[str, str]) -> dict[str, Any]:
    import json

    line = next(line for line in shell(env, PROBE).splitlines() if line.startswith("PROBE "))
    return dict(json.loads(line[6:]))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def populate_args(args: argparse.Namespace, url: str) -> argparse.Namespace:
    """What bench/worker.py's populate stage is given (the rest are its defaults)."""
    return argparse.Namespace(
        url=url, servers=1, stale=0.0, warmup=args.warmup, measure=args.measure, baseline=0, warmup_limit=60,
        profile_lines=30, rounds=0, round_seconds=5, push_tasks=0, push_steps=20, push_delay=0.2,
        py_spy=False, gc_freeze=False, cprofile=False, tracemalloc=0, dump_lags=None,
    )  # fmt: skip


def run(
    args: argparse.Namespace, workers: int, url: str, database: Any, server_pids: list[int]
) -> dict[str, Any]:
    env = database.fresh(f"m{workers}")
    single.log(f"M={workers}: populating {args.tasks} tasks")
    single.child("populate", populate_args(args, url), env, None, ["--n", str(args.tasks)])
    processes = []
    for k in range(workers):
        argv = [sys.executable, "manage.py", "worker", "--no-listen", "--name", f"bench-w{k + 1}"]
        processes.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL))
    try:
        time.sleep(3)  # the workers' start-up (Django, the client), holding nothing yet
        released = int(shell(env, RELEASE).strip().splitlines()[-1])
        single.log(f"M={workers}: released {released} leases; warming up {args.warmup:g} s")
        time.sleep(args.warmup)
        pids = {process.pid: process for process in processes}
        first, cpu0 = probe(env), {pid: cpu_seconds(pid) for pid in [*pids, *server_pids]}
        started = time.monotonic()
        lags: dict[str, list[float]] = {}
        behind: set[str] = set()
        while time.monotonic() - started < args.measure:
            time.sleep(min(5.0, args.measure - (time.monotonic() - started)))
            sample = probe(env)
            for beat in sample["beats"]:
                if beat["lag_p99_ms"] is not None:
                    lags.setdefault(beat["worker"], []).append(float(beat["lag_p99_ms"]))
                if beat["behind_since"]:
                    behind.add(beat["worker"])
        elapsed = time.monotonic() - started
        last, cpu1 = probe(env), {pid: cpu_seconds(pid) for pid in [*pids, *server_pids]}
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
    before = {beat["worker"]: beat for beat in first["beats"]}
    rows = []
    for beat in sorted(last["beats"], key=lambda b: b["worker"]):
        was = before.get(beat["worker"], {"polls": 0, "poll_errors": 0})
        pid = int(beat["pid"])
        rows.append(
            {
                "worker": beat["worker"],
                "polls_per_s": (beat["polls"] - was["polls"]) / elapsed,
                "errors": beat["poll_errors"] - was["poll_errors"],
                "held": last["held"].get(beat["worker"], 0),
                "lag_p99_ms": max(lags.get(beat["worker"], [0.0])),
                "behind": beat["worker"] in behind,
                "cpu": (cpu1.get(pid, 0.0) - cpu0.get(pid, 0.0)) / elapsed,
            }
        )
    server_cpu = sum(cpu1[pid] - cpu0[pid] for pid in server_pids if pid in cpu0 and pid in cpu1) / elapsed
    return {
        "workers": workers,
        "rows": rows,
        "server_cpu": server_cpu,
        "due_per_s": args.tasks * 1000 / ms.POLL_INTERVAL_MS,
    }


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    due = args.tasks * 1000 / ms.POLL_INTERVAL_MS
    print(f"\n{args.tasks} tasks, pollIntervalMs {ms.POLL_INTERVAL_MS}: {due:.0f} polls/s due")
    print(
        "| workers | worker | tasks held | polls/s | lag p99 (max of beats) | behind | errors | CPU (cores) |"
    )
    print("|---:|---|---:|---:|---:|---|---:|---:|")
    for result in results:
        for row in result["rows"]:
            print(
                f"| {result['workers']} | {row['worker']} | {row['held']} | {row['polls_per_s']:.0f} | "
                f"{row['lag_p99_ms']:.0f} ms | {'yes' if row['behind'] else 'no'} | {row['errors']} | "
                f"{row['cpu']:.2f} |"
            )
        done = sum(row["polls_per_s"] for row in result["rows"])
        print(
            f"| {result['workers']} | **all** | {sum(row['held'] for row in result['rows'])} | "
            f"**{done:.0f}** "
            f"({done / result['due_per_s']:.0%} of due) | | | | server {result['server_cpu']:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--warmup", type=float, default=20)
    parser.add_argument("--measure", type=float, default=30)
    parser.add_argument("--server-processes", type=int, default=1)
    parser.add_argument(
        "--database-url",
        default="postgres://postgres@127.0.0.1:5432/bench_workers",
        help="a throw-away database",
    )
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    database = single.Database(args.database_url, scratch)
    argv = [
        sys.executable,
        str(ROOT / "bench" / "minimal_server.py"),
        "--processes",
        str(args.server_processes),
    ]
    server, port = single.start_process(argv, None, "")
    results = []
    try:
        pids = [server.pid, *single._children(server.pid)]
        for workers in [int(m) for m in args.workers.split(",")]:
            results.append(run(args, workers, f"http://127.0.0.1:{port}/mcp", database, pids))
    finally:
        single.stop_process(server)
        database.drop()
        shutil.rmtree(scratch, ignore_errors=True)
    report(results, args)


if __name__ == "__main__":
    main()

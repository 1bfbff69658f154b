"""The PostgreSQL search path: tsvector table, GIN index and triggers from migration 0008,
in a fresh database of this test's own, driven through manage.py like production."""

import json
from collections.abc import Iterator

import psycopg
import pytest

from tests.support.stack import env_for, manage, postgres_database, sql

SCRIPT = """
import json
from django.contrib.auth.models import User
from tasksapp import search
from tasksapp.models import Agent, McpServer, RemoteTask
alice = User.objects.create(username="alice")
server = McpServer.objects.create(name="pg", url="http://127.0.0.1:9/mcp")
def add(tool, remote_id, **fields):
    row = RemoteTask(server=server, tool_name=tool, status="working", **fields)
    row.set_remote_id(remote_id)
    row.save()
    return row.pk
ids = {
    "tool": add("slow_count", "tsk-aaa111"),
    "arguments": add("echo", "tsk-bbb222", arguments={"text": "Zürich weather", "n": 42}),
    "message": add("ask_form", "tsk-ccc333", status_message="Waiting for the contact form"),
    "result": add("rich", "tsk-ddd444", result={"content": [{"type": "text", "text": "backend exploded"}]}),
    "user": add("echo", "tsk-eee555", started_by=alice),
    "agent": add("probe", "tsk-fff666", agent=Agent.objects.create(name="nightly-robot", token_hash="x" * 9)),
}
changed = RemoteTask.objects.get(pk=ids["tool"])
changed.status_message = "counted 5/60"
changed.save(update_fields=["status_message"])
def hits(text):
    return list(search.filtered({"q": text}).order_by("id").values_list("id", flat=True))
out = {"ids": ids}
for text in ["slow", "weather", "42", '"contact form"', "form contact", "exploded", "alice", "echo -alice",
             "counted 60", "-alice", "tsk-aaa111", "aaa111", "type", "content", "robot", "nightly probe"]:
    out[text] = hits(text)
from datetime import timedelta
from django.utils import timezone
now = timezone.now()
for key, seconds in (("tool", 50), ("arguments", 5), ("message", 500)):
    start = now - timedelta(hours=1)
    end = start + timedelta(seconds=seconds)
    RemoteTask.objects.filter(pk=ids[key]).update(created_at=start, finished_at=end)
RemoteTask.objects.filter(pk__in=[ids["result"], ids["user"], ids["agent"]]).update(
    created_at=now - timedelta(days=2)
)
longest = search.ordered(search.filtered({}), search.parse_sort("-duration"))
out["by duration"] = list(longest.values_list("id", flat=True))
print("RESULT " + json.dumps(out))
"""


@pytest.fixture
def database() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test only (a clone of the migrated template)."""
    with postgres_database("search") as url:
        yield url


@pytest.mark.postgres
def test_postgresql_full_text_search_is_indexed_and_follows_changes(database: str) -> None:
    env = env_for(database)
    output = manage(env, "shell", "-c", SCRIPT)
    found = json.loads(output.split("RESULT ", 1)[1])
    ids = found["ids"]
    assert found["slow"] == [ids["tool"]]
    assert found["weather"] == [ids["arguments"]]
    assert found["42"] == [ids["arguments"]]
    assert found['"contact form"'] == [ids["message"]]
    assert found["form contact"] == [ids["message"]]
    assert found["exploded"] == [ids["result"]]
    assert found["alice"] == [ids["user"]]
    assert found["echo -alice"] == [ids["arguments"]]
    assert found["counted 60"] == [ids["tool"]]  # the update trigger re-indexed the new message
    assert found["-alice"] == [ids["user"]]
    assert found["robot"] == found["nightly probe"] == [ids["agent"]]
    running_longest = sorted(
        [ids["result"], ids["user"], ids["agent"]], reverse=True
    )  # same start: newest id first
    assert found["by duration"] == [*running_longest, ids["message"], ids["tool"], ids["arguments"]]
    for text in ("tsk-aaa111", "aaa111", "type", "content"):
        assert found[text] == [], text  # task ids and JSON keys are never indexed
    indexes = sql(database, "SELECT indexdef FROM pg_indexes WHERE tablename = 'tasksapp_task_search'")
    assert any("USING gin (document)" in row[0] for row in indexes), indexes
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("SET enable_seqscan = off")  # five rows: make the planner show it can use it
        plan = connection.execute(
            "EXPLAIN SELECT task_id FROM tasksapp_task_search "
            "WHERE document @@ to_tsquery('simple', 'slow:*')"
        ).fetchall()
    assert "tasksapp_task_search_document" in " ".join(row[0] for row in plan), plan


AGENT_TASK = """
from tasksapp.models import Agent, McpServer, RemoteTask
row = RemoteTask(server=McpServer.objects.create(name="pg", url="http://127.0.0.1:9/mcp"), tool_name="echo",
                 status="working", agent=Agent.objects.create(name="nightly-robot", token_hash="x" * 64))
row.set_remote_id("tsk-1")
row.save()
"""
HITS = """
import json
from tasksapp import search
print("HITS " + json.dumps({w: search.filtered({"q": w}).count() for w in ("robot", "echo")}))
"""


@pytest.mark.postgres
def test_migration_0020_indexes_the_agents_of_tasks_mirrored_before_it(database: str) -> None:
    env = env_for(database)
    manage(env, "migrate", "tasksapp", "0019", "-v0")  # back to the index of 0008: no agent
    manage(env, "shell", "-c", AGENT_TASK)
    assert json.loads(manage(env, "shell", "-c", HITS).split("HITS ")[1]) == {"robot": 0, "echo": 1}
    manage(env, "migrate", "-v0")
    assert json.loads(manage(env, "shell", "-c", HITS).split("HITS ")[1]) == {"robot": 1, "echo": 1}

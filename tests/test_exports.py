"""Exports: the filtered task list and the audit log as streamed CSV and JSON Lines,
task ids (bearer secrets) only for roles that may act on tasks, every export audited."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.http import StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils import timezone

from tasksapp import exports
from tasksapp.models import Agent, OperatorAction
from tests.support.opsdata import logged_in, person, server, task

pytestmark = pytest.mark.django_db(transaction=True)


def body(response: HttpResponseBase) -> str:
    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)  # streamed, never built whole in memory
    return response.getvalue().decode("utf-8-sig")


def test_task_list_exports_as_csv_and_json_lines_with_the_lists_filters_and_order() -> None:
    alice = person("alice", "operator")
    alpha, beta = server("alpha"), server("beta")
    # A task id is the server's choice: an ordinary one is exported as it is, a formula is escaped (a
    # random id starting with "-" is escaped too, which made this test fail one run in 64).
    first = task(
        alpha,
        "slow_count",
        status_message="counted 3/9",
        arguments={"n": 9},
        started_by=alice,
        remote_id="tsk-4f0c2d9e",
    )
    second = task(alpha, "slow_count", status_message='=HYPERLINK("http://evil")', remote_id="-2+3")
    task(beta, "echo", status_message="other server")
    client = logged_in(alice)

    params = {"server": str(alpha.pk), "tool": "count", "sort": "created"}
    text = body(client.get(reverse("tasks:export", args=["csv"]), params))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [int(row["id"]) for row in rows] == [first.pk, second.pk]
    assert rows[0]["server"] == "alpha" and rows[0]["started_by"] == "alice"
    assert rows[0]["status_message"] == "counted 3/9" and json.loads(rows[0]["arguments"]) == {"n": 9}
    assert rows[1]["status_message"].startswith("'=HYPERLINK")  # a spreadsheet must not run it
    assert rows[0]["task_id"] == first.remote_id  # an operator may act on tasks: ids included
    assert rows[1]["task_id"] == "'-2+3"

    lines = body(client.get(reverse("tasks:export", args=["jsonl"]), {**params, "sort": "-created"}))
    records = [json.loads(line) for line in lines.splitlines()]
    assert [record["id"] for record in records] == [second.pk, first.pk]
    assert records[1]["arguments"] == {"n": 9} and records[1]["task_id"] == first.remote_id


def test_viewers_get_no_task_ids_and_every_export_is_audited() -> None:
    secret = "tsk-bearer-secret-0042"
    row = task(server(), "echo", remote_id=secret, status_message="hello")
    vera = person("vera", "viewer")
    client = logged_in(vera)

    for fmt in ("csv", "jsonl"):
        response = client.get(reverse("tasks:export", args=[fmt]), {"q": "hello"})
        text = body(response)
        assert str(row.pk) in text and secret not in text and "task_id" not in text
        assert response["Content-Disposition"] == f'attachment; filename="tasks.{fmt}"'

    audited = OperatorAction.objects.filter(action="export", user=vera).order_by("id")
    assert [entry.detail["format"] for entry in audited] == ["csv", "jsonl"]
    assert audited[0].detail["filters"] == {"q": "hello"} and audited[0].detail["with_task_ids"] is False
    assert client.get(reverse("tasks:export", args=["xml"])).status_code == 404


def test_audit_log_exports_with_its_filters() -> None:
    admin = person("ada", "admin")
    alpha, beta = server("alpha"), server("beta")
    OperatorAction.objects.create(
        user=admin, action="server_edit", server=alpha, detail={"summary": "url: a → b"}
    )
    OperatorAction.objects.create(user=admin, action="server_edit", server=beta, detail={"summary": "other"})
    client = logged_in(person("vera", "viewer"))

    text = body(client.get(reverse("tasks:audit-export", args=["csv"]), {"server": str(alpha.pk)}))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(row["action"], row["server"], row["user"], row["summary"]) for row in rows] == [
        ("server_edit", "alpha", "ada", "url: a → b")
    ]
    lines = body(client.get(reverse("tasks:audit-export", args=["jsonl"]), {"action": "server_edit"}))
    assert [json.loads(line)["server"] for line in lines.splitlines()] == ["beta", "alpha"]
    assert OperatorAction.objects.filter(action="export", detail__what="audit").count() == 2


def test_exports_need_a_role() -> None:
    task(server(), "echo")
    nobody = logged_in(User.objects.create_user("nobody"))  # no role
    for url in (reverse("tasks:export", args=["csv"]), reverse("tasks:audit-export", args=["csv"])):
        assert nobody.get(url).status_code == 403


def test_an_export_another_site_asked_for_is_refused_and_not_audited() -> None:
    """A link or image on another site makes the browser send Sec-Fetch-Site: cross-site (or
    same-site from a sibling subdomain): refused before anything is exported or audited."""
    task(server(), "echo")
    client = logged_in(person("vera", "viewer"))
    for url in (
        reverse("tasks:export", args=["csv"]),
        reverse("tasks:export", args=["jsonl"]),
        "/audit/export.csv",
    ):
        before = OperatorAction.objects.filter(action="export").count()
        for site in ("cross-site", "same-site", "Cross-Site"):
            refused = client.get(url, headers={"sec-fetch-site": site, "sec-fetch-mode": "navigate"})
            assert refused.status_code == 403, (url, site)
            assert "Another site asked for this" in refused.content.decode()
        assert OperatorAction.objects.filter(action="export").count() == before  # nothing recorded
        for allowed in ({"sec-fetch-site": "same-origin"}, {"sec-fetch-site": "none"}, {}):
            body(client.get(url, headers=allowed))  # its own page, a bookmark, a script
    assert OperatorAction.objects.filter(action="export").count() == 9


def test_the_csv_cells_are_the_json_lines_values_with_formulas_escaped() -> None:
    """The CSV export writes each row's cells straight from the columns (exports.task_cells); the
    JSON Lines export writes the values. Cell for cell, the CSV is the JSON value as a cell: text
    anyone but the dashboard chose (server and tool names, status messages, people's and agents'
    names, task ids) escaped when a spreadsheet would run it, in every kind of row."""
    now = timezone.now()
    plus = person("+plus", "operator")
    agent = Agent.objects.create(name="-agent", token_hash="0" * 64)
    hostile = server("=SUM(A1)")
    rows = [
        task(hostile, "@tool", status_message="-1+1", started_by=plus, remote_id="=HYPERLINK(1)"),
        task(hostile, "\tTab", status_message="\rCR", agent=agent, remote_id="+1", took=2.5),
        task(hostile, "plain", status="failed", is_tool_error=True, remote_id="tsk-1", took=0.0004),
        task(hostile, "plain", status="completed", is_tool_error=True, arguments={"=": ["=x", 1]}),
        task(hostile, "plain", expired=True, expired_at=now, created_at=now - timedelta(seconds=3)),
        task(hostile, "plain", cancel_requested_at=now, arguments=[1, "a"]),
        task(
            hostile, "日本語", status="cancelled", status_message="", finished_at=now + timedelta(seconds=1)
        ),
    ]
    client = logged_in(plus)
    cells = list(csv.DictReader(io.StringIO(body(client.get(reverse("tasks:export", args=["csv"]))))))
    lines = body(client.get(reverse("tasks:export", args=["jsonl"])))
    values = [json.loads(line) for line in lines.splitlines()]
    assert len(cells) == len(values) == len(rows)
    assert {row["task_id"] for row in cells} >= {"'=HYPERLINK(1)", "'+1", "tsk-1"}
    assert {row["server"] for row in cells} == {"'=SUM(A1)"}
    for csv_row, record in zip(cells, values, strict=True):
        assert list(csv_row) == list(record)  # the same columns in the same order
        assert csv_row == {column: exports._cell(value) for column, value in record.items()}

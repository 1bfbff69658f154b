"""The /_debug endpoints other tests use to see what a client really sent."""

from __future__ import annotations

from tasksapp.demoserver import run_in_thread

from .wire import Wire


def test_requests_are_recorded_with_lowercased_headers_and_parsed_bodies() -> None:
    server = run_in_thread(debug=True)
    wire = Wire(server.url)
    try:
        task_id = wire.start("slow_count", {"n": 0})["taskId"]
        wire.get(task_id)
        recorded = wire.debug("requests")
        assert [r["method"] for r in recorded] == ["tools/call", "tasks/get"]
        last = recorded[-1]
        assert last["headers"]["mcp-name"] == task_id
        assert last["headers"]["mcp-method"] == "tasks/get"
        assert last["body"]["params"]["taskId"] == task_id
        assert wire.debug("stats")["methods"] == {"tools/call": 1, "tasks/get": 1}
        assert wire.debug("requests/clear", method="POST") == {"cleared": True}
        assert wire.debug("requests") == []
        assert wire.debug("stats")["methods"] == {}
    finally:
        wire.close()
        server.stop()


def test_request_log_keeps_the_last_500() -> None:
    server = run_in_thread(debug=True)
    wire = Wire(server.url)
    try:
        for _ in range(505):
            wire.post("server/discover")
        assert len(wire.debug("requests")) == 500
        assert wire.debug("stats")["methods"]["server/discover"] == 505
    finally:
        wire.close()
        server.stop()


def test_debug_routes_check_the_http_method(wire: Wire) -> None:
    assert wire.http.get(f"{wire.base}/_debug/close-streams").status_code == 405
    assert wire.http.post(f"{wire.base}/_debug/stats").status_code == 405
    assert wire.http.get(f"{wire.base}/_debug/nothing").status_code == 404

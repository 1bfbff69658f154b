"""`python -m tasksapp.mcpclient`: JSON out, one line per change, and the documented exit codes."""

import json

from tests.mcpclient.helpers import cli, lines
from tests.peers.launch import RunningPeer, free_port


def test_call_follow_prints_the_task_moving_to_completed(fastmcp_server: RunningPeer) -> None:
    run = cli(fastmcp_server.url, "call", "slow_count", '{"n": 3, "delay": 0.2}', "--follow")
    assert run.returncode == 0, run.stderr
    events = lines(run.stdout)
    assert events[0]["outcome"] == "task"
    statuses = [e["status"] for e in events]
    assert statuses[0] == "working" and statuses[-1] == "completed"
    assert any(e.get("statusMessage", "").startswith("counted") for e in events)
    assert len({json.dumps(e, sort_keys=True) for e in events}) == len(events)  # changes only


def test_follow_exits_3_when_the_task_needs_input_and_update_answers_it(
    fastmcp_server: RunningPeer,
) -> None:
    run = cli(fastmcp_server.url, "call", "ask_name", "--follow")
    assert run.returncode == 3, run.stderr
    waiting = lines(run.stdout)[-1]
    assert waiting["status"] == "input_required"
    [key] = waiting["inputRequests"]
    task_id = waiting["taskId"]
    answer = json.dumps({key: {"action": "accept", "content": {"name": "Ada"}}})
    assert cli(fastmcp_server.url, "update", task_id, answer).returncode == 0
    got = cli(fastmcp_server.url, "get", task_id)
    assert got.returncode == 0
    assert lines(got.stdout)[0]["status"] in ("working", "completed")


def test_immediate_result_and_discover_and_tools(fastmcp_server: RunningPeer) -> None:
    called = cli(fastmcp_server.url, "call", "echo", '{"text": "hi"}')
    assert called.returncode == 0
    assert lines(called.stdout) == [lines(called.stdout)[0]]
    assert lines(called.stdout)[0]["outcome"] == "result"
    found = lines(cli(fastmcp_server.url, "discover").stdout)[0]
    assert found["era"] == "modern" and found["tasksSupported"] is True
    tools = lines(cli(fastmcp_server.url, "tools").stdout)[0]["tools"]
    assert "slow_count" in {tool["name"] for tool in tools}


def test_cancel_then_get_shows_cancelled(fastmcp_server: RunningPeer) -> None:
    task_id = lines(cli(fastmcp_server.url, "call", "run_forever").stdout)[0]["taskId"]
    assert cli(fastmcp_server.url, "cancel", task_id).returncode == 0
    # tasks/get is the server's word: once the cancel is accepted the task must read "cancelled"
    # (at most after a few polls, should the server settle it asynchronously).
    statuses = []
    for _ in range(20):
        statuses.append(lines(cli(fastmcp_server.url, "get", task_id).stdout)[0]["status"])
        if statuses[-1] != "working":
            break
    assert statuses[-1] == "cancelled", statuses


def test_json_rpc_error_goes_to_stderr_with_exit_2(fastmcp_server: RunningPeer) -> None:
    run = cli(fastmcp_server.url, "get", "no-such-task")
    assert run.returncode == 2
    assert run.stdout == ""
    assert json.loads(run.stderr)["error"]["code"] == -32602


def test_transport_error_exits_1(fastmcp_server: RunningPeer) -> None:
    run = cli(f"http://127.0.0.1:{free_port()}/mcp", "discover")
    assert run.returncode == 1
    assert "cannot reach" in json.loads(run.stderr)["error"]["message"]


def test_bad_arguments_json_is_a_clear_error() -> None:
    run = cli("http://127.0.0.1:1/mcp", "call", "echo", "{not json")
    assert run.returncode == 2
    assert "ARGUMENTS is not valid JSON" in run.stderr


def test_headers_and_token_reach_the_server(fastmcp_server: RunningPeer) -> None:
    fastmcp_server.clear()
    run = cli(fastmcp_server.url, "--header", "X-Team: ops", "--token", "s3cret", "tools")
    assert run.returncode == 0
    seen = fastmcp_server.last_request("tools/list")["headers"]
    assert seen["x-team"] == "ops"
    assert seen["authorization"] == "Bearer s3cret"


def test_task_ids_starting_with_a_dash_are_ids_not_options(fastmcp_server: RunningPeer) -> None:
    for verb in ("get", "cancel"):
        run = cli(fastmcp_server.url, "--header", "X-Team: ops", verb, "-starts-with-a-dash")
        assert run.returncode == 2, run.stderr  # parsed as an id: the server says it is unknown
        assert json.loads(run.stderr)["error"]["code"] == -32602
    update = cli(fastmcp_server.url, "update", "-dash-id", '{"-dash-id:0": {"action": "decline"}}')
    assert update.returncode == 2 and json.loads(update.stderr)["error"]["code"] == -32602


def test_task_verbs_on_a_legacy_server_are_refused_clearly(legacy_server: RunningPeer) -> None:
    for verb in (["get", "t-1"], ["cancel", "t-1"], ["update", "t-1", "{}"], ["listen", "t-1"]):
        legacy_server.clear()
        run = cli(legacy_server.url, *verb)
        assert run.returncode == 1, (verb, run.stdout, run.stderr)
        assert "legacy" in json.loads(run.stderr)["error"]["message"]
        sent = [r["method"] for r in legacy_server.received() if r.get("http") == "POST"]
        assert not any(m.startswith(("tasks/", "subscriptions/")) for m in sent), sent


def test_listen_stops_when_the_ack_accepts_none_of_the_ids(demo_server: RunningPeer) -> None:
    run = cli(demo_server.url, "listen", "no-such-task-1", "no-such-task-2", timeout=20)
    assert run.returncode == 2, run.stderr
    assert lines(run.stdout) == [lines(run.stdout)[0]] and lines(run.stdout)[0]["taskIds"] == []
    error = json.loads(run.stderr)["error"]
    assert error["type"] == "NotAcknowledged" and error["taskIds"] == ["no-such-task-1", "no-such-task-2"]
    assert "nothing to listen for" in error["message"]

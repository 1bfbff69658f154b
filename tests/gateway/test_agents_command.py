"""manage.py agents: add prints the token alone on the last line (or {"token": …} with --json),
list shows the agents without their tokens, revoke stops the token at once."""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.utils import translation

from tasksapp.models import Agent, McpServer, OperatorAction
from tasksapp.services.agents import token_digest

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str) -> str:
    out = io.StringIO()
    with translation.override("en"):  # a command speaks English, whatever a test before it chose
        call_command("agents", *args, stdout=out)
    return out.getvalue()


def test_add_prints_the_new_token_alone_on_the_last_line_and_keeps_only_its_hash(
    demo_registered: McpServer,
) -> None:
    output = run("add", "ci-bot", "--server", "demo")
    token = output.strip().splitlines()[-1]
    assert token.startswith("mcpgw_") and " " not in token
    agent = Agent.objects.get(name="ci-bot")
    assert agent.token_hash == token_digest(token)
    assert list(agent.servers.all()) == [demo_registered]
    assert OperatorAction.objects.filter(action="agent_add", detail__agent="ci-bot").exists()


def test_add_with_json_prints_the_token_and_list_never_shows_it(demo_registered: McpServer) -> None:
    added = json.loads(run("add", "json-bot", "--server", "demo", "--json"))
    assert added["token"].startswith("mcpgw_")
    listed = run("list", "--json")
    assert added["token"] not in listed
    (entry,) = json.loads(listed)
    assert entry["name"] == "json-bot" and entry["servers"] == ["demo"] and entry["revokedAt"] is None
    assert entry["tokenHint"] == added["token"][:10]


def test_revoke_and_the_errors_people_can_act_on(demo_registered: McpServer) -> None:
    run("add", "old-bot", "--server", "demo")
    assert "revoked old-bot" in run("revoke", "old-bot")
    assert Agent.objects.get(name="old-bot").revoked_at is not None
    with pytest.raises(CommandError, match="already revoked"):
        run("revoke", "old-bot")
    with pytest.raises(CommandError, match="no agent named ghost"):
        run("revoke", "ghost")
    with pytest.raises(CommandError, match="no server named nowhere"):
        run("add", "lost-bot", "--server", "nowhere")
    with pytest.raises(CommandError, match="exists already"):
        run("add", "old-bot")


def test_servers_list_json_gives_each_servers_gateway_url(
    demo_registered: McpServer, settings: object
) -> None:
    out = io.StringIO()
    call_command("servers", "list", "--json", stdout=out)
    (server,) = json.loads(out.getvalue())
    assert server["gatewayUrl"] == f"http://127.0.0.1:8000/gateway/{demo_registered.pk}/mcp"

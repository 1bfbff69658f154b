"""The gateway on the dashboard's pages: a server's gateway URL and host configuration, its policy
form (admins), and the agents page (adding one shows its token once; revoking stops it)."""

import html
import json
import re
import shlex

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from tasksapp.models import Agent, McpServer
from tasksapp.services.agents import token_digest

pytestmark = pytest.mark.django_db(transaction=True)


def login(role: str) -> Client:
    user = User.objects.create_user(f"{role}-user", password="pw")
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def test_a_servers_page_shows_its_gateway_url_and_host_configuration(demo_registered: McpServer) -> None:
    page = login("viewer").get(f"/servers/{demo_registered.pk}/tools/").content.decode()
    url = f"http://testserver/gateway/{demo_registered.pk}/mcp"
    assert f'<code id="gateway-url">{url}</code>' in page
    assert (
        f"claude mcp add --transport http demo {url} --header &#x27;Authorization: Bearer TOKEN&#x27;" in page
    )
    assert "--protocol-era modern" in page
    assert 'action="/servers/' not in page.split('id="gateway"')[1].split("</section>")[0]  # no form


def test_host_configuration_pastes_whole_for_a_server_name_with_spaces_and_quotes(
    demo_registered: McpServer,
) -> None:
    name = 'Bob\'s "big" server; rm -rf ~'
    McpServer.objects.filter(pk=demo_registered.pk).update(name=name)
    page = login("viewer").get(f"/servers/{demo_registered.pk}/tools/").content.decode()
    block = page.split('id="gateway"')[1].split("</details>")[0]
    texts = [
        html.unescape(t) for t in re.findall(r"<pre class=\"small\"><code>(.*?)</code></pre>", block, re.S)
    ]
    url = f"http://testserver/gateway/{demo_registered.pk}/mcp"
    code, desktop, inspector = texts
    assert shlex.split(code) == [
        "claude", "mcp", "add", "--transport", "http", name, url, "--header", "Authorization: Bearer TOKEN"
    ]  # fmt: skip
    assert json.loads(desktop)["mcpServers"][name]["args"] == [
        "mcp-remote", url, "--header", "Authorization: Bearer TOKEN"
    ]  # fmt: skip
    argv = shlex.split(inspector)
    assert argv[:4] == ["npx", "@modelcontextprotocol/inspector", "--cli", url]
    assert argv[argv.index("--header") + 1] == "Authorization: Bearer TOKEN"


def test_an_admin_sets_who_answers_and_a_wrong_exception_is_explained(demo_registered: McpServer) -> None:
    admin = login("admin")
    saved = admin.post(
        f"/servers/{demo_registered.pk}/gateway/",
        {"policy": "people", "tools": "ask_form: agent"},
        follow=True,
    )
    assert "was saved" in saved.content.decode()
    demo_registered.refresh_from_db()
    assert (demo_registered.gateway_policy, demo_registered.gateway_tool_policies) == (
        "people",
        {"ask_form": "agent"},
    )
    wrong = admin.post(
        f"/servers/{demo_registered.pk}/gateway/",
        {"policy": "people", "tools": "ask_form: robots"},
        follow=True,
    )
    assert "tool: either" in wrong.content.decode()
    assert (
        login("operator").post(f"/servers/{demo_registered.pk}/gateway/", {"policy": "agent"}).status_code
        == 403
    )


def test_adding_an_agent_shows_its_token_once_and_revoking_it_is_one_button(
    demo_registered: McpServer,
) -> None:
    admin = login("admin")
    added = admin.post("/agents/", {"name": "web-bot", "servers": [demo_registered.pk], "rate_limit": 600})
    page = added.content.decode()
    token = page.split('id="token-value">')[1].split("<")[0]
    agent = Agent.objects.get(name="web-bot")
    assert agent.token_hash == token_digest(token) and list(agent.servers.all()) == [demo_registered]
    assert "no-store" in added["Cache-Control"]
    again = admin.get("/agents/").content.decode()
    assert token not in again and agent.token_hint in again
    assert login("viewer").post("/agents/", {"name": "sneaky", "rate_limit": 1}).status_code == 403
    admin.post(f"/agents/{agent.pk}/revoke/")
    agent.refresh_from_db()
    assert agent.revoked_at is not None


def test_the_admin_site_adds_an_agent_through_the_service_and_revokes_it(demo_registered: McpServer) -> None:
    root = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(root)
    form = {
        "name": "admin-bot",
        "description": "",
        "servers": [demo_registered.pk],
        "rate_limit_per_minute": 60,
    }
    page = client.post("/admin/tasksapp/agent/add/", form, follow=True).content.decode()
    token = page.split("shown only now: ")[1].split("<")[0].strip()
    agent = Agent.objects.get(name="admin-bot")
    assert agent.token_hash == token_digest(token) and agent.rate_limit_per_minute == 60
    assert list(agent.servers.all()) == [demo_registered]
    client.post("/admin/tasksapp/agent/", {"action": "revoke", "_selected_action": [agent.pk]})
    agent.refresh_from_db()
    assert agent.revoked_at is not None

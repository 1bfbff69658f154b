"""`python -m tasksapp.conformance URL`: the client the official conformance suite drives.

`conformance client --command "python -m tasksapp.conformance"` appends the URL of
its scenario server and names the scenario in MCP_CONFORMANCE_SCENARIO (and, for some, passes
data in MCP_CONFORMANCE_CONTEXT). Each scenario is played with McpClient's public API only.
Whatever a server asks (an elicitation, an MRTR round) or a tool needs (its arguments) comes
from an Operator; `main()` uses the dashboard's scripted operator, which fills the dashboard's
own forms, so the answers are the ones the UI would send. It lives beside the dashboard, not in
tasksapp/mcpclient/, because of that operator: the library stays free of Django.

The auth/* scenarios run the same OAuth code the dashboard uses (tasksapp.mcpclient.oauth):
discovery, registration, PKCE, refresh, step-up. Where the dashboard sends a person's browser to
the authorization server, this client follows the authorization redirect itself, as a browser
that consents at once would, and reads the code off the redirect to its callback URL.

Exit status: 0 when the scenario was played through, 1 when an exchange failed, 2 for a
scenario this client does not play.
"""

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from tasksapp.mcpclient.client import McpClient
from tasksapp.mcpclient.errors import McpError
from tasksapp.mcpclient.types import InputRequest, InputRequired, JsonObject, Tool
from tasksapp.mcpclient.wire import ALL_INPUT_KINDS

if TYPE_CHECKING:
    from tasksapp.mcpclient.oauth import ClientConfig, McpOAuth

MAX_ROUNDS = 10
CLIENT_INFO: JsonObject = {"name": "mcp-tasks-dashboard-conformance", "version": "0.1.0"}
# The suite's auth/basic-cimd expects this URL as the client ID (a document it never fetches).
METADATA_DOCUMENT_URL = "https://conformance-test.local/client-metadata.json"
REDIRECT_URI = "http://127.0.0.1/oauth/callback"
MAX_REDIRECTS = 5
LOOPBACK = ("127.0.0.0/8", "::1", "localhost")  # where the suite's servers run


class Operator(Protocol):
    """The person in front of the dashboard: answers input requests, fills in tool arguments."""

    def answer(self, request: InputRequest) -> JsonObject: ...

    def arguments(self, tool: Tool) -> JsonObject: ...


Scenario = Callable[[McpClient, Operator, JsonObject], Awaitable[None]]
Between = Callable[[], Awaitable[None]]


async def settle(
    client: McpClient, operator: Operator, name: str, arguments: JsonObject, *, between: Between | None = None
) -> Any:
    """tools/call, answering each input_required round through the operator (at most MAX_ROUNDS).

    `between` runs before every retry: another request in between must not carry this call's
    inputResponses or requestState (they belong to the retry alone, §4.2).
    """
    outcome = await client.call_tool(name, arguments)
    for _ in range(MAX_ROUNDS):
        if not isinstance(outcome, InputRequired):
            return outcome
        answers = {key: operator.answer(request) for key, request in outcome.input_requests.items()}
        if between is not None:
            await between()
        outcome = await client.call_tool(
            name, arguments, input_responses=answers, request_state=outcome.request_state
        )
    raise McpError(f"{name}: still asking for input after {MAX_ROUNDS} rounds")


async def call_every_tool(client: McpClient, operator: Operator, context: JsonObject) -> None:
    """tools/list (tools with invalid x-mcp-header annotations are dropped), then call each kept one."""
    for tool in await client.list_tools():
        await settle(client, operator, tool.name, operator.arguments(tool))


async def discover_and_list(client: McpClient, operator: Operator, context: JsonObject) -> None:
    await client.discover()
    await client.list_tools()


async def look_without_fetching(client: McpClient, operator: Operator, context: JsonObject) -> None:
    """List tools and build each one's Run form: processing a schema must never fetch a network $ref."""
    for tool in await client.list_tools():
        operator.arguments(tool)


async def everything_listed(client: McpClient, operator: Operator, context: JsonObject) -> None:
    await call_every_tool(client, operator, context)
    for resource in await client.list_resources():
        await client.read_resource(str(resource["uri"]))
    for prompt in await client.list_prompts():
        await client.get_prompt(str(prompt["name"]))


async def context_tool_calls(client: McpClient, operator: Operator, context: JsonObject) -> None:
    """The calls the scenario names in MCP_CONFORMANCE_CONTEXT, with exactly its arguments."""
    await client.list_tools()
    for call in context.get("toolCalls", []):
        await settle(client, operator, str(call["name"]), dict(call.get("arguments") or {}))


async def request_state_rounds(client: McpClient, operator: Operator, context: JsonObject) -> None:
    await client.list_tools()

    async def unrelated() -> None:
        await client.call_tool("test_mrtr_unrelated", {})

    await settle(client, operator, "test_mrtr_echo_state", {}, between=unrelated)
    await settle(client, operator, "test_mrtr_no_state", {})
    await settle(client, operator, "test_mrtr_no_result_type", {})


async def echo_schema(client: McpClient, operator: Operator, context: JsonObject) -> None:
    """Send the focal tool's inputSchema back as it arrived: nothing may be lost on the way."""
    tools = {tool.name: tool for tool in await client.list_tools()}
    focal = tools.get("json_schema_2020_12_tool")
    if focal is None:
        raise McpError("the scenario's server listed no json_schema_2020_12_tool")
    await client.call_tool("json_schema_echo", {"schema": focal.input_schema})


SCENARIOS: dict[str, Scenario] = {
    "tools_call": call_every_tool,
    "request-metadata": discover_and_list,
    "sep-2322-client-request-state": request_state_rounds,
    "http-standard-headers": everything_listed,
    "http-custom-headers": context_tool_calls,
    "http-invalid-tool-headers": call_every_tool,
    "json-schema-ref-no-deref": look_without_fetching,
    "json-schema-2020-12-preservation": echo_schema,
}


def oauth_config(scenario: str, context: JsonObject) -> "ClientConfig":
    """What an admin would enter for the scenario's server: pre-registered credentials when the
    scenario hands some over, client credentials for the machine-to-machine ones."""
    from tasksapp.mcpclient.oauth import ClientConfig

    machine = scenario.startswith("auth/client-credentials-")
    return ClientConfig(
        redirect_uri=REDIRECT_URI,
        client_name="mcp-tasks-dashboard conformance",
        metadata_url=METADATA_DOCUMENT_URL,
        client_id=_opt(context, "client_id"),
        client_secret=_opt(context, "client_secret"),
        private_key=_opt(context, "private_key_pem"),
        signing_alg=_opt(context, "signing_algorithm"),
        grant="client_credentials" if machine else "authorization_code",
        application_type="native",
    )


def _opt(context: JsonObject, key: str) -> str | None:
    value = context.get(key)
    return value if isinstance(value, str) and value else None


def browser_that_consents(http: httpx.AsyncClient, redirect_uri: str) -> Callable[[str], Awaitable[str]]:
    """Follow the authorization server's redirects until one lands on our callback URL."""

    from tasksapp.mcpclient.oauth import OAuthError

    async def authorize(url: str) -> str:
        for _ in range(MAX_REDIRECTS):
            response = await http.get(url)
            location = response.headers.get("location")
            if not response.is_redirect or not location:
                raise OAuthError(
                    f"the authorization endpoint answered HTTP {response.status_code}, not a redirect"
                )
            url = str(response.url.join(location))
            if url.startswith(redirect_uri):
                return url
        raise OAuthError(f"no redirect to {redirect_uri} after {MAX_REDIRECTS} hops")

    return authorize


async def _authorized(scenario: str, url: str, context: JsonObject, browser: httpx.AsyncClient) -> "McpOAuth":
    """The dashboard's OAuth provider, set up as an admin would for the scenario's server: the
    suite runs on this machine (loopback allowed), and credentials the scenario hands over are
    bound to the authorization server its MCP server names before anything is sent (as the
    dashboard binds them when an admin saves them)."""
    from dataclasses import replace

    from tasksapp.mcpclient.addresses import AddressPolicy, allow_list
    from tasksapp.mcpclient.oauth import McpOAuth, MemoryGrantStore, OAuthClient, current_issuer

    config = oauth_config(scenario, context)
    policy = AddressPolicy(allowed=allow_list(LOOPBACK)).with_own(url, public_only=False)
    if config.has_credentials:
        anonymous = replace(config, client_id=None, client_secret=None, private_key=None)
        finder = OAuthClient(anonymous, policy=policy)
        try:
            config = replace(config, issuer=await current_issuer(finder, url))
        finally:
            await finder.aclose()
    client = OAuthClient(config, policy=policy)
    authorize = browser_that_consents(browser, config.redirect_uri)
    return McpOAuth(client, MemoryGrantStore(), url, authorize=authorize, confirm_issuer=_admin_confirms)


async def _admin_confirms(bound: str, named: str) -> bool:
    """The suite's authorization server moves (SEP-2352): the dashboard would stop and ask an admin;
    the harness plays that admin, says so, and confirms (dropping what belonged to the old one)."""
    print(
        f"conformance client: the authorization server changed from {bound} to {named}; "
        "confirming it as an admin would",
        file=sys.stderr,
    )
    return True


async def play(scenario: str, url: str, context: JsonObject, operator: Operator) -> None:
    """Play one scenario against the suite's server at `url` (McpClient closes the provider)."""
    async with httpx.AsyncClient(timeout=10, follow_redirects=False) as browser:
        auth = await _authorized(scenario, url, context, browser) if scenario.startswith("auth/") else None
        async with McpClient(url, input_kinds=ALL_INPUT_KINDS, client_info=CLIENT_INFO, auth=auth) as client:
            await SCENARIOS.get(scenario, call_every_tool)(client, operator, context)


class _NoInputOperator:
    """For the auth/* scenarios, whose one tool takes no arguments and asks nothing: they test
    authorization, so the dashboard's forms (and Django's start-up) stay out of them."""

    def answer(self, request: InputRequest) -> JsonObject:
        raise McpError("an auth scenario's server asked for input; nothing to answer with")

    def arguments(self, tool: Tool) -> JsonObject:
        return {}


class _DashboardOperator:
    """The dashboard's scripted operator, set up (Django's settings, its forms) on first use only.

    The one reach outside the pure library: answers come from the dashboard's own forms.
    """

    def __init__(self) -> None:
        self._operator: Any = None

    def _get(self) -> Operator:
        if self._operator is None:
            # Imported here: the auth/* scenarios run without Django.
            from tasksapp.schemaforms.operator import ScriptedOperator

            self._operator = ScriptedOperator()
        operator: Operator = self._operator
        return operator

    def answer(self, request: InputRequest) -> JsonObject:
        return self._get().answer(request)

    def arguments(self, tool: Tool) -> JsonObject:
        return self._get().arguments(tool)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if not args:
        print("usage: python -m tasksapp.conformance URL (scenario in MCP_CONFORMANCE_SCENARIO)")
        return 2
    if scenario not in SCENARIOS and not scenario.startswith("auth/"):
        print(f"conformance client: scenario {scenario!r} is not played here: unknown", file=sys.stderr)
        return 2
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    try:
        operator: Operator = _NoInputOperator() if scenario.startswith("auth/") else _DashboardOperator()
        asyncio.run(play(scenario, args[-1], context, operator))
    except McpError as exc:
        print(f"conformance client: {scenario}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

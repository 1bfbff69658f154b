"""The dashboard's address policies, from its settings: for URLs a remote party names (OAuth
discovery) and for webhooks. The MCP servers' own policy is MCP_BLOCK_PRIVATE_ADDRESSES.

Both refuse private addresses except on OUTBOUND_ALLOWED_HOSTS (checked again on every
connection, after DNS); OAuth URLs must also be https, except on the registered MCP server's own
origin and on the allow-list. docs/security.md says why.
"""

import asyncio
import socket

import httpx
from asgiref.sync import async_to_sync
from django.conf import settings

from tasksapp.mcpclient.addresses import AddressPolicy, allow_list
from tasksapp.mcpclient.outbound import Deadlines, Outbound

RESOLVE_SECONDS = 5.0
LOOPBACK = ("127.0.0.0/8", "::1", "localhost")  # what `manage.py demo` and the tests allow


def discovery_policy(server_url: str) -> AddressPolicy:
    """For the OAuth requests about one MCP server: its own origin as for MCP traffic; anything
    else https and public unless OUTBOUND_ALLOWED_HOSTS lists it."""
    allowed = allow_list(settings.OUTBOUND_ALLOWED_HOSTS)
    policy = AddressPolicy(https_only=True, public_only=True, allowed=allowed)
    return policy.with_own(server_url, public_only=settings.MCP_BLOCK_PRIVATE_ADDRESSES)


def webhook_policy() -> AddressPolicy:
    """For webhooks: http or https, public addresses unless OUTBOUND_ALLOWED_HOSTS lists them."""
    allowed = allow_list(settings.OUTBOUND_ALLOWED_HOSTS)
    return AddressPolicy(https_only=False, public_only=True, allowed=allowed)


def oauth_deadlines() -> Deadlines:
    total = float(settings.OAUTH_DEADLINE_SECONDS)
    return Deadlines(connect=min(5.0, total), read=min(10.0, total), total=total)


def webhook_client() -> Outbound:
    total = float(settings.NOTIFY_DEADLINE_SECONDS)
    deadlines = Deadlines(connect=min(5.0, total), read=min(10.0, total), total=total)
    return Outbound(webhook_policy(), deadlines=deadlines)


def webhook_url_refusal(url: str) -> str | None:
    """Why a webhook URL cannot be saved (its scheme, or an address its host resolves to now);
    None when it may. A name that does not resolve now is let through: every connection is
    checked again, after DNS, so it can only ever reach what the policy allows."""
    policy = webhook_policy()
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "it is not a URL"
    if refusal := policy.url_refusal(parsed):
        return refusal
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        addresses = async_to_sync(_resolve)(parsed.host, port)
    except (OSError, UnicodeError, TimeoutError):
        return None
    for address in addresses:
        if refusal := policy.address_refusal(parsed.host, port, address):
            return refusal
    return None


async def _resolve(host: str, port: int) -> list[str]:
    """The addresses a name resolves to now, within RESOLVE_SECONDS."""
    async with asyncio.timeout(RESOLVE_SECONDS):
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(entry[4][0]) for entry in found]

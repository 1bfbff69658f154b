"""The address policy (tasksapp/mcpclient/addresses.py): which URLs may be fetched and which
addresses they may reach, before sending and after DNS."""

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.env import env_hosts
from tasksapp.mcpclient.addresses import AddressPolicy, Allowed, allow_list

STRICT = AddressPolicy()


def refusal(policy: AddressPolicy, url: str) -> str | None:
    return policy.url_refusal(httpx.URL(url))


@pytest.mark.parametrize(
    "url",
    [
        "http://auth.example.com/token",  # not https
        "ftp://auth.example.com/",
        "https://127.0.0.1/token",
        "https://[::1]/token",
        "https://[::ffff:127.0.0.1]/token",  # IPv4-mapped loopback
        "https://10.0.0.1/",
        "https://169.254.169.254/latest/meta-data/",
        "https://[fe80::1]/",
        "https://100.64.0.1/",  # shared address space
    ],
)
def test_a_strict_policy_refuses_plain_http_and_internal_addresses(url: str) -> None:
    assert refusal(STRICT, url)


def test_a_strict_policy_lets_https_to_a_name_or_public_address_through() -> None:
    assert refusal(STRICT, "https://auth.example.com/token") is None
    assert refusal(STRICT, "https://93.184.216.34/token") is None


def test_names_are_checked_after_resolution() -> None:
    assert STRICT.address_refusal("auth.example.com", 443, "93.184.216.34") is None
    why = STRICT.address_refusal("rebound.example.com", 443, "127.0.0.1")
    assert why is not None and "rebound.example.com resolves to 127.0.0.1" in why
    assert STRICT.address_refusal("x.example.com", 443, "::ffff:10.1.2.3")


def test_the_allow_list_lets_listed_hosts_through_on_any_scheme() -> None:
    policy = AddressPolicy(allowed=allow_list(["auth.internal", "10.20.0.0/16", "127.0.0.1:8443"]))
    assert refusal(policy, "http://auth.internal/token") is None
    assert policy.address_refusal("auth.internal", 80, "10.9.9.9") is None
    assert refusal(policy, "http://10.20.3.4/token") is None
    assert policy.address_refusal("name.example.com", 443, "10.20.3.4") is None  # a listed network
    assert refusal(policy, "http://127.0.0.1:8443/") is None
    assert refusal(policy, "http://127.0.0.1:8444/")  # another port is not listed
    assert refusal(policy, "http://other.internal/")


def test_the_own_origin_is_held_to_its_own_rule_only() -> None:
    policy = STRICT.with_own("http://127.0.0.1:8765/mcp", public_only=False)
    assert refusal(policy, "http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp") is None
    assert policy.address_refusal("127.0.0.1", 8765, "127.0.0.1") is None
    assert refusal(policy, "http://127.0.0.1:8766/")  # another port: another origin
    assert refusal(policy, "https://127.0.0.1:8765/")  # another scheme: another origin
    blocked = STRICT.with_own("http://127.0.0.1:8765/mcp", public_only=True)
    assert refusal(blocked, "http://127.0.0.1:8765/x")


@pytest.mark.parametrize(
    "entry", ["auth.internal", "Auth.Internal.", "auth:8443", "[::1]:8443", "::1", "10.0.0.0/8"]
)
def test_allow_list_entries_parse(entry: str) -> None:
    Allowed.parse(entry)


@pytest.mark.parametrize(
    "entry", ["http://auth.internal", "auth.internal:port", "a b", "auth:0", "10.0.0.0/33"]
)
def test_bad_allow_list_entries_stop_the_start_naming_the_setting(
    entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OUTBOUND_ALLOWED_HOSTS", f"localhost,{entry}")
    with pytest.raises(ImproperlyConfigured, match="OUTBOUND_ALLOWED_HOSTS"):
        env_hosts("OUTBOUND_ALLOWED_HOSTS", "")

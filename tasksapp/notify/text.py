"""What a message says on each channel, with the values a server chose made harmless.

Tool names, server error texts (and every other value put into a message) are made plain first:
control characters, line and paragraph separators and bidirectional overrides become spaces, so
a value cannot start a line of its own or reorder the text around it. Email and webhook texts then
escape `&`, `<` and `>` as `&amp;`, `&lt;`, `&gt;`: the characters Slack-style webhooks read as
markup (`<!channel>`, `<https://…|a disguised link>`), and that mail-to-chat bridges and HTML
renderings would read too. Browser notifications show text only and get the plain values.
"""

import re
from typing import Any

MARKUP_CHANNELS = frozenset({"email", "webhook"})
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")


def plain(value: str) -> str:
    return _UNSAFE.sub(" ", value)


def escaped(value: str) -> str:
    """`value` with &, < and > as entities, the way Slack's message format asks for them."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def values_for(channel: str, values: dict[str, Any]) -> dict[str, Any]:
    """The message's values as `channel` must show them (numbers are left as they are)."""
    markup = channel in MARKUP_CHANNELS
    return {
        key: (escaped(plain(value)) if markup else plain(value)) if isinstance(value, str) else value
        for key, value in values.items()
    }

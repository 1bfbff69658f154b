"""A tool's name as one URL path segment: any name a server sends, addressing only that tool.

A name in the spec's recommended form (1 to 128 of `A-Z a-z 0-9 _ - .`, and not "." or "..",
which browsers resolve as path steps) is the segment itself, so URLs stay readable:
`/servers/3/tools/slow_count/run/`. Any other name ("\n=1+1", "../../1/tools/echo", "ns/tool?x#y",
emoji) is "~" and the base64url of its UTF-8 bytes: letters, digits, "-" and "_" only, so it
never leaves its server's pages, never needs percent-decoding, and never fails to reverse.
"""

import base64
import binascii
import re

PLAIN = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
ENCODED = "~"


def tool_segment(name: str) -> str:
    """The path segment that names `name`; tool_name(tool_segment(name)) == name for every str."""
    if PLAIN.fullmatch(name) and name not in (".", ".."):
        return name
    return ENCODED + base64.urlsafe_b64encode(name.encode("utf-8", "surrogatepass")).decode().rstrip("=")


def tool_name(segment: str) -> str | None:
    """The name `segment` stands for, or None when it is not a segment tool_segment() makes."""
    if not segment.startswith(ENCODED):
        return segment if tool_segment(segment) == segment else None
    body = segment[len(ENCODED) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        name = raw.decode("utf-8", "surrogatepass")
    except (binascii.Error, ValueError):
        return None
    return name if tool_segment(name) == segment else None  # one segment per name, no aliases


class ToolNameConverter:
    """The `<tool:name>` URL converter: views get the name; `{% url %}` takes it as it came."""

    regex = r"[A-Za-z0-9_.~\-]+"

    def to_python(self, value: str) -> str:
        name = tool_name(value)
        if name is None:
            raise ValueError("not a tool segment")  # Django answers 404
        return name

    def to_url(self, value: str) -> str:
        return tool_segment(str(value))

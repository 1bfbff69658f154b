"""Byte-level pieces of Streamable HTTP: header values, the request envelope, and SSE framing."""

import base64
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tasksapp.mcpclient.errors import InvalidHeaderAnnotation, InvalidResponse

PROTOCOL_VERSION = "2026-07-28"
LEGACY_VERSION = "2025-11-25"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
ACCEPT = "application/json, text/event-stream"
TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})

_SENTINEL_START, _SENTINEL_END = "=?base64?", "?="
_EOL = re.compile(rb"\r\n?|\n")
_COLON = ord(":")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


def encode_header_value(value: str) -> str:
    """§2.3: plain when visible ASCII without edge whitespace, else =?base64?…?=."""
    safe = value.isascii() and value.isprintable() and value == value.strip()
    looks_encoded = value.startswith(_SENTINEL_START) and value.endswith(_SENTINEL_END)
    if safe and not looks_encoded:
        return value
    encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
    return f"{_SENTINEL_START}{encoded}{_SENTINEL_END}"


@dataclass(frozen=True, slots=True)
class InputKinds:
    """Which kinds of server input request the caller can put in front of a person."""

    elicitation_form: bool = False
    elicitation_url: bool = False
    sampling: bool = False
    roots: bool = False
    sampling_tools: bool = False

    @classmethod
    def declared(cls, capabilities: Mapping[str, Any]) -> "InputKinds":
        """The kinds a request's clientCapabilities declare (`elicitation: {}` alone is form mode)."""
        elicitation, sampling = capabilities.get("elicitation"), capabilities.get("sampling")
        modes = elicitation if isinstance(elicitation, dict) else None
        explicit = modes is not None and ("form" in modes or "url" in modes)
        return cls(
            elicitation_form=modes is not None and (not explicit or "form" in modes),
            elicitation_url=modes is not None and "url" in modes,
            sampling=isinstance(sampling, dict),
            roots=isinstance(capabilities.get("roots"), dict),
            sampling_tools=isinstance(sampling, dict) and isinstance(sampling.get("tools"), dict),
        )

    def allows(self, method: str, params: Any) -> bool:
        """Whether a client of these kinds may be sent this input request (§2.1: only declared kinds)."""
        params = params if isinstance(params, dict) else {}
        if method == "elicitation/create":
            return self.elicitation_url if params.get("mode") == "url" else self.elicitation_form
        if method == "sampling/createMessage":
            return self.sampling and (self.sampling_tools or not params.get("tools"))
        return self.roots if method == "roots/list" else False

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
        elicitation: dict[str, Any] = {}
        if self.elicitation_form:
            elicitation["form"] = {}
        if self.elicitation_url:
            elicitation["url"] = {}
        if elicitation:
            caps["elicitation"] = elicitation
        if self.sampling:
            caps["sampling"] = {"tools": {}} if self.sampling_tools else {}
        if self.roots:
            caps["roots"] = {}
        return caps


ALL_INPUT_KINDS = InputKinds(elicitation_form=True, elicitation_url=True, sampling=True, roots=True)


def parse_header_lines(lines: Iterable[str]) -> dict[str, str]:
    """'Name: value' lines (blank lines skipped) as headers; ValueError names a malformed line."""
    headers: dict[str, str] = {}
    for line in lines:
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.match(name.strip()):
            raise ValueError(f"{line[:80]!r} is not 'Name: value'")
        headers[name.strip()] = value.strip()
    return headers


def parse_json_object(text: str, what: str) -> dict[str, Any]:
    """A JSON object typed by a person; ValueError says what is wrong with it."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{what} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f'{what} must be a JSON object, like {{"key": "value"}}')
    return value


def envelope(capabilities: dict[str, Any], client_info: dict[str, Any]) -> dict[str, Any]:
    return {
        META_VERSION: PROTOCOL_VERSION,
        META_CAPABILITIES: capabilities,
        META_CLIENT_INFO: client_info,
    }


def name_header(method: str, params: dict[str, Any]) -> str | None:
    """The Mcp-Name value for a method, or None where the header does not apply."""
    if method in ("tools/call", "prompts/get"):
        return encode_header_value(str(params["name"]))
    if method == "resources/read":
        return encode_header_value(str(params["uri"]))
    if method in TASK_METHODS:
        return encode_header_value(str(params["taskId"]))
    return None


def param_header_names(input_schema: Mapping[str, Any]) -> dict[str, str]:
    """§2.4: argument name -> the X of its `Mcp-Param-X` header, for a tool's inputSchema.

    Only top-level `properties` count. Raises InvalidHeaderAnnotation when an annotation breaks
    §2.4 (not an RFC 9110 token, a type other than string/integer/boolean, a name used twice
    ignoring case): such a tool must not be called.
    """
    properties = input_schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    mapping: dict[str, str] = {}
    for prop, prop_schema in properties.items():
        if not isinstance(prop_schema, dict) or "x-mcp-header" not in prop_schema:
            continue
        header = prop_schema["x-mcp-header"]
        if not isinstance(header, str) or not _TOKEN.match(header):
            raise InvalidHeaderAnnotation(f"argument {prop!r}: x-mcp-header {header!r} is not a header name")
        if prop_schema.get("type") not in ("string", "integer", "boolean"):
            raise InvalidHeaderAnnotation(
                f"argument {prop!r}: x-mcp-header needs a string, integer or boolean argument"
            )
        if header.lower() in {name.lower() for name in mapping.values()}:
            raise InvalidHeaderAnnotation(f"argument {prop!r}: x-mcp-header {header!r} is used twice")
        mapping[prop] = header
    return mapping


def param_headers(input_schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, str]:
    """The `Mcp-Param-*` headers a tools/call of this tool carries for these arguments (§2.4).

    `{"Mcp-Param-Region": "eu-west"}`: a string as is, an integer in decimal, a boolean as
    true/false, each encoded as §2.3 says; an absent or null argument sends no header.
    Raises InvalidHeaderAnnotation as param_header_names does.
    """
    return param_header_values(param_header_names(input_schema), arguments)


def param_header_values(names: Mapping[str, str], arguments: Mapping[str, Any]) -> dict[str, str]:
    """param_headers for a mapping param_header_names already returned."""
    headers: dict[str, str] = {}
    for prop, header in names.items():
        value = render_param_header(arguments.get(prop))
        if value is not None:
            headers[f"Mcp-Param-{header}"] = value
    return headers


def render_param_header(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return encode_header_value(str(value))


@dataclass(slots=True)
class SseParser:
    """Incremental SSE decoder: feed bytes, get the data payload of each complete event.

    Comments (keep-alives), `id:` and `retry:` lines are ignored; events whose type is not
    `message` are skipped. One event larger than `max_event_bytes` raises InvalidResponse.
    Linear in the bytes fed: each byte is scanned for a line end once, however the stream is
    chunked (a server trickling one long line a byte at a time costs no more than sending it whole).
    """

    max_event_bytes: int
    _buffer: bytearray = field(default_factory=bytearray)
    _scanned: int = 0  # bytes of _buffer already known to hold no line end
    _data: list[str] = field(default_factory=list)
    _event: str = "message"
    _size: int = 0

    def feed(self, chunk: bytes) -> Iterator[str]:
        buffer = self._buffer
        buffer += chunk
        start = 0
        try:
            while True:
                match = _EOL.search(buffer, self._scanned)
                if match is None or (match.group() == b"\r" and match.end() == len(buffer)):
                    # No full line yet; a CR at the end may be the first half of CRLF.
                    self._scanned = match.start() if match is not None else len(buffer)
                    break
                end = match.start()
                if end == start and not self._data:  # a blank line ending an event with no data
                    self._event = "message"
                    start = self._scanned = match.end()
                    continue
                if end > start and buffer[start] == _COLON:  # a comment (keep-alive): nothing to decode
                    start = self._scanned = match.end()
                    continue
                line = _decoded(bytes(buffer[start:end]))
                start = self._scanned = match.end()
                payload = self._line(line)
                if payload is not None:
                    yield payload
        finally:
            if start:
                del buffer[:start]  # once per chunk, not once per line
                self._scanned -= start
        if len(buffer) + self._size > self.max_event_bytes:
            raise InvalidResponse(f"an SSE event exceeds {self.max_event_bytes} bytes")

    def finish(self) -> Iterator[str]:
        """At the end of the stream: a CR held back as a possible CRLF half was a line end after all."""
        if self._buffer.endswith(b"\r"):
            yield from self.feed(b"\n")

    @property
    def mid_event(self) -> bool:
        """True when bytes of an unfinished event are pending (a stream cut here lost data)."""
        return bool(self._data) or bool(self._buffer.strip())

    def _line(self, line: str) -> str | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._size += len(value) + 1
            if self._size > self.max_event_bytes:
                raise InvalidResponse(f"an SSE event exceeds {self.max_event_bytes} bytes")
        elif name == "event":
            self._event = value or "message"
        return None

    def _dispatch(self) -> str | None:
        data, event = self._data, self._event
        self._data, self._event, self._size = [], "message", 0
        payload = "\n".join(data)
        if not payload or event != "message":
            return None  # also the empty priming event some SDK servers send first
        return payload


def _decoded(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidResponse("an SSE line is not valid UTF-8") from None

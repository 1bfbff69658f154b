"""Resources, prompts and completions: the fixtures the official conformance suite reads.

Fixed content under `test://` URIs and `test_*` prompt names, exactly as the suite's
scenarios describe them; `test_input_required_result_prompt` shows that MRTR (§4) works on
`prompts/get` too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .protocol import JsonObject, invalid_params
from .tools.content import b64, tiny_png
from .tools.registry import CallContext, NeedInput, form_request

CACHE_HINTS: JsonObject = {"ttlMs": 0, "cacheScope": "private"}
_TEMPLATE = re.compile(r"^test://template/([^/?#]+)/data$")

RESOURCES: list[JsonObject] = [
    {
        "uri": "test://static-text",
        "name": "static-text",
        "title": "Static text",
        "description": "A fixed text resource.",
        "mimeType": "text/plain",
    },
    {
        "uri": "test://static-binary",
        "name": "static-binary",
        "title": "Static binary",
        "description": "A fixed 1x1 PNG image.",
        "mimeType": "image/png",
    },
]
TEMPLATES: list[JsonObject] = [
    {
        "uriTemplate": "test://template/{id}/data",
        "name": "template-data",
        "title": "Data by id",
        "description": "JSON data for any id.",
        "mimeType": "application/json",
    }
]


def read_resource(uri: Any) -> JsonObject:
    """The ReadResourceResult for a URI; an unknown one is -32602 with the URI in data (SEP-2164)."""
    if not isinstance(uri, str):
        raise invalid_params("resources/read needs params.uri (a string)")
    if uri == "test://static-text":
        contents = {"mimeType": "text/plain", "text": "This is the content of the static text resource."}
    elif uri == "test://static-binary":
        contents = {"mimeType": "image/png", "blob": b64(tiny_png())}
    elif match := _TEMPLATE.match(uri):
        item = match.group(1)
        data = {"id": item, "templateTest": True, "data": f"Data for ID: {item}"}
        contents = {"mimeType": "application/json", "text": json.dumps(data, separators=(",", ":"))}
    else:
        raise invalid_params("Resource not found", {"uri": uri})
    return {"contents": [{"uri": uri, **contents}], **CACHE_HINTS}


# --- prompts --------------------------------------------------------------------------------

PromptFn = Callable[[CallContext], Awaitable[JsonObject | NeedInput]]


@dataclass(frozen=True)
class Prompt:
    name: str
    title: str
    description: str
    render: PromptFn
    arguments: list[JsonObject] = field(default_factory=list)

    def definition(self) -> JsonObject:
        prompt: JsonObject = {"name": self.name, "title": self.title, "description": self.description}
        if self.arguments:
            prompt["arguments"] = self.arguments
        return prompt

    def check(self, arguments: Any) -> dict[str, str]:
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise invalid_params(f"Prompt '{self.name}': arguments must be an object of strings")
        for argument in self.arguments:
            if argument.get("required") and argument["name"] not in arguments:
                raise invalid_params(f"Prompt '{self.name}': missing required argument '{argument['name']}'")
        return arguments


def _user(content: JsonObject) -> JsonObject:
    return {"role": "user", "content": content}


def _text(text: str) -> JsonObject:
    return {"type": "text", "text": text}


async def _simple(call: CallContext) -> JsonObject:
    return {"messages": [_user(_text("This is a simple prompt for testing."))]}


async def _with_arguments(call: CallContext) -> JsonObject:
    arg1, arg2 = call.arguments["arg1"], call.arguments["arg2"]
    return {"messages": [_user(_text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]}


async def _with_resource(call: CallContext) -> JsonObject:
    resource = {
        "uri": call.arguments["resourceUri"],
        "mimeType": "text/plain",
        "text": "Embedded resource content for testing.",
    }
    return {
        "messages": [
            _user({"type": "resource", "resource": resource}),
            _user(_text("Please process the embedded resource above.")),
        ]
    }


async def _with_image(call: CallContext) -> JsonObject:
    image = {"type": "image", "data": b64(tiny_png()), "mimeType": "image/png"}
    return {"messages": [_user(image), _user(_text("Please analyze the image above."))]}


CONTEXT_FORM: JsonObject = {
    "type": "object",
    "properties": {"context": {"type": "string", "title": "Context"}},
    "required": ["context"],
}


async def _needs_context(call: CallContext) -> JsonObject | NeedInput:
    answer = call.input_responses.get("user_context")
    content = answer.get("content") if isinstance(answer, dict) and answer.get("action") == "accept" else None
    if not isinstance(content, dict) or not isinstance(content.get("context"), str):
        request = form_request("What context should the prompt use?", CONTEXT_FORM)
        return NeedInput({"user_context": request}, None)
    return {"messages": [_user(_text(f"Answer using this context: {content['context']}"))]}


def _argument(name: str, description: str) -> JsonObject:
    return {"name": name, "description": description, "required": True}


PROMPTS: tuple[Prompt, ...] = (
    Prompt("test_simple_prompt", "Simple prompt", "A prompt without arguments.", _simple),
    Prompt(
        "test_prompt_with_arguments",
        "Prompt with arguments",
        "A prompt that fills in two arguments.",
        _with_arguments,
        [_argument("arg1", "First test argument"), _argument("arg2", "Second test argument")],
    ),
    Prompt(
        "test_prompt_with_embedded_resource",
        "Prompt with a resource",
        "A prompt that embeds the resource it is given.",
        _with_resource,
        [_argument("resourceUri", "URI of the resource to embed")],
    ),
    Prompt("test_prompt_with_image", "Prompt with an image", "A prompt carrying an image.", _with_image),
    Prompt(
        "test_input_required_result_prompt",
        "Prompt that asks first",
        "Asks (through an input_required result) which context to use, then renders.",
        _needs_context,
    ),
)
PROMPTS_BY_NAME = {prompt.name: prompt for prompt in PROMPTS}

# --- completion -----------------------------------------------------------------------------

_WORDS = ("paris", "park", "party", "test", "testing", "value")


def complete(params: JsonObject) -> JsonObject:
    """completion/complete for the prompts' arguments and the template's {id}."""
    ref, argument = params.get("ref"), params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise invalid_params("completion/complete needs params.ref and params.argument (objects)")
    value = argument.get("value")
    prefix = value if isinstance(value, str) else ""
    if ref.get("type") == "ref/prompt" and ref.get("name") in PROMPTS_BY_NAME:
        values = [word for word in _WORDS if word.startswith(prefix)]
    elif ref.get("type") == "ref/resource" and ref.get("uri") == TEMPLATES[0]["uriTemplate"]:
        values = [item for item in ("1", "42", "123") if item.startswith(prefix)]
    else:
        raise invalid_params("completion/complete: unknown prompt or resource template")
    return {"completion": {"values": values, "total": len(values), "hasMore": False}}

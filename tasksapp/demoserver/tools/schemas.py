"""Input requests the scenario tools send: a form using every §6.1 field type, and friends."""

from __future__ import annotations

from ..protocol import JsonObject

# One property per allowed primitive shape of PROTOCOL.md §6.1, so a client's form
# builder meets each of them (including the deprecated enumNames) in one place.
CONTACT_FORM: JsonObject = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "title": "Full name",
            "description": "As it should appear on your badge.",
            "minLength": 1,
            "maxLength": 100,
        },
        "nickname": {"type": "string", "title": "Nickname", "default": "Ace"},
        "email": {"type": "string", "format": "email", "title": "Email", "description": "Work"},
        "website": {"type": "string", "format": "uri", "title": "Website"},
        "birthday": {"type": "string", "format": "date", "title": "Birthday"},
        "meeting": {"type": "string", "format": "date-time", "title": "Preferred meeting time"},
        "budget": {"type": "number", "title": "Budget (EUR)", "minimum": 0, "maximum": 10000.5},
        "age": {"type": "integer", "title": "Age", "minimum": 18, "maximum": 130, "default": 30},
        "agree": {"type": "boolean", "title": "Accept the terms", "default": False},
        "plan": {
            "type": "string",
            "title": "Plan",
            "enum": ["free", "pro", "enterprise"],
            "default": "free",
        },
        "color": {
            "type": "string",
            "title": "Favourite colour",
            "oneOf": [
                {"const": "#FF0000", "title": "Red"},
                {"const": "#00FF00", "title": "Green"},
                {"const": "#0000FF", "title": "Blue"},
            ],
            "default": "#00FF00",
        },
        "size": {
            "type": "string",
            "title": "T-shirt size",
            "enum": ["s", "m", "l"],
            "enumNames": ["Small", "Medium", "Large"],
            "default": "m",
        },
        "tags": {
            "type": "array",
            "title": "Tags",
            "minItems": 1,
            "maxItems": 2,
            "items": {"type": "string", "enum": ["alpha", "beta", "gamma"]},
            "default": ["alpha"],
        },
        "teams": {
            "type": "array",
            "title": "Teams",
            "description": "Pick any number.",
            "items": {
                "anyOf": [
                    {"const": "t1", "title": "Team One"},
                    {"const": "t2", "title": "Team Two"},
                    {"const": "t3", "title": "Team Three"},
                ]
            },
            "default": ["t2"],
        },
    },
    "required": ["name", "email", "plan"],
}

NAME_FORM: JsonObject = {
    "type": "object",
    "properties": {"name": {"type": "string", "title": "Your name"}},
    "required": ["name"],
}

COLOR_FORM: JsonObject = {
    "type": "object",
    "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]}},
    "required": ["color"],
}

COUNT_FORM: JsonObject = {
    "type": "object",
    "properties": {"count": {"type": "integer", "minimum": 1, "maximum": 10}},
    "required": ["count"],
}

SAMPLING_REQUEST: JsonObject = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [
            {
                "role": "user",
                "content": {"type": "text", "text": "What is the capital of France? One word."},
            }
        ],
        "systemPrompt": "You are a terse geography assistant.",
        "modelPreferences": {
            "hints": [{"name": "claude-3-sonnet"}],
            "costPriority": 0.3,
            "speedPriority": 0.5,
            "intelligencePriority": 0.8,
        },
        "includeContext": "none",
        "temperature": 0.2,
        "maxTokens": 100,
    },
}

# params is optional for roots/list; leaving it out makes clients handle that case.
ROOTS_REQUEST: JsonObject = {"method": "roots/list"}

HOSTILE_FORM: JsonObject = {
    "type": "object",
    "properties": {
        "answer": {
            "type": "string",
            "title": '<b onmouseover=alert("field")>Answer</b>',
            "description": '<img src=x onerror=alert("description")>',
            "default": '"><script>alert("default")</script>',
        },
        "choice": {
            "type": "string",
            "oneOf": [{"const": "<i>x</i>", "title": '<script>alert("option")</script>'}],
        },
    },
    "required": ["answer"],
}

HOSTILE_MESSAGE = (
    'Please confirm <script>alert("elicitation")</script> or open '
    '<a href="javascript:alert(1)">this link</a> [or this one](javascript:alert(1))'
)

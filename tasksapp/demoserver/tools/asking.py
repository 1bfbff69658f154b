"""Scenario tools whose tasks stop at input_required and wait for tasks/update."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from ..protocol import JsonObject
from ..tasks import TaskContext, TaskStart
from .registry import (
    Arguments,
    TaskFn,
    Tool,
    accepted_content,
    form_request,
    task_properties,
    text_result,
)
from .schemas import (
    COLOR_FORM,
    CONTACT_FORM,
    COUNT_FORM,
    HOSTILE_FORM,
    HOSTILE_MESSAGE,
    ROOTS_REQUEST,
    SAMPLING_REQUEST,
)

_ASK_DELAY_TEXT = "Seconds to wait before asking (and before finishing)."
_PAST_TENSE = {"decline": "declined", "cancel": "cancelled"}


def _refusal(what: str, response: JsonObject) -> JsonObject:
    action = response.get("action")
    verb = _PAST_TENSE.get(action, "not accepted") if isinstance(action, str) else "not accepted"
    return text_result(f"You {verb} {what}; nothing was done.")


async def _ask_form(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    request = form_request("Please fill in your contact details.", CONTACT_FORM)
    answers = await ctx.ask({"contact": request}, "Waiting for the contact form.")
    content = accepted_content(answers["contact"])
    if content is None:
        return _refusal("the contact form", answers["contact"])
    return text_result(f"Thanks! Received {len(content)} answers.", {"answers": content})


async def _ask_url(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    state = secrets.token_urlsafe(12)
    await asyncio.sleep(arguments["delay"])
    request = {
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "url": f"https://example.com/connect?state={state}",
            "message": "Connect your Example account to continue.",
        },
    }
    answers = await ctx.ask({"connect": request}, "Waiting for you to connect your account.")
    if answers["connect"].get("action") != "accept":
        return _refusal("to connect your account", answers["connect"])
    ctx.say("Checking that the connection finished…")
    await asyncio.sleep(arguments["delay"])
    return text_result("Connected your Example account.", {"connected": True})


async def _ask_two(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    requests = {
        "color": form_request("Pick a colour.", COLOR_FORM),
        "count": form_request("How many?", COUNT_FORM),
    }
    answers = await ctx.ask(requests, "Waiting for two answers.")
    await asyncio.sleep(arguments["delay"])
    return text_result("Got both answers.", {"first": answers["color"], "second": answers["count"]})


def _reply_text(reply: JsonObject) -> str:
    content: Any = reply.get("content")
    blocks = content if isinstance(content, list) else [content]
    texts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return " ".join(texts)


async def _ask_sampling(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    answers = await ctx.ask({"capital": SAMPLING_REQUEST}, "Waiting for the model's answer.")
    reply = answers["capital"]
    text = _reply_text(reply)
    return text_result(f"The model replied: {text}", {"reply": text, "model": reply.get("model")})


async def _ask_roots(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    answers = await ctx.ask({"roots": ROOTS_REQUEST}, "Waiting for the list of roots.")
    roots = answers["roots"].get("roots")
    entries = roots if isinstance(roots, list) else []
    uris = [r["uri"] for r in entries if isinstance(r, dict) and isinstance(r.get("uri"), str)]
    listing = ", ".join(uris) or "(none)"
    return text_result(f"Received {len(uris)} roots: {listing}", {"roots": uris})


async def _hostile_text(ctx: TaskContext, arguments: Arguments) -> JsonObject:
    await asyncio.sleep(arguments["delay"])
    request = form_request(HOSTILE_MESSAGE, HOSTILE_FORM)
    await ctx.ask({"hostile": request}, '<img src=x onerror=alert("waiting")>')
    return {
        "content": [
            {"type": "text", "text": '<script>alert("result")</script>'},
            {
                "type": "resource_link",
                "uri": "javascript:alert(1)",
                "name": '<script>alert("link")</script>',
                "description": "<img src=x onerror=alert(2)>",
            },
        ],
        "structuredContent": {"html": '<script>alert("structured")</script>'},
        "isError": False,
    }


def _asking(name: str, title: str, description: str, task: TaskFn) -> Tool:
    return Tool(
        name=name,
        title=title,
        description=description,
        properties=task_properties(0.3, _ASK_DELAY_TEXT),
        task=task,
    )


ASKING_TOOLS: tuple[Tool, ...] = (
    _asking(
        "ask_form",
        "Ask: Form",
        "A task that asks for a contact form using every elicitation field type.",
        _ask_form,
    ),
    _asking("ask_url", "Ask: URL", "A task that asks the user to open a URL.", _ask_url),
    _asking(
        "ask_two",
        "Ask: Two Questions",
        "A task with two outstanding elicitations; it resumes only when both are answered.",
        _ask_two,
    ),
    _asking(
        "ask_sampling",
        "Ask: Sampling",
        "A task that asks the client's model a question.",
        _ask_sampling,
    ),
    _asking("ask_roots", "Ask: Roots", "A task that asks for the client's roots.", _ask_roots),
    Tool(
        name="hostile_text",
        title='<script>alert("title")</script> Hostile',
        description="Server text full of markup <img src=x onerror=alert(1)> for escaping tests.",
        properties=task_properties(0.3, _ASK_DELAY_TEXT),
        task=_hostile_text,
        start=lambda arguments, interval: TaskStart(
            '<script>alert("status")</script>', arguments.get("poll_interval_ms", interval)
        ),
    ),
)

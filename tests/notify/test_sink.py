"""The demo's outbox sink (tasksapp/notify/sink.py): Django's own SMTP backend and the webhook
sender deliver to it, and its page shows what came, escaped."""

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.core import mail

from tasksapp.notify.send import post_webhook
from tasksapp.notify.sink import Sink
from tests.peers.launch import free_port


@pytest.fixture
async def sink(tmp_path: Path) -> AsyncIterator[Sink]:
    running = Sink(folder=tmp_path / "outbox")
    await running.start("127.0.0.1", free_port(), free_port())
    yield running
    await running.stop()


async def test_mail_and_webhooks_arrive_and_are_shown(sink: Sink, settings: object) -> None:
    host, port = sink.smtp_address.rsplit(":", 1)
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"  # type: ignore[attr-defined]
    settings.EMAIL_HOST, settings.EMAIL_PORT = host, int(port)  # type: ignore[attr-defined]
    text = "Task #7 <b>failed</b>.\n.a line that starts with a dot\nhttp://127.0.0.1:8000/tasks/7/"
    await sync_to_async(mail.send_mail)("Task #7 失败", text, "dash@localhost", ["ops@example.com"])
    status = await post_webhook(
        sink.webhook_url, b'{"text": "Task #7 failed."}', {"Content-Type": "application/json"}
    )
    assert status == 200

    email, webhook = sink.caught
    assert (email.kind, email.to, email.subject) == ("email", "ops@example.com", "Task #7 失败")
    assert ".a line that starts with a dot" in email.text  # dot-stuffing undone
    assert (webhook.kind, webhook.subject) == ("webhook", "Task #7 failed.")
    assert sorted(path.suffix for path in sink.folder.iterdir()) == [".eml", ".json"]
    async with httpx.AsyncClient() as client:
        page = (await client.get(sink.page_url)).text
    assert "Task #7 &lt;b&gt;failed&lt;/b&gt;." in page and "<b>failed</b>" not in page

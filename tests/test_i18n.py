"""Language: English by default, Simplified Chinese from Accept-Language, the switch
(a plain POST form) or the user's setting; the zh-Hans catalogue is complete and compiled."""

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import polib
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, Group, User
from django.test import Client
from django.urls import reverse
from django.utils import translation

from tasksapp import services
from tasksapp.consumers import LiveConsumer
from tasksapp.models import RemoteTask, UserPreference
from tasksapp.prefs import language_for_scope
from tasksapp.services import prefs
from tasksapp.templatetags.ui_strings import STRINGS

pytestmark = pytest.mark.django_db(transaction=True)

CATALOGUE = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES"
ZH = {"accept-language": "zh-Hans,zh;q=0.9,en;q=0.5"}
# Words of the English interface; none may be visible on a Chinese page except inside server data.
ENGLISH_UI = """
    Overview Tasks Inbox Servers Audit Log out Status Server Filter Search Started Elapsed Export Sort
    page of Name Health Edit Archive Who When Outcome Nothing No Add Cancel Answer Run Discover Tool
    Description Latest message tasks any anyone clear newer older next previous yes no entries
""".split()  # noqa: SIM905 -- a word list reads better as words
SAME_IN_CHINESE = {"URL"}
PLACEHOLDER = re.compile(r"%\(\w+\)[sdr]|\{\}")


class VisibleText(HTMLParser):
    """Text a person sees (and hears: alt, title, aria-label, placeholder), without scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        for name, value in attrs:
            if name in ("alt", "title", "aria-label", "placeholder") and value:
                self.parts.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


# A server's markdown (tool descriptions), rendered: server data, whatever words it uses.
SERVER_MARKDOWN = re.compile(r'<(td|div)\b[^>]*class="[^"]*\bmd\b[^"]*"[^>]*>.*?</\1>', re.S)


def visible(html: str, *data: str) -> str:
    parser = VisibleText()
    parser.feed(SERVER_MARKDOWN.sub(" ", html))
    text = " ".join(parser.parts)
    for value in sorted(data, key=len, reverse=True):  # what servers and users supplied
        text = text.replace(value, " ")
    return re.sub(r"\s+", " ", text)


def operator() -> Client:
    user = User.objects.create_user("olga", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name="admin"), Group.objects.get(name="operator"))
    client = Client()
    client.force_login(user)
    return client


def main_pages(task: RemoteTask) -> dict[str, tuple[str, str]]:
    """url -> (a Chinese phrase the page must show, the English it replaces)."""
    return {
        reverse("tasks:overview"): ("概览", "Overview"),
        reverse("tasks:list"): ("按确切 ID 查找任务", "Find a task by its exact id"),
        reverse("tasks:detail", args=[task.pk]): ("工作中", "working"),
        reverse("tasks:inbox"): ("收件箱", "Inbox"),
        reverse("tasks:servers"): ("健康状况", "Health"),
        reverse("tasks:server-tools", args=[task.server_id]): ("重新发现", "Discover again"),
        reverse("tasks:audit"): ("审计日志", "Audit log"),
    }


def test_english_is_the_default(task: RemoteTask) -> None:
    client = operator()
    for url, (chinese, english) in main_pages(task).items():
        response = client.get(url)
        assert response.status_code == 200, url
        assert response["Content-Language"] == "en", url
        assert english in response.content.decode(), url
        assert chinese not in response.content.decode(), url


def test_accept_language_zh_hans_renders_every_main_page_in_chinese(task: RemoteTask) -> None:
    client = operator()
    brand = ["MCP Tasks", "MCP"]  # the product's name, not UI text
    data = [task.server.name, task.tool_name, task.status_message, task.server.url, "olga", *brand]
    for tool in task.server.tools:
        data += [tool["name"], tool.get("title") or tool["name"], tool.get("description") or tool["name"]]
    data += [str(task.server.server_info.get(key, "")) for key in ("name", "version")]
    for url, (chinese, _english) in main_pages(task).items():
        response = client.get(url, headers=ZH)
        assert response.status_code == 200, url
        assert response["Content-Language"] == "zh-hans", url
        html = response.content.decode()
        assert chinese in html, url
        assert '<html lang="zh-hans"' in html, url
        text = visible(html, *data)
        left = sorted({word for word in ENGLISH_UI if re.search(rf"(?<![\w-]){word}(?![\w-])", text)})
        assert not left, f"{url}: English left on the Chinese page: {left}\n{text[:3000]}"


def test_the_login_page_is_chinese_for_a_chinese_browser() -> None:
    response = Client().get(reverse("login"), headers={"accept-language": "zh-CN,zh;q=0.9"})
    assert response["Content-Language"] == "zh-hans"  # zh-CN (what browsers send) falls back to zh-Hans
    html = response.content.decode()
    assert "用户名" in html and "密码" in html and ">登录<" in html
    left = [word for word in ("Username", "Password", "Log in") if word in visible(html)]
    assert not left


def test_the_switch_is_a_post_form_with_csrf_that_works_without_javascript() -> None:
    client = Client(enforce_csrf_checks=True)
    page = client.get(reverse("login"))
    token = page.cookies["csrftoken"].value
    assert client.get(reverse("set_language")).status_code == 405
    refused = client.post(reverse("set_language"), {"language": "zh-hans", "next": "/login/"})
    assert refused.status_code == 403  # no CSRF token
    response = client.post(
        reverse("set_language"), {"language": "zh-hans", "next": "/login/", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert response.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    # The cookie outranks the browser's Accept-Language from now on.
    again = client.get("/login/", headers={"accept-language": "en"})
    assert again["Content-Language"] == "zh-hans" and "用户名" in again.content.decode()
    english = {"language": "en", "next": "/login/", "csrfmiddlewaretoken": token}
    back = client.post(reverse("set_language"), english)
    assert back.cookies[settings.LANGUAGE_COOKIE_NAME].value == "en"
    assert client.get("/login/", headers=ZH)["Content-Language"] == "en"


def test_messages_and_form_errors_follow_the_language(task: RemoteTask) -> None:
    client = operator()
    response = client.post(reverse("tasks:find"), {"task_id": "no-such-task"}, follow=True, headers=ZH)
    assert "没有任务使用该 ID。" in response.content.decode()  # the messages framework
    response = client.post(reverse("tasks:server-add"), {"name": "x", "url": "ftp://example.com"}, headers=ZH)
    assert "请使用 http:// 或 https:// URL。" in response.content.decode()  # a form's own error
    response = client.post(reverse("tasks:cancel", args=[task.pk]), headers=ZH, follow=True)
    assert f"已请求取消任务 #{task.pk}。" in response.content.decode()


def test_the_catalogue_is_complete_and_the_compiled_file_matches_it() -> None:
    po = polib.pofile(str(CATALOGUE / "django.po"))
    mo = polib.mofile(str(CATALOGUE / "django.mo"))
    assert not po.metadata_is_fuzzy and "nplurals=1" in po.metadata["Plural-Forms"]
    assert len(po) > 300
    assert not po.untranslated_entries(), [entry.msgid for entry in po.untranslated_entries()]
    assert not po.fuzzy_entries(), [entry.msgid for entry in po.fuzzy_entries()]
    assert not po.obsolete_entries(), [entry.msgid for entry in po.obsolete_entries()]

    def key(entry: polib._BaseEntry) -> tuple[str | None, str]:
        return (entry.msgctxt, entry.msgid)

    def value(entry: polib._BaseEntry) -> str:
        return str(entry.msgstr_plural[0] if entry.msgid_plural else entry.msgstr)

    compiled = {key(entry): value(entry) for entry in mo}
    written = {key(entry): value(entry) for entry in po}
    stale = sorted(k[1] for k in written.keys() ^ compiled.keys())
    assert not stale, f"django.mo is not compiled from django.po (run compilemessages): {stale[:5]}"
    changed = [k[1] for k in written if written[k] != compiled[k]]
    assert not changed, f"django.mo is older than django.po (run compilemessages): {changed[:5]}"
    for entry in po:  # every placeholder survives translation, or a page would raise or lie
        english = set(PLACEHOLDER.findall(entry.msgid))
        assert set(PLACEHOLDER.findall(value(entry))) == english, entry.msgid
        assert value(entry) != entry.msgid or entry.msgid in SAME_IN_CHINESE, f"not translated: {entry.msgid}"


def test_every_string_marked_for_translation_has_a_chinese_entry(tmp_path: Path) -> None:
    """makemessages on a copy of the code: a string marked in Python or a template but missing from
    the catalogue (or changed since it was translated) fails here, and so does an entry nothing uses."""
    for part in ("manage.py", "dashboard", "tasksapp", "templates", "locale"):
        source = Path(settings.BASE_DIR) / part
        if source.is_dir():
            shutil.copytree(source, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, tmp_path / part)
    ignored = [f"--ignore={pattern}" for pattern in (".venv*", "tests", "bench", "staticfiles", "var")]
    run = subprocess.run(
        [sys.executable, "manage.py", "makemessages", "-l", "zh_Hans", "--no-obsolete", *ignored],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "DASHBOARD_VAR_DIR": str(tmp_path / "var")},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, f"makemessages needs GNU gettext (apt-get install gettext): {run.stderr}"
    extracted = polib.pofile(str(tmp_path / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"))
    missing = [entry.msgid for entry in extracted if not entry.translated() or "fuzzy" in entry.flags]
    assert not missing, f"no zh-Hans translation (see docs/operator.md, Language): {missing}"
    committed = polib.pofile(str(CATALOGUE / "django.po"))
    used = {(entry.msgctxt, entry.msgid) for entry in extracted}
    unused = [entry.msgid for entry in committed if (entry.msgctxt, entry.msgid) not in used]
    assert not unused, f"catalogue entries no code uses any more: {unused}"


def test_the_language_of_a_websocket_follows_the_same_rules_as_its_page() -> None:
    anonymous = {"user": AnonymousUser()}
    chinese_browser = [(b"accept-language", b"zh-CN,zh;q=0.9")]
    assert language_for_scope({**anonymous, "headers": chinese_browser}) == "zh-hans"
    assert language_for_scope({**anonymous, "headers": [(b"accept-language", b"fr, de;q=0.5")]}) == "en"
    chosen = {**anonymous, "cookies": {settings.LANGUAGE_COOKIE_NAME: "zh-hans"}, "headers": []}
    assert language_for_scope(chosen) == "zh-hans"
    assert language_for_scope(anonymous) == "en"


async def _live_row(accept_language: bytes, user: User) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        LiveConsumer.as_asgi(), "/ws/live/?page=tasks", headers=[(b"accept-language", accept_language)]
    )
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def test_live_fragments_are_in_each_pages_language(task: RemoteTask) -> None:
    viewer = await sync_to_async(User.objects.create_user)("vic", password="pw-for-tests-only")
    await sync_to_async(viewer.groups.add)(await sync_to_async(Group.objects.get)(name="viewer"))
    chinese = await _live_row(b"zh-Hans,zh;q=0.9", viewer)
    english = await _live_row(b"en-GB,en;q=0.9", viewer)
    await sync_to_async(services.task_cancel)(task=task, user=None)
    assert "已请求取消" in await chinese.receive_from(timeout=5)
    assert "cancel requested" in await english.receive_from(timeout=5)
    await chinese.disconnect()
    await english.disconnect()


def test_the_users_setting_outranks_the_cookie_and_the_browser() -> None:
    client = operator()
    user = User.objects.get(username="olga")
    audit = reverse("tasks:audit")
    prefs.preference_set(user=user, language="zh-hans")
    response = client.get(audit, headers={"accept-language": "en"})
    assert response["Content-Language"] == "zh-hans" and "<h1>审计日志</h1>" in response.content.decode()
    assert language_for_scope({"user": user, "headers": [(b"accept-language", b"en")]}) == "zh-hans"
    # The footer's switch changes the setting too, or the setting would undo it on the next page.
    client.post(reverse("set_language"), {"language": "en", "next": audit})
    assert UserPreference.objects.get(user=user).language == "en"
    response = client.get(audit, headers=ZH)
    assert response["Content-Language"] == "en" and "<h1>Audit log</h1>" in response.content.decode()
    # No language chosen: the browser decides again.
    prefs.preference_set(user=user, language="")
    del client.cookies[settings.LANGUAGE_COOKIE_NAME]
    assert client.get(audit, headers=ZH)["Content-Language"] == "zh-hans"


async def test_live_fragments_say_the_times_in_each_readers_zone(task: RemoteTask) -> None:
    """The zone follows the page's rules too (shell's preferences): chosen, the browser's, the server's."""
    viewers = []
    for name in ("shanghai", "utc"):
        viewer = await sync_to_async(User.objects.create_user)(name, password="pw-for-tests-only")
        await sync_to_async(viewer.groups.add)(await sync_to_async(Group.objects.get)(name="viewer"))
        viewers.append(viewer)
    await sync_to_async(prefs.preference_set)(user=viewers[0], time_zone="Asia/Shanghai")
    shanghai = await _live_row(b"en", viewers[0])
    utc = await _live_row(b"en", viewers[1])
    await sync_to_async(services.task_cancel)(task=task, user=None)
    assert re.search(r"<time [^>]*>[0-9:-]+[^<]* CST</time>", await shanghai.receive_from(timeout=5))
    assert re.search(r"<time [^>]*>[0-9:-]+[^<]* UTC</time>", await utc.receive_from(timeout=5))
    await shanghai.disconnect()
    await utc.disconnect()


def test_the_scripts_words_come_translated_in_a_json_block_the_csp_does_not_run() -> None:
    client = Client()
    chinese = client.get(reverse("login"), headers={"accept-language": "zh-CN,zh;q=0.9"})
    html = chinese.content.decode()
    block = re.search(r'<script id="ui-strings" type="application/json">(.*?)</script>', html)
    assert block, "base.html renders the ui-strings block"
    words = json.loads(block.group(1))
    assert set(words) == set(STRINGS)
    with translation.override("en"):
        english = {key: str(text) for key, text in STRINGS.items()}
    untranslated = [english[key] for key in words if words[key] == english[key]]
    assert not untranslated, f"not in the zh-Hans catalogue: {untranslated}"
    assert words["live"] == "实时" and "%(server)s" in words["waiting"]
    assert "'unsafe-inline'" not in chinese["Content-Security-Policy"]  # data, not code: allowed as it is
    js = (Path(settings.BASE_DIR) / "static" / "tasksapp" / "app.js").read_text()
    assert '"reconnecting…"' not in js and '"Copied"' not in js  # app.js asks for its words by key


def test_form_placeholders_workers_and_who_started_a_task_are_chinese(task: RemoteTask) -> None:
    from tasksapp.schemaforms.fields import schema_field

    with translation.override("zh-hans"):
        choice = schema_field("plan", {"type": "string", "enum": ["a", "b"]}, required=True)
        optional = schema_field("ok", {"type": "boolean"}, required=False)
        assert dict(choice.choices)[""] == "— 请选择 —"  # type: ignore[attr-defined]
        labels = [str(label) for _, label in optional.choices]  # type: ignore[attr-defined]
        assert labels == ["—\uff08未回答\uff09", "是", "否"]
    ada = User.objects.create_user("ada")
    ada.groups.add(Group.objects.get(name="viewer"))
    RemoteTask.objects.filter(pk=task.pk).update(started_by=ada)
    client = Client()
    client.force_login(ada)
    page = client.get(reverse("tasks:detail", args=[task.pk]), headers=ZH).content.decode()
    assert "发起人 ada" in page and "授权人" not in page
    overview = client.get(reverse("tasks:overview"), headers=ZH).content.decode()
    assert "<h2>工作进程</h2>" in overview

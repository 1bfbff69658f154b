"""An answer form rendered once and reused (`{% rendered_once %}` in _input_request.html): every reader
still gets their own CSRF token, their own rights and their own answer's errors, and a changed
question is rendered anew; a page is the same whether its forms were kept or not."""

import re

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from tasksapp.models import InputRequest, McpServer
from tasksapp.templatetags import rendered_once
from tests.support.inbox import CONTACT_FORM, asking

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]*)"')


def signed_in(name: str, group: str, *, enforce_csrf_checks: bool = False) -> Client:
    user = User.objects.create_user(name)
    user.groups.add(Group.objects.get(name=group))
    client = Client(enforce_csrf_checks=enforce_csrf_checks)
    client.force_login(user)
    return client


@pytest.fixture
def question() -> InputRequest:
    rendered_once.kept.clear()
    task = asking(
        McpServer.objects.create(name="s", url="http://127.0.0.1:9/mcp"),
        "ask",
        "elicitation/create",
        CONTACT_FORM,
    )
    return task.input_requests.get()


def test_each_reader_gets_a_token_of_their_own_that_the_csrf_check_accepts(question: InputRequest) -> None:
    first = signed_in("op1", "operator", enforce_csrf_checks=True)
    second = signed_in("op2", "operator", enforce_csrf_checks=True)
    for page in ("/inbox/", f"/tasks/{question.task_id}/"):
        for client in (first, second, first):
            html = client.get(page).content.decode()
            assert 'class="answer-form"' in html
            assert rendered_once._STAND_IN not in html
            tokens = set(TOKEN.findall(html))
            assert len(tokens) == 1 and "" not in tokens
            # The form's token passes the CSRF check: the view answers (not Django's 403).
            posted = client.post(
                reverse("tasks:answer", args=[question.pk]),
                {"csrfmiddlewaretoken": tokens.pop(), "action": "accept", "next": page},
            )
            assert posted.status_code != 403
    assert len(rendered_once.kept) >= 1  # the forms were kept, and reused above


def test_a_viewer_after_an_operator_sees_the_question_but_no_form(question: InputRequest) -> None:
    operator = signed_in("op", "operator")
    viewer = signed_in("v", "viewer")
    for page in ("/inbox/", f"/tasks/{question.task_id}/"):
        assert 'class="answer-form"' in operator.get(page).content.decode()
        seen = viewer.get(page).content.decode()
        assert "Please fill in your contact details." in seen
        assert 'class="answer-form"' not in seen and "Accept and send" not in seen


def test_an_answer_with_errors_is_shown_with_them_and_the_next_reader_gets_a_clean_form(
    question: InputRequest,
) -> None:
    operator = signed_in("op", "operator")
    operator.get("/inbox/")  # the unbound form is kept
    empty = {"action": "accept", "next": "/inbox/", "in_place": "1", f"ir{question.pk}-name": ""}
    refused = operator.post(
        reverse("tasks:answer", args=[question.pk]), empty, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Please correct the answer; nothing was sent." in refused and "errorlist" in refused
    again = operator.get("/inbox/").content.decode()
    assert 'class="answer-form"' in again and "errorlist" not in again


def test_a_question_asked_again_differently_is_rendered_anew(question: InputRequest) -> None:
    operator = signed_in("op", "operator")
    pages = ("/inbox/", f"/tasks/{question.task_id}/")
    for page in pages:
        assert f'name="ir{question.pk}-name"' in operator.get(page).content.decode()
    question.params = {
        "message": "And your age?",
        "requestedSchema": {"type": "object", "properties": {"age": {"type": "integer"}}},
    }
    question.save(update_fields=["params"])
    for page in pages:
        html = operator.get(page).content.decode()
        assert f'name="ir{question.pk}-age"' in html and f'name="ir{question.pk}-name"' not in html


def test_a_page_is_the_same_with_its_forms_kept_or_rendered_fresh(question: InputRequest) -> None:
    operator = signed_in("op", "operator")
    for page in ("/inbox/", f"/tasks/{question.task_id}/"):
        rendered_once.kept.clear()
        fresh, kept = (_without_tokens(operator.get(page).content.decode()) for _ in range(2))
        assert {"answer-form", "menu-top", "menu-rest"} <= {key[0] for key in rendered_once.kept._items}
        assert kept == fresh


def _without_tokens(html: str) -> str:
    """The page without what differs per request: its masked CSRF tokens (forms, htmx's header) and
    the moment it was rendered (the live socket's starting point)."""
    for token in set(TOKEN.findall(html)):
        html = html.replace(token, "")
    return re.sub(r"\b\d{10}\.\d+\b", "", html)


def test_what_is_kept_is_bounded_in_size_not_only_in_count() -> None:
    kept = rendered_once._Kept(size=100, part=60)
    kept.put(("a",), "x" * 40)
    kept.put(("b",), "y" * 40)
    assert kept.get(("a",)) is not None  # a is now the most recently used
    kept.put(("c",), "z" * 40)  # 120 > 100: the least recently used (b) goes
    assert kept.get(("b",)) is None and kept.get(("a",)) and kept.get(("c",))
    assert kept.held == 80
    kept.put(("huge",), "h" * 61)  # longer than a part may be: never kept
    assert kept.get(("huge",)) is None and kept.held == 80
    kept.put(("a",), "x" * 10)  # replaced, counted once
    assert kept.held == 50 and len(kept) == 2


def test_a_form_kept_in_one_language_is_not_shown_in_another(question: InputRequest) -> None:
    english = signed_in("en", "operator")
    chinese = signed_in("zh", "operator")
    chinese.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    page = f"/tasks/{question.task_id}/"
    assert "Accept and send" in english.get(page).content.decode()
    html = chinese.get(page).content.decode()
    assert "接受并发送" in html and "Accept and send" not in html


def test_the_menu_kept_for_one_reader_and_page_names_each_reader_and_page_their_own() -> None:
    rendered_once.kept.clear()
    operator = signed_in("op-ann", "operator")
    admin = User.objects.create_superuser("root-bob", password="x" * 20)
    staff = Client()
    staff.force_login(admin)
    for client, name, role_shown in ((operator, "op-ann", "operator"), (staff, "root-bob", "superuser")):
        for path, current in (
            ("/", "Overview"),
            ("/tasks/", "Tasks"),
            ("/tasks/?q=x", "Tasks"),
            ("/inbox/?server=", "Inbox"),
        ):
            html = client.get(path).content.decode()
            assert f'<span class="user">{name} <small>(' in html and role_shown in html.split(name, 1)[1][:60]
            assert re.findall(r'aria-current="page">([^<]+)</a>', html) == [current]
            assert ('href="/admin/"' in html) is (name == "root-bob")
            assert html.count(f'<input type="hidden" name="next" value="{path}">') == 2  # theme, language
            assert len(set(TOKEN.findall(html))) == 1 and rendered_once._STAND_IN not in html

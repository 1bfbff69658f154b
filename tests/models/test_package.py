"""tasksapp/models/ is one package: every model of the app is importable from tasksapp.models,
and each lives in the module of its part of the domain (the session row beside its store)."""

from django.apps import apps

import tasksapp.models


def test_every_model_is_importable_from_tasksapp_models() -> None:
    models = apps.get_app_config("tasksapp").get_models()
    assert [
        model.__name__ for model in models if getattr(tasksapp.models, model.__name__, None) is not model
    ] == []


def test_every_model_lives_in_the_models_package_but_the_session_row() -> None:
    outside = {
        model.__name__: model.__module__
        for model in apps.get_app_config("tasksapp").get_models()
        if not model.__module__.startswith("tasksapp.models.")
    }
    assert outside == {"HashedSession": "tasksapp.sessions"}
